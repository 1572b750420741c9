package sqlite

import (
	"context"
	"errors"
	"fmt"

	"clouddb"
)

// The default rules are the rows of account 0 (ids 1 to 3, seeded by migration
// 0004_acl.sql); a rule is a default one exactly when its account is 0.

// errACLRuleAccount refuses to create a rule without an account: it would be a default
// rule, which only the migration seeds.
var errACLRuleAccount = errors.New("sqlite: an ACL rule needs an account (the default rules are the store's own)")

// CreateACLRule inserts a rule of an account; an unset Generation becomes 1. A name taken
// in the account or by a default rule is a conflict. The rule must have an account and
// must not claim to be a default one.
func (tx *Tx) CreateACLRule(ctx context.Context, r *clouddb.ACLRule) error {
	if r.AccountID == 0 || r.IsDefault {
		return errACLRuleAccount
	}
	if err := tx.aclRuleNameFree(ctx, r.AccountID, r.Name, r.ID); err != nil {
		return err
	}
	tx.stamp(&r.CreatedAt, &r.UpdatedAt)
	if r.Generation == 0 {
		r.Generation = 1
	}
	res, err := tx.tx.ExecContext(ctx, `INSERT INTO acl_rules (id, account_id, name, acl, status,
		generation, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		idArg(r.ID), r.AccountID, r.Name, r.ACL, string(r.Status), r.Generation,
		timeArg(r.CreatedAt), timeArg(r.UpdatedAt))
	if err != nil {
		return mapErr(err)
	}
	id, err := res.LastInsertId()
	r.ID = int(id)
	return err
}

// aclRuleNameFree returns ErrConflict when a rule other than id holds name in the account
// or among the default rules.
func (tx *Tx) aclRuleNameFree(ctx context.Context, accountID int, name string, id int) error {
	var n int
	if err := tx.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM acl_rules
		WHERE name = ? AND account_id IN (?, 0) AND id <> ?`, name, accountID, id).Scan(&n); err != nil {
		return mapErr(err)
	}
	if n > 0 {
		return fmt.Errorf("%w: ACL rule name %q is taken", clouddb.ErrConflict, name)
	}
	return nil
}

// aclRuleAccount is the account of a rule that is not a default one: ErrNotFound for a
// missing rule, ErrConflict for a default one.
func (tx *Tx) aclRuleAccount(ctx context.Context, id int) (int, error) {
	var accountID int
	if err := tx.tx.QueryRowContext(ctx, `SELECT account_id FROM acl_rules WHERE id = ?`, id).
		Scan(&accountID); err != nil {
		return 0, mapErr(err)
	}
	if accountID == 0 {
		return 0, fmt.Errorf("%w: ACL rule %d is a default rule", clouddb.ErrConflict, id)
	}
	return accountID, nil
}

const aclRuleColumns = `id, account_id, name, acl, status, generation, created_at, updated_at`

func scanACLRule(s scanner) (*clouddb.ACLRule, error) {
	var r clouddb.ACLRule
	err := s.Scan(&r.ID, &r.AccountID, &r.Name, &r.ACL, &r.Status, &r.Generation,
		timeCol{&r.CreatedAt}, timeCol{&r.UpdatedAt})
	r.IsDefault = r.AccountID == 0
	return &r, err
}

// ACLRule finds a rule of the account or a default rule (any rule for accountID 0).
func (tx *Tx) ACLRule(ctx context.Context, accountID, id int) (*clouddb.ACLRule, error) {
	var w where
	w.add("id = ?", id)
	if accountID != 0 {
		w.add("account_id IN (?, 0)", accountID)
	}
	return one(scanACLRule(tx.tx.QueryRowContext(ctx,
		`SELECT `+aclRuleColumns+` FROM acl_rules`+w.String(), w.args...)))
}

// ACLRules lists the default rules and the account's (every account's for accountID 0),
// by id: the default rules come first.
func (tx *Tx) ACLRules(ctx context.Context, accountID int) ([]*clouddb.ACLRule, error) {
	var w where
	if accountID != 0 {
		w.add("account_id IN (?, 0)", accountID)
	}
	return queryAll(ctx, tx.tx, `SELECT `+aclRuleColumns+` FROM acl_rules`+w.String()+
		` ORDER BY id`, w.args, scanACLRule)
}

// UpdateACLRule writes the name, the rule text, the status and the generation, and sets
// r.UpdatedAt. A default rule cannot be updated (ErrConflict), nor can a rule take a name
// held in its account or by a default rule (ErrConflict).
func (tx *Tx) UpdateACLRule(ctx context.Context, r *clouddb.ACLRule) error {
	accountID, err := tx.aclRuleAccount(ctx, r.ID)
	if err != nil {
		return err
	}
	if err = tx.aclRuleNameFree(ctx, accountID, r.Name, r.ID); err != nil {
		return err
	}
	err = mustAffect(tx.tx.ExecContext(ctx, `UPDATE acl_rules SET name = ?, acl = ?, status = ?,
		generation = ?, updated_at = ? WHERE id = ?`,
		r.Name, r.ACL, string(r.Status), r.Generation, timeArg(tx.now), r.ID))
	if err != nil {
		return err
	}
	r.UpdatedAt = tx.now
	return nil
}

// DeleteACLRule deletes a rule; a default rule cannot be deleted (ErrConflict). Whether
// roles still use the rule is for the caller to check.
func (tx *Tx) DeleteACLRule(ctx context.Context, id int) error {
	if _, err := tx.aclRuleAccount(ctx, id); err != nil {
		return err
	}
	return mustAffect(tx.tx.ExecContext(ctx, `DELETE FROM acl_rules WHERE id = ?`, id))
}

// SetACLRuleStatus sets the status if the generation still matches; it reports whether it
// did (false also for a missing rule, and for a default rule, which stays active).
func (tx *Tx) SetACLRuleStatus(ctx context.Context, id, generation int, s clouddb.ACLStatus) (bool, error) {
	res, err := tx.tx.ExecContext(ctx, `UPDATE acl_rules SET status = ?, updated_at = ?
		WHERE id = ? AND generation = ? AND account_id <> 0`, string(s), timeArg(tx.now), id, generation)
	if err != nil {
		return false, mapErr(err)
	}
	return affected(res)
}
