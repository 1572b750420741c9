package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	dataDir := smallDataDir(t)

	// The provisioning delay lets the disk fill between a create's processing and its
	// server's start.
	s := startService(t, dataDir, options{delay: 500 * time.Millisecond})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "full", 0.1)
	lateID := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("late"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})

	// Fill the disk.
	free := fillDisk(t, dataDir)

	// Reads keep answering. The database whose server could not be set up for want of
	// space waits for it: it stays pending, never falsely active nor failed, and the
	// wait is logged.
	_, err := s.c.GetSubscription(ctx, subID)
	require.NoError(t, err)
	eventually(t, 10*time.Second, "the wait is logged", func() bool {
		for line := range strings.Lines(s.logs.String()) {
			if strings.Contains(line, "waits for disk space") && strings.Contains(line, " database_id="+strconv.Itoa(lateID)+" ") {
				return true
			}
		}
		return false
	})
	late, err := s.c.GetDatabase(ctx, subID, lateID)
	require.NoError(t, err)
	require.Equal(t, "pending", late.Status)

	// Writes fail cleanly: 507 at once, or a task that ends with the cause.
	var taskIDs []string
	refused := 0
	for i := range 5 {
		task, createErr := s.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("full-" + string(rune('a'+i))),
			MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})
		if createErr != nil {
			var cerr *client.Error
			require.ErrorAs(t, createErr, &cerr)
			require.Equal(t, http.StatusInsufficientStorage, cerr.StatusCode, "%v", createErr)
			require.Equal(t, "INSUFFICIENT_STORAGE", cerr.Type)
			refused++
			continue
		}
		taskIDs = append(taskIDs, task.ID)
	}

	t.Logf("while full: %d creates refused with 507, %d accepted as tasks", refused, len(taskIDs))
	require.Positive(t, refused+len(taskIDs))
	free()

	// Every task the API accepted ends; a failure names the disk; a completed create's
	// database settles (active, or error with the cause).
	for _, id := range taskIDs {
		tctx, cancel := timeoutCtx(t, 30*time.Second)
		got, waitErr := s.c.WaitForTask(tctx, id)
		cancel()
		if waitErr != nil {
			var cerr *client.Error
			require.ErrorAs(t, waitErr, &cerr)
			require.Contains(t, []string{"INSUFFICIENT_STORAGE", "GENERAL_ERROR"}, cerr.Type, "%v", waitErr)
			require.NotEqual(t, "GENERAL_ERROR", cerr.Type, "a full disk is named as the cause: %v", waitErr)
			t.Logf("task %s failed: %v", id, waitErr)
			continue
		}
		require.Equal(t, "processing-completed", got.Status)
		eventually(t, 20*time.Second, "created database settles", func() bool {
			db, getErr := s.c.GetDatabase(ctx, subID, got.ResourceID())
			require.NoError(t, getErr)
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

// TestDiskFullBacksOffAndLogsOnce: tasks that wait behind an import when the disk fills
// are not lost and not spammed about: during seconds of full disk the service logs a
// handful of lines about the store (not two ERROR lines a second), writes answer 507,
// and once space is free again every task ends exactly once, in order.
// It needs root to mount the tmpfs; it is skipped otherwise (CI runs as root).
func TestDiskFullBacksOffAndLogsOnce(t *testing.T) {
	dataDir := smallDataDir(t)

	s := startService(t, dataDir, options{dataTimeout: 3 * time.Second})
	ctx := testContext(t)
	subID, db := s.activeSubscription(ctx, "full", 0.1)
	src, _ := trickle(t, time.Second)
	// The import holds the account's queue (one task at a time per account) while the
	// disk fills; the renames wait behind it.
	imp, err := s.c.ImportDatabase(ctx, subID, db.ID, client.Import{SourceType: client.Ptr("http"), ImportFromURI: []string{src.URL + "/x.rdb"}})
	require.NoError(t, err)
	var renames []string
	for i := range 3 {
		task, uerr := s.c.UpdateDatabase(ctx, subID, db.ID, client.UpdateDatabase{Name: client.Ptr(fmt.Sprintf("renamed-%d", i))})
		require.NoError(t, uerr)
		renames = append(renames, task.ID)
	}

	free := fillDisk(t, dataDir)
	mark := len(s.logs.String())

	// The import's deadline passes while the disk is full: its end cannot be written.
	time.Sleep(6 * time.Second)
	var about []string
	for line := range strings.Lines(s.logs.String()[mark:]) {
		if (strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN")) && !strings.Contains(line, "request failed") {
			about = append(about, line)
		}
	}
	t.Logf("%d ERROR/WARN lines in 6s of full disk:\n%s", len(about), strings.Join(about, ""))
	require.LessOrEqual(t, len(about), 6, "a handful of lines, not two a second")
	require.Contains(t, s.logs.String()[mark:], "store cannot write")

	_, err = s.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("refused"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, http.StatusInsufficientStorage, cerr.StatusCode, "%v", err)
	require.Equal(t, "INSUFFICIENT_STORAGE", cerr.Type)
	// The browser API's store is on the same disk: it answers 507 with a clear JSON
	// error too, not a generic 500.
	host, portText, err := net.SplitHostPort(db.PublicEndpoint)
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"name": "while-full", "connectionType": "STANDALONE", "host": host, "port": port, "password": db.Security.Password})
	require.NoError(t, err)
	resp, err := browserAPIClient(t).Post("http://"+s.m.BrowserAddr+"/api/db/", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusInsufficientStorage, resp.StatusCode, string(b))
	require.Contains(t, string(b), `"code":"INSUFFICIENT_STORAGE"`)

	free()
	_, err = s.c.WaitForTask(ctx, imp.ID)
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "DATABASE_IMPORT_FAILED", cerr.Type)
	require.Contains(t, cerr.Description, "--data-timeout")
	for _, id := range renames {
		got, werr := s.c.WaitForTask(ctx, id)
		require.NoError(t, werr)
		require.Equal(t, "processing-completed", got.Status)
	}
	got, err := s.c.GetDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	require.Equal(t, "renamed-2", got.Name, "the renames took effect in order")
	eventually(t, 10*time.Second, "the recovery is logged", func() bool { return strings.Contains(s.logs.String()[mark:], "store writable again") })
}

// smallDataDir is a data dir on a 16 MiB tmpfs, for a test that fills it; the test is
// skipped where no tmpfs can be mounted (it needs root).
func smallDataDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("optional: needs root to mount a tmpfs for the data dir")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(dataDir, 0o700))
	if err := mountTmpfs(t, dataDir, "16m"); err != nil {
		t.Skipf("optional: cannot mount a tmpfs here: %v", err)
	}
	return dataDir
}

// mountTmpfs mounts a tmpfs of size on dir, unmounted (lazily) when the test ends.
func mountTmpfs(t *testing.T, dir, size string) error {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return nil
}

// fillDisk writes a file in dir until its filesystem is full, and returns what removes it.
func fillDisk(t *testing.T, dir string) (free func()) {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{0xa5}, 64<<10)
	for {
		if _, werr := f.Write(chunk); werr != nil {
			require.ErrorIs(t, werr, syscall.ENOSPC, "filling the disk")
			break
		}
	}
	_ = f.Close() // what it wrote is filler; the disk being full is the point
	return func() { require.NoError(t, os.Remove(filler)) }
}
