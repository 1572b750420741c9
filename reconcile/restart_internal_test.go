package reconcile

import (
	"context"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// gate is a driver whose Ensure and Stop wait until release is closed, and which counts
// the calls under way: what a restart of many databases runs at once is what these
// tests check, without timing anything.
type gate struct {
	release chan struct{}

	mu        sync.Mutex
	ensuring  map[int]int // Ensure calls under way, per database
	stopping  map[int]int // Stop calls under way, per database
	ensures   int         // Ensure calls under way, in all
	stops     int         // Stop calls under way, in all
	maxEnsure int         // the most Ensure calls under way at once
	maxStop   int         // the most Stop calls under way at once
	twice     []int       // databases that had two calls under way at once
	ensured   map[int]int // Ensure calls ended, per database
	stopped   map[int]int // Stop calls ended, per database
	passes    int         // Instances calls: one per pass
}

func newGate() *gate {
	return &gate{release: make(chan struct{}), ensuring: map[int]int{}, stopping: map[int]int{}, ensured: map[int]int{}, stopped: map[int]int{}}
}

// enter counts a call to database id in calls (per database) and *now (in all).
func (g *gate) enter(id int, calls map[int]int, now, most *int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	calls[id]++
	if g.ensuring[id]+g.stopping[id] > 1 {
		g.twice = append(g.twice, id)
	}
	*now++
	*most = max(*most, *now)
}

func (g *gate) leave(id int, calls, ended map[int]int, now *int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	calls[id]--
	ended[id]++
	*now--
}

func (g *gate) Ensure(ctx context.Context, in clouddb.Instance) error {
	g.enter(in.DatabaseID, g.ensuring, &g.ensures, &g.maxEnsure)
	defer g.leave(in.DatabaseID, g.ensuring, g.ensured, &g.ensures)
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) Stop(ctx context.Context, id int) error {
	g.enter(id, g.stopping, &g.stops, &g.maxStop)
	defer g.leave(id, g.stopping, g.stopped, &g.stops)
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Running: a database this driver ensured runs.
func (g *gate) Running(_ context.Context, in clouddb.Instance) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ensured[in.DatabaseID] > 0, nil
}

func (g *gate) Remove(context.Context, int) error { return nil }

func (g *gate) Instances(context.Context) ([]int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.passes++
	var ids []int
	for id := range g.ensured {
		ids = append(ids, id)
	}
	return ids, nil
}

func (g *gate) Snapshot(context.Context, clouddb.Instance, int, io.Writer) (int64, error) {
	return 0, nil
}
func (g *gate) Load(context.Context, clouddb.Instance, []string) error { return nil }
func (g *gate) CopyFrom(context.Context, clouddb.Instance, clouddb.RedisEndpoint) error {
	return nil
}

// read returns what fn reads of g, under its lock.
func read[T any](g *gate, fn func() T) T {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fn()
}

// activeDatabases stores an account and a subscription with n active databases, as
// after a restart: none of them ensured by this process yet. It returns the account.
func activeDatabases(t *testing.T, n int) (clouddb.Store, int) {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	ctx := t.Context()
	var account int
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		account = a.ID
		s := &clouddb.Subscription{AccountID: a.ID, Name: "s", Status: clouddb.SubscriptionActive}
		require.NoError(t, tx.CreateSubscription(ctx, s))
		for i := range n {
			d := &clouddb.Database{AccountID: a.ID, SubscriptionID: s.ID, Port: 10000 + i, Password: "pw", Status: clouddb.DatabaseActive,
				Spec: clouddb.DatabaseSpec{Name: "d" + strconv.Itoa(i), MemoryLimitInGB: 0.1}}
			require.NoError(t, tx.CreateDatabase(ctx, d))
		}
		return nil
	}))
	return store, account
}

// TestRestartEnsuresInParallelUpToTheBound: after a restart, the databases are ensured
// at once up to Concurrency, never more, even over several passes while they all wait,
// and never one database twice at once; each is ensured once.
func TestRestartEnsuresInParallelUpToTheBound(t *testing.T) {
	const n, bound = 12, 3
	store, _ := activeDatabases(t, n)
	g := newGate()
	r := &Reconciler{Store: store, Driver: g, Interval: 5 * time.Millisecond, Concurrency: bound}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		require.NoError(t, r.Run(ctx))
	}()
	t.Cleanup(func() { cancel(); <-done })

	require.Eventually(t, func() bool { return read(g, func() int { return g.ensures }) == bound }, 10*time.Second, time.Millisecond)
	// More passes while they wait: none starts another call.
	passes := read(g, func() int { return g.passes })
	require.Eventually(t, func() bool { return read(g, func() int { return g.passes }) >= passes+5 }, 10*time.Second, time.Millisecond)
	require.Equal(t, bound, read(g, func() int { return g.ensures }))

	close(g.release)
	require.Eventually(t, func() bool { return read(g, func() int { return len(g.ensured) }) == n }, 10*time.Second, time.Millisecond)
	cancel()
	<-done
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, bound, g.maxEnsure, "never more Ensure calls at once than the bound")
	require.Empty(t, g.twice, "never two calls for one database at once")
	for id, calls := range g.ensured {
		require.Equal(t, 1, calls, "database %d ensured once", id)
	}
}

// TestAdoptionAsksNoPassUnlessACLWaits: a database adopted or started again after a
// restart asks for another pass only when ACL rows wait for databases to settle: a pass
// per database brought back made a restart of N databases run N passes over all N.
func TestAdoptionAsksNoPassUnlessACLWaits(t *testing.T) {
	store, account := activeDatabases(t, 5)
	g := newGate()
	close(g.release)
	r := &Reconciler{Store: store, Driver: g}
	require.NoError(t, r.Pass(t.Context()))
	r.wg.Wait()
	require.Len(t, g.ensured, 5)
	require.Empty(t, r.wake, "no pass asked for")

	// A pending rule of the account: the databases brought back may be what it waits for.
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		return tx.CreateACLRule(t.Context(), &clouddb.ACLRule{AccountID: account, Name: "writer", ACL: "+@write ~*", Status: clouddb.ACLPending})
	}))
	r = &Reconciler{Store: store, Driver: g} // a new process: nothing ensured yet
	r.init()
	r.aclPending.Store(true) // as a pass finds it
	require.NoError(t, r.superviseDatabase(t.Context(), &clouddb.Database{ID: 1, Status: clouddb.DatabaseActive}, clouddb.Instance{DatabaseID: 1}))
	require.Len(t, r.wake, 1, "a pass asked for")
}

// TestShutdownStopsWiderThanConcurrency: a graceful stop stops stopBound servers at once
// however small Concurrency is (a stop mostly waits for its server), never more, and
// stops every one, once.
func TestShutdownStopsWiderThanConcurrency(t *testing.T) {
	const n, bound = stopBound + 10, 1
	store, _ := activeDatabases(t, n)
	g := newGate()
	r := &Reconciler{Store: store, Driver: g, Concurrency: bound}
	errc := make(chan error, 1)
	go func() { errc <- r.Shutdown(t.Context()) }()

	require.Eventually(t, func() bool { return read(g, func() int { return g.stops }) == stopBound }, 10*time.Second, time.Millisecond)
	close(g.release)
	require.NoError(t, <-errc)
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Equal(t, stopBound, g.maxStop, "never more stops at once than the bound")
	require.Empty(t, g.twice)
	require.Len(t, g.stopped, n)
	for id, calls := range g.stopped {
		require.Equal(t, 1, calls, "database %d stopped once", id)
	}
}

// TestDefaultConcurrency: the default bound grows with the cores, up to its maximum.
func TestDefaultConcurrency(t *testing.T) {
	for _, c := range []struct{ procs, want int }{{1, 16}, {2, 32}, {4, 64}, {16, 64}} {
		prev := runtime.GOMAXPROCS(c.procs)
		got := defaultConcurrency()
		runtime.GOMAXPROCS(prev)
		require.Equal(t, c.want, got, "GOMAXPROCS %d", c.procs)
	}
	r := &Reconciler{}
	r.init()
	require.Equal(t, defaultConcurrency(), r.Concurrency)
	require.Equal(t, r.Concurrency, cap(r.sem))
}
