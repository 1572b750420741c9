package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/syncbuf"
	"clouddb/reconcile"
	"clouddb/sqlite"
)

// panicky is a recorder whose Ensure panics for one database: a bug met by one tenant's
// resource.
type panicky struct {
	*recorder
	id int
}

func (p *panicky) Ensure(ctx context.Context, in clouddb.Instance) error {
	if in.DatabaseID == p.id {
		panic("driver internals: nil map")
	}
	return p.recorder.Ensure(ctx, in)
}

// failing is a recorder whose Ensure fails, once armed, as a restart does when another
// process took the server's port.
type failing struct {
	*recorder
	mu  sync.Mutex
	err error
}

func (f *failing) Ensure(ctx context.Context, in clouddb.Instance) error {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.recorder.Ensure(ctx, in)
}

// pendingDatabases stores an account, an active subscription and n pending databases.
func pendingDatabases(t *testing.T, store clouddb.Store, n int) []int {
	t.Helper()
	ctx := t.Context()
	var ids []int
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		s := &clouddb.Subscription{AccountID: a.ID, Name: "s", Status: clouddb.SubscriptionActive}
		require.NoError(t, tx.CreateSubscription(ctx, s))
		for i := range n {
			d := &clouddb.Database{AccountID: a.ID, SubscriptionID: s.ID, Port: 10000 + i, Password: "pw", Status: clouddb.DatabasePending,
				Spec: clouddb.DatabaseSpec{Name: "d" + string(rune('a'+i)), MemoryLimitInGB: 0.1}}
			require.NoError(t, tx.CreateDatabase(ctx, d))
			ids = append(ids, d.ID)
		}
		return nil
	}))
	return ids
}

func databaseOf(t *testing.T, store clouddb.Store, id int) *clouddb.Database {
	t.Helper()
	var d *clouddb.Database
	require.NoError(t, store.View(t.Context(), func(tx clouddb.Tx) error {
		var err error
		d, err = tx.Database(t.Context(), 0, id)
		return err
	}))
	return d
}

func openStore(t *testing.T) clouddb.Store {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store
}

// runReconciler runs r until the test ends.
func runReconciler(t *testing.T, r *reconcile.Reconciler) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Errorf("reconciler: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestPanicInEnsureFailsOnlyThatDatabase: a driver that panics while provisioning one
// database does not end the process: that database goes to error with a reason that says
// an internal error happened (not the panic's text), the stack is logged, the other
// databases become active, and the reconciler keeps working on new ones.
func TestPanicInEnsureFailsOnlyThatDatabase(t *testing.T) {
	store := openStore(t)
	ids := pendingDatabases(t, store, 3)
	logs := &syncbuf.Buffer{}
	drv := &panicky{recorder: newRecorder(), id: ids[1]}
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runReconciler(t, r)

	require.Eventually(t, func() bool {
		return databaseOf(t, store, ids[0]).Status == clouddb.DatabaseActive &&
			databaseOf(t, store, ids[1]).Status == clouddb.DatabaseError &&
			databaseOf(t, store, ids[2]).Status == clouddb.DatabaseActive
	}, 5*time.Second, 10*time.Millisecond)
	bad := databaseOf(t, store, ids[1])
	require.Equal(t, clouddb.InternalErrorDetail, bad.StatusDetail)
	require.NotContains(t, bad.StatusDetail, "internals", "the panic's internals stay in the operator's log")
	require.Contains(t, logs.String(), "reconcile step panicked")
	require.Contains(t, logs.String(), "panicky).Ensure", "the log has the stack")

	// The failed database is not tried again in a loop; new work still gets done.
	n := strings.Count(logs.String(), "reconcile step panicked")
	more := pendingDatabasesIn(t, store, bad.AccountID, bad.SubscriptionID, 20000)
	require.Eventually(t, func() bool { return databaseOf(t, store, more).Status == clouddb.DatabaseActive }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, n, strings.Count(logs.String(), "reconcile step panicked"))
}

// pendingDatabasesIn stores one more pending database in an existing subscription.
func pendingDatabasesIn(t *testing.T, store clouddb.Store, accountID, subID, port int) int {
	t.Helper()
	ctx := t.Context()
	d := &clouddb.Database{AccountID: accountID, SubscriptionID: subID, Port: port, Password: "pw", Status: clouddb.DatabasePending,
		Spec: clouddb.DatabaseSpec{Name: "later", MemoryLimitInGB: 0.1}}
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error { return tx.CreateDatabase(ctx, d) }))
	return d.ID
}

// TestPanicInPassDoesNotEndRun: a panic in a pass itself (here, listing the driver's
// servers) is logged and the next pass runs.
func TestPanicInPassDoesNotEndRun(t *testing.T) {
	store := openStore(t)
	id := activeDatabase(t, store)
	logs := &syncbuf.Buffer{}
	drv := &panicOnce{recorder: newRecorder()}
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runReconciler(t, r)
	require.Eventually(t, func() bool { return drv.ensures(id) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Contains(t, logs.String(), "reconcile pass panicked")
}

// panicOnce panics in its first Instances call.
type panicOnce struct {
	*recorder
	once sync.Once
}

func (p *panicOnce) Instances(ctx context.Context) ([]int, error) {
	p.once.Do(func() { panic("listing failed") })
	return p.recorder.Instances(ctx)
}

// TestSupervisedRestartFailureShadowedErr is the regression test of the shadowed err in
// superviseDatabase: when the restart of a dead server failed (its port taken by another
// process, a CONFIG SET port by the tenant), the error path read a nil closure-local err
// and panicked clouddb, which then crash-looped. The database must go to error with the
// restart's cause.
func TestSupervisedRestartFailureShadowedErr(t *testing.T) {
	store := openStore(t)
	id := activeDatabase(t, store)
	drv := &failing{recorder: newRecorder()}
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond}
	runReconciler(t, r)
	require.Eventually(t, func() bool { return drv.ensures(id) == 1 }, 5*time.Second, 5*time.Millisecond)

	drv.mu.Lock()
	drv.err = errors.New("port 10000 is taken by another process")
	drv.mu.Unlock()
	require.NoError(t, drv.Stop(t.Context(), id))
	require.Eventually(t, func() bool { return databaseOf(t, store, id).Status == clouddb.DatabaseError }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, "port 10000 is taken by another process", databaseOf(t, store, id).StatusDetail)
}

// halfStart is a recorder whose Ensure, once armed, starts the server and then fails
// with err, as a restart does when a command to the new server times out or the server
// is still loading its data.
type halfStart struct {
	*recorder
	mu  sync.Mutex
	err error
}

func (h *halfStart) arm(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

func (h *halfStart) Ensure(ctx context.Context, in clouddb.Instance) error {
	err := h.recorder.Ensure(ctx, in)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	return err
}

// TestFailedRestartKeepsWhatRuns: a restart that fails after it started a server puts
// the database in error with the cause, but does not stop that server, which may hold
// the only copy of the data.
func TestFailedRestartKeepsWhatRuns(t *testing.T) {
	store := openStore(t)
	id := activeDatabase(t, store)
	drv := &halfStart{recorder: newRecorder()}
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond}
	runReconciler(t, r)
	require.Eventually(t, func() bool { return drv.ensures(id) == 1 }, 5*time.Second, 5*time.Millisecond)

	drv.arm(errors.New("database 1: CONFIG SET: i/o timeout"))
	require.NoError(t, drv.Stop(t.Context(), id)) // the server dies
	require.Eventually(t, func() bool { return databaseOf(t, store, id).Status == clouddb.DatabaseError }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, "database 1: CONFIG SET: i/o timeout", databaseOf(t, store, id).StatusDetail)
	require.Equal(t, 2, drv.ensures(id))
	up, err := drv.Running(t.Context(), clouddb.Instance{DatabaseID: id})
	require.NoError(t, err)
	require.True(t, up, "the restarted server was left running")
}

// TestWaitingServerWaits: a server still loading its data when Ensure gives up, or busy
// (a tenant's long script, a loaded machine), is a wait, not a failure: the database
// stays active, the wait is logged once, and a later pass adopts the server once it
// answers, with no PUT.
func TestWaitingServerWaits(t *testing.T) {
	for _, c := range []struct {
		name, begins, ends string
		err                error
	}{
		{"loading", "is still loading its data; it is tried again", "has loaded its data",
			fmt.Errorf("database 1: redis-server pid 42 did not answer PING within 10s (%w)", clouddb.ErrServerStarting)},
		{"busy", "is busy (a long script", "answers again",
			fmt.Errorf("database 1: apply configuration: ACL USERS: i/o timeout (%w)", clouddb.ErrServerBusy)},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := openStore(t)
			id := activeDatabase(t, store)
			drv := &halfStart{recorder: newRecorder()}
			logs := &syncbuf.Buffer{}
			r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(logs, nil))}
			runReconciler(t, r)
			require.Eventually(t, func() bool { return drv.ensures(id) == 1 }, 5*time.Second, 5*time.Millisecond)

			drv.arm(c.err)
			require.NoError(t, drv.Stop(t.Context(), id))
			require.Eventually(t, func() bool { return drv.ensures(id) > 5 }, 5*time.Second, 5*time.Millisecond, "tried again")
			require.Equal(t, clouddb.DatabaseActive, databaseOf(t, store, id).Status)
			require.Equal(t, 1, strings.Count(logs.String(), c.begins), logs.String())

			drv.arm(nil)
			require.Eventually(t, func() bool { return strings.Contains(logs.String(), c.ends) }, 5*time.Second, 10*time.Millisecond)
			require.Equal(t, clouddb.DatabaseActive, databaseOf(t, store, id).Status)
			require.NotContains(t, logs.String(), "level=ERROR")
		})
	}
}
