package storetest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func testTx(t *testing.T, open OpenFunc) {
	t.Run("UpdateRollsBack", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		boom := errors.New("boom")
		err := bn.store.Update(bn.ctx, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateAccount(bn.ctx, &clouddb.Account{Name: "C", Plan: clouddb.PlanFree}))
			s := newSubscription(bn.a.ID, clouddb.InternalCloudAccountID, "sub")
			require.NoError(t, tx.CreateSubscription(bn.ctx, s))
			require.NoError(t, tx.CreateDatabase(bn.ctx, newDatabase(s, "db1", 10001)))
			require.NoError(t, tx.CreateTask(bn.ctx, &clouddb.Task{AccountID: bn.a.ID, CommandType: clouddb.CommandDatabaseCreate}))
			require.NoError(t, tx.CreateLogEntry(bn.ctx, &clouddb.LogEntry{AccountID: bn.a.ID, Description: "x"}))
			return boom
		})
		require.ErrorIs(t, err, boom, "Update returns fn's error")

		bn.view(t, func(tx clouddb.Tx) error {
			accounts, err := tx.Accounts(bn.ctx)
			require.NoError(t, err)
			require.Equal(t, []*clouddb.Account{bn.a, bn.b}, accounts)
			subs, err := tx.Subscriptions(bn.ctx, clouddb.SubscriptionFilter{})
			require.NoError(t, err)
			require.Empty(t, subs)
			dbs, total, err := tx.Databases(bn.ctx, clouddb.DatabaseFilter{})
			require.NoError(t, err)
			require.Empty(t, dbs)
			require.Zero(t, total)
			ports, err := tx.UsedPorts(bn.ctx)
			require.NoError(t, err)
			require.Empty(t, ports)
			tasks, err := tx.Tasks(bn.ctx, clouddb.TaskFilter{})
			require.NoError(t, err)
			require.Empty(t, tasks)
			entries, err := tx.LogEntries(bn.ctx, clouddb.LogFilter{})
			require.NoError(t, err)
			require.Empty(t, entries)
			return nil
		})
	})

	t.Run("ConflictRollsBack", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		// A write before a conflict in the same transaction is not kept either.
		err := bn.store.Update(bn.ctx, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateAccount(bn.ctx, &clouddb.Account{Name: "C", Plan: clouddb.PlanFree}))
			return tx.CreateCloudAccount(bn.ctx, &clouddb.CloudAccount{ID: clouddb.InternalCloudAccountID, Name: "dup"})
		})
		require.ErrorIs(t, err, clouddb.ErrConflict)
		bn.view(t, func(tx clouddb.Tx) error {
			accounts, err := tx.Accounts(bn.ctx)
			require.NoError(t, err)
			require.Len(t, accounts, 2)
			return nil
		})
	})

	t.Run("ViewIsReadOnly", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		err := bn.store.View(bn.ctx, func(tx clouddb.Tx) error {
			return tx.CreateAccount(bn.ctx, &clouddb.Account{Name: "C", Plan: clouddb.PlanFree})
		})
		require.Error(t, err)
		bn.view(t, func(tx clouddb.Tx) error {
			accounts, err := tx.Accounts(bn.ctx)
			require.NoError(t, err)
			require.Len(t, accounts, 2)
			return nil
		})

		boom := errors.New("boom")
		require.ErrorIs(t, bn.store.View(bn.ctx, func(clouddb.Tx) error { return boom }), boom, "View returns fn's error")
	})
}
