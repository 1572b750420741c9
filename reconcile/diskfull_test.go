package reconcile_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
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
