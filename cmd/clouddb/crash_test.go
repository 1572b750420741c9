package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
	"clouddb/internal/pgtest"
)

// TestCrashLoop kills the real binary with SIGKILL at random moments of a busy workload of
// several accounts (subscription, database and cloud-account creates, database updates and
// deletes, subscription deletes), restarts it on the same data dir each time, and then
// checks that nothing was lost and nothing happened twice: every task whose id the API
// returned ended; each create took effect exactly once if its task completed (and not at
// all otherwise); every database runs, once per node (a primary, and a replica when its
// replication is on: one database create in three asks for it and some updates turn it
// on or off), with the password, size and replication its last completed change gave it;
// no redis-server runs that no database wants; and a server left running by a crash was
// adopted by the next start, never started again (which would lose the data of a
// database without persistence), on every node of every topology. The seed is logged;
// CRASH_SEED=<n> replays a run's choices (not their timing).
//
// It runs on each store.
func TestCrashLoop(t *testing.T) {
	bin := buildBinary(t)
	t.Run("sqlite", func(t *testing.T) {
		crashLoop(t, bin, nil, 10, [2]time.Duration{100 * time.Millisecond, 1500 * time.Millisecond})
	})
	t.Run("postgres", func(t *testing.T) {
		key := clouddb.NewKey()
		// clouddb admin, run in this process, reads the key from the environment.
		t.Setenv(envKey, key)
		s := &sharedStore{url: pgtest.URL(t), key: key}
		crashLoop(t, bin, s, 10, [2]time.Duration{100 * time.Millisecond, 1500 * time.Millisecond})
	})
}

// sharedStore is the Postgres store a harness's clouddb uses, with its key.
type sharedStore struct{ url, key string }

func crashLoop(t *testing.T, bin string, shared *sharedStore, iterations int, between [2]time.Duration) {
	seed := envSeed(t, "CRASH_SEED")
	rng := rand.New(rand.NewPCG(seed, 1))
	start := time.Now()

	ports := portBlocks(t, 6)
	h := newHarness(t, bin, ports, "--provisioning-delay", "100ms", "--task-lease", "1s", "--rate-limit", "0", "--log-level", "warn")
	h.useStore(shared)
	h.start()
	servers := newServerTracker(t, h.databasesDir())
	accounts := h.accounts(3)

	w := newWorkload(h, accounts, seed, workloadOptions{workersPerAccount: 2, pause: [2]time.Duration{10 * time.Millisecond, 60 * time.Millisecond},
		maxSubscriptions: 4, maxDatabases: 8, replication: true})
	w.start()

	for i := range iterations {
		d := randDuration(rng, between[0], between[1])
		time.Sleep(d)
		h.kill()
		t.Logf("kill %d after %s of workload (%d tasks so far)", i+1, d.Round(time.Millisecond), w.recorded())
		h.start()
		w.setURL(h.url)
	}
	time.Sleep(randDuration(rng, between[0], between[1]))
	w.stop()
	// A last crash while tasks are still queued or in hand, then the final restart.
	h.kill()
	h.start()
	w.setURL(h.url)

	v := h.verify(w, 60*time.Second)
	servers.checkExcept(t, v.replicasRemoved)
	h.stopAndCheckNoServers()
	t.Logf("crash loop: seed %d, %d kills, %d tasks recorded (%d completed, %d failed), %d writes without an answer, %d reads; %d databases (%d replicated), %d subscriptions, %d cloud accounts at the end; %d replicas removed by an update; %d server processes seen; %d polls for the workers lock after a kill; %s in all",
		seed, h.kills, len(w.records), v.completed, v.failed, w.ambiguous, w.reads.Load(), v.databases, v.replicated, v.subscriptions, v.cloudAccounts,
		sumValues(v.replicasRemoved), servers.seen(), h.lockWaits, time.Since(start).Round(time.Second))
}

// envSeed returns the seed in the environment variable, or a fresh one; it is logged so a
// failing run can be replayed.
func envSeed(t *testing.T, name string) uint64 {
	t.Helper()
	if s := os.Getenv(name); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "%s", name)
		return n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with %s=%d)", seed, name, seed)
	return seed
}

func randDuration(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// portBlocks joins n consecutive blocks of portRange into one range. Called before any
// parallel test resumes, the blocks it takes are consecutive; otherwise it takes more.
func portBlocks(t *testing.T, n int) string {
	t.Helper()
	for range 10 {
		lo, hi := 0, 0
		ok := true
		for i := range n {
			l, h, err := parsePorts(portRange())
			require.NoError(t, err)
			if i == 0 {
				lo = l
			} else if l != hi+1 {
				ok = false
			}
			hi = h
		}
		if ok && hi < 32768 { // below Linux's ephemeral range
			return fmt.Sprintf("%d-%d", lo, hi)
		}
	}
	t.Fatal("no consecutive port blocks")
	return ""
}

// harness runs the real binary on one data dir across restarts.
type harness struct {
	t    *testing.T
	bin  string
	dir  string
	env  []string
	args []string
	// store and key name a shared store; empty for SQLite in dir.
	store, key string

	mu  sync.Mutex
	cmd *exec.Cmd
	url string

	starts, kills, terms int
	// lockWaits counts the polls of waitLockFree that found the lock held.
	lockWaits int
}

const (
	harnessKey    = "crash-key"
	harnessSecret = "crash-secret-0123456789abcdef"
)

// newHarness prepares a data dir. Its cleanup, which runs after those of runBinary (so
// no clouddb is left to start servers), kills every redis-server still running from the
// data dir, whatever the outcome of the test.
func newHarness(t *testing.T, bin, ports string, args ...string) *harness {
	dir := t.TempDir()
	h := &harness{t: t, bin: bin, dir: dir,
		env:  []string{"CLOUDDB_BOOTSTRAP_API_KEY=" + harnessKey, "CLOUDDB_BOOTSTRAP_SECRET_KEY=" + harnessSecret},
		args: append([]string{"--data-dir", dir, "--listen", "127.0.0.1:0", "--db-ports", ports}, args...)}
	t.Cleanup(func() {
		procs, _ := redisProcesses(h.databasesDir())
		for _, p := range procs {
			_ = syscall.Kill(p.pid, syscall.SIGKILL) // it may be gone already
		}
		if len(procs) > 0 {
			t.Logf("cleanup: killed %d redis-server processes left in %s", len(procs), h.databasesDir())
		}
	})
	return h
}

// useStore points the harness's clouddb (and its admin commands) at a shared store; nil
// keeps SQLite in the data dir.
func (h *harness) useStore(s *sharedStore) {
	if s == nil {
		return
	}
	h.store, h.key = s.url, s.key
	h.args = append(h.args, "--store", s.url)
	h.env = append(h.env, envKey+"="+s.key)
}

// config is the configuration that opens the harness's store.
func (h *harness) config() Config {
	return Config{DataDir: h.dir, Store: h.store, EncryptionKey: h.key}
}

// adminArgs are the store arguments of clouddb admin.
func (h *harness) adminArgs() []string {
	args := []string{"--data-dir", h.dir}
	if h.store != "" {
		args = append(args, "--store", h.store)
	}
	return args
}

func (h *harness) databasesDir() string { return filepath.Join(h.dir, "databases") }

func (h *harness) start() {
	h.t.Helper()
	cmd, u := runBinary(h.t, h.bin, h.env, h.args...)
	h.mu.Lock()
	h.cmd, h.url = cmd, u
	h.mu.Unlock()
	h.starts++
}

// pid is the pid of the running clouddb.
func (h *harness) pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cmd.Process.Pid
}

// kill sends SIGKILL and reaps the process.
func (h *harness) kill() {
	h.t.Helper()
	require.NoError(h.t, h.cmd.Process.Signal(syscall.SIGKILL))
	_ = h.cmd.Wait() // reports the signal
	h.kills++
	h.waitLockFree()
}

// waitLockFree waits, after a SIGKILL, until the SQLite data dir's workers lock is free,
// as a supervisor's restart delay would: a child clouddb forked to exec a redis-server
// holds the lock (flock, shared by fork) until its exec, so that a start at once after
// the kill can find it held for some milliseconds and refuse to serve ("another clouddb
// serves"). Held for more than 2 seconds it is a leak, and fails the test.
func (h *harness) waitLockFree() {
	h.t.Helper()
	if h.store != "" {
		return // replicas share a Postgres store: a start waits for the lock
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		l, ok, err := tryLock(filepath.Join(h.dir, workersFile))
		require.NoError(h.t, err)
		if ok {
			l.unlock()
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the workers lock of %s is still held 2s after clouddb was killed", h.dir)
		}
		h.lockWaits++
		time.Sleep(5 * time.Millisecond)
	}
}

// term sends SIGTERM and waits for a clean exit (status 0).
func (h *harness) term() {
	h.t.Helper()
	require.NoError(h.t, h.cmd.Process.Signal(syscall.SIGTERM))
	waitExit(h.t, h.cmd, 90*time.Second)
	h.terms++
}

// stopAndCheckNoServers stops clouddb with SIGTERM and checks that no redis-server of the
// data dir is left.
func (h *harness) stopAndCheckNoServers() {
	h.t.Helper()
	h.term()
	procs, err := redisProcesses(h.databasesDir())
	require.NoError(h.t, err)
	require.Empty(h.t, procs, "redis-server processes of the data dir left after SIGTERM")
}

// accounts returns n flexible accounts: the bootstrapped one and n-1 made with
// `clouddb admin` on the data dir while the server runs.
func (h *harness) accounts(n int) []*testAccount {
	h.t.Helper()
	out := []*testAccount{{index: 0, key: harnessKey, secret: harnessSecret}}
	for i := 1; i < n; i++ {
		var stdout, stderr strings.Builder
		require.NoError(h.t, run(context.Background(), append([]string{"admin", "accounts", "create", "--name", fmt.Sprintf("tenant-%d", i)}, h.adminArgs()...), &stdout, &stderr), stderr.String())
		var id int
		_, err := fmt.Sscanf(stdout.String(), "account %d created", &id)
		require.NoError(h.t, err, stdout.String())
		stdout.Reset()
		require.NoError(h.t, run(context.Background(), append([]string{"admin", "keys", "create", "--account", strconv.Itoa(id), "--name", "load"}, h.adminArgs()...), &stdout, &stderr), stderr.String())
		m := regexp.MustCompile(`x-api-key: (\S+)\nx-api-secret-key: (\S+)`).FindStringSubmatch(stdout.String())
		require.NotNil(h.t, m, stdout.String())
		out = append(out, &testAccount{index: i, key: m[1], secret: m[2]})
	}
	ctx := testContext(h.t)
	for _, a := range out {
		c := client.New(h.url, a.key, a.secret)
		acct, err := c.GetAccount(ctx)
		require.NoError(h.t, err)
		a.id = acct.ID
		pms, err := c.ListPaymentMethods(ctx)
		require.NoError(h.t, err)
		require.NotEmpty(h.t, pms)
		a.pm = pms[0].ID
	}
	return out
}

// testAccount is an account the workload drives.
type testAccount struct {
	index       int
	id          int
	key, secret string
	pm          int
}

// redisProc is a redis-server process found in /proc.
type redisProc struct {
	pid, ppid int
	cwd       string
}

// redisProcesses lists the live redis-server processes whose working directory is under
// root (a database's node runs in its data directory, root/<id> or root/<id>/node1). Fork
// children of a server (background saves, full syncs) are left out.
func redisProcesses(root string) ([]redisProc, error) {
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	all := map[int]redisProc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p := "/proc/" + e.Name()
		cmdline, err := os.ReadFile(p + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline), "redis-server") {
			continue
		}
		cwd, err := os.Readlink(p + "/cwd")
		if err != nil || !strings.HasPrefix(cwd, root+string(filepath.Separator)) {
			continue // gone, a zombie, or not ours
		}
		stat, err := os.ReadFile(p + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) S ppid ..."
		i := strings.LastIndexByte(string(stat), ')')
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		all[pid] = redisProc{pid: pid, ppid: ppid, cwd: cwd}
	}
	var out []redisProc
	for _, p := range all {
		if parent, ok := all[p.ppid]; ok && parent.cwd == p.cwd {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out, nil
}

// nodeKey names one node of a database: node 0 runs in the database's directory
// (root/<id>), node 1, which a database has with replication, in its node1 subdirectory.
// Either may be the primary (topology.json in the database's directory says which).
type nodeKey struct{ db, node int }

func (k nodeKey) String() string { return fmt.Sprintf("database %d node %d", k.db, k.node) }

// replicaNodeDir is node 1's directory inside its database's.
const replicaNodeDir = "node1"

// serversByNode groups redis-server processes by the database and node their working
// directory names; processes in any other directory (one deleted under them reads
// "<dir> (deleted)") are returned as strays.
func serversByNode(root string, procs []redisProc) (map[nodeKey][]int, []string) {
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	byNode := map[nodeKey][]int{}
	var strays []string
	for _, p := range procs {
		rel := strings.TrimPrefix(p.cwd, root+string(filepath.Separator))
		dbPart, nodePart, inNode := strings.Cut(rel, string(filepath.Separator))
		id, err := strconv.Atoi(dbPart)
		k := nodeKey{db: id}
		if inNode {
			k.node = 1
		}
		if err != nil || id <= 0 || (inNode && nodePart != replicaNodeDir) {
			strays = append(strays, fmt.Sprintf("pid %d in %q", p.pid, p.cwd))
			continue
		}
		byNode[k] = append(byNode[k], p.pid)
	}
	return byNode, strays
}

// primaryNode reads which node of the database serves its endpoint: the topology file's
// "primary", node 0 when there is none (a database that never failed over may have none).
func primaryNode(t *testing.T, root string, id int) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, strconv.Itoa(id), "topology.json"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	require.NoError(t, err)
	var topo struct {
		Primary *int `json:"primary"`
	}
	require.NoError(t, json.Unmarshal(data, &topo), "topology.json of database %d: %s", id, data)
	require.NotNil(t, topo.Primary, "topology.json of database %d names no primary: %s", id, data)
	require.Contains(t, []int{0, 1}, *topo.Primary, "topology.json of database %d", id)
	return *topo.Primary
}

func dirNames(entries []os.DirEntry) []string {
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func sumValues(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// ---- the workload ----

type workloadOptions struct {
	workersPerAccount int
	// pause is the range of the random pause between two steps of a worker.
	pause [2]time.Duration
	// maxSubscriptions and maxDatabases bound what an account creates (the port range is
	// small); a step that would exceed them does something else.
	maxSubscriptions, maxDatabases int
	// maxCloudAccounts, when set, bounds the cloud accounts of an account.
	maxCloudAccounts int
	// soak adds the remaining requests: every read, subscription updates, cloud-account
	// updates and deletes, tags.
	soak bool
	// replication makes one database create in three ask for replication, and one
	// database update in four turn it on or off.
	replication bool
}

// taskRecord is a task id the API returned, with what it was for.
type taskRecord struct {
	id      string
	account int // index in workload.accounts
	kind    string
	// name is the subscription, database or cloud account a create makes; plan lists a
	// subscription create's databases.
	name  string
	plan  []string
	subID int
	dbID  int
	caID  int
}

// workload drives the API from concurrent workers, several per account, and records every
// task id it is given.
type workload struct {
	accounts []*testAccount
	opts     workloadOptions
	seed     uint64
	base     atomic.Pointer[string]
	http     *http.Client

	mu        sync.Mutex
	records   []*taskRecord
	ambiguous int // writes whose answer was lost (the server died): they may or may not be in the store
	problems  []string
	counts    map[string]int

	reads, writes atomic.Int64
	names         atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newWorkload(h *harness, accounts []*testAccount, seed uint64, o workloadOptions) *workload {
	w := &workload{accounts: accounts, opts: o, seed: seed, counts: map[string]int{},
		http: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 5 * time.Second}}}
	w.setURL(h.url)
	w.ctx, w.cancel = context.WithCancel(context.Background())
	h.t.Cleanup(w.stop) // runs before the harness's: workers stop before servers are killed
	return w
}

func (w *workload) setURL(u string) { w.base.Store(&u) }

func (w *workload) client(a *testAccount) *client.Client {
	return client.New(*w.base.Load(), a.key, a.secret, client.WithHTTPClient(w.http), client.WithPollInterval(50*time.Millisecond))
}

func (w *workload) start() {
	n := 0
	for _, a := range w.accounts {
		for range w.opts.workersPerAccount {
			rng := rand.New(rand.NewPCG(w.seed, uint64(n)+100))
			n++
			w.wg.Go(func() { w.work(a, rng) })
		}
	}
}

// stop ends the workers and waits for them; it may be called more than once.
func (w *workload) stop() {
	w.cancel()
	w.wg.Wait()
	w.http.CloseIdleConnections()
}

func (w *workload) recorded() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.records)
}

func (w *workload) work(a *testAccount, rng *rand.Rand) {
	for w.ctx.Err() == nil {
		w.step(a, rng)
		select {
		case <-w.ctx.Done():
		case <-time.After(randDuration(rng, w.opts.pause[0], w.opts.pause[1])):
		}
	}
}

func (w *workload) problem(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) < 50 {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

// lostAnswer reports whether err means the request got no answer: the server died or
// was stopped under it, or the workload was stopped.
func lostAnswer(err error) bool {
	if client.StatusCode(err) != 0 {
		return false
	}
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.Canceled)
}

// read checks the outcome of a read: an answer, a lost answer, or a 404 (the resource went
// away meanwhile). Anything else is a problem.
func (w *workload) read(what string, err error) bool {
	w.reads.Add(1)
	switch {
	case err == nil:
		return true
	case lostAnswer(err), client.IsNotFound(err):
	default:
		w.problem("%s: %v", what, err)
	}
	return false
}

// submitted records the outcome of a write: a task (recorded), a lost answer (the write
// may or may not have been taken: counted), or an error answer, after which no task may
// exist; only a 404 is expected (the target went away meanwhile).
func (w *workload) submitted(rec *taskRecord, tk *client.Task, err error) {
	w.writes.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[rec.kind]++
	switch {
	case err == nil && tk != nil && tk.ID != "":
		rec.id = tk.ID
		w.records = append(w.records, rec)
	case err == nil:
		w.problems = append(w.problems, fmt.Sprintf("%s: a 2xx answer without a taskId", rec.kind))
	case lostAnswer(err):
		w.ambiguous++
	case client.IsNotFound(err):
	default:
		if len(w.problems) < 50 {
			w.problems = append(w.problems, fmt.Sprintf("%s: %v", rec.kind, err))
		}
	}
}

// Kinds of recorded writes.
const (
	kindSubCreate = "subscription-create"
	kindSubUpdate = "subscription-update"
	kindSubDelete = "subscription-delete"
	kindDBCreate  = "database-create"
	kindDBUpdate  = "database-update"
	kindDBDelete  = "database-delete"
	kindCACreate  = "cloud-account-create"
	kindCAUpdate  = "cloud-account-update"
	kindCADelete  = "cloud-account-delete"
)

// name returns a name no other request of the run uses, so that each create can be
// found (or found missing) by its name.
func (w *workload) name(prefix string, a *testAccount) string {
	return fmt.Sprintf("%s%dx%d", prefix, a.index, w.names.Add(1))
}

func pick[T any](rng *rand.Rand, s []T) (T, bool) {
	var zero T
	if len(s) == 0 {
		return zero, false
	}
	return s[rng.IntN(len(s))], true
}

// step does one random thing as the account: it reads the subscriptions, then writes.
func (w *workload) step(a *testAccount, rng *rand.Rand) {
	ctx := w.ctx
	c := w.client(a)
	list, err := c.ListSubscriptions(ctx)
	if !w.read("GET /subscriptions", err) {
		return
	}
	var active, empty []client.Subscription
	live := 0
	for _, s := range list.Subscriptions {
		live += s.NumberOfDatabases
		if s.Status == "active" {
			active = append(active, s)
			if s.NumberOfDatabases == 0 {
				empty = append(empty, s)
			}
		}
	}
	if w.opts.soak && rng.IntN(3) == 0 {
		w.readAll(c, a, rng, list.Subscriptions)
		return
	}
	r := rng.IntN(100)
	switch {
	case r < 14 && len(list.Subscriptions) < w.opts.maxSubscriptions:
		name := w.name("s", a)
		plan := w.name("p", a)
		q := 1 + rng.IntN(2)
		db := planDB(plan, 0.1)
		db.Quantity = client.Ptr(q)
		rec := &taskRecord{account: a.index, kind: kindSubCreate, name: name, plan: (&clouddb.DatabaseSpec{Name: plan, Quantity: q}).PlanNames()}
		tk, err := c.CreateSubscription(ctx, subscriptionBody(a.pm, name, db))
		w.submitted(rec, tk, err)
	case r < 42 && live < w.opts.maxDatabases:
		sub, ok := pick(rng, active)
		if !ok {
			if sub, ok = pick(rng, list.Subscriptions); !ok {
				return
			}
		}
		name := w.name("d", a)
		body := client.CreateDatabase{Name: client.Ptr(name), DatasetSizeInGB: client.Ptr(0.1),
			Password: client.Ptr(fmt.Sprintf("pw-%s-%08x", name, rng.Uint32()))}
		if rng.IntN(4) == 0 {
			body.DataPersistence = client.Ptr("aof-every-1-second")
		}
		if w.opts.replication && rng.IntN(3) == 0 {
			body.Replication = client.Ptr(true)
		}
		rec := &taskRecord{account: a.index, kind: kindDBCreate, name: name, subID: sub.ID}
		tk, err := c.CreateDatabase(ctx, sub.ID, body)
		w.submitted(rec, tk, err)
	case r < 62:
		sub, db, ok := w.pickDatabase(c, rng, active)
		if !ok {
			return
		}
		var body client.UpdateDatabase
		kinds := 3
		if w.opts.replication {
			kinds = 4
		}
		switch rng.IntN(kinds) {
		case 0:
			body.DatasetSizeInGB = client.Ptr(float64(1+rng.IntN(3)) / 10)
		case 1:
			body.Password = client.Ptr(fmt.Sprintf("up-%s-%08x", db.Name, rng.Uint32()))
		case 2:
			body.DatasetSizeInGB = client.Ptr(float64(1+rng.IntN(3)) / 10)
			body.Password = client.Ptr(fmt.Sprintf("up-%s-%08x", db.Name, rng.Uint32()))
		default:
			body.Replication = client.Ptr(!db.Replication)
		}
		rec := &taskRecord{account: a.index, kind: kindDBUpdate, subID: sub, dbID: db.ID}
		tk, err := c.UpdateDatabase(ctx, sub, db.ID, body)
		w.submitted(rec, tk, err)
	case r < 78:
		sub, db, ok := w.pickDatabase(c, rng, active)
		if !ok {
			return
		}
		rec := &taskRecord{account: a.index, kind: kindDBDelete, subID: sub, dbID: db.ID}
		tk, err := c.DeleteDatabase(ctx, sub, db.ID)
		w.submitted(rec, tk, err)
	case r < 90:
		if w.opts.maxCloudAccounts > 0 {
			list, err := c.ListCloudAccounts(ctx)
			if !w.read("GET /cloud-accounts", err) || len(list.CloudAccounts)-1 >= w.opts.maxCloudAccounts {
				return
			}
		}
		name := w.name("c", a)
		rec := &taskRecord{account: a.index, kind: kindCACreate, name: name}
		tk, err := c.CreateCloudAccount(ctx, client.CreateCloudAccount{Name: client.Ptr(name), Provider: client.Ptr("AWS"),
			AccessKeyID: client.Ptr("AKIA" + strings.ToUpper(name)), AccessSecretKey: client.Ptr(fmt.Sprintf("secret-%08x", rng.Uint32())),
			ConsoleUsername: client.Ptr("ops"), ConsolePassword: client.Ptr("console-pw"), SignInLoginURL: client.Ptr("https://signin.example/console")})
		w.submitted(rec, tk, err)
	case r < 95 && w.opts.soak:
		w.soakWrite(c, a, rng, active)
	default:
		sub, ok := pick(rng, empty)
		if !ok {
			return
		}
		rec := &taskRecord{account: a.index, kind: kindSubDelete, subID: sub.ID}
		tk, err := c.DeleteSubscription(ctx, sub.ID)
		w.submitted(rec, tk, err)
	}
}

// pickDatabase reads the databases of a random active subscription and picks one.
func (w *workload) pickDatabase(c *client.Client, rng *rand.Rand, subs []client.Subscription) (int, client.Database, bool) {
	var withDBs []client.Subscription
	for _, s := range subs {
		if s.NumberOfDatabases > 0 {
			withDBs = append(withDBs, s)
		}
	}
	sub, ok := pick(rng, withDBs)
	if !ok {
		return 0, client.Database{}, false
	}
	page, err := c.ListDatabases(w.ctx, sub.ID, 100, 0)
	if !w.read("GET /subscriptions/{id}/databases", err) {
		return 0, client.Database{}, false
	}
	if len(page.Subscription) != 1 {
		w.problem("GET /subscriptions/%d/databases: %d subscription entries", sub.ID, len(page.Subscription))
		return 0, client.Database{}, false
	}
	db, ok := pick(rng, page.Subscription[0].Databases)
	return sub.ID, db, ok
}

// ---- the checks after the run ----

// verdict sums up the final state.
type verdict struct {
	completed, failed                       int
	databases, subscriptions, cloudAccounts int
	// replicated counts the databases with replication at the end.
	replicated int
	// replicasRemoved counts, per database, the completed updates that turned its
	// replication off: each removed its replica, whose node may then start a new server
	// when replication is turned on again.
	replicasRemoved map[int]int
}

// storeState is everything in the store.
type storeState struct {
	tasks []*clouddb.Task
	dbs   []*clouddb.Database
	subs  []*clouddb.Subscription
	cas   []*clouddb.CloudAccount
}

func readStore(ctx context.Context, c Config) (*storeState, error) {
	db, _, err := openState(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var s storeState
	err = db.View(ctx, func(tx clouddb.Tx) error {
		var qerr error
		if s.tasks, qerr = tx.Tasks(ctx, clouddb.TaskFilter{}); qerr != nil {
			return qerr
		}
		if s.dbs, _, qerr = tx.Databases(ctx, clouddb.DatabaseFilter{}); qerr != nil {
			return qerr
		}
		if s.subs, qerr = tx.Subscriptions(ctx, clouddb.SubscriptionFilter{}); qerr != nil {
			return qerr
		}
		s.cas, qerr = tx.CloudAccounts(ctx, clouddb.CloudAccountFilter{})
		return qerr
	})
	sort.Slice(s.tasks, func(i, j int) bool { return s.tasks[i].Seq < s.tasks[j].Seq })
	return &s, err
}

// unsettled says what still waits for the engine or the reconciler, or "" when nothing
// does.
func (s *storeState) unsettled() string {
	var out []string
	for _, t := range s.tasks {
		if !t.Status.Final() {
			out = append(out, fmt.Sprintf("task %s (%s) %s", t.ID, t.CommandType, t.Status))
		}
	}
	for _, d := range s.dbs {
		if !d.Status.Settled() {
			out = append(out, fmt.Sprintf("database %d %s", d.ID, d.Status))
		}
	}
	for _, sub := range s.subs {
		if sub.Status != clouddb.SubscriptionActive {
			out = append(out, fmt.Sprintf("subscription %d %s", sub.ID, sub.Status))
		}
	}
	for _, c := range s.cas {
		if c.Status != clouddb.CloudAccountActive {
			out = append(out, fmt.Sprintf("cloud account %d %s", c.ID, c.Status))
		}
	}
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("and %d more", len(out)-10))
	}
	return strings.Join(out, "; ")
}

// settle waits until every task is final and every resource settled; it returns the
// state then.
func (h *harness) settle(within time.Duration) *storeState {
	h.t.Helper()
	ctx := testContext(h.t)
	deadline := time.Now().Add(within)
	for {
		s, err := readStore(ctx, h.config())
		require.NoError(h.t, err)
		left := s.unsettled()
		if left == "" {
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("not settled within %s: %s", within, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func decodePayload(t *testing.T, tk *clouddb.Task, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(tk.Payload, v), "payload of task %s (%s)", tk.ID, tk.CommandType)
}

// verify waits until everything settled, then checks the store, the API and the
// processes against the recorded tasks.
func (h *harness) verify(w *workload, within time.Duration) verdict {
	t := h.t
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Empty(t, w.problems, "unexpected answers during the workload")

	s := h.settle(within)
	var v verdict
	v.databases, v.subscriptions = len(s.dbs), len(s.subs)
	for _, c := range s.cas {
		if c.AccountID != 0 {
			v.cloudAccounts++
		}
	}

	// Every task the API returned is in the store, final, of its account; the store holds
	// no task beyond those and the writes whose answer was lost.
	byID := map[string]*clouddb.Task{}
	for _, tk := range s.tasks {
		byID[tk.ID] = tk
		require.True(t, tk.Status.Final(), "task %s is %s", tk.ID, tk.Status)
		if tk.Status == clouddb.TaskFailed {
			require.NotNil(t, tk.Error, "failed task %s has no error", tk.ID)
			require.NotEqual(t, clouddb.ErrTypeGeneral, tk.Error.Type, "task %s (%s) failed with an internal error: %+v", tk.ID, tk.CommandType, tk.Error)
			v.failed++
		} else {
			require.Nil(t, tk.Error)
			v.completed++
		}
	}
	recorded := map[string]bool{}
	for _, r := range w.records {
		tk, ok := byID[r.id]
		require.True(t, ok, "task %s (%s) returned by the API is lost", r.id, r.kind)
		require.Equal(t, w.accounts[r.account].id, tk.AccountID, "task %s", r.id)
		recorded[r.id] = true
	}
	require.LessOrEqual(t, len(s.tasks)-len(recorded), w.ambiguous,
		"the store holds %d tasks no answer named, but only %d writes lost their answer", len(s.tasks)-len(recorded), w.ambiguous)

	// The API shows the same: every recorded task, final, with the right response. GET
	// /tasks lists the most recently updated ones up to its cap; the others are read
	// one by one.
	ctx := testContext(t)
	for _, a := range w.accounts {
		c := client.New(h.url, a.key, a.secret)
		list, err := c.ListTasks(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(list), cloudapi.MaxListedTasks)
		seen := map[string]client.Task{}
		for _, tk := range list {
			seen[tk.ID] = tk
		}
		for _, r := range w.records {
			if r.account != a.index {
				continue
			}
			tk, ok := seen[r.id]
			if !ok {
				require.Len(t, list, cloudapi.MaxListedTasks, "GET /tasks of account %d lacks task %s (%s) below its cap", a.id, r.id, r.kind)
				got, gerr := c.GetTask(ctx, r.id)
				require.NoError(t, gerr, "GET /tasks/%s of account %d", r.id, a.id)
				tk = *got
			}
			require.Contains(t, []string{client.TaskCompleted, client.TaskFailed}, tk.Status, "task %s", r.id)
			require.NotNil(t, tk.Response, "task %s", r.id)
			if tk.Status == client.TaskFailed {
				require.NotNil(t, tk.Response.Error, "task %s", r.id)
			} else {
				require.Nil(t, tk.Response.Error, "task %s", r.id)
			}
		}
	}

	h.checkEffects(s)
	exp := h.expectations(s)
	h.checkServers(s, w, exp)
	v.replicasRemoved = map[int]int{}
	for id, e := range exp {
		if e.replicasRemoved > 0 {
			v.replicasRemoved[id] = e.replicasRemoved
		}
	}
	for _, d := range s.dbs {
		if d.Spec.Replication {
			v.replicated++
		}
	}
	return v
}

// checkEffects checks that each create took effect exactly once when its task completed,
// and not at all when it failed, and that deletes removed what they deleted.
func (h *harness) checkEffects(s *storeState) {
	t := h.t
	t.Helper()
	completed := func(tk *clouddb.Task) bool { return tk.Status == clouddb.TaskCompleted }
	deletedDB, deletedSub, deletedCA := map[int]bool{}, map[int]bool{}, map[int]bool{}
	deletedInSub := map[int]map[int]bool{} // subscription id -> ids of its deleted databases
	madeByCreate := map[int]bool{}         // ids of databases made by a database create
	for _, tk := range s.tasks {
		if !completed(tk) {
			continue
		}
		switch tk.CommandType {
		case clouddb.CommandDatabaseCreate:
			madeByCreate[tk.ResourceID] = true
		case clouddb.CommandDatabaseDelete:
			deletedDB[tk.DatabaseID] = true
			if deletedInSub[tk.SubscriptionID] == nil {
				deletedInSub[tk.SubscriptionID] = map[int]bool{}
			}
			deletedInSub[tk.SubscriptionID][tk.DatabaseID] = true
		case clouddb.CommandSubscriptionDelete:
			deletedSub[tk.SubscriptionID] = true
		case clouddb.CommandCloudAccountDelete:
			deletedCA[tk.CloudAccountID] = true
		}
	}
	dbsByName := map[string][]*clouddb.Database{}
	dbByID := map[int]*clouddb.Database{}
	for _, d := range s.dbs {
		dbsByName[d.Spec.Name] = append(dbsByName[d.Spec.Name], d)
		dbByID[d.ID] = d
	}
	subsByName := map[string][]*clouddb.Subscription{}
	subByID := map[int]*clouddb.Subscription{}
	for _, sub := range s.subs {
		subsByName[sub.Name] = append(subsByName[sub.Name], sub)
		subByID[sub.ID] = sub
	}
	casByName := map[string][]*clouddb.CloudAccount{}
	caByID := map[int]*clouddb.CloudAccount{}
	for _, c := range s.cas {
		casByName[c.Name] = append(casByName[c.Name], c)
		caByID[c.ID] = c
	}
	for id := range deletedDB {
		require.NotContains(t, dbByID, id, "database %d exists although its delete completed", id)
	}
	for id := range deletedSub {
		require.NotContains(t, subByID, id, "subscription %d exists although its delete completed", id)
	}
	for id := range deletedCA {
		require.NotContains(t, caByID, id, "cloud account %d exists although its delete completed", id)
	}
	creator := map[int]int{} // database id -> how many completed creates made it

	for _, tk := range s.tasks {
		switch tk.CommandType {
		case clouddb.CommandDatabaseCreate:
			var spec clouddb.DatabaseSpec
			decodePayload(t, tk, &spec)
			got := dbsByName[spec.Name]
			require.LessOrEqual(t, len(got), 1, "database name %q exists %d times (task %s)", spec.Name, len(got), tk.ID)
			switch {
			case !completed(tk):
				require.Empty(t, got, "database %q exists although its create task %s failed", spec.Name, tk.ID)
			case deletedDB[tk.ResourceID]:
				require.Empty(t, got, "database %q (%d) exists although its delete completed", spec.Name, tk.ResourceID)
			default:
				require.Len(t, got, 1, "database %q of completed task %s is missing", spec.Name, tk.ID)
				d := got[0]
				require.Equal(t, tk.ResourceID, d.ID, "database %q", spec.Name)
				require.Equal(t, tk.SubscriptionID, d.SubscriptionID, "database %q", spec.Name)
				require.Equal(t, tk.AccountID, d.AccountID, "database %q", spec.Name)
				creator[d.ID]++
			}
		case clouddb.CommandSubscriptionCreate:
			var spec clouddb.SubscriptionSpec
			decodePayload(t, tk, &spec)
			got := subsByName[spec.Name]
			require.LessOrEqual(t, len(got), 1, "subscription name %q exists %d times", spec.Name, len(got))
			switch {
			case !completed(tk):
				require.Empty(t, got, "subscription %q exists although its create task %s failed", spec.Name, tk.ID)
			case deletedSub[tk.ResourceID]:
				require.Empty(t, got, "subscription %q (%d) exists although its delete completed", spec.Name, tk.ResourceID)
			default:
				require.Len(t, got, 1, "subscription %q of completed task %s is missing", spec.Name, tk.ID)
				require.Equal(t, tk.ResourceID, got[0].ID)
				require.Equal(t, tk.AccountID, got[0].AccountID)
			}
			// The creation-plan databases: each exists once in the subscription, unless a
			// completed delete removed it (a deleted database of the subscription that no
			// database create made).
			var plan []string
			for _, d := range spec.Databases {
				plan = append(plan, d.PlanNames()...)
			}
			existing := 0
			for _, name := range plan {
				got := dbsByName[name]
				require.LessOrEqual(t, len(got), 1, "database name %q exists %d times", name, len(got))
				if !completed(tk) {
					require.Empty(t, got, "database %q exists although its subscription create task %s failed", name, tk.ID)
					continue
				}
				if len(got) == 1 {
					require.Equal(t, tk.ResourceID, got[0].SubscriptionID, "database %q", name)
					require.Equal(t, tk.AccountID, got[0].AccountID, "database %q", name)
					creator[got[0].ID]++
					existing++
				}
			}
			if completed(tk) {
				deletedPlan := 0
				for id := range deletedInSub[tk.ResourceID] {
					if !madeByCreate[id] {
						deletedPlan++
					}
				}
				require.Equal(t, len(plan), existing+deletedPlan,
					"subscription %d (task %s): %d creation-plan databases, %d exist and %d were deleted", tk.ResourceID, tk.ID, len(plan), existing, deletedPlan)
			}
		case clouddb.CommandCloudAccountCreate:
			var spec clouddb.CloudAccountSpec
			decodePayload(t, tk, &spec)
			require.NotNil(t, spec.Name)
			got := casByName[*spec.Name]
			require.LessOrEqual(t, len(got), 1, "cloud account name %q exists %d times", *spec.Name, len(got))
			switch {
			case !completed(tk):
				require.Empty(t, got, "cloud account %q exists although its create task %s failed", *spec.Name, tk.ID)
			case deletedCA[tk.ResourceID]:
				require.Empty(t, got, "cloud account %q (%d) exists although its delete completed", *spec.Name, tk.ResourceID)
			default:
				require.Len(t, got, 1, "cloud account %q of completed task %s is missing", *spec.Name, tk.ID)
				require.Equal(t, tk.ResourceID, got[0].ID)
				require.Equal(t, tk.AccountID, got[0].AccountID)
			}
		}
	}
	// Every row was made by exactly one completed create.
	for _, d := range s.dbs {
		require.Equal(t, 1, creator[d.ID], "database %d (%q) was made by %d completed creates", d.ID, d.Spec.Name, creator[d.ID])
		_, ok := subByID[d.SubscriptionID]
		require.True(t, ok, "database %d belongs to a missing subscription %d", d.ID, d.SubscriptionID)
	}
}

// expectedDatabase is what the completed tasks say a database must run with.
type expectedDatabase struct {
	password    string // "" when only the server knows it (a creation-plan database never updated)
	sizeGB      float64
	replication bool
	// replicasRemoved counts the completed updates that turned replication off.
	replicasRemoved int
}

// expectations replays the completed creates and updates in submission order. A
// creation-plan database deleted since is known only by its updates: its entry counts
// its replica's removals, nothing else.
func (h *harness) expectations(s *storeState) map[int]*expectedDatabase {
	t := h.t
	exp := map[int]*expectedDatabase{}
	planReplication := map[int]bool{} // subscription id -> whether a database of its creation plan has replication
	for _, tk := range s.tasks {
		if tk.Status != clouddb.TaskCompleted {
			continue
		}
		switch tk.CommandType {
		case clouddb.CommandDatabaseCreate:
			var spec clouddb.DatabaseSpec
			decodePayload(t, tk, &spec)
			exp[tk.ResourceID] = &expectedDatabase{password: spec.Password, sizeGB: spec.DatasetSizeGB(), replication: spec.Replication}
		case clouddb.CommandSubscriptionCreate:
			var spec clouddb.SubscriptionSpec
			decodePayload(t, tk, &spec)
			for _, ds := range spec.Databases {
				planReplication[tk.ResourceID] = planReplication[tk.ResourceID] || ds.Replication
				for _, name := range ds.PlanNames() {
					for _, d := range s.dbs {
						if d.SubscriptionID == tk.ResourceID && d.Spec.Name == name {
							exp[d.ID] = &expectedDatabase{sizeGB: ds.DatasetSizeGB(), replication: ds.Replication}
						}
					}
				}
			}
		case clouddb.CommandDatabaseUpdate:
			var u clouddb.DatabaseUpdate
			decodePayload(t, tk, &u)
			e := exp[tk.DatabaseID]
			if e == nil {
				// A creation-plan database deleted since: only live ones are looked up.
				// Its replication is followed still, as its replica's removals count
				// (see serverTracker.checkExcept); it starts as its plan's.
				require.False(t, slices.ContainsFunc(s.dbs, func(d *clouddb.Database) bool { return d.ID == tk.DatabaseID }),
					"update task %s of database %d completed before any create of it", tk.ID, tk.DatabaseID)
				e = &expectedDatabase{replication: planReplication[tk.SubscriptionID]}
				exp[tk.DatabaseID] = e
			}
			if u.Password != nil {
				e.password = *u.Password
			}
			if u.DatasetSizeInGB != nil {
				e.sizeGB = *u.DatasetSizeInGB
			}
			if u.Replication != nil {
				if e.replication && !*u.Replication {
					e.replicasRemoved++
				}
				e.replication = *u.Replication
			}
		}
	}
	return exp
}

// checkServers checks the real world: every database is active and answers an
// authenticated PING with the password the API gives (the one its last completed change
// set), from the one server process of its primary node, with the size it was given;
// with replication its other node runs one server too, a replica the primary counts as
// connected, and without, that node runs nothing and a node1 directory is gone; no other
// redis-server runs from the data dir and no directory is left of a deleted database.
func (h *harness) checkServers(s *storeState, w *workload, exp map[int]*expectedDatabase) {
	t := h.t
	t.Helper()
	want := map[int]*clouddb.Database{}
	for _, d := range s.dbs {
		require.Equal(t, clouddb.DatabaseActive, d.Status, "database %d (%q): %s", d.ID, d.Spec.Name, d.StatusDetail)
		want[d.ID] = d
	}

	procs, err := redisProcesses(h.databasesDir())
	require.NoError(t, err)
	byNode, strays := serversByNode(h.databasesDir(), procs)
	require.Empty(t, strays, "redis-server processes in no database node's directory")
	for k, pids := range byNode {
		require.Contains(t, want, k.db, "orphan: redis-server pids %v run for %s, whose database does not exist", pids, k)
		require.Len(t, pids, 1, "duplicate: %s has redis-server pids %v", k, pids)
	}
	primaries := map[int]int{} // database id -> its primary's pid
	for id, d := range want {
		p := primaryNode(t, h.databasesDir(), id)
		primary, replica := nodeKey{id, p}, nodeKey{id, 1 - p}
		require.Contains(t, byNode, primary, "database %d is active but no redis-server runs on its primary node %d", id, p)
		primaries[id] = byNode[primary][0]
		if d.Spec.Replication {
			require.Contains(t, byNode, replica, "database %d has replication but no redis-server runs on its replica node %d", id, replica.node)
			continue
		}
		require.NotContains(t, byNode, replica, "database %d has no replication but its node %d still runs a server", id, replica.node)
		if p == 0 {
			left, rerr := os.ReadDir(filepath.Join(h.databasesDir(), strconv.Itoa(id), replicaNodeDir))
			require.True(t, errors.Is(rerr, os.ErrNotExist), "database %d has no replication but its replica's directory is left, holding %v (%v)", id, dirNames(left), rerr)
		}
	}
	entries, err := os.ReadDir(h.databasesDir())
	require.NoError(t, err)
	var dirs []int
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		require.NoError(t, err, "unexpected entry %q in %s", e.Name(), h.databasesDir())
		dirs = append(dirs, id)
	}
	var ids []int
	for id := range want {
		ids = append(ids, id)
	}
	slices.Sort(dirs)
	slices.Sort(ids)
	require.Equal(t, ids, dirs, "database directories left behind or missing")

	ctx := testContext(t)
	for _, a := range w.accounts {
		c := client.New(h.url, a.key, a.secret)
		subs, err := c.ListSubscriptions(ctx)
		require.NoError(t, err)
		for _, sub := range subs.Subscriptions {
			dbs, err := c.AllDatabases(ctx, sub.ID)
			require.NoError(t, err)
			for _, db := range dbs {
				d := want[db.ID]
				require.NotNil(t, d, "the API shows database %d, which the store does not have", db.ID)
				require.Equal(t, "active", db.Status)
				e := exp[db.ID]
				require.NotNil(t, e, "database %d", db.ID)
				if e.password != "" {
					require.Equal(t, e.password, db.Security.Password, "database %d has the password of its last completed change", db.ID)
				}
				require.Equal(t, e.replication, db.Replication, "database %d has the replication of its last completed change", db.ID)
				require.Equal(t, e.replication, d.Spec.Replication, "database %d: the store's replication", db.ID)
				r := redis.NewClient(&redis.Options{Addr: db.PublicEndpoint, Password: db.Security.Password, MaxRetries: -1, DialTimeout: 2 * time.Second})
				require.NoError(t, r.Ping(ctx).Err(), "authenticated PING of database %d on %s", db.ID, db.PublicEndpoint)
				info, err := r.Info(ctx, "server").Result()
				require.NoError(t, err)
				require.Equal(t, strconv.Itoa(primaries[db.ID]), infoValue(info, "process_id"), "database %d answers from its primary's server process", db.ID)
				if db.Replication {
					// A replica started before its primary connects at its next retry (a
					// second): active says the servers run, not that the link is up yet.
					var repl string
					deadline := time.Now().Add(5 * time.Second)
					for {
						repl, err = r.Info(ctx, "replication").Result()
						require.NoError(t, err)
						if infoValue(repl, "connected_slaves") == "1" || time.Now().After(deadline) {
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
					require.Equal(t, "master", infoValue(repl, "role"), "database %d", db.ID)
					require.Equal(t, "1", infoValue(repl, "connected_slaves"), "database %d: its replica follows its primary\n%s", db.ID, repl)
				}
				maxmem, err := internalRedis(t, h.databasesDir(), db.ID, db.PublicEndpoint).ConfigGet(ctx, "maxmemory").Result()
				require.NoError(t, err)
				require.Equal(t, strconv.FormatInt(int64(e.sizeGB*(1<<30)), 10), maxmem["maxmemory"], "database %d runs with the size of its last completed change", db.ID)
				r.Close()
				delete(want, db.ID)
			}
		}
	}
	require.Empty(t, want, "databases in the store that no account's API shows")
}

func infoValue(info, key string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+":"); ok {
			return v
		}
	}
	return ""
}

// readAll reads a few random things the account can see (every kind of GET).
func (w *workload) readAll(c *client.Client, a *testAccount, rng *rand.Rand, subs []client.Subscription) {
	ctx := w.ctx
	sub, haveSub := pick(rng, subs)
	for range 1 + rng.IntN(3) {
		var err error
		what := ""
		switch rng.IntN(16) {
		case 0:
			what = "GET /"
			_, err = c.GetAccount(ctx)
		case 1:
			what = "GET /payment-methods"
			_, err = c.ListPaymentMethods(ctx)
		case 2:
			what = "GET /regions"
			_, err = c.ListRegions(ctx)
		case 3:
			what = "GET /data-persistence"
			_, err = c.ListDataPersistence(ctx)
		case 4:
			what = "GET /database-modules"
			_, err = c.ListModules(ctx)
		case 5:
			what = "GET /cloud-accounts"
			var list *client.CloudAccountList
			if list, err = c.ListCloudAccounts(ctx); err == nil {
				if ca, ok := pick(rng, list.CloudAccounts); ok {
					w.read("GET /cloud-accounts/{id}", ignoreValue(c.GetCloudAccount(ctx, ca.ID)))
				}
			}
		case 6:
			what = "GET /tasks"
			var tasks []client.Task
			if tasks, err = c.ListTasks(ctx); err == nil {
				if tk, ok := pick(rng, tasks); ok {
					w.read("GET /tasks/{id}", ignoreValue(c.GetTask(ctx, tk.ID)))
				}
			}
		case 7:
			what = "GET /logs"
			_, err = c.Logs(ctx, client.LogQuery{Limit: 50})
		case 8:
			if !haveSub {
				continue
			}
			what = "GET /subscriptions/{id}"
			_, err = c.GetSubscription(ctx, sub.ID)
		case 9:
			if !haveSub {
				continue
			}
			what = "GET /subscriptions/{id}/maintenance-windows"
			_, err = c.GetMaintenanceWindows(ctx, sub.ID)
		case 10:
			if !haveSub {
				continue
			}
			what = "GET /subscriptions/{id}/pricing"
			_, err = c.GetPricing(ctx, sub.ID)
		case 11:
			if !haveSub {
				continue
			}
			what = "GET /subscriptions/redis-versions"
			_, err = c.RedisVersions(ctx, sub.ID)
		default:
			if !haveSub {
				continue
			}
			what = "GET /subscriptions/{id}/databases"
			var page *client.DatabaseList
			if page, err = c.ListDatabases(ctx, sub.ID, 100, 0); err == nil && len(page.Subscription) == 1 {
				if db, ok := pick(rng, page.Subscription[0].Databases); ok {
					w.read("GET /subscriptions/{id}/databases/{id}", ignoreValue(c.GetDatabase(ctx, sub.ID, db.ID)))
					w.read("GET /subscriptions/{id}/databases/{id}/tags", ignoreValue(c.GetDatabaseTags(ctx, sub.ID, db.ID)))
				}
			}
		}
		w.read(what, err)
	}
}

func ignoreValue[T any](_ T, err error) error { return err }

// soakWrite makes the writes only the soak makes: subscription updates (the body
// Terraform sends), cloud-account updates and deletes, and tags (answered at once).
func (w *workload) soakWrite(c *client.Client, a *testAccount, rng *rand.Rand, active []client.Subscription) {
	ctx := w.ctx
	switch rng.IntN(4) {
	case 0:
		sub, ok := pick(rng, active)
		if !ok {
			return
		}
		rec := &taskRecord{account: a.index, kind: kindSubUpdate, subID: sub.ID}
		tk, err := c.UpdateSubscription(ctx, sub.ID, client.UpdateSubscription{Name: client.Ptr(sub.Name), PaymentMethodID: client.Ptr(a.pm),
			PublicEndpointAccess: client.Ptr(rng.IntN(2) == 0)})
		w.submitted(rec, tk, err)
	case 1, 2:
		list, err := c.ListCloudAccounts(ctx)
		if !w.read("GET /cloud-accounts", err) {
			return
		}
		var own []client.CloudAccount
		for _, ca := range list.CloudAccounts {
			if ca.ID != client.InternalCloudAccountID && ca.Status == client.CloudAccountActive {
				own = append(own, ca)
			}
		}
		ca, ok := pick(rng, own)
		if !ok {
			return
		}
		if rng.IntN(2) == 0 {
			rec := &taskRecord{account: a.index, kind: kindCAUpdate, caID: ca.ID}
			tk, err := c.UpdateCloudAccount(ctx, ca.ID, client.UpdateCloudAccount{Name: client.Ptr(ca.Name),
				AccessKeyID: client.Ptr(fmt.Sprintf("AKIA%08X", rng.Uint32())), AccessSecretKey: client.Ptr(fmt.Sprintf("secret-%08x", rng.Uint32()))})
			w.submitted(rec, tk, err)
		} else {
			rec := &taskRecord{account: a.index, kind: kindCADelete, caID: ca.ID}
			tk, err := c.DeleteCloudAccount(ctx, ca.ID)
			w.submitted(rec, tk, err)
		}
	default:
		sub, db, ok := w.pickDatabase(c, rng, active)
		if !ok {
			return
		}
		tags := []client.Tag{{Key: "env", Value: fmt.Sprintf("v%d", rng.IntN(100))}}
		got, err := c.PutDatabaseTags(ctx, sub, db.ID, tags)
		w.writes.Add(1)
		if err == nil && !slices.Equal(got, tags) {
			w.problem("PUT tags of database %d answered %v, want %v", db.ID, got, tags)
		}
		w.read("PUT /subscriptions/{id}/databases/{id}/tags", err)
	}
}

// serverTracker watches the redis-server processes of the data dir while the service runs
// and is crashed: a server left running by a crashed clouddb must be adopted, never
// started again, so within an epoch (a graceful stop stops every server and starts a new
// one) each node of each database is served by one pid only, and never by two at once.
// The one expected exception is a replica removed because replication was turned off:
// its node starts a new server if replication is turned on again (see checkExcept).
type serverTracker struct {
	root   string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	epoch      int
	pids       map[nodeKey][]int // node -> the pids seen for it in this epoch, in order
	violations []string
	replaced   []replacement
	scans      int
	all        map[int]bool // every pid seen
}

// replacement is a node's server that a new pid took over from.
type replacement struct {
	node     nodeKey
	old, new int
	epoch    int
}

func (r replacement) String() string {
	return fmt.Sprintf("%s: redis-server pid %d replaced pid %d (epoch %d): a running server was started again instead of adopted",
		r.node, r.new, r.old, r.epoch)
}

func newServerTracker(t *testing.T, root string) *serverTracker {
	ctx, cancel := context.WithCancel(context.Background())
	st := &serverTracker{root: root, cancel: cancel, pids: map[nodeKey][]int{}, all: map[int]bool{}}
	st.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			st.scan()
		}
	})
	t.Cleanup(st.stop)
	return st
}

func (st *serverTracker) stop() {
	st.cancel()
	st.wg.Wait()
}

// newEpoch forgets the pids seen: after a graceful stop the servers are started anew.
func (st *serverTracker) newEpoch() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.epoch++
	st.pids = map[nodeKey][]int{}
}

func (st *serverTracker) scan() {
	procs, err := redisProcesses(st.root)
	if err != nil {
		return
	}
	byNode, _ := serversByNode(st.root, procs)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.scans++
	for k, pids := range byNode {
		if len(pids) > 1 && len(st.violations) < 20 {
			st.violations = append(st.violations, fmt.Sprintf("%s has redis-server pids %v at once", k, pids))
		}
		for _, pid := range pids {
			st.all[pid] = true
			seen := st.pids[k]
			if slices.Contains(seen, pid) {
				continue
			}
			st.pids[k] = append(seen, pid)
			if len(seen) > 0 && len(st.replaced) < 100 {
				st.replaced = append(st.replaced, replacement{node: k, old: seen[len(seen)-1], new: pid, epoch: st.epoch})
			}
		}
	}
}

// seen is how many server processes the tracker saw.
func (st *serverTracker) seen() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.all)
}

// check reports what the tracker saw: no server of any node was replaced or doubled.
func (st *serverTracker) check(t *testing.T) {
	t.Helper()
	st.checkExcept(t, nil)
}

// checkExcept is check for a workload that turns replication off and on again:
// replicasRemoved[id] completed updates removed database id's replica, so its replica
// node (node 1: no primary fails in these runs, so node 0 stays the primary) may have
// that many new servers. Any other replacement is a violation.
func (st *serverTracker) checkExcept(t *testing.T, replicasRemoved map[int]int) {
	t.Helper()
	st.stop()
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Positive(t, st.scans)
	excused := map[int]int{}
	violations := slices.Clone(st.violations)
	for _, r := range st.replaced {
		if r.node.node == 1 && excused[r.node.db] < replicasRemoved[r.node.db] {
			excused[r.node.db]++
			continue
		}
		violations = append(violations, r.String())
	}
	require.Empty(t, violations, "database servers restarted or duplicated while clouddb was crashed and restarted")
}
