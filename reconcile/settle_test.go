package reconcile_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/reconcile"
)

// TestACLSettlesPerRow: an active database whose server waits holds back only the ACL rows
// its change concerns: the rule its role uses, that role, the users it must have and a
// user it must lose (one whose role moved it elsewhere); the account's rows about its
// other database settle, a user deleted from there included. Once it no longer waits,
// the rest settles.
func TestACLSettlesPerRow(t *testing.T) {
	store := openStore(t)
	a := createAccount(t, store, "a", 2)
	d1, d2 := a.dbs[0], a.dbs[1]
	drv := &gate{recorder: newRecorder(), id: d2.ID, last: map[int]clouddb.Instance{}}
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond}
	runReconciler(t, r)
	poll(t, func() bool { return allActive(t, store, d1, d2) }, 10*time.Second)

	on := func(d *clouddb.Database) []clouddb.ACLRoleDatabaseRef {
		return []clouddb.ACLRoleDatabaseRef{{SubscriptionID: a.sub, DatabaseID: d.ID}}
	}
	var x, y *clouddb.ACLRule
	var r1, r2, r3 *clouddb.ACLRole
	var u1, u2, mover, gone *clouddb.ACLUser
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		ctx := t.Context()
		x = &clouddb.ACLRule{AccountID: a.account, Name: "x", ACL: "+get ~x:*", Status: clouddb.ACLPending, Generation: 1}
		y = &clouddb.ACLRule{AccountID: a.account, Name: "y", ACL: "+get ~y:*", Status: clouddb.ACLPending, Generation: 1}
		for _, rule := range []*clouddb.ACLRule{x, y} {
			require.NoError(t, tx.CreateACLRule(ctx, rule))
		}
		r1 = &clouddb.ACLRole{AccountID: a.account, Name: "r1", Status: clouddb.ACLPending, Generation: 1, Rules: []clouddb.ACLRoleRule{{RuleID: x.ID, Databases: on(d1)}}}
		r2 = &clouddb.ACLRole{AccountID: a.account, Name: "r2", Status: clouddb.ACLPending, Generation: 1, Rules: []clouddb.ACLRoleRule{{RuleID: y.ID, Databases: on(d2)}}}
		r3 = &clouddb.ACLRole{AccountID: a.account, Name: "r3", Status: clouddb.ACLPending, Generation: 1, Rules: []clouddb.ACLRoleRule{{RuleID: readOnlyRuleID, Databases: on(d1)}}}
		for _, role := range []*clouddb.ACLRole{r1, r2, r3} {
			require.NoError(t, tx.CreateACLRole(ctx, role))
		}
		u1 = &clouddb.ACLUser{AccountID: a.account, Name: "u1", RoleID: r1.ID, Password: "U1.pass", Status: clouddb.ACLPending, Generation: 1}
		u2 = &clouddb.ACLUser{AccountID: a.account, Name: "u2", RoleID: r2.ID, Password: "U2.pass", Status: clouddb.ACLPending, Generation: 1}
		mover = &clouddb.ACLUser{AccountID: a.account, Name: "mover", RoleID: r2.ID, Password: "Mover.pass", Status: clouddb.ACLPending, Generation: 1}
		gone = &clouddb.ACLUser{AccountID: a.account, Name: "gone", RoleID: r1.ID, Password: "Gone.pass", Status: clouddb.ACLPending, Generation: 1}
		for _, u := range []*clouddb.ACLUser{u1, u2, mover, gone} {
			require.NoError(t, tx.CreateACLUser(ctx, u))
		}
		return nil
	}))
	ruleStatus := func(x *clouddb.ACLRule) clouddb.ACLStatus { return ruleRow(t, store, x.ID).Status }
	roleStatus := func(r *clouddb.ACLRole) clouddb.ACLStatus { return roleRow(t, store, r.ID).Status }
	userStatus := func(u *clouddb.ACLUser) clouddb.ACLStatus {
		row, err := userRow(t, store, u.ID)
		if errors.Is(err, clouddb.ErrNotFound) {
			return "gone"
		}
		require.NoError(t, err)
		return row.Status
	}
	type all struct {
		x, y, r1, r2          clouddb.ACLStatus
		u1, u2, mover, goneSt clouddb.ACLStatus
	}
	now := func() all {
		return all{ruleStatus(x), ruleStatus(y), roleStatus(r1), roleStatus(r2), userStatus(u1), userStatus(u2), userStatus(mover), userStatus(gone)}
	}
	active := clouddb.ACLActive
	poll(t, func() bool { return now() == all{active, active, active, active, active, active, active, active} }, 10*time.Second)
	require.Equal(t, active, roleStatus(r3))
	require.ElementsMatch(t, []string{"u2", "mover"}, names(drv.users(d2.ID)))

	// d2's server waits; a change of everything.
	drv.held.Store(true)
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		ctx := t.Context()
		for _, rule := range []*clouddb.ACLRule{x, y} {
			rule.ACL += " +set"
			rule.Status, rule.Generation = clouddb.ACLPending, rule.Generation+1
			require.NoError(t, tx.UpdateACLRule(ctx, rule))
		}
		for _, role := range []*clouddb.ACLRole{r1, r2} {
			role.Status, role.Generation = clouddb.ACLPending, role.Generation+1
			require.NoError(t, tx.UpdateACLRole(ctx, role))
		}
		for _, u := range []*clouddb.ACLUser{u1, u2} {
			u.Password += "2"
			u.Status, u.Generation = clouddb.ACLPending, u.Generation+1
			require.NoError(t, tx.UpdateACLUser(ctx, u))
		}
		mover.RoleID = r3.ID // leaves d2 for d1
		mover.Status, mover.Generation = clouddb.ACLPending, mover.Generation+1
		require.NoError(t, tx.UpdateACLUser(ctx, mover))
		gone.Status, gone.Generation = clouddb.ACLDeleting, gone.Generation+1
		return tx.UpdateACLUser(ctx, gone)
	}))
	pending := clouddb.ACLPending
	want := all{active, pending, active, pending, active, pending, pending, "gone"}
	poll(t, func() bool { return now() == want }, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // many passes
	require.Equal(t, want, now(), "what concerns d2 waits for it, and only that")
	require.Equal(t, []string{"mover", "u1"}, names(drv.users(d1.ID)), "gone is gone from d1, mover came")
	require.Equal(t, "U1.pass2", drv.users(d1.ID)[1].Password)

	drv.held.Store(false)
	poll(t, func() bool { return now() == all{active, active, active, active, active, active, active, "gone"} }, 10*time.Second)
	require.Equal(t, []string{"u2"}, names(drv.users(d2.ID)))
}

func names(users []clouddb.DatabaseUser) []string {
	out := make([]string, len(users))
	for i, u := range users {
		out[i] = u.Name
	}
	return out
}
