package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func newACLRole(accountID int, name string, rules ...clouddb.ACLRoleRule) *clouddb.ACLRole {
	return &clouddb.ACLRole{AccountID: accountID, Name: name, Rules: rules, Status: clouddb.ACLPending}
}

// aclRole reads a role in a transaction of its own.
func (bn *bundle) aclRole(t *testing.T, accountID, id int) (*clouddb.ACLRole, error) {
	t.Helper()
	return read(bn, func(tx clouddb.Tx) (*clouddb.ACLRole, error) { return tx.ACLRole(bn.ctx, accountID, id) })
}

// aclRoles lists the roles of an account in a transaction of its own.
func (bn *bundle) aclRoles(t *testing.T, accountID int) []*clouddb.ACLRole {
	t.Helper()
	out, err := read(bn, func(tx clouddb.Tx) ([]*clouddb.ACLRole, error) { return tx.ACLRoles(bn.ctx, accountID) })
	require.NoError(t, err)
	return out
}

func testACLRole(t *testing.T, open OpenFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		rule := newACLRule(bn.a.ID, "mine", "+@read ~app:*")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRule(bn.ctx, rule) })
		r := newACLRole(bn.a.ID, "app",
			clouddb.ACLRoleRule{RuleID: 1, Databases: []clouddb.ACLRoleDatabaseRef{
				{SubscriptionID: 7, DatabaseID: 9, Regions: []string{"us-east-1", "eu-west-1"}},
				{SubscriptionID: 7, DatabaseID: 10},
			}},
			clouddb.ACLRoleRule{RuleID: rule.ID, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: 8, DatabaseID: 11}}},
		)
		v := bn.store.Version()
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRole(bn.ctx, r) })
		require.NotEqual(t, v, bn.store.Version(), "an ACL write changes the version")
		require.NotZero(t, r.ID)
		require.Equal(t, 1, r.Generation)
		requireStamped(t, r.CreatedAt)
		require.Equal(t, r.CreatedAt, r.UpdatedAt)

		got, err := bn.aclRole(t, bn.a.ID, r.ID)
		require.NoError(t, err)
		require.Equal(t, r, got)
		require.Equal(t, []string{"us-east-1", "eu-west-1"}, got.Rules[0].Databases[0].Regions)
		require.Nil(t, got.Rules[0].Databases[1].Regions)
		got, err = bn.aclRole(t, 0, r.ID)
		require.NoError(t, err, "account 0 sees every account")
		require.Equal(t, r, got)
		_, err = bn.aclRole(t, bn.b.ID, r.ID)
		require.ErrorIs(t, err, clouddb.ErrNotFound, "another account's role is not found")
		_, err = bn.aclRole(t, bn.a.ID, r.ID+1000)
		require.ErrorIs(t, err, clouddb.ErrNotFound)
		_, err = bn.aclRole(t, 0, r.ID+1000)
		require.ErrorIs(t, err, clouddb.ErrNotFound)

		// Preset id, times and generation are kept.
		preset := newACLRole(bn.b.ID, "preset")
		preset.ID, preset.CreatedAt, preset.UpdatedAt, preset.Generation = 100, base, base, 4
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRole(bn.ctx, preset) })
		got, err = bn.aclRole(t, bn.b.ID, 100)
		require.NoError(t, err)
		require.Equal(t, preset, got)
	})

	// NilAndEmpty: the associations read back as they were written, nil as nil and empty as
	// empty; empty regions are omitted, so they read back nil.
	t.Run("NilAndEmpty", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		none := newACLRole(bn.a.ID, "none")
		empty := newACLRole(bn.a.ID, "empty")
		empty.Rules = []clouddb.ACLRoleRule{}
		noDBs := newACLRole(bn.a.ID, "no-dbs", clouddb.ACLRoleRule{RuleID: 2},
			clouddb.ACLRoleRule{RuleID: 3, Databases: []clouddb.ACLRoleDatabaseRef{}})
		noRegions := newACLRole(bn.a.ID, "no-regions", clouddb.ACLRoleRule{RuleID: 1,
			Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: 1, DatabaseID: 2, Regions: []string{}}}})
		bn.update(t, func(tx clouddb.Tx) error {
			for _, r := range []*clouddb.ACLRole{none, empty, noDBs, noRegions} {
				require.NoError(t, tx.CreateACLRole(bn.ctx, r))
			}
			return nil
		})
		roles := bn.aclRoles(t, bn.a.ID)
		require.Len(t, roles, 4)
		require.Nil(t, roles[0].Rules)
		require.NotNil(t, roles[1].Rules)
		require.Empty(t, roles[1].Rules)
		require.Nil(t, roles[2].Rules[0].Databases)
		require.NotNil(t, roles[2].Rules[1].Databases)
		require.Empty(t, roles[2].Rules[1].Databases)
		require.Nil(t, roles[3].Rules[0].Databases[0].Regions)
		noRegions.Rules[0].Databases[0].Regions = nil
		require.Equal(t, []*clouddb.ACLRole{none, empty, noDBs, noRegions}, roles)

		// An update writes them the same way.
		upd := *empty
		upd.Rules = nil
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateACLRole(bn.ctx, &upd) })
		got, err := bn.aclRole(t, bn.a.ID, empty.ID)
		require.NoError(t, err)
		require.Nil(t, got.Rules)
		upd.Rules = []clouddb.ACLRoleRule{}
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateACLRole(bn.ctx, &upd) })
		got, err = bn.aclRole(t, bn.a.ID, empty.ID)
		require.NoError(t, err)
		require.NotNil(t, got.Rules)
		require.Equal(t, &upd, got)
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1 := newACLRole(bn.a.ID, "a1", clouddb.ACLRoleRule{RuleID: 1})
		b1 := newACLRole(bn.b.ID, "b1", clouddb.ACLRoleRule{RuleID: 2})
		a2 := newACLRole(bn.a.ID, "a2", clouddb.ACLRoleRule{RuleID: 3})
		require.Empty(t, bn.aclRoles(t, bn.a.ID))
		require.Empty(t, bn.aclRoles(t, 0))
		bn.update(t, func(tx clouddb.Tx) error {
			for _, r := range []*clouddb.ACLRole{a1, b1, a2} {
				require.NoError(t, tx.CreateACLRole(bn.ctx, r))
			}
			return nil
		})
		require.Less(t, a1.ID, b1.ID)
		require.Less(t, b1.ID, a2.ID)
		require.Equal(t, []*clouddb.ACLRole{a1, a2}, bn.aclRoles(t, bn.a.ID))
		require.Equal(t, []*clouddb.ACLRole{b1}, bn.aclRoles(t, bn.b.ID))
		require.Equal(t, []*clouddb.ACLRole{a1, b1, a2}, bn.aclRoles(t, 0))
	})

	t.Run("NameUnique", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		create := func(r *clouddb.ACLRole) error {
			return bn.tryUpdate(func(tx clouddb.Tx) error { return tx.CreateACLRole(bn.ctx, r) })
		}
		ra := newACLRole(bn.a.ID, "r")
		require.NoError(t, create(ra))
		require.ErrorIs(t, create(newACLRole(bn.a.ID, "r")), clouddb.ErrConflict, "a name taken in the account")
		rb := newACLRole(bn.b.ID, "r")
		require.NoError(t, create(rb), "another account may use the name")

		other := newACLRole(bn.a.ID, "other")
		require.NoError(t, create(other))
		upd := *other
		upd.Name = "r"
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLRole(bn.ctx, &upd) }),
			clouddb.ErrConflict, "renamed to a name taken in the account")
		require.Equal(t, []*clouddb.ACLRole{ra, other}, bn.aclRoles(t, bn.a.ID))

		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteACLRole(bn.ctx, ra.ID) })
		require.NoError(t, create(newACLRole(bn.a.ID, "r")), "a deleted role's name is free again")
	})

	t.Run("UpdateDelete", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		r := newACLRole(bn.a.ID, "r", clouddb.ACLRoleRule{RuleID: 1, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: 1, DatabaseID: 1}}})
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRole(bn.ctx, r) })

		upd := *r
		upd.Name = "renamed"
		upd.Rules = []clouddb.ACLRoleRule{
			{RuleID: 3, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: 2, DatabaseID: 5, Regions: []string{"eu-west-1"}}}},
		}
		upd.Status = clouddb.ACLActive
		upd.Generation = 5 // the caller owns the generation
		upd.CreatedAt = base
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateACLRole(bn.ctx, &upd) })
		requireStamped(t, upd.UpdatedAt)
		require.False(t, upd.UpdatedAt.Before(r.UpdatedAt))
		want := upd
		want.CreatedAt = r.CreatedAt // not written by an update
		got, err := bn.aclRole(t, bn.a.ID, r.ID)
		require.NoError(t, err)
		require.Equal(t, &want, got)

		missing := *r
		missing.ID += 1000
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLRole(bn.ctx, &missing) }), clouddb.ErrNotFound)
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteACLRole(bn.ctx, missing.ID) }), clouddb.ErrNotFound)

		// The store deletes a role that users hold: refusing it is the caller's rule.
		u := newACLUser(bn.a.ID, "u", r.ID)
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLUser(bn.ctx, u) })
		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteACLRole(bn.ctx, r.ID) })
		_, err = bn.aclRole(t, 0, r.ID)
		require.ErrorIs(t, err, clouddb.ErrNotFound)
		require.Empty(t, bn.aclRoles(t, bn.a.ID))
		gotUser, err := bn.aclUser(t, bn.a.ID, u.ID)
		require.NoError(t, err)
		require.Equal(t, u, gotUser, "the user is left as it was")
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteACLRole(bn.ctx, r.ID) }), clouddb.ErrNotFound)
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLRole(bn.ctx, &want) }), clouddb.ErrNotFound)

		// A deleted role's id is not handed out again.
		again := newACLRole(bn.a.ID, "r")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRole(bn.ctx, again) })
		require.Greater(t, again.ID, r.ID)
	})

	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		set := func(id, generation int, st clouddb.ACLStatus) bool {
			var ok bool
			bn.update(t, func(tx clouddb.Tx) error {
				var err error
				ok, err = tx.SetACLRoleStatus(bn.ctx, id, generation, st)
				return err
			})
			return ok
		}
		r := newACLRole(bn.a.ID, "r", clouddb.ACLRoleRule{RuleID: 1})
		bn.update(t, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateACLRole(bn.ctx, r))
			r.Generation = 2
			return tx.UpdateACLRole(bn.ctx, r)
		})
		require.False(t, set(r.ID, 1, clouddb.ACLActive), "a stale generation changes nothing")
		require.False(t, set(r.ID+1000, 2, clouddb.ACLActive), "a missing role")
		got, err := bn.aclRole(t, bn.a.ID, r.ID)
		require.NoError(t, err)
		require.Equal(t, r, got)

		require.True(t, set(r.ID, 2, clouddb.ACLError))
		got, err = bn.aclRole(t, bn.a.ID, r.ID)
		require.NoError(t, err)
		require.False(t, got.UpdatedAt.Before(r.UpdatedAt))
		want := *r
		want.Status, want.UpdatedAt = clouddb.ACLError, got.UpdatedAt
		require.Equal(t, &want, got, "only the status (and the update time) changed")
	})
}
