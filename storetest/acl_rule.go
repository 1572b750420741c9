package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// defaultACLRules are copies of clouddb.DefaultACLRules as a store returns them.
func defaultACLRules() []*clouddb.ACLRule {
	out := make([]*clouddb.ACLRule, len(clouddb.DefaultACLRules))
	for i := range clouddb.DefaultACLRules {
		r := clouddb.DefaultACLRules[i]
		out[i] = &r
	}
	return out
}

func newACLRule(accountID int, name, acl string) *clouddb.ACLRule {
	return &clouddb.ACLRule{AccountID: accountID, Name: name, ACL: acl, Status: clouddb.ACLPending}
}

// aclRule reads a rule in a transaction of its own.
func (bn *bundle) aclRule(t *testing.T, accountID, id int) (*clouddb.ACLRule, error) {
	t.Helper()
	return read(bn, func(tx clouddb.Tx) (*clouddb.ACLRule, error) { return tx.ACLRule(bn.ctx, accountID, id) })
}

// aclRules lists the rules of an account in a transaction of its own.
func (bn *bundle) aclRules(t *testing.T, accountID int) []*clouddb.ACLRule {
	t.Helper()
	out, err := read(bn, func(tx clouddb.Tx) ([]*clouddb.ACLRule, error) { return tx.ACLRules(bn.ctx, accountID) })
	require.NoError(t, err)
	return out
}

func testACLRule(t *testing.T, open OpenFunc) {
	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		defaults := defaultACLRules()
		require.Len(t, defaults, 3)
		// The API's text, byte for byte: Full-Access has two spaces.
		require.Equal(t, "+@all  ~*", defaults[0].ACL)

		for _, accountID := range []int{bn.a.ID, bn.b.ID, 0} {
			rules := bn.aclRules(t, accountID)
			require.Equal(t, defaults, rules, "account %d has the default rules", accountID)
			require.Equal(t, []string{"Full-Access", "Read-Write", "Read-Only"},
				[]string{rules[0].Name, rules[1].Name, rules[2].Name})
			require.Equal(t, []string{"+@all  ~*", "+@all -@dangerous ~*", "+@read ~*"},
				[]string{rules[0].ACL, rules[1].ACL, rules[2].ACL})
			for i, want := range defaults {
				require.Equal(t, i+1, want.ID)
				require.True(t, want.IsDefault)
				require.Zero(t, want.AccountID)
				require.Equal(t, clouddb.ACLActive, want.Status)
				got, err := bn.aclRule(t, accountID, want.ID)
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
		}

		// Default rules cannot be changed or deleted, and their status stays.
		for _, d := range defaults {
			upd := *d
			upd.ACL = "+@read ~x"
			require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLRule(bn.ctx, &upd) }),
				clouddb.ErrConflict, "update %s", d.Name)
			require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteACLRule(bn.ctx, d.ID) }),
				clouddb.ErrConflict, "delete %s", d.Name)
			bn.update(t, func(tx clouddb.Tx) error {
				ok, err := tx.SetACLRuleStatus(bn.ctx, d.ID, d.Generation, clouddb.ACLPending)
				require.NoError(t, err)
				require.False(t, ok, "a default rule's status is not set")
				return nil
			})
		}
		require.Equal(t, defaults, bn.aclRules(t, bn.a.ID), "the default rules are unchanged")

		// No account rule is a default one: the store refuses to create one.
		require.Error(t, bn.tryUpdate(func(tx clouddb.Tx) error {
			return tx.CreateACLRule(bn.ctx, newACLRule(0, "mine", "+@read ~*"))
		}), "a rule without an account")
		r := newACLRule(bn.a.ID, "mine", "+@read ~*")
		r.IsDefault = true
		require.Error(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.CreateACLRule(bn.ctx, r) }),
			"a rule that claims to be a default one")
		require.Equal(t, defaults, bn.aclRules(t, 0))
	})

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		v := bn.store.Version()
		r := newACLRule(bn.a.ID, "cache-reader", "+@read +get ~cache:* &events")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRule(bn.ctx, r) })
		require.NotEqual(t, v, bn.store.Version(), "an ACL write changes the version")
		require.Equal(t, len(clouddb.DefaultACLRules)+1, r.ID, "ids of created rules follow the default rules'")
		require.Equal(t, 1, r.Generation)
		require.False(t, r.IsDefault)
		requireStamped(t, r.CreatedAt)
		require.Equal(t, r.CreatedAt, r.UpdatedAt)

		got, err := bn.aclRule(t, bn.a.ID, r.ID)
		require.NoError(t, err)
		require.Equal(t, r, got)
		got, err = bn.aclRule(t, 0, r.ID)
		require.NoError(t, err, "account 0 sees every account")
		require.Equal(t, r, got)
		_, err = bn.aclRule(t, bn.b.ID, r.ID)
		require.ErrorIs(t, err, clouddb.ErrNotFound, "another account's rule is not found")
		_, err = bn.aclRule(t, bn.a.ID, r.ID+1000)
		require.ErrorIs(t, err, clouddb.ErrNotFound)
		_, err = bn.aclRule(t, 0, r.ID+1000)
		require.ErrorIs(t, err, clouddb.ErrNotFound)

		// Preset id, times and generation are kept; ids continue after a preset one.
		preset := newACLRule(bn.b.ID, "preset", "-@all +ping")
		preset.ID, preset.CreatedAt, preset.UpdatedAt, preset.Generation = 100, base, base.Add(time.Second), 3
		preset.Status = clouddb.ACLActive
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRule(bn.ctx, preset) })
		require.Equal(t, 100, preset.ID)
		got, err = bn.aclRule(t, bn.b.ID, 100)
		require.NoError(t, err)
		require.Equal(t, preset, got)
		next := newACLRule(bn.b.ID, "next", "+@read ~*")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRule(bn.ctx, next) })
		require.Equal(t, 101, next.ID)
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error {
			return tx.CreateACLRule(bn.ctx, &clouddb.ACLRule{ID: 100, AccountID: bn.a.ID, Name: "dup-id"})
		}), clouddb.ErrConflict, "a taken id")
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1 := newACLRule(bn.a.ID, "a1", "+@read ~a1")
		b1 := newACLRule(bn.b.ID, "b1", "+@read ~b1")
		a2 := newACLRule(bn.a.ID, "a2", "+@write ~a2")
		bn.update(t, func(tx clouddb.Tx) error {
			for _, r := range []*clouddb.ACLRule{a1, b1, a2} {
				require.NoError(t, tx.CreateACLRule(bn.ctx, r))
			}
			return nil
		})
		require.Less(t, a1.ID, b1.ID)
		require.Less(t, b1.ID, a2.ID)
		defaults := defaultACLRules()
		require.Equal(t, append(defaultACLRules(), a1, a2), bn.aclRules(t, bn.a.ID))
		require.Equal(t, append(defaultACLRules(), b1), bn.aclRules(t, bn.b.ID))
		require.Equal(t, append(defaults, a1, b1, a2), bn.aclRules(t, 0))
	})

	t.Run("NameUnique", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		create := func(r *clouddb.ACLRule) error {
			return bn.tryUpdate(func(tx clouddb.Tx) error { return tx.CreateACLRule(bn.ctx, r) })
		}
		update := func(r *clouddb.ACLRule) error {
			return bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLRule(bn.ctx, r) })
		}
		ra := newACLRule(bn.a.ID, "r", "+@read ~*")
		require.NoError(t, create(ra))
		require.ErrorIs(t, create(newACLRule(bn.a.ID, "r", "+@write ~*")), clouddb.ErrConflict, "a name taken in the account")
		rb := newACLRule(bn.b.ID, "r", "+@write ~*")
		require.NoError(t, create(rb), "another account may use the name")
		for _, d := range clouddb.DefaultACLRules {
			require.ErrorIs(t, create(newACLRule(bn.a.ID, d.Name, "+@read ~*")), clouddb.ErrConflict, "a default rule's name %q", d.Name)
		}

		other := newACLRule(bn.a.ID, "other", "+@read ~o")
		require.NoError(t, create(other))
		upd := *other
		upd.Name = "r"
		require.ErrorIs(t, update(&upd), clouddb.ErrConflict, "renamed to a name taken in the account")
		upd.Name = "Read-Only"
		require.ErrorIs(t, update(&upd), clouddb.ErrConflict, "renamed to a default rule's name")
		upd.Name = "other"
		upd.ACL = "+@read ~p"
		require.NoError(t, update(&upd), "an update keeping its own name")

		require.Equal(t, append(defaultACLRules(), ra, &upd), bn.aclRules(t, bn.a.ID))
		require.Equal(t, append(defaultACLRules(), rb), bn.aclRules(t, bn.b.ID))

		// A deleted rule's name is free again.
		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteACLRule(bn.ctx, ra.ID) })
		require.NoError(t, create(newACLRule(bn.a.ID, "r", "+@read ~*")))
	})

	t.Run("UpdateDelete", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		r := newACLRule(bn.a.ID, "r", "+@read ~*")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRule(bn.ctx, r) })

		upd := *r
		upd.Name = "renamed"
		upd.ACL = "+@all -@dangerous ~app:*"
		upd.Status = clouddb.ACLActive
		upd.Generation = 5 // the caller owns the generation
		upd.CreatedAt = base
		bn.update(t, func(tx clouddb.Tx) error { return tx.UpdateACLRule(bn.ctx, &upd) })
		requireStamped(t, upd.UpdatedAt)
		require.False(t, upd.UpdatedAt.Before(r.UpdatedAt))
		want := upd
		want.CreatedAt = r.CreatedAt // not written by an update
		got, err := bn.aclRule(t, bn.a.ID, r.ID)
		require.NoError(t, err)
		require.Equal(t, &want, got)

		missing := *r
		missing.ID += 1000
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLRule(bn.ctx, &missing) }), clouddb.ErrNotFound)
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteACLRule(bn.ctx, missing.ID) }), clouddb.ErrNotFound)

		bn.update(t, func(tx clouddb.Tx) error { return tx.DeleteACLRule(bn.ctx, r.ID) })
		_, err = bn.aclRule(t, 0, r.ID)
		require.ErrorIs(t, err, clouddb.ErrNotFound)
		require.Equal(t, defaultACLRules(), bn.aclRules(t, bn.a.ID))
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.DeleteACLRule(bn.ctx, r.ID) }), clouddb.ErrNotFound)
		require.ErrorIs(t, bn.tryUpdate(func(tx clouddb.Tx) error { return tx.UpdateACLRule(bn.ctx, &want) }), clouddb.ErrNotFound)

		// A deleted rule's id is not handed out again.
		again := newACLRule(bn.a.ID, "r", "+@read ~*")
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateACLRule(bn.ctx, again) })
		require.Greater(t, again.ID, r.ID)
	})

	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		set := func(id, generation int, st clouddb.ACLStatus) bool {
			var ok bool
			bn.update(t, func(tx clouddb.Tx) error {
				var err error
				ok, err = tx.SetACLRuleStatus(bn.ctx, id, generation, st)
				return err
			})
			return ok
		}
		r := newACLRule(bn.a.ID, "r", "+@read ~*")
		bn.update(t, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateACLRule(bn.ctx, r))
			r.Generation = 2
			return tx.UpdateACLRule(bn.ctx, r)
		})
		require.False(t, set(r.ID, 1, clouddb.ACLActive), "a stale generation changes nothing")
		require.False(t, set(r.ID+1000, 2, clouddb.ACLActive), "a missing rule")
		got, err := bn.aclRule(t, bn.a.ID, r.ID)
		require.NoError(t, err)
		require.Equal(t, r, got)

		require.True(t, set(r.ID, 2, clouddb.ACLActive))
		got, err = bn.aclRule(t, bn.a.ID, r.ID)
		require.NoError(t, err)
		require.Equal(t, clouddb.ACLActive, got.Status)
		require.Equal(t, 2, got.Generation)
		require.False(t, got.UpdatedAt.Before(r.UpdatedAt))
		want := *r
		want.Status, want.UpdatedAt = clouddb.ACLActive, got.UpdatedAt
		require.Equal(t, &want, got, "only the status (and the update time) changed")
	})
}
