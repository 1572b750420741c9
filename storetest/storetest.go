// Package storetest is the conformance suite of clouddb.Store. Every implementation runs
// the same Run, so that the SQLite and the Postgres stores behave alike and the packages
// above them can rely on this suite instead of on either store.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// OpenFunc returns a fresh, empty store and arranges (with t.Cleanup) for it to be closed.
type OpenFunc = func(t *testing.T) clouddb.Store

// Run runs the suite against the stores open returns; each subtest opens its own.
func Run(t *testing.T, open OpenFunc) {
	t.Run("Account", func(t *testing.T) { testAccount(t, open) })
	t.Run("CloudAccount", func(t *testing.T) { testCloudAccount(t, open) })
	t.Run("Subscription", func(t *testing.T) { testSubscription(t, open) })
	t.Run("Database", func(t *testing.T) { testDatabase(t, open) })
	t.Run("ACLRule", func(t *testing.T) { testACLRule(t, open) })
	t.Run("ACLRole", func(t *testing.T) { testACLRole(t, open) })
	t.Run("ACLUser", func(t *testing.T) { testACLUser(t, open) })
	t.Run("Tx", func(t *testing.T) { testTx(t, open) })
	t.Run("Task", func(t *testing.T) { testTask(t, open) })
	t.Run("ClaimTask", func(t *testing.T) { testClaimTask(t, open) })
	t.Run("ProcessTasks", func(t *testing.T) { testProcessTasks(t, open) })
	t.Run("Savepoint", func(t *testing.T) { testSavepoint(t, open) })
	t.Run("Log", func(t *testing.T) { testLog(t, open) })
	t.Run("Version", func(t *testing.T) { testVersion(t, open) })
	t.Run("Setting", func(t *testing.T) { testSetting(t, open) })
}

// base is a fixed instant with microsecond precision, the precision every store keeps.
var base = time.Date(2025, 3, 4, 5, 6, 7, 123_000_000, time.UTC)

// bundle is a fresh store with two accounts, A and B, and the internal cloud account.
type bundle struct {
	ctx      context.Context
	store    clouddb.Store
	a, b     *clouddb.Account
	internal *clouddb.CloudAccount
}

func setup(t *testing.T, open OpenFunc) *bundle {
	t.Helper()
	bn := &bundle{ctx: t.Context(), store: open(t)}
	bn.update(t, func(tx clouddb.Tx) error {
		bn.a = &clouddb.Account{Name: "A", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(bn.ctx, bn.a))
		bn.b = &clouddb.Account{Name: "B", Plan: clouddb.PlanAnnual}
		require.NoError(t, tx.CreateAccount(bn.ctx, bn.b))
		bn.internal = &clouddb.CloudAccount{
			ID:       clouddb.InternalCloudAccountID,
			Name:     "Internal",
			Provider: "AWS",
			Status:   clouddb.CloudAccountActive,
		}
		return tx.CreateCloudAccount(bn.ctx, bn.internal)
	})
	return bn
}

// update runs fn in a write transaction that must succeed.
// testVersion: the store's version changes with every committed write, and not with a
// read or a rolled-back write.
func testVersion(t *testing.T, open OpenFunc) {
	t.Parallel()
	bn := setup(t, open)
	v := bn.store.Version()
	bn.view(t, func(tx clouddb.Tx) error { _, err := tx.Accounts(bn.ctx); return err })
	require.Equal(t, v, bn.store.Version(), "a read")
	require.Error(t, bn.tryUpdate(func(tx clouddb.Tx) error {
		require.NoError(t, tx.CreateAccount(bn.ctx, &clouddb.Account{Name: "x", Plan: clouddb.PlanFree}))
		return errors.New("roll back")
	}))
	require.Equal(t, v, bn.store.Version(), "a rolled-back write")
	bn.update(t, func(tx clouddb.Tx) error {
		return tx.CreateAccount(bn.ctx, &clouddb.Account{Name: "y", Plan: clouddb.PlanFree})
	})
	v2 := bn.store.Version()
	require.NotEqual(t, v, v2, "a committed write")
	bn.createTasks(t, newTask(bn.a.ID))
	v3 := bn.store.Version()
	tk, err := bn.store.ClaimTask(bn.ctx, "w", time.Now(), time.Minute)
	require.NoError(t, err)
	require.NotNil(t, tk)
	require.NotEqual(t, v3, bn.store.Version(), "a claim changes a task")
	v4 := bn.store.Version()
	require.NoError(t, bn.store.ExtendLease(bn.ctx, tk.ID, "w", time.Now().Add(time.Hour)))
	require.NotEqual(t, v4, bn.store.Version(), "a lease extension changes a task")
}

func (bn *bundle) update(t *testing.T, fn func(tx clouddb.Tx) error) {
	t.Helper()
	require.NoError(t, bn.store.Update(bn.ctx, fn))
}

// read runs get in a read-only transaction of its own and returns what it read.
func read[T any](bn *bundle, get func(tx clouddb.Tx) (T, error)) (T, error) {
	var out T
	err := bn.store.View(bn.ctx, func(tx clouddb.Tx) error {
		var err error
		out, err = get(tx)
		return err
	})
	return out, err
}

// view runs fn in a read transaction that must succeed.
func (bn *bundle) view(t *testing.T, fn func(tx clouddb.Tx) error) {
	t.Helper()
	require.NoError(t, bn.store.View(bn.ctx, fn))
}

// tryUpdate runs fn in a write transaction and returns its error: a store may not accept
// more statements in a transaction after one failed (Postgres), so an expected failure
// gets a transaction of its own.
func (bn *bundle) tryUpdate(fn func(tx clouddb.Tx) error) error {
	return bn.store.Update(bn.ctx, fn)
}

// requireStamped checks a time the store assigned: set, in UTC, and recent.
func requireStamped(t *testing.T, ts time.Time) {
	t.Helper()
	require.False(t, ts.IsZero())
	require.Equal(t, time.UTC, ts.Location())
	require.WithinDuration(t, time.Now(), ts, time.Minute)
}
