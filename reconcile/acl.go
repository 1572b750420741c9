package reconcile

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"clouddb"
)

// dbKey names a database as a role does: its account (a role reaches its own account's
// databases only), subscription and id.
type dbKey struct{ account, subscription, database int }

// aclState is the ACL rows one pass read, and what they make of each database: its named
// users.
type aclState struct {
	rules []*clouddb.ACLRule
	roles []*clouddb.ACLRole
	users []*clouddb.ACLUser
	// byDB are the named users of each database, sorted by name.
	byDB map[dbKey][]clouddb.DatabaseUser
}

// newACLState works out each database's users: every user (not being deleted) whose role
// binds a rule to the database, with the user's password and the rule's text. Only rows
// of one account meet: a user's role, the role's rules (or the default ones) and the
// databases it names must all be the user's account's.
func newACLState(rules []*clouddb.ACLRule, roles []*clouddb.ACLRole, users []*clouddb.ACLUser) *aclState {
	a := &aclState{rules: rules, roles: roles, users: users, byDB: map[dbKey][]clouddb.DatabaseUser{}}
	ruleByID := make(map[int]*clouddb.ACLRule, len(rules))
	for _, x := range rules {
		ruleByID[x.ID] = x
	}
	roleByID := make(map[int]*clouddb.ACLRole, len(roles))
	for _, r := range roles {
		roleByID[r.ID] = r
	}
	for _, u := range users {
		role := roleByID[u.RoleID]
		if u.Status == clouddb.ACLDeleting || role == nil || role.AccountID != u.AccountID {
			continue
		}
		seen := map[dbKey]bool{}
		for _, assoc := range role.Rules {
			x := ruleByID[assoc.RuleID]
			if x == nil || (x.AccountID != 0 && x.AccountID != u.AccountID) {
				continue
			}
			for _, ref := range assoc.Databases {
				k := dbKey{u.AccountID, ref.SubscriptionID, ref.DatabaseID}
				if seen[k] {
					continue // one rule per database in a role: the first one
				}
				seen[k] = true
				a.byDB[k] = append(a.byDB[k], clouddb.DatabaseUser{Name: u.Name, Password: u.Password, Rule: x.ACL})
			}
		}
	}
	for _, l := range a.byDB {
		slices.SortFunc(l, func(x, y clouddb.DatabaseUser) int { return strings.Compare(x.Name, y.Name) })
	}
	return a
}

// usersOf are the named users of database d, sorted by name (so that the instance's
// fingerprint does not change with the order of the rows); nil when it has none.
func (a *aclState) usersOf(d *clouddb.Database) []clouddb.DatabaseUser {
	if a == nil {
		return nil
	}
	return slices.Clone(a.byDB[dbKey{d.AccountID, d.SubscriptionID, d.ID}])
}

// unsettled lists the accounts that have an ACL rule, role or user pending, or a user
// being deleted.
func (a *aclState) unsettled() map[int]bool {
	out := map[int]bool{}
	for _, x := range a.rules {
		if x.AccountID != 0 && x.Status == clouddb.ACLPending {
			out[x.AccountID] = true
		}
	}
	for _, r := range a.roles {
		if r.Status == clouddb.ACLPending {
			out[r.AccountID] = true
		}
	}
	for _, u := range a.users {
		if u.Status == clouddb.ACLPending || u.Status == clouddb.ACLDeleting {
			out[u.AccountID] = true
		}
	}
	return out
}

// settleACL settles the ACL rows of the accounts whose every active database runs the
// instance this pass's rows make of it (r.ensured): the changes they wait for are on every
// server that serves, so pending rows become active and users being deleted go. A
// database that is not active (pending, in error, being deleted) does not hold them back:
// it gets its users when it next becomes active.
func (r *Reconciler) settleACL(ctx context.Context, dbs []*clouddb.Database, idx index, acl *aclState) {
	ready := acl.unsettled()
	if len(ready) == 0 {
		return
	}
	want := map[int]string{}
	for _, d := range dbs {
		if ready[d.AccountID] && d.Status == clouddb.DatabaseActive {
			in, _ := desiredInstance(d, idx, acl)
			want[d.ID] = fingerprint(in)
		}
	}
	r.mu.Lock()
	for _, d := range dbs {
		if fp, ok := want[d.ID]; ok && r.ensured[d.ID] != fp {
			ready[d.AccountID] = false
		}
	}
	r.mu.Unlock()
	for account, ok := range ready {
		if !ok {
			continue
		}
		r.spawn(ctx, "acl:"+strconv.Itoa(account),
			func(ctx context.Context) error { return r.applyACL(ctx, account, acl) },
			func(ctx context.Context) { r.aclFailed(ctx, account, acl) })
	}
}

// applyACL marks the account's pending rules, roles and users active and deletes its
// users being deleted, each only if it is still as this pass read it (its generation): a
// newer change waits for its own pass.
func (r *Reconciler) applyACL(ctx context.Context, account int, acl *aclState) error {
	if !r.delay(ctx) {
		return nil
	}
	var applied, removed []*clouddb.ACLUser
	err := r.update(ctx, func(tx clouddb.Tx) error {
		applied, removed = nil, nil
		for _, x := range acl.rules {
			if x.AccountID == account && x.Status == clouddb.ACLPending {
				if _, err := tx.SetACLRuleStatus(ctx, x.ID, x.Generation, clouddb.ACLActive); err != nil {
					return err
				}
			}
		}
		for _, role := range acl.roles {
			if role.AccountID == account && role.Status == clouddb.ACLPending {
				if _, err := tx.SetACLRoleStatus(ctx, role.ID, role.Generation, clouddb.ACLActive); err != nil {
					return err
				}
			}
		}
		for _, u := range acl.users {
			if u.AccountID != account {
				continue
			}
			switch u.Status {
			case clouddb.ACLPending:
				set, err := tx.SetACLUserStatus(ctx, u.ID, u.Generation, clouddb.ACLActive)
				if err != nil {
					return err
				}
				if set {
					applied = append(applied, u)
				}
			case clouddb.ACLDeleting:
				cur, err := tx.ACLUser(ctx, account, u.ID)
				if err != nil {
					if err = ignoreGone(err); err != nil {
						return err
					}
					continue
				}
				if cur.Status != clouddb.ACLDeleting {
					continue
				}
				if err := tx.DeleteACLUser(ctx, u.ID); err != nil {
					return err
				}
				removed = append(removed, u)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, u := range applied {
		r.event(ctx, account, clouddb.LogTypeACLUser, u.Name, u.ID, "ACL user %q (id %d) is set on the databases its role names", u.Name, u.ID)
	}
	for _, u := range removed {
		r.event(ctx, account, clouddb.LogTypeACLUser, u.Name, u.ID, "ACL user %q (id %d) was removed from every database and deleted", u.Name, u.ID)
	}
	return nil
}

// aclFailed puts the account's pending rows in error after applyACL panicked, so that it
// is not tried again in a loop and their owner sees that something went wrong. Users being
// deleted stay so: the next pass tries again, as for a database being deleted.
func (r *Reconciler) aclFailed(ctx context.Context, account int, acl *aclState) {
	err := r.update(ctx, func(tx clouddb.Tx) error {
		for _, x := range acl.rules {
			if x.AccountID == account && x.Status == clouddb.ACLPending {
				if _, err := tx.SetACLRuleStatus(ctx, x.ID, x.Generation, clouddb.ACLError); err != nil {
					return err
				}
			}
		}
		for _, role := range acl.roles {
			if role.AccountID == account && role.Status == clouddb.ACLPending {
				if _, err := tx.SetACLRoleStatus(ctx, role.ID, role.Generation, clouddb.ACLError); err != nil {
					return err
				}
			}
		}
		for _, u := range acl.users {
			if u.AccountID == account && u.Status == clouddb.ACLPending {
				if _, err := tx.SetACLUserStatus(ctx, u.ID, u.Generation, clouddb.ACLError); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		r.Logger.Error("mark ACL rows failed", "account_id", account, "err", err)
	}
}
