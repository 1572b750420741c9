package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// logEntries reads every log entry.
func (bn *bundle) logEntries(t *testing.T) []*clouddb.LogEntry {
	t.Helper()
	var out []*clouddb.LogEntry
	bn.view(t, func(tx clouddb.Tx) error {
		var err error
		out, err = tx.LogEntries(bn.ctx, clouddb.LogFilter{})
		return err
	})
	return out
}

// testProcessTasks: claims and what is done with them commit together, or not at all.
func testProcessTasks(t *testing.T, open OpenFunc) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	entry := func(bn *bundle, tk *clouddb.Task) *clouddb.LogEntry {
		return &clouddb.LogEntry{AccountID: tk.AccountID, Description: "did " + tk.ID}
	}

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		v := bn.store.Version()
		got, err := bn.store.ProcessTasks(bn.ctx, "w", now, time.Minute, func(clouddb.Tx, *clouddb.Task) (bool, error) {
			t.Error("fn called with no task waiting")
			return false, nil
		})
		require.NoError(t, err)
		require.Empty(t, got)
		require.Equal(t, v, bn.store.Version(), "nothing was written")
	})

	t.Run("CommitsTogether", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1 := newTask(bn.a.ID)
		bn.createTasks(t, a1)
		v := bn.store.Version()
		got, err := bn.store.ProcessTasks(bn.ctx, "w", now, time.Minute, func(tx clouddb.Tx, tk *clouddb.Task) (bool, error) {
			require.Equal(t, a1.ID, tk.ID)
			require.Equal(t, clouddb.TaskInProgress, tk.Status)
			require.Equal(t, "w", tk.LeaseOwner)
			if err := tx.CreateLogEntry(bn.ctx, entry(bn, tk)); err != nil {
				return false, err
			}
			tk.Status, tk.ResourceID = clouddb.TaskCompleted, 9
			return true, tx.FinishTask(bn.ctx, tk)
		})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.NotEqual(t, v, bn.store.Version())
		stored := bn.getTask(t, a1.ID)
		require.Equal(t, got[0], stored, "ProcessTasks returns the tasks as stored")
		require.Equal(t, clouddb.TaskCompleted, stored.Status)
		require.Equal(t, 9, stored.ResourceID)
		require.Len(t, bn.logEntries(t), 1)
	})

	t.Run("ErrorRollsBackTheClaim", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1, b1 := newTask(bn.a.ID), newTask(bn.b.ID)
		bn.createTasks(t, a1, b1)
		boom := errors.New("boom")
		calls := 0
		v := bn.store.Version()
		got, err := bn.store.ProcessTasks(bn.ctx, "w", now, time.Minute, func(tx clouddb.Tx, tk *clouddb.Task) (bool, error) {
			calls++
			require.NoError(t, tx.CreateLogEntry(bn.ctx, entry(bn, tk)))
			if tk.ID == b1.ID {
				return false, boom
			}
			tk.Status = clouddb.TaskCompleted
			return true, tx.FinishTask(bn.ctx, tk)
		})
		require.ErrorIs(t, err, boom)
		require.Nil(t, got)
		require.Equal(t, 2, calls)
		require.Equal(t, v, bn.store.Version(), "a rolled-back write")
		// Neither the finished first task nor the claim of the second was kept: both
		// wait as they did before, with no lease to wait for.
		for _, want := range []*clouddb.Task{a1, b1} {
			stored := bn.getTask(t, want.ID)
			require.Equal(t, clouddb.TaskReceived, stored.Status)
			require.Empty(t, stored.LeaseOwner)
			require.True(t, stored.LeaseExpiresAt.IsZero())
		}
		require.Empty(t, bn.logEntries(t))
		tk, err := bn.store.ClaimTask(bn.ctx, "w2", now, time.Minute)
		require.NoError(t, err)
		require.Equal(t, a1.ID, tk.ID, "claimable again at once")
	})

	t.Run("UnfinishedStaysClaimed", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1, a2 := newTask(bn.a.ID), newTask(bn.a.ID)
		bn.createTasks(t, a1, a2)
		calls := 0
		got, err := bn.store.ProcessTasks(bn.ctx, "w", now, time.Minute, func(tx clouddb.Tx, tk *clouddb.Task) (bool, error) {
			calls++
			return true, nil // asks for more, but a2 waits for a1
		})
		require.NoError(t, err)
		require.Equal(t, 1, calls)
		require.Len(t, got, 1)
		stored := bn.getTask(t, a1.ID)
		require.Equal(t, clouddb.TaskInProgress, stored.Status)
		require.Equal(t, "w", stored.LeaseOwner)
		require.Equal(t, now.Add(time.Minute), stored.LeaseExpiresAt)
		require.Equal(t, clouddb.TaskReceived, bn.getTask(t, a2.ID).Status)
		// The lease holds against another worker, and the holder finishes as after
		// ClaimTask.
		tk, err := bn.store.ClaimTask(bn.ctx, "w2", now.Add(30*time.Second), time.Minute)
		require.NoError(t, err)
		require.Nil(t, tk)
		stored.Status = clouddb.TaskCompleted
		require.NoError(t, bn.finish(stored))
	})

	t.Run("BatchKeepsAccountOrder", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1, b1, a2, a3, b2 := newTask(bn.a.ID), newTask(bn.b.ID), newTask(bn.a.ID), newTask(bn.a.ID), newTask(bn.b.ID)
		bn.createTasks(t, a1, b1, a2, a3, b2)
		var order []string
		got, err := bn.store.ProcessTasks(bn.ctx, "w", now, time.Minute, func(tx clouddb.Tx, tk *clouddb.Task) (bool, error) {
			order = append(order, tk.ID)
			if err := tx.CreateLogEntry(bn.ctx, entry(bn, tk)); err != nil {
				return false, err
			}
			tk.Status = clouddb.TaskCompleted
			// Finishing a task frees its account's next one in the same transaction.
			return len(order) < 4, tx.FinishTask(bn.ctx, tk)
		})
		require.NoError(t, err)
		require.Equal(t, []string{a1.ID, b1.ID, a2.ID, a3.ID}, order, "lowest seq first, an account's tasks in turn")
		require.Len(t, got, 4)
		for i, tk := range got {
			require.Equal(t, order[i], tk.ID)
			require.Equal(t, clouddb.TaskCompleted, bn.getTask(t, tk.ID).Status)
		}
		require.Equal(t, clouddb.TaskReceived, bn.getTask(t, b2.ID).Status, "fn asked for no more")
		require.Len(t, bn.logEntries(t), 4)
	})

	t.Run("FinishingAnotherTaskFreesAnEarlierOne", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1, a2, b1, b2 := newTask(bn.a.ID), newTask(bn.a.ID), newTask(bn.b.ID), newTask(bn.b.ID)
		bn.createTasks(t, a1, a2, b1, b2)
		held, err := bn.store.ClaimTask(bn.ctx, "w", now, time.Minute)
		require.NoError(t, err)
		require.Equal(t, a1.ID, held.ID)
		var order []string
		_, err = bn.store.ProcessTasks(bn.ctx, "w", now, time.Minute, func(tx clouddb.Tx, tk *clouddb.Task) (bool, error) {
			order = append(order, tk.ID)
			if held != nil {
				// The task this owner holds from an earlier claim ends here too: A's
				// next task, before the one just claimed, may go now.
				held.Status = clouddb.TaskCompleted
				if ferr := tx.FinishTask(bn.ctx, held); ferr != nil {
					return false, ferr
				}
				held = nil
			}
			tk.Status = clouddb.TaskCompleted
			return true, tx.FinishTask(bn.ctx, tk)
		})
		require.NoError(t, err)
		require.Equal(t, []string{b1.ID, a2.ID, b2.ID}, order, "the lowest seq claimable at each claim")
		require.Equal(t, clouddb.TaskCompleted, bn.getTask(t, a1.ID).Status)
	})

	t.Run("InProgressAccountWaits", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1, a2, b1 := newTask(bn.a.ID), newTask(bn.a.ID), newTask(bn.b.ID)
		bn.createTasks(t, a1, a2, b1)
		held, err := bn.store.ClaimTask(bn.ctx, "other", now, time.Minute)
		require.NoError(t, err)
		require.Equal(t, a1.ID, held.ID)
		var order []string
		_, err = bn.store.ProcessTasks(bn.ctx, "w", now, time.Minute, func(tx clouddb.Tx, tk *clouddb.Task) (bool, error) {
			order = append(order, tk.ID)
			tk.Status = clouddb.TaskCompleted
			return true, tx.FinishTask(bn.ctx, tk)
		})
		require.NoError(t, err)
		require.Equal(t, []string{b1.ID}, order, "A's next task waits for the one another worker holds")
		// Past the lease, the held task is taken over inside a batch too.
		order = nil
		_, err = bn.store.ProcessTasks(bn.ctx, "w", now.Add(2*time.Minute), time.Minute, func(tx clouddb.Tx, tk *clouddb.Task) (bool, error) {
			order = append(order, tk.ID)
			tk.Status = clouddb.TaskCompleted
			return true, tx.FinishTask(bn.ctx, tk)
		})
		require.NoError(t, err)
		require.Equal(t, []string{a1.ID, a2.ID}, order)
		held.Status = clouddb.TaskCompleted
		require.ErrorIs(t, bn.finish(held), clouddb.ErrConflict, "the old holder's lease is gone")
	})
}

// testSavepoint: a savepoint undoes what its fn wrote, a failed statement included, and
// the transaction goes on.
func testSavepoint(t *testing.T, open OpenFunc) {
	boom := errors.New("boom")
	names := func(t *testing.T, bn *bundle) []string {
		t.Helper()
		var out []string
		bn.view(t, func(tx clouddb.Tx) error {
			accounts, err := tx.Accounts(bn.ctx)
			for _, a := range accounts {
				out = append(out, a.Name)
			}
			return err
		})
		return out
	}
	create := func(tx clouddb.Tx, bn *bundle, name string) error {
		return tx.CreateAccount(bn.ctx, &clouddb.Account{Name: name, Plan: clouddb.PlanFree})
	}

	t.Run("ErrorUndoesFnAlone", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		bn.update(t, func(tx clouddb.Tx) error {
			require.NoError(t, create(tx, bn, "before"))
			err := tx.Savepoint(bn.ctx, func(tx clouddb.Tx) error {
				require.NoError(t, create(tx, bn, "inside"))
				return boom
			})
			require.ErrorIs(t, err, boom)
			return create(tx, bn, "after")
		})
		require.Equal(t, []string{"A", "B", "before", "after"}, names(t, bn))
	})

	t.Run("FailedStatementUndone", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		bn.update(t, func(tx clouddb.Tx) error {
			err := tx.Savepoint(bn.ctx, func(tx clouddb.Tx) error {
				require.NoError(t, create(tx, bn, "inside"))
				// A uniqueness conflict: PostgreSQL aborts the transaction on it,
				// which the savepoint must repair.
				return tx.CreateCloudAccount(bn.ctx, &clouddb.CloudAccount{ID: clouddb.InternalCloudAccountID, Name: "dup"})
			})
			require.ErrorIs(t, err, clouddb.ErrConflict)
			return create(tx, bn, "after")
		})
		require.Equal(t, []string{"A", "B", "after"}, names(t, bn))
	})

	t.Run("Success", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		bn.update(t, func(tx clouddb.Tx) error {
			return tx.Savepoint(bn.ctx, func(tx clouddb.Tx) error { return create(tx, bn, "inside") })
		})
		require.Equal(t, []string{"A", "B", "inside"}, names(t, bn))
	})

	t.Run("NothingWritten", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		bn.update(t, func(tx clouddb.Tx) error {
			require.ErrorIs(t, tx.Savepoint(bn.ctx, func(clouddb.Tx) error { return boom }), boom)
			require.NoError(t, tx.Savepoint(bn.ctx, func(clouddb.Tx) error { return nil }))
			return create(tx, bn, "after")
		})
		require.Equal(t, []string{"A", "B", "after"}, names(t, bn))
	})

	t.Run("Nested", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		bn.update(t, func(tx clouddb.Tx) error {
			// An inner failure undoes the inner writes alone.
			require.NoError(t, tx.Savepoint(bn.ctx, func(tx clouddb.Tx) error {
				require.NoError(t, create(tx, bn, "outer1"))
				require.ErrorIs(t, tx.Savepoint(bn.ctx, func(tx clouddb.Tx) error {
					require.NoError(t, create(tx, bn, "inner1"))
					return boom
				}), boom)
				return nil
			}))
			// An outer failure undoes an inner success and what came before it.
			require.ErrorIs(t, tx.Savepoint(bn.ctx, func(tx clouddb.Tx) error {
				require.NoError(t, create(tx, bn, "outer2"))
				require.NoError(t, tx.Savepoint(bn.ctx, func(tx clouddb.Tx) error { return create(tx, bn, "inner2") }))
				return boom
			}), boom)
			return nil
		})
		require.Equal(t, []string{"A", "B", "outer1"}, names(t, bn))
	})
}
