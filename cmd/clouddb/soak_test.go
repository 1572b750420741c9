//go:build soak

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestSoak drives several accounts concurrently with every kind of request for a few
// minutes (SOAK_DURATION, default 3m) while the real binary is restarted at random moments,
// by SIGTERM and SIGKILL in turn. Then: every task ended; each account's tasks were
// processed one at a time in submission order; and nothing leaked: no redis-server or data
// directory of a deleted database is left, and the service's open files and memory are
// about the same in the last minute as in the first. Run it with `make soak`; SOAK_SEED
// replays a run's choices.
func TestSoak(t *testing.T) {
	duration := 3 * time.Minute
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "SOAK_DURATION")
		duration = d
	}
	seed := envSeed(t, "SOAK_SEED")
	rng := rand.New(rand.NewPCG(seed, 2))
	begin := time.Now()

	ports := portBlocks(t, 8)
	bin := buildBinary(t)
	h := newHarness(t, bin, ports, "--provisioning-delay", "200ms", "--task-lease", "2s", "--rate-limit", "0", "--log-level", "warn")
	h.start()
	servers := newServerTracker(t, h.databasesDir())
	accounts := h.accounts(4)

	mon := newMonitor(t, h)
	w := newWorkload(h, accounts, seed, workloadOptions{workersPerAccount: 2, pause: [2]time.Duration{20 * time.Millisecond, 150 * time.Millisecond},
		maxSubscriptions: 4, maxDatabases: 8, maxCloudAccounts: 6, soak: true})
	w.start()
	start := time.Now()
	end := start.Add(duration)

	kill := rng.IntN(2) == 0
	for {
		wait := randDuration(rng, 15*time.Second, 35*time.Second)
		if time.Now().Add(wait).After(end.Add(-10 * time.Second)) {
			break
		}
		time.Sleep(wait)
		how := "SIGTERM"
		began := time.Now()
		if kill {
			how = "SIGKILL"
			h.kill()
		} else {
			h.term()
			servers.newEpoch() // a graceful stop stops the servers; the start starts them anew
		}
		h.start()
		w.setURL(h.url)
		t.Logf("%s: restart by %s, back after %s (%d tasks so far)", time.Since(start).Round(time.Second), how,
			time.Since(began).Round(time.Millisecond), w.recorded())
		kill = !kill
	}
	time.Sleep(time.Until(end))
	w.stop()

	v := h.verify(w, 90*time.Second)
	servers.check(t)
	mon.stop()
	require.Empty(t, mon.violations, "per-account processing seen out of order")
	checkFIFO(t, h)
	mon.checkStable(start, end)
	h.stopAndCheckNoServers()

	t.Logf("soak: seed %d, %s of load, %d restarts (%d SIGTERM, %d SIGKILL), %d tasks recorded (%d completed, %d failed), %d writes (%d without an answer), %d reads, %d FIFO snapshots; at the end %d databases, %d subscriptions, %d cloud accounts; %s in all",
		seed, duration, h.starts-1, h.terms-1, h.kills, len(w.records), v.completed, v.failed, w.writes.Load(), w.ambiguous, w.reads.Load(),
		mon.snapshots, v.databases, v.subscriptions, v.cloudAccounts, time.Since(begin).Round(time.Second))
	var kinds []string
	for k, n := range w.counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	t.Logf("writes by kind: %s", strings.Join(kinds, ", "))
}

// TestSoakChaos is the long chaos run (TestChaos is the short one): more tenants, and
// round after round of attacks and faults.
func TestSoakChaos(t *testing.T) {
	runChaos(t, chaosOptions{tenants: 5, rounds: 6, loadPerTenant: 20, settle: 3 * time.Minute})
}

// checkFIFO checks, for each account, that its tasks ended in submission order: the
// final timestamps are non-decreasing in submission order, so no task finished before an
// earlier one of its account. (The store stamps a task's end inside the transaction that
// ends it, and the engine claims an account's next task only once the previous one has
// ended, so the order of the stamps is the order of the processing.)
func checkFIFO(t *testing.T, h *harness) {
	t.Helper()
	s, err := readStore(testContext(t), h.config())
	require.NoError(t, err)
	last := map[int]*clouddb.Task{}
	n := 0
	for _, tk := range s.tasks { // in submission order
		require.True(t, tk.Status.Final(), "task %s is %s", tk.ID, tk.Status)
		if prev := last[tk.AccountID]; prev != nil {
			require.False(t, tk.UpdatedAt.Before(prev.UpdatedAt),
				"account %d: task %s (seq %d) ended at %s, before task %s (seq %d) submitted earlier, which ended at %s",
				tk.AccountID, tk.ID, tk.Seq, tk.UpdatedAt.Format(time.RFC3339Nano), prev.ID, prev.Seq, prev.UpdatedAt.Format(time.RFC3339Nano))
		}
		last[tk.AccountID] = tk
		n++
	}
	t.Logf("FIFO: %d tasks of %d accounts ended in submission order", n, len(last))
}

// monitor watches the service while the soak runs: every second a snapshot of the tasks
// (an account never has two tasks in progress, and never has a task ended after an
// earlier one that has not), and every two seconds the clouddb process's open files and
// resident memory.
type monitor struct {
	t      *testing.T
	h      *harness
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	samples    []sample
	violations []string
	snapshots  int
}

type sample struct {
	at      time.Time
	pid     int
	fds     int
	rssKB   int
	servers int
}

func newMonitor(t *testing.T, h *harness) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{t: t, h: h, cancel: cancel}
	store, _, err := openState(ctx, h.config(), nil)
	require.NoError(t, err)
	m.wg.Go(func() {
		defer store.Close()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m.snapshot(ctx, store)
		}
	})
	m.wg.Go(func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m.sample()
		}
	})
	t.Cleanup(m.stop)
	return m
}

func (m *monitor) stop() {
	m.cancel()
	m.wg.Wait()
}

func (m *monitor) violation(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.violations) < 20 {
		m.violations = append(m.violations, fmt.Sprintf(format, args...))
	}
}

// snapshot reads every task in one read transaction and checks each account's queue.
func (m *monitor) snapshot(ctx context.Context, store clouddb.Store) {
	var tasks []*clouddb.Task
	err := store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		tasks, err = tx.Tasks(ctx, clouddb.TaskFilter{})
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			m.violation("read tasks: %v", err)
		}
		return
	}
	slices.SortFunc(tasks, func(a, b *clouddb.Task) int { return int(a.Seq - b.Seq) })
	inProgress := map[int]*clouddb.Task{}
	pending := map[int]*clouddb.Task{} // the earliest task of each account not ended yet
	for _, tk := range tasks {
		if tk.Status == clouddb.TaskInProgress {
			if other := inProgress[tk.AccountID]; other != nil {
				m.violation("account %d has tasks %s and %s in progress at once", tk.AccountID, other.ID, tk.ID)
			}
			inProgress[tk.AccountID] = tk
		}
		if !tk.Status.Final() {
			if pending[tk.AccountID] == nil {
				pending[tk.AccountID] = tk
			}
			continue
		}
		if p := pending[tk.AccountID]; p != nil {
			m.violation("account %d: task %s (seq %d) ended while task %s (seq %d), submitted earlier, is %s", tk.AccountID, tk.ID, tk.Seq, p.ID, p.Seq, p.Status)
		}
	}
	m.mu.Lock()
	m.snapshots++
	m.mu.Unlock()
}

// sample records the open files and resident memory of the running clouddb.
func (m *monitor) sample() {
	pid := m.h.pid()
	dir := "/proc/" + strconv.Itoa(pid)
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return // between a stop and a start
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return
	}
	rss := 0
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rss, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	if rss == 0 {
		return // a process on its way out
	}
	procs, _ := redisProcesses(m.h.databasesDir())
	m.mu.Lock()
	m.samples = append(m.samples, sample{at: time.Now(), pid: pid, fds: len(fds), rssKB: rss, servers: len(procs)})
	m.mu.Unlock()
}

type spread struct{ min, median, max int }

func spreadOf(v []int) spread {
	if len(v) == 0 {
		return spread{}
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return spread{v[0], v[len(v)/2], v[len(v)-1]}
}

func (s spread) String() string {
	return fmt.Sprintf("min %d, median %d, max %d", s.min, s.median, s.max)
}

// checkStable compares the clouddb process's open files and resident memory in the
// first and the last minute of the load. A leak per request or per database would grow
// them by hundreds of files or tens of MB in a minute.
func (m *monitor) checkStable(start, end time.Time) {
	t := m.t
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var firstFDs, firstRSS, lastFDs, lastRSS, firstSrv, lastSrv []int
	pids := map[int]bool{}
	for _, s := range m.samples {
		pids[s.pid] = true
		switch {
		case s.at.Before(start.Add(time.Minute)):
			firstFDs, firstRSS, firstSrv = append(firstFDs, s.fds), append(firstRSS, s.rssKB), append(firstSrv, s.servers)
		case s.at.After(end.Add(-time.Minute)):
			lastFDs, lastRSS, lastSrv = append(lastFDs, s.fds), append(lastRSS, s.rssKB), append(lastSrv, s.servers)
		}
	}
	require.NotEmpty(t, firstFDs, "no sample in the first minute")
	require.NotEmpty(t, lastFDs, "no sample in the last minute")
	ff, lf := spreadOf(firstFDs), spreadOf(lastFDs)
	fr, lr := spreadOf(firstRSS), spreadOf(lastRSS)
	t.Logf("clouddb open files: first minute %s; last minute %s (%d samples of %d processes)", ff, lf, len(m.samples), len(pids))
	t.Logf("clouddb RSS (kB): first minute %s; last minute %s", fr, lr)
	t.Logf("redis-server processes: first minute %s; last minute %s", spreadOf(firstSrv), spreadOf(lastSrv))
	require.LessOrEqual(t, lf.max, ff.max+64, "open files grew from the first minute to the last")
	require.LessOrEqual(t, lr.median, 2*fr.median+32<<10, "resident memory grew from the first minute to the last")
}
