package task

import (
	"context"
	"errors"
	"path/filepath"
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
	go func() { e.Run(runCtx); close(done) }()
	require.Eventually(t, func() bool {
		err := store.View(ctx, func(tx clouddb.Tx) error { _, err := tx.Task(ctx, 0, oldDone.ID); return err })
		return errors.Is(err, clouddb.ErrNotFound)
	}, 10*time.Second, 20*time.Millisecond, "the old finished task is purged")
	stop()
	<-done
	require.NoError(t, store.View(ctx, func(tx clouddb.Tx) error { _, err := tx.Task(ctx, 0, recentDone.ID); return err }),
		"a recent task stays")
}
