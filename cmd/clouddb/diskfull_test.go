package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// TestDiskFull puts the data dir on a small tmpfs and fills it: reads keep answering,
// writes fail with a clear 507 or a failed task naming the cause, nothing half-made is
// left, and once space is free again every returned task has ended and new work succeeds.
// It needs root to mount the tmpfs; it is skipped otherwise (CI runs as root).
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("optional: needs root to mount a tmpfs for the data dir")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(dataDir, 0o700))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", dataDir).CombinedOutput(); err != nil {
		t.Skipf("optional: cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dataDir).Run() })

	// The provisioning delay lets the disk fill between a create's processing and its
	// server's start.
	s := startService(t, dataDir, options{delay: 500 * time.Millisecond})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "full", 0.1)
	lateID := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("late"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})

	// Fill the disk.
	filler := filepath.Join(dataDir, "filler")
	f, err := os.Create(filler)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{0xa5}, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "filling: %v", err)
			break
		}
	}
	f.Close()

	// Reads keep answering. The database whose server could not be set up cannot be
	// marked either (the store is on the same disk): it stays pending, never falsely
	// active, and the cause is logged.
	_, err = s.c.GetSubscription(ctx, subID)
	require.NoError(t, err)
	eventually(t, 10*time.Second, "the cause is logged", func() bool {
		return strings.Contains(s.logs.String(), "INSUFFICIENT_STORAGE")
	})
	late, err := s.c.GetDatabase(ctx, subID, lateID)
	require.NoError(t, err)
	require.Equal(t, "pending", late.Status)

	// Writes fail cleanly: 507 at once, or a task that ends with the cause.
	var taskIDs []string
	refused := 0
	for i := range 5 {
		task, err := s.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("full-" + string(rune('a'+i))),
			MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})
		if err != nil {
			var cerr *client.Error
			require.ErrorAs(t, err, &cerr)
			require.Equal(t, http.StatusInsufficientStorage, cerr.StatusCode, "%v", err)
			require.Equal(t, "INSUFFICIENT_STORAGE", cerr.Type)
			refused++
			continue
		}
		taskIDs = append(taskIDs, task.ID)
	}

	t.Logf("while full: %d creates refused with 507, %d accepted as tasks", refused, len(taskIDs))
	require.Positive(t, refused+len(taskIDs))
	require.NoError(t, os.Remove(filler))

	// Every task the API accepted ends; a failure names the disk; a completed create's
	// database settles (active, or error with the cause).
	for _, id := range taskIDs {
		tctx, cancel := timeoutCtx(t, 30*time.Second)
		got, err := s.c.WaitForTask(tctx, id)
		cancel()
		if err != nil {
			var cerr *client.Error
			require.ErrorAs(t, err, &cerr)
			require.Contains(t, []string{"INSUFFICIENT_STORAGE", "GENERAL_ERROR"}, cerr.Type, "%v", err)
			require.NotEqual(t, "GENERAL_ERROR", cerr.Type, "a full disk is named as the cause: %v", err)
			t.Logf("task %s failed: %v", id, err)
			continue
		}
		require.Equal(t, "processing-completed", got.Status)
		eventually(t, 20*time.Second, "created database settles", func() bool {
			db, err := s.c.GetDatabase(ctx, subID, got.ResourceID())
			require.NoError(t, err)
			return db.Status == "active" || db.Status == "error"
		})
	}

	// With space again, the service works as before, and the pending database is
	// provisioned.
	_, err = s.c.WaitForDatabaseStatus(ctx, subID, lateID, "active")
	require.NoError(t, err)
	dbID := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("after"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-after")})
	db, err := s.c.WaitForDatabaseStatus(ctx, subID, dbID, "active")
	require.NoError(t, err)
	require.NoError(t, redisOf(t, db).Ping(ctx).Err())
	dbs, err := s.c.AllDatabases(ctx, subID)
	require.NoError(t, err)
	for _, d := range dbs {
		require.Contains(t, []string{"active", "error"}, d.Status, "database %s", d.Name)
		if d.Status == "error" {
			require.Contains(t, d.StatusDetail, "no space left", "an error names its cause")
		}
	}
}
