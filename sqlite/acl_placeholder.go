package sqlite

// Placeholders until the ACL tables land: every ACL call fails.

import (
	"context"
	"errors"

	"clouddb"
)

var errACLPending = errors.New("ACL store not implemented yet")

func (tx *Tx) CreateACLRule(ctx context.Context, r *clouddb.ACLRule) error { return errACLPending }
func (tx *Tx) ACLRule(ctx context.Context, accountID, id int) (*clouddb.ACLRule, error) {
	return nil, errACLPending
}
func (tx *Tx) ACLRules(ctx context.Context, accountID int) ([]*clouddb.ACLRule, error) {
	return nil, nil
}
func (tx *Tx) UpdateACLRule(ctx context.Context, r *clouddb.ACLRule) error { return errACLPending }
func (tx *Tx) DeleteACLRule(ctx context.Context, id int) error             { return errACLPending }
func (tx *Tx) SetACLRuleStatus(ctx context.Context, id, generation int, s clouddb.ACLStatus) (bool, error) {
	return false, errACLPending
}
func (tx *Tx) CreateACLRole(ctx context.Context, r *clouddb.ACLRole) error { return errACLPending }
func (tx *Tx) ACLRole(ctx context.Context, accountID, id int) (*clouddb.ACLRole, error) {
	return nil, errACLPending
}
func (tx *Tx) ACLRoles(ctx context.Context, accountID int) ([]*clouddb.ACLRole, error) {
	return nil, nil
}
func (tx *Tx) UpdateACLRole(ctx context.Context, r *clouddb.ACLRole) error { return errACLPending }
func (tx *Tx) DeleteACLRole(ctx context.Context, id int) error             { return errACLPending }
func (tx *Tx) SetACLRoleStatus(ctx context.Context, id, generation int, s clouddb.ACLStatus) (bool, error) {
	return false, errACLPending
}
func (tx *Tx) CreateACLUser(ctx context.Context, u *clouddb.ACLUser) error { return errACLPending }
func (tx *Tx) ACLUser(ctx context.Context, accountID, id int) (*clouddb.ACLUser, error) {
	return nil, errACLPending
}
func (tx *Tx) ACLUsers(ctx context.Context, accountID int) ([]*clouddb.ACLUser, error) {
	return nil, nil
}
func (tx *Tx) UpdateACLUser(ctx context.Context, u *clouddb.ACLUser) error { return errACLPending }
func (tx *Tx) DeleteACLUser(ctx context.Context, id int) error             { return errACLPending }
func (tx *Tx) SetACLUserStatus(ctx context.Context, id, generation int, s clouddb.ACLStatus) (bool, error) {
	return false, errACLPending
}
