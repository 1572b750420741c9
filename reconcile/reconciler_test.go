package reconcile_test

import (
	"context"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/reconcile"
	"clouddb/sqlite"
)

// recorder is a driver that runs nothing and records what it was asked: the reconciler's
// decisions are what these tests check (driver/local's tests run real servers).
type recorder struct {
	mu      sync.Mutex
	ensured map[int]int // calls per database
	running map[int]bool
}

func newRecorder() *recorder { return &recorder{ensured: map[int]int{}, running: map[int]bool{}} }

func (r *recorder) Ensure(_ context.Context, in clouddb.Instance) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ensured[in.DatabaseID]++
	r.running[in.DatabaseID] = true
	return nil
}

func (r *recorder) Running(_ context.Context, in clouddb.Instance) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[in.DatabaseID], nil
}

func (r *recorder) Stop(_ context.Context, id int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[id] = false
	return nil
}

func (r *recorder) Remove(ctx context.Context, id int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, id)
	return nil
}

func (r *recorder) Instances(context.Context) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int
	for id := range r.running {
		ids = append(ids, id)
	}
	return ids, nil
}

func (r *recorder) Snapshot(context.Context, clouddb.Instance, int, io.Writer) (int64, error) {
	return 0, nil
}
func (r *recorder) Load(context.Context, clouddb.Instance, []string) error { return nil }
func (r *recorder) CopyFrom(context.Context, clouddb.Instance, clouddb.RedisEndpoint) error {
	return nil
}

func (r *recorder) ensures(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ensured[id]
}

// activeDatabase stores an account, an active subscription and an active database.
func activeDatabase(t *testing.T, store clouddb.Store) int {
	t.Helper()
	ctx := t.Context()
	var id int
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		s := &clouddb.Subscription{AccountID: a.ID, Name: "s", Status: clouddb.SubscriptionActive}
		require.NoError(t, tx.CreateSubscription(ctx, s))
		d := &clouddb.Database{AccountID: a.ID, SubscriptionID: s.ID, Port: 10000, Password: "pw", Status: clouddb.DatabaseActive,
			Spec: clouddb.DatabaseSpec{Name: "d", MemoryLimitInGB: 0.1}}
		require.NoError(t, tx.CreateDatabase(ctx, d))
		id = d.ID
		return nil
	}))
	return id
}

// TestRunAgainEnsuresAgain: a reconciler that runs again (a replica regaining the
// workers' lock) ensures every database once more instead of trusting what it ensured
// before: another replica may have changed the servers in between. Within one run, a
// database it ensured is only checked.
func TestRunAgainEnsuresAgain(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	id := activeDatabase(t, store)
	drv := newRecorder()
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond}

	run := func(want int) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := r.Run(ctx); err != nil {
				t.Errorf("reconciler: %v", err)
			}
		}()
		require.Eventually(t, func() bool { return drv.ensures(id) == want }, 5*time.Second, 5*time.Millisecond)
		// Several more passes (every 10ms): they only check.
		time.Sleep(100 * time.Millisecond)
		cancel()
		<-done
		require.Equal(t, want, drv.ensures(id), "later passes of a run only check")
	}
	run(1)
	run(2) // a new run ensures again
}

// TestDeadServerRestarted: a server that stops running is ensured again on the next
// pass.
func TestDeadServerRestarted(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	id := activeDatabase(t, store)
	drv := newRecorder()
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Errorf("reconciler: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	require.Eventually(t, func() bool { return drv.ensures(id) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, drv.Stop(ctx, id))
	require.Eventually(t, func() bool { return drv.ensures(id) == 2 }, 5*time.Second, 5*time.Millisecond)
}
