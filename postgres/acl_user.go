package postgres

import (
	"context"

	"clouddb"
)

// CreateACLUser inserts a user; an unset Generation becomes 1. A name taken in the account
// is a conflict. The password is sealed; the role is not checked.
func (tx *Tx) CreateACLUser(ctx context.Context, u *clouddb.ACLUser) error {
	tx.stamp(&u.CreatedAt, &u.UpdatedAt)
	if u.Generation == 0 {
		u.Generation = 1
	}
	id, err := tx.insert(ctx, "acl_users", u.ID, `INSERT INTO acl_users (id, account_id, name,
		role_id, password, status, generation, created_at, updated_at)
		VALUES (`+newID("acl_users")+`, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
		u.AccountID, u.Name, u.RoleID, tx.seal.Seal(u.Password), string(u.Status), u.Generation,
		timeArg(u.CreatedAt), timeArg(u.UpdatedAt))
	if err != nil {
		return err
	}
	u.ID = id
	return nil
}

const aclUserColumns = `id, account_id, name, role_id, password, status, generation, created_at,
	updated_at`

func (se sealer) scanACLUser(s scanner) (*clouddb.ACLUser, error) {
	var u clouddb.ACLUser
	err := s.Scan(&u.ID, &u.AccountID, &u.Name, &u.RoleID, se.col(&u.Password), &u.Status,
		&u.Generation, timeCol{&u.CreatedAt}, timeCol{&u.UpdatedAt})
	return &u, err
}

// ACLUser finds a user of the account (of any account for accountID 0).
func (tx *Tx) ACLUser(ctx context.Context, accountID, id int) (*clouddb.ACLUser, error) {
	var w where
	w.add("id = " + w.arg(id))
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return one(tx.seal.scanACLUser(tx.tx.QueryRow(ctx,
		`SELECT `+aclUserColumns+` FROM acl_users`+w.String(), w.args...)))
}

// ACLUsers lists the account's users (every account's for accountID 0) by id.
func (tx *Tx) ACLUsers(ctx context.Context, accountID int) ([]*clouddb.ACLUser, error) {
	var w where
	if accountID != 0 {
		w.add("account_id = " + w.arg(accountID))
	}
	return queryAll(ctx, tx.tx, `SELECT `+aclUserColumns+` FROM acl_users`+w.String()+
		` ORDER BY id`, w.args, tx.seal.scanACLUser)
}

// UpdateACLUser writes the name, the role, the password, the status and the generation,
// and sets u.UpdatedAt. A name taken in the account is a conflict.
func (tx *Tx) UpdateACLUser(ctx context.Context, u *clouddb.ACLUser) error {
	err := mustAffect(tx.tx.Exec(ctx, `UPDATE acl_users SET name = $1, role_id = $2,
		password = $3, status = $4, generation = $5, updated_at = $6 WHERE id = $7`,
		u.Name, u.RoleID, tx.seal.Seal(u.Password), string(u.Status), u.Generation,
		timeArg(tx.now), u.ID))
	if err != nil {
		return err
	}
	u.UpdatedAt = tx.now
	return nil
}

// DeleteACLUser deletes a user.
func (tx *Tx) DeleteACLUser(ctx context.Context, id int) error {
	return mustAffect(tx.tx.Exec(ctx, `DELETE FROM acl_users WHERE id = $1`, id))
}

// SetACLUserStatus sets the status if the generation still matches; it reports whether it
// did (false also for a missing user).
func (tx *Tx) SetACLUserStatus(ctx context.Context, id, generation int, s clouddb.ACLStatus) (bool, error) {
	return affected(tx.tx.Exec(ctx, `UPDATE acl_users SET status = $1, updated_at = $2
		WHERE id = $3 AND generation = $4`, string(s), timeArg(tx.now), id, generation))
}
