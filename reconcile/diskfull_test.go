package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/syncbuf"
	"clouddb/reconcile"
)

// fullStore is a store whose writes fail as on a full disk while full is set.
type fullStore struct {
	clouddb.Store
	full   atomic.Bool
	writes atomic.Int32 // attempted while full
}

func (f *fullStore) Update(ctx context.Context, fn func(clouddb.Tx) error) error {
	if f.full.Load() {
		f.writes.Add(1)
		return clouddb.ErrStorageFull
	}
	return f.Store.Update(ctx, fn)
}

// TestStoreFullBacksOffAndLogsOnce: while the store cannot write, the reconciler neither
// spins nor logs every failed attempt: it says so once, spaces its passes out, says once
// that the store is writable again, and then finishes the work.
func TestStoreFullBacksOffAndLogsOnce(t *testing.T) {
	db := openStore(t)
	ids := pendingDatabases(t, db, 2)
	store := &fullStore{Store: db}
	store.full.Store(true)
	logs := &syncbuf.Buffer{}
	r := &reconcile.Reconciler{Store: store, Driver: newRecorder(), Interval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runReconciler(t, r)

	time.Sleep(3 * time.Second)
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "store cannot write"), out)
	require.Equal(t, 0, strings.Count(out, "level=ERROR")-1, "only the one line about the store:\n%s", out)
	// Every 10ms for 3s with 2 databases would be ~600 writes; backing off (250ms
	// doubling to 4s) makes a handful of passes.
	require.Less(t, store.writes.Load(), int32(30), "writes attempted while full")

	store.full.Store(false)
	require.Eventually(t, func() bool {
		return databaseOf(t, db, ids[0]).Status == clouddb.DatabaseActive && databaseOf(t, db, ids[1]).Status == clouddb.DatabaseActive
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, strings.Count(logs.String(), "store writable again"))
}

// fullDriver fails to set up a server as on a full disk while full is set.
type fullDriver struct {
	*recorder
	full atomic.Bool
}

func (f *fullDriver) Ensure(ctx context.Context, in clouddb.Instance) error {
	if f.full.Load() {
		return fmt.Errorf("database %d: write redis.conf: %w", in.DatabaseID,
			&fs.PathError{Op: "write", Path: "redis.conf", Err: syscall.ENOSPC})
	}
	return f.recorder.Ensure(ctx, in)
}

// TestDiskFullServerWaitsForSpace: a server that cannot be set up because the disk is
// full (a restart of an active database's dead server, or a new database's first start)
// puts nothing in error: the database keeps its status, the wait is logged once, and the
// server starts once there is space, with no PUT needed.
func TestDiskFullServerWaitsForSpace(t *testing.T) {
	store := openStore(t)
	ids := pendingDatabases(t, store, 2)
	drv := &fullDriver{recorder: newRecorder()}
	logs := &syncbuf.Buffer{}
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runReconciler(t, r)
	require.Eventually(t, func() bool {
		return databaseOf(t, store, ids[0]).Status == clouddb.DatabaseActive && databaseOf(t, store, ids[1]).Status == clouddb.DatabaseActive
	}, 5*time.Second, 10*time.Millisecond)

	// The disk fills; the active database's server dies and a new database arrives.
	drv.full.Store(true)
	require.NoError(t, drv.Stop(t.Context(), ids[0]))
	later := pendingDatabasesIn(t, store, databaseOf(t, store, ids[0]).AccountID, databaseOf(t, store, ids[0]).SubscriptionID, 20000)
	r.Notify()
	time.Sleep(500 * time.Millisecond) // some fifty passes
	require.Equal(t, clouddb.DatabaseActive, databaseOf(t, store, ids[0]).Status)
	require.Equal(t, clouddb.DatabasePending, databaseOf(t, store, later).Status)
	// Lines about one database: another pass that read a database before it turned
	// active may set it up once more, and wait too, which is fine.
	count := func(id int, what string) int {
		n := 0
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, what) && slices.Contains(strings.Fields(line), "database_id="+strconv.Itoa(id)) {
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, count(ids[0], "server waits for disk space"), logs.String())
	require.Equal(t, 1, count(later, "server waits for disk space"), logs.String())

	drv.full.Store(false)
	require.Eventually(t, func() bool {
		up, err := drv.Running(t.Context(), clouddb.Instance{DatabaseID: ids[0]})
		return err == nil && up && databaseOf(t, store, later).Status == clouddb.DatabaseActive
	}, 5*time.Second, 10*time.Millisecond, "the servers start once there is space")
	require.Equal(t, clouddb.DatabaseActive, databaseOf(t, store, ids[0]).Status)
	require.Equal(t, 1, count(ids[0], "no longer waits for disk space"), logs.String())
	require.Equal(t, 1, count(later, "no longer waits for disk space"), logs.String())
}

// TestLogTextIsNoFullDisk: a failed start whose message quotes the server's log saying
// the disk is full (the tenant writes that log) is a failure, not a wait: only the driver's
// ENOSPC makes a full disk.
func TestLogTextIsNoFullDisk(t *testing.T) {
	store := openStore(t)
	id := activeDatabase(t, store)
	drv := &halfStart{recorder: newRecorder()}
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond}
	runReconciler(t, r)
	require.Eventually(t, func() bool { return drv.ensures(id) == 1 }, 5*time.Second, 5*time.Millisecond)

	const cause = "database 1: redis-server exited during start-up (exit status 1): redis.log: # No space left on device | # Address already in use"
	drv.arm(errors.New(cause))
	require.NoError(t, drv.Stop(t.Context(), id))
	require.Eventually(t, func() bool { return databaseOf(t, store, id).Status == clouddb.DatabaseError }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, cause, databaseOf(t, store, id).StatusDetail)
}
