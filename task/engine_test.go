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

// unreachable is a store whose writes fail as a shared store's do while its server is out
// of reach, as long as down is set; claims and reads go through.
type unreachable struct {
	clouddb.Store
	down atomic.Bool
}

func (u *unreachable) Update(ctx context.Context, fn func(clouddb.Tx) error) error {
	if u.down.Load() {
		return clouddb.ErrUnavailable
	}
	return u.Store.Update(ctx, fn)
}

// TestUnavailableStoreLeavesTask: a task whose processing meets an unreachable store is
// neither failed nor lost: it stays in progress until its lease expires and is then
// processed again, once the store is back.
func TestUnavailableStoreLeavesTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	defer db.Close()
	tk := &clouddb.Task{CommandType: clouddb.CommandCloudAccountCreate,
		Payload: []byte(`{"name":"c","provider":"AWS","accessKeyId":"k","accessSecretKey":"s","consoleUsername":"u","consolePassword":"p","signInLoginUrl":"https://example.com"}`)}
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		tk.AccountID = a.ID
		return tx.CreateTask(ctx, tk)
	}))
	store := &unreachable{Store: db}
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Lease: 100 * time.Millisecond}
	status := func() clouddb.TaskStatus {
		var got *clouddb.Task
		require.NoError(t, db.View(ctx, func(tx clouddb.Tx) (err error) { got, err = tx.Task(ctx, 0, tk.ID); return err }))
		return got.Status
	}

	store.down.Store(true)
	did, err := e.ProcessNext(ctx)
	require.ErrorIs(t, err, clouddb.ErrUnavailable, "the caller learns that the store is away, to back off")
	require.True(t, did)
	require.Equal(t, clouddb.TaskInProgress, status(), "not failed for a store that is away")

	store.down.Store(false)
	did, err = e.ProcessNext(ctx)
	require.NoError(t, err)
	require.False(t, did, "the task is held until its lease expires")
	time.Sleep(150 * time.Millisecond)
	did, err = e.ProcessNext(ctx)
	require.NoError(t, err)
	require.True(t, did)
	require.Equal(t, clouddb.TaskCompleted, status())
}
