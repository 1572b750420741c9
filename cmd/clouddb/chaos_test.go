package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
)

// TestChaos is the short chaos run of `make test` (the long one is TestSoakChaos, in
// `make soak`): tenants attack their own servers with their own passwords while tasks run,
// servers are killed, a dead server's port is taken, and the data dir fills up.
func TestChaos(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosOptions{tenants: 3, rounds: 1, loadPerTenant: 4, settle: 60 * time.Second})
}

type chaosOptions struct {
	tenants int
	// rounds of faults: each tenant tries every administrative command, a server is
	// killed, another's port is taken while it is dead, and the disk fills and empties.
	rounds int
	// loadPerTenant is how many database creates each tenant submits during the faults.
	loadPerTenant int
	// settle bounds the wait for every task and database to settle at the end.
	settle time.Duration
}

// adminCommands are what a tenant tries on its own server with its own password. Each
// must be refused (NOPERM, or an unknown command); the ones that move the server (bind,
// port, SHUTDOWN) come last, on the connection already open.
var adminCommands = [][]any{
	{"CONFIG", "SET", "maxmemory", "0"},
	{"CONFIG", "SET", "appendonly", "yes"},
	{"CONFIG", "SET", "save", "1 1"},
	{"CONFIG", "GET", "requirepass"},
	{"CONFIG", "RESETSTAT"},
	{"ACL", "SETUSER", "intruder", "on", ">intruder-pw", "~*", "+@all"},
	{"ACL", "DELUSER", "clouddb-internal"},
	{"ACL", "SAVE"},
	{"MODULE", "LIST"},
	{"MODULE", "LOAD", "/nonexistent/module.so"},
	{"DEBUG", "SLEEP", "0"},
	{"SAVE"},
	{"BGSAVE"},
	{"BGREWRITEAOF"},
	{"REPLICAOF", "169.254.169.254", "6379"},
	{"SLAVEOF", "NO", "ONE"},
	{"MIGRATE", "169.254.169.254", "6379", "", "0", "100", "KEYS", "k"},
	{"FAILOVER"},
	{"CLUSTER", "RESET"},
	{"CONFIG", "REWRITE"},
	{"CONFIG", "SET", "bind", "127.0.0.2"},
	{"CONFIG", "SET", "port", "0"}, // the port is filled in per tenant
	{"SHUTDOWN", "NOSAVE"},
}

// streamCommands take over the connection (replication streams), each on its own.
var streamCommands = [][]any{{"SYNC"}, {"PSYNC", "?", "-1"}}

// chaosTenant is an account with its subscription and its own database.
type chaosTenant struct {
	acct   *testAccount
	c      *client.Client
	subID  int
	db     *client.Database
	secret string // clouddb's internal user's password on db's server

	// portTaken: the test held the port of db while its server was dead, so db may
	// rightly end in error.
	portTaken bool

	mu      sync.Mutex
	tasks   []chaosTask
	allowed []string // admin commands that were not refused
}

type chaosTask struct{ id, name string }

func (tn *chaosTenant) record(id, name string) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.tasks = append(tn.tasks, chaosTask{id, name})
}

func runChaos(t *testing.T, o chaosOptions) {
	begin := time.Now()
	bin := buildBinary(t)
	// Ports for every database the run makes (blocks of 12), and one block to spare.
	blocks := (o.tenants*(2+o.loadPerTenant))/12 + 2
	h := newHarness(t, bin, portBlocks(t, blocks), "--rate-limit", "0", "--log-level", "warn", "--task-lease", "2s")
	tmpfs := mountChaosTmpfs(t, h)
	h.start()
	pid := h.pid()
	ctx := testContext(t)
	if o.settle > 90*time.Second { // the long run outlasts testContext's two minutes
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 4*o.settle)
		t.Cleanup(cancel)
	}

	tenants := setUpTenants(t, ctx, h, o.tenants)

	// The load: each tenant creates databases while the faults happen.
	var load sync.WaitGroup
	for _, tn := range tenants {
		load.Go(func() {
			for i := range o.loadPerTenant {
				name := fmt.Sprintf("load-%d", i)
				task, err := tn.c.CreateDatabase(ctx, tn.subID, client.CreateDatabase{Name: client.Ptr(name), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("load-pw")})
				if err != nil {
					// A full disk may refuse the request itself (507); nothing was accepted.
					var cerr *client.Error
					if errors.As(err, &cerr) && cerr.StatusCode == 507 {
						time.Sleep(200 * time.Millisecond)
						continue
					}
					t.Errorf("tenant %d: create %s: %v", tn.acct.id, name, err)
					return
				}
				tn.record(task.ID, name)
				time.Sleep(150 * time.Millisecond)
			}
		})
	}

	for round := range o.rounds {
		// Every tenant attacks its own server at once (but those whose server the test
		// brought down: it may rightly stay down).
		var attacks sync.WaitGroup
		for _, tn := range tenants {
			if !tn.portTaken {
				attacks.Go(func() { tn.tryAdminCommands(t, ctx, adminCommands) })
			}
		}
		attacks.Wait()

		// kill -9 of one tenant's server, and the server of every load database.
		var healthy []*chaosTenant
		for _, tn := range tenants {
			if !tn.portTaken {
				healthy = append(healthy, tn)
			}
		}
		victim := healthy[round%len(healthy)]
		killServer(t, h, victim.db.ID)
		killLoadServers(t, h, tenants)

		// Another's server dies and its port is taken while the supervisor restarts it;
		// one tenant at least is spared, so that the isolation checks have a server to
		// look at.
		if len(healthy) > 1 {
			taken := healthy[(round+1)%len(healthy)]
			port := portOf(t, taken.db.PublicEndpoint)
			killServer(t, h, taken.db.ID)
			if ln := takePort(port, 2*time.Second); ln != nil {
				taken.portTaken = true
				time.Sleep(3 * time.Second)
				ln.Close()
				t.Logf("round %d: held port %d of database %d for 3s", round+1, port, taken.db.ID)
			} else {
				t.Logf("round %d: the supervisor took port %d back before the test could", round+1, port)
			}
		}

		// The disk fills up, and empties.
		if tmpfs != "" {
			free := fillDisk(t, tmpfs)
			time.Sleep(2 * time.Second)
			free()
		}
		requireAlive(t, h, pid)
	}
	load.Wait()

	// A last attack that does not stop the server, so that nothing restarts it from
	// clouddb's own config file before the end state is read: what it changed would stay.
	var attacks sync.WaitGroup
	for _, tn := range tenants {
		if tn.portTaken { // its server may rightly be down
			continue
		}
		attacks.Go(func() { tn.tryAdminCommands(t, ctx, adminCommands[:len(adminCommands)-3]) })
	}
	attacks.Wait()

	// The end state: clouddb still runs (the same process), every task reached exactly one
	// final state, every create took effect once if it completed and not at all
	// otherwise, and every database is active, or in error with a reason.
	requireAlive(t, h, pid)
	s := settleChaos(t, h, o.settle)
	byID := map[string]*clouddb.Task{}
	for _, tk := range s.tasks {
		require.NotContains(t, byID, tk.ID, "task %s stored twice", tk.ID)
		byID[tk.ID] = tk
	}
	dbsBySub := map[int][]*clouddb.Database{}
	for _, d := range s.dbs {
		dbsBySub[d.SubscriptionID] = append(dbsBySub[d.SubscriptionID], d)
		if d.Status == clouddb.DatabaseError {
			require.NotEmpty(t, d.StatusDetail, "database %d is in error without a reason", d.ID)
		} else {
			require.Equal(t, clouddb.DatabaseActive, d.Status, "database %d", d.ID)
		}
	}
	completed, failed := 0, 0
	failures := map[string]int{} // failed creates by error type
	for _, tn := range tenants {
		names := map[string]int{}
		for _, d := range dbsBySub[tn.subID] {
			require.Equal(t, tn.acct.id, d.AccountID, "database %d", d.ID)
			api, err := tn.c.GetDatabase(ctx, tn.subID, d.ID)
			require.NoError(t, err)
			names[api.Name]++
		}
		want := 2 // the plan database and the tenant's own
		for _, rec := range tn.tasks {
			tk, ok := byID[rec.id]
			require.True(t, ok, "task %s (create %s) of account %d is lost", rec.id, rec.name, tn.acct.id)
			require.True(t, tk.Status.Final(), "task %s is %s", rec.id, tk.Status)
			if tk.Status == clouddb.TaskCompleted {
				completed++
				want++
				require.Equal(t, 1, names[rec.name], "account %d: completed create %s made %d databases", tn.acct.id, rec.name, names[rec.name])
			} else {
				failed++
				require.NotNil(t, tk.Error, "failed task %s has no error", rec.id)
				failures[tk.Error.Type]++
				require.Zero(t, names[rec.name], "account %d: failed create %s made a database", tn.acct.id, rec.name)
			}
		}
		require.Len(t, dbsBySub[tn.subID], want, "account %d: databases against completed creates", tn.acct.id)
	}

	// Isolation: the ACL and drift repair make these hold (see the README's list of
	// commands a tenant may not run).
	for _, tn := range tenants {
		tn.checkIsolation(t, ctx, s)
	}
	requireAlive(t, h, pid)
	t.Logf("chaos: %d tenants, %d rounds, tmpfs %v; %d creates completed, %d failed %v; %d databases; %s in all",
		o.tenants, o.rounds, tmpfs != "", completed, failed, failures, len(s.dbs), time.Since(begin).Round(time.Second))
}

// setUpTenants makes n accounts, each with an active subscription and a database of its
// own (password known), and reads that server's internal-user secret.
func setUpTenants(t *testing.T, ctx context.Context, h *harness, n int) []*chaosTenant {
	t.Helper()
	var tenants []*chaosTenant
	for _, a := range h.accounts(n) {
		tn := &chaosTenant{acct: a, c: client.New(h.url, a.key, a.secret, client.WithPollInterval(50*time.Millisecond))}
		task, err := tn.c.CreateSubscription(ctx, subscriptionBody(a.pm, fmt.Sprintf("chaos-%d", a.index), planDB("plan", 0.1)))
		require.NoError(t, err)
		done, err := tn.c.WaitForTask(ctx, task.ID)
		require.NoError(t, err)
		tn.subID = done.ResourceID()
		_, err = tn.c.WaitForSubscriptionStatus(ctx, tn.subID, "active")
		require.NoError(t, err)
		task, err = tn.c.CreateDatabase(ctx, tn.subID, client.CreateDatabase{Name: client.Ptr("own"), MemoryLimitInGB: client.Ptr(0.1),
			Password: client.Ptr(fmt.Sprintf("tenant-%d-pw", a.index))})
		require.NoError(t, err)
		done, err = tn.c.WaitForTask(ctx, task.ID)
		require.NoError(t, err)
		tn.db, err = tn.c.WaitForDatabaseStatus(ctx, tn.subID, done.ResourceID(), "active")
		require.NoError(t, err)
		tn.secret = internalSecret(t, h, tn.db.ID)
		require.NotEmpty(t, tn.secret, "database %d: no internal user in its redis.conf", tn.db.ID)
		tenants = append(tenants, tn)
	}
	return tenants
}

// internalSecret reads the password of clouddb's internal user from the database's
// redis.conf, or "" when the file does not hold it in clear.
func internalSecret(t *testing.T, h *harness, dbID int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(h.databasesDir(), strconv.Itoa(dbID), "redis.conf"))
	if err != nil {
		return ""
	}
	return internalSecretIn(data)
}

// refused reports whether err is the server refusing a command to the user: an ACL
// refusal, an unknown (renamed) command, or one the server's configuration disables
// (DEBUG and MODULE are off by default). An error of the command itself ("background
// save already in progress") is not a refusal: it would have run another time.
func refused(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "command not allowed")
}

// tryAdminCommands runs the administrative commands (and the replication stream ones) on
// the tenant's own server with the tenant's password and records those that were not
// refused.
func (tn *chaosTenant) tryAdminCommands(t *testing.T, ctx context.Context, commands [][]any) {
	opts := &redis.Options{Addr: tn.db.PublicEndpoint, Password: tn.db.Security.Password, MaxRetries: -1, PoolSize: 1,
		DialTimeout: 2 * time.Second, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second, Protocol: 2, DisableIdentity: true}
	note := func(cmd []any, err error) {
		if refused(err) {
			return
		}
		tn.mu.Lock()
		defer tn.mu.Unlock()
		tn.allowed = append(tn.allowed, fmt.Sprintf("%v (answered %v)", cmd, err))
	}
	r := redis.NewClient(opts)
	defer r.Close()
	// The server may be on its way back from a fault of the last round (a kill, a disk
	// that was full): the attack is on a server that runs, or nothing is learnt.
	for deadline := time.Now().Add(20 * time.Second); r.Ping(ctx).Err() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("tenant %d: its database %d does not answer 20s after the last fault: %v", tn.acct.id, tn.db.ID, r.Ping(ctx).Err())
			return
		}
	}
	for _, cmd := range streamCommands {
		sr := redis.NewClient(opts)
		note(cmd, sr.Do(ctx, cmd...).Err())
		_ = sr.Close()
	}
	// Normal data commands work for the tenant.
	if err := r.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("tenant %d: SET on its own database: %v", tn.acct.id, err)
	}
	for _, cmd := range commands {
		if cmd[len(cmd)-1] == "0" && cmd[1] == "SET" && cmd[2] == "port" {
			cmd = []any{"CONFIG", "SET", "port", strconv.Itoa(freeLoopbackPort())}
		}
		note(cmd, r.Do(ctx, cmd...).Err())
	}
	// FLUSHALL is the tenant's own data: it may or may not be allowed, but must not harm
	// anyone else.
	t.Logf("tenant %d: FLUSHALL answered %v", tn.acct.id, r.FlushAll(ctx).Err())
}

// checkIsolation checks the end state of the tenant's attacks: every administrative
// command was refused, the server's configuration (read as clouddb's internal user) is
// the one clouddb gave it, and the tenant's data commands work.
func (tn *chaosTenant) checkIsolation(t *testing.T, ctx context.Context, s *storeState) {
	t.Helper()
	for _, a := range tn.allowed {
		t.Errorf("tenant %d: administrative command not refused: %s", tn.acct.id, a)
	}
	var db *clouddb.Database
	for _, d := range s.dbs {
		if d.ID == tn.db.ID {
			db = d
		}
	}
	require.NotNil(t, db, "database %d of tenant %d is gone", tn.db.ID, tn.acct.id)
	if db.Status != clouddb.DatabaseActive && tn.portTaken {
		t.Logf("tenant %d: its database %d, whose port the test held, is %s: %.200s", tn.acct.id, db.ID, db.Status, db.StatusDetail)
		return
	}
	if db.Status != clouddb.DatabaseActive {
		t.Errorf("tenant %d: its database %d is %s (%s) after its own attacks: clouddb should have refused them or put the server back", tn.acct.id, db.ID, db.Status, db.StatusDetail)
		return
	}
	r := redis.NewClient(&redis.Options{Addr: tn.db.PublicEndpoint, Username: "clouddb-internal", Password: tn.secret, MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer r.Close()
	want := map[string]string{"port": strconv.Itoa(db.Port), "bind": "127.0.0.1", "maxmemory": strconv.FormatInt(db.Spec.MaxMemoryBytes(), 10)}
	for name, value := range want {
		got, err := r.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Errorf("tenant %d: CONFIG GET %s as the internal user on %s: %v", tn.acct.id, name, tn.db.PublicEndpoint, err)
			continue
		}
		if got[name] != value {
			t.Errorf("tenant %d: %s is %q on its server, not %q", tn.acct.id, name, got[name], value)
		}
	}
	if users, err := r.Do(ctx, "ACL", "USERS").StringSlice(); err == nil && slices.Contains(users, "intruder") {
		t.Errorf("tenant %d: its ACL SETUSER took effect: users %v", tn.acct.id, users)
	}
	if role, err := r.Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] != "master" {
		t.Errorf("tenant %d: its server is a %v, not a primary", tn.acct.id, role[0])
	}
	own := redis.NewClient(&redis.Options{Addr: tn.db.PublicEndpoint, Password: tn.db.Security.Password, MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer own.Close()
	if err := own.Set(ctx, "after", "chaos", 0).Err(); err != nil {
		t.Errorf("tenant %d: SET on its own database after the chaos: %v", tn.acct.id, err)
	}
}

// freeLoopbackPort is a port nothing listens on now (0 if none could be found).
func freeLoopbackPort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// killServer kills database id's redis-server with SIGKILL, by its pid file.
func killServer(t *testing.T, h *harness, id int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(h.databasesDir(), strconv.Itoa(id), "redis.pid"))
	if err != nil {
		t.Logf("database %d has no pid file (its server is down): %v", id, err)
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err, "pid file of database %d", id)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Logf("kill -9 %d (database %d): %v", pid, id, err)
	}
}

// killLoadServers kills with SIGKILL the running servers (those with a pid file) of the
// databases other than the tenants' own: the plan and load ones.
func killLoadServers(t *testing.T, h *harness, tenants []*chaosTenant) {
	t.Helper()
	own := map[int]bool{}
	for _, tn := range tenants {
		own[tn.db.ID] = true
	}
	entries, _ := os.ReadDir(h.databasesDir())
	n := 0
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil || own[id] {
			continue
		}
		data, err := os.ReadFile(filepath.Join(h.databasesDir(), e.Name(), "redis.pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	t.Logf("killed the servers of %d plan and load databases", n)
}

// takePort listens on the loopback port as soon as it is free, trying for at most
// within; nil when it could not.
func takePort(port int, within time.Duration) net.Listener {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return ln
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// mountChaosTmpfs puts the harness's data dir on a small tmpfs when this process may
// mount one, and returns it; "" (with a message) otherwise.
func mountChaosTmpfs(t *testing.T, h *harness) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: the disk-full part of the chaos run is left out")
		return ""
	}
	if err := mountTmpfs(t, h.dir, "48m"); err != nil {
		t.Logf("cannot mount a tmpfs here (%v): the disk-full part of the chaos run is left out", err)
		return ""
	}
	// Runs before the unmount (cleanups run last first): the servers go before the lazy
	// unmount would hide them from the harness's own cleanup.
	t.Cleanup(func() {
		procs, _ := redisProcesses(h.databasesDir())
		for _, p := range procs {
			_ = syscall.Kill(p.pid, syscall.SIGKILL) // it may be gone already
		}
	})
	return h.dir
}

// requireAlive checks that clouddb is the same process as at the start, still running
// (not a zombie), and answering.
func requireAlive(t *testing.T, h *harness, pid int) {
	t.Helper()
	require.Equal(t, pid, h.pid(), "clouddb was restarted")
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err, "clouddb (pid %d) exited", pid)
	i := bytes.LastIndexByte(stat, ')')
	require.Positive(t, i)
	state := strings.Fields(string(stat[i+1:]))[0]
	require.NotContains(t, []string{"Z", "X"}, state, "clouddb (pid %d) exited", pid)
	c := client.New(h.url, harnessKey, harnessSecret)
	_, err = c.GetAccount(testContext(t))
	require.NoError(t, err, "clouddb does not answer")
}

// settleChaos waits until every task is final and every database active or in error;
// it returns the store then.
func settleChaos(t *testing.T, h *harness, within time.Duration) *storeState {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s, err := readStore(testContext(t), h.config())
		require.NoError(t, err)
		var left []string
		for _, tk := range s.tasks {
			if !tk.Status.Final() {
				left = append(left, fmt.Sprintf("task %s (%s) %s", tk.ID, tk.CommandType, tk.Status))
			}
		}
		for _, d := range s.dbs {
			if !d.Status.Settled() {
				left = append(left, fmt.Sprintf("database %d %s", d.ID, d.Status))
			}
		}
		if len(left) == 0 {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled within %s: %s", within, strings.Join(left, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
