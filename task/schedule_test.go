package task

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
	"clouddb/sqlite"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestLastWindow(t *testing.T) {
	for _, tc := range []struct {
		now   string
		every time.Duration
		at    time.Duration
		want  string
	}{
		{"2026-05-10T10:30:00Z", 24 * time.Hour, 3 * time.Hour, "2026-05-10T03:00:00Z"},
		{"2026-05-10T02:59:00Z", 24 * time.Hour, 3 * time.Hour, "2026-05-09T03:00:00Z"},
		{"2026-05-10T03:00:00Z", 24 * time.Hour, 3 * time.Hour, "2026-05-10T03:00:00Z"},
		{"2026-05-10T10:30:00Z", 12 * time.Hour, 9*time.Hour + 15*time.Minute, "2026-05-10T09:15:00Z"},
		{"2026-05-10T22:00:00Z", 12 * time.Hour, 9*time.Hour + 15*time.Minute, "2026-05-10T21:15:00Z"},
		{"2026-05-10T01:00:00Z", 12 * time.Hour, 9*time.Hour + 15*time.Minute, "2026-05-09T21:15:00Z"},
		{"2026-05-10T10:59:00Z", time.Hour, 30 * time.Minute, "2026-05-10T10:30:00Z"},
		{"2026-05-10T10:29:00Z", 4 * time.Hour, 0, "2026-05-10T08:00:00Z"},
	} {
		require.Equal(t, at(tc.want), lastWindow(at(tc.now), tc.every, tc.at), "%+v", tc)
	}
}

func TestBackupDue(t *testing.T) {
	now := at("2026-05-10T10:30:00Z")
	db := func(updated string, last *clouddb.OperationStatus, spec clouddb.DatabaseSpec) *clouddb.Database {
		return &clouddb.Database{Status: clouddb.DatabaseActive, UpdatedAt: at(updated), State: clouddb.DatabaseState{Backup: last}, Spec: spec}
	}
	daily3 := clouddb.DatabaseSpec{RemoteBackup: &clouddb.RemoteBackup{Active: true, Interval: "every-24-hours", TimeUTC: "03:00", StoragePath: "/b"}}
	pathOnly := clouddb.DatabaseSpec{PeriodicBackupPath: "/b"}

	_, due := backupDue(db("2026-05-01T00:00:00Z", nil, daily3), now)
	require.True(t, due, "never backed up, configured before the window")
	_, due = backupDue(db("2026-05-10T04:00:00Z", nil, daily3), now)
	require.False(t, due, "configured after today's window")
	_, due = backupDue(db("2026-05-01T00:00:00Z", &clouddb.OperationStatus{Status: "success", Time: at("2026-05-10T03:00:05Z")}, daily3), now)
	require.False(t, due, "today's window is done")
	window, due := backupDue(db("2026-05-01T00:00:00Z", &clouddb.OperationStatus{Status: "success", Time: at("2026-05-07T03:00:05Z")}, daily3), now)
	require.True(t, due, "windows were missed while down: the latest is caught up")
	require.Equal(t, at("2026-05-10T03:00:00Z"), window)
	_, due = backupDue(db("2026-05-01T00:00:00Z", nil, pathOnly), now)
	require.True(t, due, "periodicBackupPath alone means daily backups")
	_, due = backupDue(db("2026-05-01T00:00:00Z", nil, clouddb.DatabaseSpec{}), now)
	require.False(t, due, "no destination, no backups")
	pending := db("2026-05-01T00:00:00Z", nil, daily3)
	pending.Status = clouddb.DatabasePending
	_, due = backupDue(pending, now)
	require.False(t, due, "a database that does not run yet")
}

// TestPeriodicBackupCatchUp: a database whose backup window passed while clouddb was down
// gets one backup (a real snapshot written to its path) and no more.
func TestPeriodicBackupCatchUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "clouddb.db"))
	require.NoError(t, err)
	defer store.Close()
	drv, err := local.New(local.Config{Dir: filepath.Join(dir, "databases"), Host: "127.0.0.1"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	backups := filepath.Join(dir, "backups")
	now := time.Now().UTC()
	var d *clouddb.Database
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		s := &clouddb.Subscription{AccountID: a.ID, Name: "s", Status: clouddb.SubscriptionActive}
		require.NoError(t, tx.CreateSubscription(ctx, s))
		d = &clouddb.Database{AccountID: a.ID, SubscriptionID: s.ID, Status: clouddb.DatabaseActive, Port: port, Password: "pw",
			UpdatedAt: now.Add(-72 * time.Hour), CreatedAt: now.Add(-72 * time.Hour),
			Spec: clouddb.DatabaseSpec{Name: "nightly", MemoryLimitInGB: 0.01,
				RemoteBackup: &clouddb.RemoteBackup{Active: true, Interval: "every-1-hours", StoragePath: backups}}}
		return tx.CreateDatabase(ctx, d)
	}))
	require.NoError(t, drv.Ensure(ctx, clouddb.InstanceOf(d)))
	defer func() {
		if rmErr := drv.Remove(context.Background(), d.ID); rmErr != nil {
			t.Errorf("remove database %d: %v", d.ID, rmErr)
		}
	}()

	e := &Engine{Store: store, Driver: drv, Ports: &Ports{Low: 1, High: 1}}
	e.init()
	require.NoError(t, e.scheduleBackups(ctx))
	require.NoError(t, e.scheduleBackups(ctx), "a second check while the task is queued adds nothing")
	processed := 0
	for {
		did, nextErr := e.ProcessNext(ctx)
		require.NoError(t, nextErr)
		if !did {
			break
		}
		processed++
	}
	require.Equal(t, 1, processed, "one backup for the missed windows")
	files, err := os.ReadDir(backups)
	require.NoError(t, err)
	require.Len(t, files, 1)

	require.NoError(t, e.scheduleBackups(ctx))
	did, err := e.ProcessNext(ctx)
	require.NoError(t, err)
	require.False(t, did, "caught up: nothing more until the next window")
	require.NoError(t, store.View(ctx, func(tx clouddb.Tx) error {
		got, err := tx.Database(ctx, 0, d.ID)
		require.NoError(t, err)
		require.Equal(t, clouddb.OperationSuccess, got.State.Backup.Status)
		return nil
	}))
}
