package reconcile

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
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

// usersFingerprint identifies what a database's server must hold of its named users:
// the users, and whether they are read-only (the database replicates).
func usersFingerprint(in clouddb.Instance) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%v %#v", len(in.ReplicaOf) > 0, in.Users))
	return string(sum[:])
}

// usersRecord is what this process knows of the named users of a database's server.
type usersRecord struct {
	// fp is the usersFingerprint of the users the server was last given, by Ensure or
	// SetUsers; empty after an attempt that failed, which may have left some of the new
	// users and some of the old.
	fp string
	// names are the users the server may have: those it was last given and those of any
	// attempt since.
	names map[string]bool
}

// noteUsers records what Ensure or SetUsers made of in's users on database id's server.
// A database removed (errRemoved) is forgotten: nothing is known of its server any more.
func (r *Reconciler) noteUsers(id int, in clouddb.Instance, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if errors.Is(err, errRemoved) {
		delete(r.users, id)
		return
	}
	rec, known := r.users[id]
	if err == nil || !known {
		rec = usersRecord{names: map[string]bool{}}
	}
	if err == nil {
		rec.fp = usersFingerprint(in)
	} else {
		rec.fp = ""
	}
	for _, u := range in.Users {
		rec.names[u.Name] = true
	}
	if err != nil && !known {
		return // what the server had before is not known either
	}
	r.users[id] = rec
}

// usersInFlight records, before Ensure or SetUsers is asked to give in's users to
// database id's server, that the server may soon have them: until the call ends, no ACL
// row is settled on what the server had before (a user deleted meanwhile would otherwise
// have its row removed while a call made for the older rows puts it back).
func (r *Reconciler) usersInFlight(id int, in clouddb.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, known := r.users[id]
	if !known {
		return // nothing is known of it: it holds every row of its account back already
	}
	rec.fp = ""
	for _, u := range in.Users {
		rec.names[u.Name] = true
	}
	r.users[id] = rec
}

// usersApplied reports whether database id's server is known to have the named users of
// in.
func (r *Reconciler) usersApplied(id int, in clouddb.Instance) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.users[id]
	return ok && rec.fp == usersFingerprint(in)
}

// setUsers gives the server of a database that is not ensured (in error, or whose Ensure
// waits) its named users, when the driver can (clouddb.UserSetter) and they are not
// known to be there: such a server may still run, and a revoked credential must stop
// working there as everywhere. It changes nothing else, and never the database's status:
// the PUT that brings the database back Ensures it whole. Failures are logged when they
// begin and end, not at every pass; the ACL rows concerned wait meanwhile (see
// settleACL).
func (r *Reconciler) setUsers(ctx context.Context, d *clouddb.Database, in clouddb.Instance) {
	setter, ok := r.Driver.(clouddb.UserSetter)
	if !ok || r.usersApplied(d.ID, in) {
		return
	}
	r.usersInFlight(d.ID, in)
	err := r.withDriver(ctx, func() error { return setter.SetUsers(ctx, in) })
	if ctx.Err() != nil {
		return
	}
	r.noteUsers(d.ID, in, err)
	r.mu.Lock()
	was := r.userErrs[d.ID]
	if err != nil {
		r.userErrs[d.ID] = err.Error()
	} else {
		delete(r.userErrs, d.ID)
	}
	r.mu.Unlock()
	switch {
	case err != nil && was != err.Error():
		r.Logger.Warn("cannot give the named users to the server of a database that is not active; the ACL changes that concern it wait", "database_id", d.ID, "status", d.Status, "err", err)
	case err == nil && was != "":
		r.Logger.Info("named users given to the server of a database that is not active", "database_id", d.ID, "status", d.Status)
	}
	if err == nil {
		r.Notify() // ACL rows may wait for it
	}
}

// heldDB is a database whose server may not have the named users this pass's rows make
// of it: it holds back the ACL rows its change concerns.
type heldDB struct {
	key dbKey
	// known is false when nothing is known of the users its server has (this process
	// has not given it any yet): it then concerns every row of its account.
	known bool
	// names are the users its server may have (usersRecord.names), wants those it must.
	names, wants map[string]bool
}

// concerns reports whether a change of the user named name must reach the database: it
// must have the user, or may have it (to remove or redefine), or nobody knows.
func (h heldDB) concerns(name string) bool {
	return !h.known || h.names[name] || h.wants[name]
}

// aclReady are the ACL rows of one account, by id, that no database holds back.
type aclReady struct{ rules, roles, users map[int]bool }

func (x aclReady) empty() bool { return len(x.rules)+len(x.roles)+len(x.users) == 0 }

// ready works out which unsettled rows of the account can settle, given the databases
// that hold changes back (held): a user waits for the databases that concern it (see
// heldDB.concerns: those its role gives it, and those it may be on, which covers the
// ones it left by a change of role or by its deletion); a role for its databases and its
// users'; a rule for the roles that use it. One database that waits holds back only what
// concerns it.
func (a *aclState) ready(account int, held []heldDB) aclReady {
	out := aclReady{rules: map[int]bool{}, roles: map[int]bool{}, users: map[int]bool{}}
	userHeld := func(u *clouddb.ACLUser) bool {
		return slices.ContainsFunc(held, func(h heldDB) bool { return h.concerns(u.Name) })
	}
	roleHeld := map[int]bool{}
	for _, role := range a.roles {
		if role.AccountID != account {
			continue
		}
		for _, rr := range role.Rules {
			for _, ref := range rr.Databases {
				k := dbKey{account, ref.SubscriptionID, ref.DatabaseID}
				if slices.ContainsFunc(held, func(h heldDB) bool { return h.key == k }) {
					roleHeld[role.ID] = true
				}
			}
		}
	}
	for _, u := range a.users {
		if u.AccountID != account {
			continue
		}
		if userHeld(u) {
			roleHeld[u.RoleID] = true
		} else if u.Status == clouddb.ACLPending || u.Status == clouddb.ACLDeleting {
			out.users[u.ID] = true
		}
	}
	for _, role := range a.roles {
		if role.AccountID == account && role.Status == clouddb.ACLPending && !roleHeld[role.ID] {
			out.roles[role.ID] = true
		}
	}
	for _, x := range a.rules {
		if x.AccountID != account || x.Status != clouddb.ACLPending {
			continue
		}
		used := slices.ContainsFunc(a.roles, func(role *clouddb.ACLRole) bool {
			return role.AccountID == account && roleHeld[role.ID] &&
				slices.ContainsFunc(role.Rules, func(rr clouddb.ACLRoleRule) bool { return rr.RuleID == x.ID })
		})
		if !used {
			out.rules[x.ID] = true
		}
	}
	return out
}

// settleACL settles the ACL rows whose change is on every server it concerns: pending
// rows become active and users being deleted go. A database holds back the rows its
// change concerns (see ready) until its server is known to have the named users this
// pass's rows make of it (r.users): given by Ensure, or by SetUsers for a database that
// is not active, whose server may still run. A database being deleted holds them back
// until it is gone. With a driver that cannot set users outside Ensure (no
// clouddb.UserSetter), only active databases hold rows back, the others getting their
// users when next ensured.
func (r *Reconciler) settleACL(ctx context.Context, dbs []*clouddb.Database, idx index, acl *aclState) {
	accounts := acl.unsettled()
	if len(accounts) == 0 {
		return
	}
	_, canSet := r.Driver.(clouddb.UserSetter)
	held := map[int][]heldDB{}
	for _, d := range dbs {
		if !accounts[d.AccountID] || (!canSet && d.Status != clouddb.DatabaseActive) {
			continue
		}
		in, _ := desiredInstance(d, idx, acl)
		fp := usersFingerprint(in)
		r.mu.Lock()
		rec, known := r.users[d.ID]
		h := heldDB{key: dbKey{d.AccountID, d.SubscriptionID, d.ID}, known: known, names: maps.Clone(rec.names), wants: map[string]bool{}}
		r.mu.Unlock()
		if known && rec.fp == fp {
			continue
		}
		for _, u := range in.Users {
			h.wants[u.Name] = true
		}
		held[d.AccountID] = append(held[d.AccountID], h)
	}
	for account := range accounts {
		ready := acl.ready(account, held[account])
		if ready.empty() {
			continue
		}
		r.spawn(ctx, "acl:"+strconv.Itoa(account),
			func(ctx context.Context) error { return r.applyACL(ctx, account, acl, ready) },
			func(ctx context.Context) { r.aclFailed(ctx, account, acl, ready) })
	}
}

// applyACL marks the account's ready rules, roles and users active and deletes its ready
// users being deleted, each only if it is still as this pass read it (its generation): a
// newer change waits for its own pass.
func (r *Reconciler) applyACL(ctx context.Context, account int, acl *aclState, ready aclReady) error {
	if !r.delay(ctx) {
		return nil
	}
	var applied, removed []*clouddb.ACLUser
	err := r.update(ctx, func(tx clouddb.Tx) error {
		applied, removed = nil, nil
		for _, x := range acl.rules {
			if x.AccountID == account && x.Status == clouddb.ACLPending && ready.rules[x.ID] {
				if _, err := tx.SetACLRuleStatus(ctx, x.ID, x.Generation, clouddb.ACLActive); err != nil {
					return err
				}
			}
		}
		for _, role := range acl.roles {
			if role.AccountID == account && role.Status == clouddb.ACLPending && ready.roles[role.ID] {
				if _, err := tx.SetACLRoleStatus(ctx, role.ID, role.Generation, clouddb.ACLActive); err != nil {
					return err
				}
			}
		}
		for _, u := range acl.users {
			if u.AccountID != account || !ready.users[u.ID] {
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

// aclFailed puts the account's ready pending rows in error after applyACL panicked, so
// that it is not tried again in a loop and their owner sees that something went wrong.
// Users being deleted stay so: the next pass tries again, as for a database being
// deleted.
func (r *Reconciler) aclFailed(ctx context.Context, account int, acl *aclState, ready aclReady) {
	err := r.update(ctx, func(tx clouddb.Tx) error {
		for _, x := range acl.rules {
			if x.AccountID == account && x.Status == clouddb.ACLPending && ready.rules[x.ID] {
				if _, err := tx.SetACLRuleStatus(ctx, x.ID, x.Generation, clouddb.ACLError); err != nil {
					return err
				}
			}
		}
		for _, role := range acl.roles {
			if role.AccountID == account && role.Status == clouddb.ACLPending && ready.roles[role.ID] {
				if _, err := tx.SetACLRoleStatus(ctx, role.ID, role.Generation, clouddb.ACLError); err != nil {
					return err
				}
			}
		}
		for _, u := range acl.users {
			if u.AccountID == account && u.Status == clouddb.ACLPending && ready.users[u.ID] {
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
