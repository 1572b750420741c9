package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func newACLUser(accountID int, name string, roleID int) *clouddb.ACLUser {
	return &clouddb.ACLUser{AccountID: accountID, Name: name, RoleID: roleID, Password: "Pw-" + name + "-1!", Status: clouddb.ACLPending}
}

// aclUser reads a user in a transaction of its own.
func (bn *bundle) aclUser(t *testing.T, accountID, id int) (*clouddb.ACLUser, error) {
	t.Helper()
	return read(bn, func(tx clouddb.Tx) (*clouddb.ACLUser, error) { return tx.ACLUser(bn.ctx, accountID, id) })
}

// aclUsers lists the users of an account in a transaction of its own.
func (bn *bundle) aclUsers(t *testing.T, accountID int) []*clouddb.ACLUser {
	t.Helper()
	out, err := read(bn, func(tx clouddb.Tx) ([]*clouddb.ACLUser, error) { return tx.ACLUsers(bn.ctx, accountID) })
	require.NoError(t, err)
	return out
}

func testACLUser(t *testing.T, open OpenFunc) {
	// setupRoles adds a role to A and one to B.
	setupRoles := func(t *testing.T) (*bundle, *clouddb.ACLRole, *clouddb.ACLRole) {
		bn := setup(t, open)
		ra := newACLRole(bn.a.ID, "ra", clouddb.ACLRoleRule{RuleID: 1})
		rb := newACLRole(bn.b.ID, "rb", clouddb.ACLRoleRule{RuleID: 3})
		bn.update(t, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateACLRole(bn.ctx, ra))
			return tx.CreateACLRole(bn.ctx, rb)
		})
		return bn, ra, rb
	}

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		bn, ra, _ := setupRoles(t)
		u := newACLUser(bn.a.ID, "app-user", ra.ID)
		u.Password = `P@ss w0rd"'\%_` // quotes, backslash and LIKE wildcards survive
		v := bn.store.Version()
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLUser(bn.ctx, u) })
		require.NotEqual(t, v, bn.store.Version(), "an ACL write changes the version")
		require.NotZero(t, u.ID)
		require.Equal(t, 1, u.Generation)
		requireStamped(t, u.CreatedAt)
		require.Equal(t, u.CreatedAt, u.UpdatedAt)

		got, err := bn.aclUser(t, bn.a.ID, u.ID)
		require.NoError(t, err)
		require.Equal(t, u, got)
		require.Equal(t, `P@ss w0rd"'\%_`, got.Password)
		require.Equal(t, ra.ID, got.RoleID)
		got, err = bn.aclUser(t, 0, u.ID)
		require.NoError(t, err, "account 0 sees every account")
		require.Equal(t, u, got)
		_, err = bn.aclUser(t, bn.b.ID, u.ID)
		require.ErrorIs(t, err, clouddb.ErrNotFound, "another account's user is not found")
		_, err = bn.aclUser(t, bn.a.ID, u.ID+1000)
		require.ErrorIs(t, err, clouddb.ErrNotFound)
		_, err = bn.aclUser(t, 0, u.ID+1000)
		require.ErrorIs(t, err, clouddb.ErrNotFound)

		// Preset id, times and generation are kept; the role is not checked.
		preset := newACLUser(bn.b.ID, "preset", 999)
		preset.ID, preset.CreatedAt, preset.UpdatedAt, preset.Generation = 100, base, base, 4
		preset.Password = ""
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLUser(bn.ctx, preset) })
		got, err = bn.aclUser(t, bn.b.ID, 100)
		require.NoError(t, err)
		require.Equal(t, preset, got)
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		bn, ra, rb := setupRoles(t)
		a1 := newACLUser(bn.a.ID, "a1", ra.ID)
		b1 := newACLUser(bn.b.ID, "b1", rb.ID)
		a2 := newACLUser(bn.a.ID, "a2", ra.ID)
		require.Empty(t, bn.aclUsers(t, bn.a.ID))
		require.Empty(t, bn.aclUsers(t, 0))
		bn.update(t, func(tx clouddb.Tx) error {
			for _, u := range []*clouddb.ACLUser{a1, b1, a2} {
				require.NoError(t, tx.CreateACLUser(bn.ctx, u))
			}
			return nil
		})
		require.Less(t, a1.ID, b1.ID)
		require.Less(t, b1.ID, a2.ID)
		require.Equal(t, []*clouddb.ACLUser{a1, a2}, bn.aclUsers(t, bn.a.ID))
		require.Equal(t, []*clouddb.ACLUser{b1}, bn.aclUsers(t, bn.b.ID))
		require.Equal(t, []*clouddb.ACLUser{a1, b1, a2}, bn.aclUsers(t, 0))
	})

	t.Run("NameUnique", func(t *testing.T) {
		t.Parallel()
		bn, ra, rb := setupRoles(t)
		create := func(u *clouddb.ACLUser) error {
			return bn.tryUpdate(func(tx clouddb.Tx) error { return tx.CreateACLUser(bn.ctx, u) })
		}
		ua := newACLUser(bn.a.ID, "u", ra.ID)
		require.NoError(t, create(ua))
		require.ErrorIs(t, create(newACLUser(bn.a.ID, "u", ra.ID)), clouddb.ErrConflict, "a name taken in the account")
		ub := newACLUser(bn.b.ID, "u", rb.ID)
		require.NoError(t, create(ub), "another account may use the name")

		other := newACLUser(bn.a.ID, "other", ra.ID)
		require.NoError(t, create(other))
		upd := *other
		upd.Name = "u"
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLUser(bn.ctx, &upd) }),
			clouddb.ErrConflict, "renamed to a name taken in the account")
		require.Equal(t, []*clouddb.ACLUser{ua, other}, bn.aclUsers(t, bn.a.ID))

		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteACLUser(bn.ctx, ua.ID) })
		require.NoError(t, create(newACLUser(bn.a.ID, "u", ra.ID)), "a deleted user's name is free again")
	})

	t.Run("UpdateDelete", func(t *testing.T) {
		t.Parallel()
		bn, ra, _ := setupRoles(t)
		other := newACLRole(bn.a.ID, "other")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRole(bn.ctx, other) })
		u := newACLUser(bn.a.ID, "u", ra.ID)
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLUser(bn.ctx, u) })

		upd := *u
		upd.Name = "renamed"
		upd.RoleID = other.ID
		upd.Password = "New-Passw0rd!"
		upd.Status = clouddb.ACLDeleting
		upd.Generation = 5 // the caller owns the generation
		upd.CreatedAt = base
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateACLUser(bn.ctx, &upd) })
		requireStamped(t, upd.UpdatedAt)
		require.False(t, upd.UpdatedAt.Before(u.UpdatedAt))
		want := upd
		want.CreatedAt = u.CreatedAt // not written by an update
		got, err := bn.aclUser(t, bn.a.ID, u.ID)
		require.NoError(t, err)
		require.Equal(t, &want, got)
		require.Equal(t, "New-Passw0rd!", got.Password)

		missing := *u
		missing.ID += 1000
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLUser(bn.ctx, &missing) }), clouddb.ErrNotFound)
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteACLUser(bn.ctx, missing.ID) }), clouddb.ErrNotFound)

		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteACLUser(bn.ctx, u.ID) })
		_, err = bn.aclUser(t, 0, u.ID)
		require.ErrorIs(t, err, clouddb.ErrNotFound)
		require.Empty(t, bn.aclUsers(t, bn.a.ID))
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteACLUser(bn.ctx, u.ID) }), clouddb.ErrNotFound)
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLUser(bn.ctx, &want) }), clouddb.ErrNotFound)

		// A deleted user's id is not handed out again.
		again := newACLUser(bn.a.ID, "u", ra.ID)
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLUser(bn.ctx, again) })
		require.Greater(t, again.ID, u.ID)
	})

	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		bn, ra, _ := setupRoles(t)
		set := func(id, generation int, st clouddb.ACLStatus) bool {
			var ok bool
			bn.update(t, func(tx clouddb.Tx) error {
				var err error
				ok, err = tx.SetACLUserStatus(bn.ctx, id, generation, st)
				return err
			})
			return ok
		}
		u := newACLUser(bn.a.ID, "u", ra.ID)
		bn.update(t, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateACLUser(bn.ctx, u))
			u.Generation = 2
			return tx.UpdateACLUser(bn.ctx, u)
		})
		require.False(t, set(u.ID, 1, clouddb.ACLActive), "a stale generation changes nothing")
		require.False(t, set(u.ID+1000, 2, clouddb.ACLActive), "a missing user")
		got, err := bn.aclUser(t, bn.a.ID, u.ID)
		require.NoError(t, err)
		require.Equal(t, u, got)

		require.True(t, set(u.ID, 2, clouddb.ACLActive))
		got, err = bn.aclUser(t, bn.a.ID, u.ID)
		require.NoError(t, err)
		require.False(t, got.UpdatedAt.Before(u.UpdatedAt))
		want := *u
		want.Status, want.UpdatedAt = clouddb.ACLActive, got.UpdatedAt
		require.Equal(t, &want, got, "only the status (and the update time) changed")
	})
}
