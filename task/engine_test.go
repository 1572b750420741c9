package task

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// TestRunPurgesOldTasks: a running engine deletes finished tasks older than the task
// history (GET /tasks shows ten days) and keeps recent ones and unprocessed ones.
func TestRunPurgesOldTasks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	defer store.Close()
	now := time.Now().UTC()
	old := now.Add(-clouddb.TaskHistory - time.Hour)
	mk := func(status clouddb.TaskStatus, at time.Time) *clouddb.Task {
		return &clouddb.Task{CommandType: "unknownRequest", Status: status, CreatedAt: at, UpdatedAt: at}
	}
	oldDone, recentDone := mk(clouddb.TaskCompleted, old), mk(clouddb.TaskFailed, now.Add(-time.Hour))
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		for _, tk := range []*clouddb.Task{oldDone, recentDone} {
			tk.AccountID = a.ID
			require.NoError(t, tx.CreateTask(ctx, tk))
		}
		return nil
	}))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}}
	go func() {
		defer close(done)
		if err := e.Run(runCtx); err != nil {
			t.Errorf("engine: %v", err)
		}
	}()
	require.Eventually(t, func() bool {
		err := store.View(ctx, func(tx clouddb.Tx) error { _, err := tx.Task(ctx, 0, oldDone.ID); return err })
		return errors.Is(err, clouddb.ErrNotFound)
	}, 10*time.Second, 20*time.Millisecond, "the old finished task is purged")
	stop()
	<-done
	require.NoError(t, store.View(ctx, func(tx clouddb.Tx) error { _, err := tx.Task(ctx, 0, recentDone.ID); return err }),
		"a recent task stays")
}

// unreachable is a store whose transactions lose the server half-way, as a shared
// store's do while its server is out of reach, as long as down is set: the claim goes
// through, then the handler's first write fails.
type unreachable struct {
	clouddb.Store
	down atomic.Bool
}

func (u *unreachable) ProcessTasks(ctx context.Context, owner string, now time.Time, lease time.Duration, fn func(clouddb.Tx, *clouddb.Task) (bool, error)) ([]*clouddb.Task, error) {
	return u.Store.ProcessTasks(ctx, owner, now, lease, func(tx clouddb.Tx, t *clouddb.Task) (bool, error) {
		return fn(&unreachableTx{Tx: tx, u: u}, t)
	})
}

type unreachableTx struct {
	clouddb.Tx
	u *unreachable
}

func (tx *unreachableTx) Savepoint(ctx context.Context, fn func(clouddb.Tx) error) error {
	return tx.Tx.Savepoint(ctx, func(inner clouddb.Tx) error { return fn(&unreachableTx{Tx: inner, u: tx.u}) })
}

func (tx *unreachableTx) CreateCloudAccount(ctx context.Context, c *clouddb.CloudAccount) error {
	if tx.u.down.Load() {
		return clouddb.ErrUnavailable
	}
	return tx.Tx.CreateCloudAccount(ctx, c)
}

// TestUnavailableStoreLeavesTask: a task whose processing meets an unreachable store is
// neither failed nor lost, nor held: its claim was in the transaction that failed, so it
// waits again as before, and is processed as soon as the store is back, with no lease to
// expire first.
func TestUnavailableStoreLeavesTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	defer db.Close()
	tk := &clouddb.Task{CommandType: clouddb.CommandCloudAccountCreate, Payload: []byte(cloudAccountPayload)}
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		tk.AccountID = a.ID
		return tx.CreateTask(ctx, tk)
	}))
	store := &unreachable{Store: db}
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Lease: time.Hour}

	store.down.Store(true)
	did, err := e.ProcessNext(ctx)
	require.ErrorIs(t, err, clouddb.ErrUnavailable, "the caller learns that the store is away, to back off")
	require.False(t, did, "nothing was taken")
	got := taskOf(t, db, tk.ID)
	require.Equal(t, clouddb.TaskReceived, got.Status, "neither failed nor held")
	require.Empty(t, got.LeaseOwner)
	require.True(t, got.LeaseExpiresAt.IsZero())

	store.down.Store(false)
	did, err = e.ProcessNext(ctx)
	require.NoError(t, err)
	require.True(t, did, "processed at once, although the lease is an hour")
	require.Equal(t, clouddb.TaskCompleted, taskOf(t, db, tk.ID).Status)
}
