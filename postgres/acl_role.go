package postgres

import (
	"context"

	"clouddb"
)

// CreateACLRole inserts a role; an unset Generation becomes 1. A name taken in the account
// is a conflict. Rules is stored as jsonb and read back as written (nil as nil, empty as
// empty); the rules it names are not checked.
func (tx *Tx) CreateACLRole(ctx context.Context, r *clouddb.ACLRole) error {
	rules, err := jsonArg(r.Rules)
	if err != nil {
		return err
	}
	tx.stamp(&r.CreatedAt, &r.UpdatedAt)
	if r.Generation == 0 {
		r.Generation = 1
	}
	id, err := tx.insert(ctx, "acl_roles", r.ID, `INSERT INTO acl_roles (id, account_id, name, rules,
		status, generation, created_at, updated_at)
		VALUES (`+newID("acl_roles")+`, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
		r.AccountID, r.Name, rules, string(r.Status), r.Generation, timeArg(r.CreatedAt),
		timeArg(r.UpdatedAt))
	if err != nil {
		return err
	}
	r.ID = id
	return nil
}

const aclRoleColumns = `id, account_id, name, rules, status, generation, created_at, updated_at`

func scanACLRole(s scanner) (*clouddb.ACLRole, error) {
	var r clouddb.ACLRole
	err := s.Scan(&r.ID, &r.AccountID, &r.Name, &r.Rules, &r.Status, &r.Generation,
		timeCol{&r.CreatedAt}, timeCol{&r.UpdatedAt})
	return &r, err
}

// ACLRole finds a role of the account (of any account for accountID 0).
func (tx *Tx) ACLRole(ctx context.Context, accountID, id int) (*clouddb.ACLRole, error) {
	var w where
	w.add("id = " + w.arg(id))
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return one(scanACLRole(tx.tx.QueryRow(ctx,
		`SELECT `+aclRoleColumns+` FROM acl_roles`+w.String(), w.args...)))
}

// ACLRoles lists the account's roles (every account's for accountID 0) by id.
func (tx *Tx) ACLRoles(ctx context.Context, accountID int) ([]*clouddb.ACLRole, error) {
	var w where
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return queryAll(ctx, tx.tx, `SELECT `+aclRoleColumns+` FROM acl_roles`+w.String()+
		` ORDER BY id`, w.args, scanACLRole)
}

// UpdateACLRole writes the name, the rules, the status and the generation, and sets
// r.UpdatedAt. A name taken in the account is a conflict.
func (tx *Tx) UpdateACLRole(ctx context.Context, r *clouddb.ACLRole) error {
	rules, err := jsonArg(r.Rules)
	if err != nil {
		return err
	}
	err = mustAffect(tx.tx.Exec(ctx, `UPDATE acl_roles SET name = $1, rules = $2, status = $3,
		generation = $4, updated_at = $5 WHERE id = $6`,
		r.Name, rules, string(r.Status), r.Generation, timeArg(tx.now), r.ID))
	if err != nil {
		return err
	}
	r.UpdatedAt = tx.now
	return nil
}

// DeleteACLRole deletes a role, whether or not users hold it: that is for the caller to
// check.
func (tx *Tx) DeleteACLRole(ctx context.Context, id int) error {
	return mustAffect(tx.tx.Exec(ctx, `DELETE FROM acl_roles WHERE id = $1`, id))
}

// SetACLRoleStatus sets the status if the generation still matches; it reports whether it
// did (false also for a missing role).
func (tx *Tx) SetACLRoleStatus(ctx context.Context, id, generation int, s clouddb.ACLStatus) (bool, error) {
	return affected(tx.tx.Exec(ctx, `UPDATE acl_roles SET status = $1, updated_at = $2
		WHERE id = $3 AND generation = $4`, string(s), timeArg(tx.now), id, generation))
}
