package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// RunStatusCounter checks a store's clouddb.StatusCounter: its counts follow the rows,
// and finished tasks are not in the queue.
func RunStatusCounter(t *testing.T, open OpenFunc) {
	bn := setup(t, open)
	sc, ok := bn.store.(clouddb.StatusCounter)
	require.True(t, ok, "the store is a clouddb.StatusCounter")

	counts, err := sc.DatabaseCounts(bn.ctx)
	require.NoError(t, err)
	require.Empty(t, counts)
	q, err := sc.TaskQueue(bn.ctx)
	require.NoError(t, err)
	require.Equal(t, clouddb.TaskQueue{}, q)

	sub := newSubscription(bn.a.ID, bn.internal.ID, "s")
	bn.update(t, func(tx clouddb.Tx) error {
		if cerr := tx.CreateSubscription(bn.ctx, sub); cerr != nil {
			return cerr
		}
		for i, s := range []clouddb.DatabaseStatus{clouddb.DatabaseActive, clouddb.DatabaseActive, clouddb.DatabasePending, clouddb.DatabaseDeleting} {
			d := newDatabase(sub, string(s)+string(rune('a'+i)), 10000+i)
			d.Status = s
			if cerr := tx.CreateDatabase(bn.ctx, d); cerr != nil {
				return cerr
			}
		}
		return nil
	})
	counts, err = sc.DatabaseCounts(bn.ctx)
	require.NoError(t, err)
	require.Equal(t, map[clouddb.DatabaseStatus]int{clouddb.DatabaseActive: 2, clouddb.DatabasePending: 1, clouddb.DatabaseDeleting: 1}, counts)

	// Two tasks of account A wait; one of B is claimed, then one of A finishes.
	oldest, second, other := newTask(bn.a.ID), newTask(bn.a.ID), newTask(bn.b.ID)
	oldest.CreatedAt, oldest.UpdatedAt = base, base
	second.CreatedAt, second.UpdatedAt = base.Add(time.Minute), base.Add(time.Minute)
	other.CreatedAt, other.UpdatedAt = base.Add(2*time.Minute), base.Add(2*time.Minute)
	bn.createTasks(t, oldest, second, other)
	q, err = sc.TaskQueue(bn.ctx)
	require.NoError(t, err)
	require.Equal(t, clouddb.TaskQueue{Received: 3, OldestReceived: base}, q)

	claimed, err := bn.store.ClaimTask(bn.ctx, "w", time.Now(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, oldest.ID, claimed.ID)
	q, err = sc.TaskQueue(bn.ctx)
	require.NoError(t, err)
	require.Equal(t, clouddb.TaskQueue{Received: 2, InProgress: 1, OldestReceived: base.Add(time.Minute)}, q)

	claimed.Status = clouddb.TaskCompleted
	bn.update(t, func(tx clouddb.Tx) error { return tx.FinishTask(bn.ctx, claimed) })
	q, err = sc.TaskQueue(bn.ctx)
	require.NoError(t, err)
	require.Equal(t, clouddb.TaskQueue{Received: 2, OldestReceived: base.Add(time.Minute)}, q)
}
