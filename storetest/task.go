package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func newTask(accountID int) *clouddb.Task {
	return &clouddb.Task{
		AccountID:   accountID,
		APIKeyName:  "ci",
		CommandType: clouddb.CommandDatabaseCreate,
		Payload:     []byte(`{"name":"db1"}`),
	}
}

// getTask reads a task of any account.
func (bn *bundle) getTask(t *testing.T, id string) *clouddb.Task {
	t.Helper()
	var tk *clouddb.Task
	bn.view(t, func(tx clouddb.Tx) error {
		var err error
		tk, err = tx.Task(bn.ctx, 0, id)
		return err
	})
	return tk
}

func (bn *bundle) createTasks(t *testing.T, tasks ...*clouddb.Task) {
	t.Helper()
	bn.update(t, func(tx clouddb.Tx) error {
		for _, tk := range tasks {
			if err := tx.CreateTask(bn.ctx, tk); err != nil {
				return err
			}
		}
		return nil
	})
}

func (bn *bundle) listTasks(t *testing.T, f clouddb.TaskFilter) []*clouddb.Task {
	t.Helper()
	var out []*clouddb.Task
	bn.view(t, func(tx clouddb.Tx) error {
		var err error
		out, err = tx.Tasks(bn.ctx, f)
		return err
	})
	return out
}

func (bn *bundle) finish(tk *clouddb.Task) error {
	return bn.store.Update(bn.ctx, func(tx clouddb.Tx) error { return tx.FinishTask(bn.ctx, tk) })
}

func testTask(t *testing.T, open OpenFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		tk := newTask(bn.a.ID)
		tk.SubscriptionID, tk.DatabaseID, tk.CloudAccountID = 3, 4, 5
		bn.createTasks(t, tk)
		require.NotEmpty(t, tk.ID, "the store assigns an id")
		require.Equal(t, clouddb.TaskReceived, tk.Status, "a task starts received")
		require.Positive(t, tk.Seq)
		requireStamped(t, tk.CreatedAt)
		require.Equal(t, tk.CreatedAt, tk.UpdatedAt)

		bn.view(t, func(tx clouddb.Tx) error {
			got, err := tx.Task(bn.ctx, bn.a.ID, tk.ID)
			require.NoError(t, err)
			require.Equal(t, tk, got)
			require.Nil(t, got.Error)
			require.True(t, got.LeaseExpiresAt.IsZero())

			got, err = tx.Task(bn.ctx, 0, tk.ID)
			require.NoError(t, err)
			require.Equal(t, tk, got)

			_, err = tx.Task(bn.ctx, bn.b.ID, tk.ID)
			require.ErrorIs(t, err, clouddb.ErrNotFound, "another account's task is not found")
			_, err = tx.Task(bn.ctx, bn.a.ID, "no-such-task")
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})

		// Every field of a finished task, with a preset id.
		failed := &clouddb.Task{
			ID:          "preset-id",
			AccountID:   bn.b.ID,
			APIKeyName:  "admin",
			CommandType: clouddb.CommandSubscriptionDelete,
			Status:      clouddb.TaskFailed,
			Payload:     []byte(`{}`),
			ResourceID:  9,
			Resource:    []byte(`{"status":"failed"}`),
			Error: &clouddb.TaskError{
				Type: clouddb.ErrTypeSubscriptionNotFound, Status: "404 NOT_FOUND", Description: "no such subscription",
			},
			CreatedAt:      base,
			UpdatedAt:      base.Add(time.Second),
			LeaseOwner:     "w1",
			LeaseExpiresAt: base.Add(time.Minute),
		}
		bn.createTasks(t, failed)
		require.Equal(t, "preset-id", failed.ID)
		require.Greater(t, failed.Seq, tk.Seq, "Seq follows submission order")
		require.Equal(t, failed, bn.getTask(t, "preset-id"))

		err := bn.tryUpdate(func(tx clouddb.Tx) error {
			return tx.CreateTask(bn.ctx, &clouddb.Task{ID: "preset-id", AccountID: bn.a.ID})
		})
		require.ErrorIs(t, err, clouddb.ErrConflict, "a task id is unique")
	})

	t.Run("ListPurge", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		at := func(accountID int, d time.Duration) *clouddb.Task {
			tk := newTask(accountID)
			tk.CreatedAt, tk.UpdatedAt = base, base.Add(d)
			return tk
		}
		t1 := at(bn.a.ID, 0)
		t2 := at(bn.a.ID, 2*time.Minute)
		t3 := at(bn.a.ID, time.Minute)
		t4 := at(bn.a.ID, 2*time.Minute)
		t5 := at(bn.b.ID, 3*time.Minute)
		// t1 has finished; t3 is old but still waits: only finished tasks are purged, so a
		// task whose taskId was returned is never lost.
		t1.Status = clouddb.TaskCompleted
		bn.createTasks(t, t1, t2, t3, t4, t5)

		// Most recently updated first; among equal times, the later submission first.
		require.Equal(t, []*clouddb.Task{t4, t2, t3, t1}, bn.listTasks(t, clouddb.TaskFilter{AccountID: bn.a.ID}))
		require.Equal(t, []*clouddb.Task{t4, t2, t3}, bn.listTasks(t, clouddb.TaskFilter{
			AccountID: bn.a.ID, UpdatedSince: base.Add(time.Minute),
		}), "UpdatedSince includes its own instant")
		require.Equal(t, []*clouddb.Task{t5}, bn.listTasks(t, clouddb.TaskFilter{AccountID: bn.b.ID}))
		require.Equal(t, []*clouddb.Task{t5, t4, t2, t3, t1}, bn.listTasks(t, clouddb.TaskFilter{}))
		require.Empty(t, bn.listTasks(t, clouddb.TaskFilter{UpdatedSince: base.Add(4 * time.Minute)}))
		require.Equal(t, []*clouddb.Task{t4, t2}, bn.listTasks(t, clouddb.TaskFilter{AccountID: bn.a.ID, Limit: 2}),
			"Limit keeps the most recently updated")
		require.Equal(t, []*clouddb.Task{t5, t4, t2}, bn.listTasks(t, clouddb.TaskFilter{Limit: 3}))
		require.Equal(t, []*clouddb.Task{t4, t2, t3}, bn.listTasks(t, clouddb.TaskFilter{
			AccountID: bn.a.ID, UpdatedSince: base.Add(time.Minute), Limit: 10,
		}), "a Limit past the count keeps all")

		n, err := bn.store.PurgeTasks(bn.ctx, base)
		require.NoError(t, err)
		require.Zero(t, n, "purge keeps a task updated at the cut-off")

		n, err = bn.store.PurgeTasks(bn.ctx, base.Add(90*time.Second))
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Equal(t, []*clouddb.Task{t5, t4, t2, t3}, bn.listTasks(t, clouddb.TaskFilter{}))
		bn.view(t, func(tx clouddb.Tx) error {
			_, err := tx.Task(bn.ctx, 0, t1.ID)
			require.ErrorIs(t, err, clouddb.ErrNotFound)
			return nil
		})
	})
}

func testClaimTask(t *testing.T, open OpenFunc) {
	// now is passed to every claim explicitly, so the tests control lease expiry.
	now := time.Now().UTC().Truncate(time.Millisecond)
	claim := func(t *testing.T, bn *bundle, owner string, at time.Time) *clouddb.Task {
		t.Helper()
		tk, err := bn.store.ClaimTask(bn.ctx, owner, at, time.Minute)
		require.NoError(t, err)
		return tk
	}
	requireClaimed := func(t *testing.T, bn *bundle, want *clouddb.Task, owner string, at time.Time) *clouddb.Task {
		t.Helper()
		got := claim(t, bn, owner, at)
		require.NotNil(t, got, "expected to claim %s", want.ID)
		require.Equal(t, want.ID, got.ID)
		require.Equal(t, clouddb.TaskInProgress, got.Status)
		require.Equal(t, owner, got.LeaseOwner)
		require.Equal(t, at.Add(time.Minute), got.LeaseExpiresAt)
		require.Equal(t, at, got.UpdatedAt)
		require.Equal(t, want.Seq, got.Seq)
		require.Equal(t, want.Payload, got.Payload)
		require.Equal(t, want.CreatedAt, got.CreatedAt)
		require.Equal(t, got, bn.getTask(t, got.ID), "ClaimTask returns the stored task")
		return got
	}

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		require.Nil(t, claim(t, bn, "w1", now))
	})

	t.Run("FIFOPerAccount", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1, b1, a2, a3, b2 := newTask(bn.a.ID), newTask(bn.b.ID), newTask(bn.a.ID), newTask(bn.a.ID), newTask(bn.b.ID)
		bn.createTasks(t, a1, b1, a2, a3, b2)

		c := requireClaimed(t, bn, a1, "w1", now)
		// A has a task in progress; B is not blocked by it.
		cb := requireClaimed(t, bn, b1, "w2", now)
		require.Nil(t, claim(t, bn, "w3", now), "each account has a task in progress")

		c.Status = clouddb.TaskCompleted
		c.ResourceID = 7
		require.NoError(t, bn.finish(c))
		got := bn.getTask(t, a1.ID)
		require.Equal(t, clouddb.TaskCompleted, got.Status)
		require.Equal(t, 7, got.ResourceID)
		require.Nil(t, got.Error)
		require.Equal(t, c.UpdatedAt, got.UpdatedAt)
		requireStamped(t, got.UpdatedAt)

		c = requireClaimed(t, bn, a2, "w1", now)

		cb.Status = clouddb.TaskFailed
		cb.Error = &clouddb.TaskError{Type: clouddb.ErrTypeGeneral, Status: "500 INTERNAL_SERVER_ERROR", Description: "x"}
		require.NoError(t, bn.finish(cb))
		require.Equal(t, cb.Error, bn.getTask(t, b1.ID).Error)
		require.Equal(t, clouddb.TaskFailed, bn.getTask(t, b1.ID).Status)

		cb = requireClaimed(t, bn, b2, "w2", now)
		c.Status = clouddb.TaskCompleted
		require.NoError(t, bn.finish(c))
		c = requireClaimed(t, bn, a3, "w1", now)
		c.Status = clouddb.TaskCompleted
		require.NoError(t, bn.finish(c))
		cb.Status = clouddb.TaskCompleted
		require.NoError(t, bn.finish(cb))
		require.Nil(t, claim(t, bn, "w1", now), "every task is finished")
	})

	t.Run("Takeover", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1, a2 := newTask(bn.a.ID), newTask(bn.a.ID)
		bn.createTasks(t, a1, a2)
		stale := requireClaimed(t, bn, a1, "w1", now)

		require.Nil(t, claim(t, bn, "w2", now.Add(30*time.Second)), "the lease still holds")
		require.Nil(t, claim(t, bn, "w2", now.Add(time.Minute)), "a lease expiring now still holds")

		later := now.Add(2 * time.Minute)
		taken := requireClaimed(t, bn, a1, "w2", later)

		// The first worker lost its lease: its result is refused and nothing is written.
		stale.Status = clouddb.TaskCompleted
		stale.ResourceID = 5
		require.ErrorIs(t, bn.finish(stale), clouddb.ErrConflict)
		require.Equal(t, taken, bn.getTask(t, a1.ID))

		// A failed FinishTask rolls back the rest of its transaction too.
		err := bn.store.Update(bn.ctx, func(tx clouddb.Tx) error {
			require.NoError(t, tx.CreateLogEntry(bn.ctx, &clouddb.LogEntry{AccountID: bn.a.ID, Description: "x"}))
			return tx.FinishTask(bn.ctx, stale)
		})
		require.ErrorIs(t, err, clouddb.ErrConflict)
		bn.view(t, func(tx clouddb.Tx) error {
			entries, err := tx.LogEntries(bn.ctx, clouddb.LogFilter{})
			require.NoError(t, err)
			require.Empty(t, entries)
			return nil
		})

		taken.Status = clouddb.TaskCompleted
		taken.ResourceID = 6
		require.NoError(t, bn.finish(taken))
		require.Equal(t, 6, bn.getTask(t, a1.ID).ResourceID)
		requireClaimed(t, bn, a2, "w3", later)
	})

	t.Run("FinishTask", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1 := newTask(bn.a.ID)
		bn.createTasks(t, a1)

		received := *a1
		received.Status = clouddb.TaskCompleted
		require.ErrorIs(t, bn.finish(&received), clouddb.ErrConflict, "a task not claimed cannot be finished")
		require.Equal(t, a1, bn.getTask(t, a1.ID))

		require.ErrorIs(t, bn.finish(&clouddb.Task{ID: "no-such-task", Status: clouddb.TaskCompleted}), clouddb.ErrConflict)

		c := requireClaimed(t, bn, a1, "w1", now)
		c.Status = clouddb.TaskCompleted
		c.ResourceID = 1
		c.Resource = []byte(`{"status":"success"}`)
		require.NoError(t, bn.finish(c))
		done := bn.getTask(t, a1.ID)
		require.JSONEq(t, `{"status":"success"}`, string(done.Resource), "a task's resource is kept")

		c.Status = clouddb.TaskFailed
		c.ResourceID = 2
		require.ErrorIs(t, bn.finish(c), clouddb.ErrConflict, "a finished task cannot be finished again")
		require.Equal(t, done, bn.getTask(t, a1.ID))
	})

	t.Run("ExtendLease", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		a1 := newTask(bn.a.ID)
		bn.createTasks(t, a1)
		require.ErrorIs(t, bn.store.ExtendLease(bn.ctx, a1.ID, "w1", now.Add(time.Hour)), clouddb.ErrConflict, "not claimed yet")

		requireClaimed(t, bn, a1, "w1", now)
		require.ErrorIs(t, bn.store.ExtendLease(bn.ctx, a1.ID, "w2", now.Add(time.Hour)), clouddb.ErrConflict, "another owner")
		require.NoError(t, bn.store.ExtendLease(bn.ctx, a1.ID, "w1", now.Add(time.Hour)))
		require.Equal(t, now.Add(time.Hour), bn.getTask(t, a1.ID).LeaseExpiresAt)
		require.Nil(t, claim(t, bn, "w2", now.Add(30*time.Minute)), "an extended lease is not taken over")
		requireClaimed(t, bn, a1, "w2", now.Add(2*time.Hour))
		require.ErrorIs(t, bn.store.ExtendLease(bn.ctx, a1.ID, "w1", now.Add(3*time.Hour)), clouddb.ErrConflict, "the lease was taken over")
	})

	t.Run("OneInProgressPerAccount", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		inProgress := func(accountID int) *clouddb.Task {
			tk := newTask(accountID)
			tk.Status = clouddb.TaskInProgress
			tk.LeaseOwner = "w1"
			tk.LeaseExpiresAt = now.Add(time.Hour)
			return tk
		}
		bn.createTasks(t, inProgress(bn.a.ID))
		err := bn.tryUpdate(func(tx clouddb.Tx) error { return tx.CreateTask(bn.ctx, inProgress(bn.a.ID)) })
		require.ErrorIs(t, err, clouddb.ErrConflict, "the store itself refuses a second task in progress")
		bn.createTasks(t, inProgress(bn.b.ID), newTask(bn.a.ID))
		require.Nil(t, claim(t, bn, "w2", now))
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		bn := setup(t, open)
		c := &clouddb.Account{Name: "C", Plan: clouddb.PlanFlexible}
		bn.update(t, func(tx clouddb.Tx) error { return tx.CreateAccount(bn.ctx, c) })
		accounts := []int{bn.a.ID, bn.b.ID, c.ID}
		const perAccount, workers = 8, 4
		total := int32(perAccount * len(accounts))

		submitted := map[int][]int64{}
		var tasks []*clouddb.Task
		for range perAccount {
			for _, id := range accounts {
				tasks = append(tasks, newTask(id))
			}
		}
		bn.createTasks(t, tasks...)
		for _, tk := range tasks {
			submitted[tk.AccountID] = append(submitted[tk.AccountID], tk.Seq)
		}

		type interval struct{ start, end time.Time }
		var (
			mu        sync.Mutex
			intervals = map[int][]interval{}
			processed = map[int][]int64{}
			inflight  = map[int]*atomic.Int32{}
			finished  atomic.Int32
		)
		for _, id := range accounts {
			inflight[id] = new(atomic.Int32)
		}
		ctx, cancel := context.WithTimeout(bn.ctx, time.Minute)
		defer cancel()

		var wg sync.WaitGroup
		for w := range workers {
			owner := fmt.Sprintf("w%d", w)
			wg.Go(func() {
				for finished.Load() < total {
					if ctx.Err() != nil {
						t.Errorf("%s: stopped with %d of %d tasks finished", owner, finished.Load(), total)
						return
					}
					tk, err := bn.store.ClaimTask(ctx, owner, time.Now(), time.Minute)
					if err != nil {
						t.Errorf("%s: claim: %v", owner, err)
						cancel() // stop the other workers too
						return
					}
					if tk == nil {
						time.Sleep(time.Millisecond)
						continue
					}
					start := time.Now()
					if n := inflight[tk.AccountID].Add(1); n != 1 {
						t.Errorf("account %d has %d tasks in progress", tk.AccountID, n)
					}
					time.Sleep(rand.N(500 * time.Microsecond))
					inflight[tk.AccountID].Add(-1)
					end := time.Now()

					mu.Lock()
					intervals[tk.AccountID] = append(intervals[tk.AccountID], interval{start, end})
					processed[tk.AccountID] = append(processed[tk.AccountID], tk.Seq)
					mu.Unlock()

					tk.Status = clouddb.TaskCompleted
					tk.ResourceID = int(tk.Seq)
					if err := bn.store.Update(ctx, func(tx clouddb.Tx) error { return tx.FinishTask(ctx, tk) }); err != nil {
						t.Errorf("%s: finish %s: %v", owner, tk.ID, err)
						cancel()
						return
					}
					finished.Add(1)
				}
			})
		}
		wg.Wait()
		require.False(t, t.Failed())

		for _, id := range accounts {
			require.Equal(t, submitted[id], processed[id], "account %d processed its tasks in submission order", id)
			iv := intervals[id]
			sort.Slice(iv, func(i, j int) bool { return iv[i].start.Before(iv[j].start) })
			for i := 1; i < len(iv); i++ {
				require.False(t, iv[i].start.Before(iv[i-1].end), "account %d: tasks in progress at the same time", id)
			}
		}
		for _, tk := range bn.listTasks(t, clouddb.TaskFilter{}) {
			require.Equal(t, clouddb.TaskCompleted, tk.Status)
			require.Equal(t, int(tk.Seq), tk.ResourceID)
		}
		require.Nil(t, claim(t, bn, "w0", time.Now()))
	})
}
