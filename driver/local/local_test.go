package local_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
)

const mb = 1 << 20

// helperEnv makes the test binary act as a short-lived clouddb: it ensures the instance
// in the variable, prints the server's pid and waits to be killed.
const helperEnv = "CLOUDDB_LOCAL_TEST_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helper(spec))
	}
	os.Exit(m.Run())
}

type helperSpec struct {
	Dir      string
	Instance clouddb.Instance
}

func helper(spec string) int {
	var h helperSpec
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d, err := local.New(local.Config{Dir: h.Dir})
	if err == nil {
		err = d.Ensure(context.Background(), h.Instance)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p, err := d.Pid(h.Instance.DatabaseID)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(p)
	select {}
}

// testBundle is one driver on a temporary directory.
type testBundle struct {
	dir    string
	driver *local.Driver
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install -y redis-server")
	}
	dir := t.TempDir()
	return &testBundle{dir: dir, driver: mustDriver(t, dir)}
}

func mustDriver(t *testing.T, dir string) *local.Driver {
	t.Helper()
	d, err := local.New(local.Config{
		Dir:          dir,
		Host:         "127.0.0.1",
		StartTimeout: 10 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	return d
}

// testWriter sends log lines to t.Log until the test ends, and drops them after: a
// driver's goroutines may log a server's exit after the test (a server another driver
// removed is reaped, and its exit logged, by the driver that started it), and t.Log
// then is a race.
type testWriter struct{ w *logSink }

type logSink struct {
	mu    sync.Mutex
	t     *testing.T
	ended bool
}

func newTestWriter(t *testing.T) testWriter {
	s := &logSink{t: t}
	t.Cleanup(func() {
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
	})
	return testWriter{s}
}

func (w testWriter) Write(p []byte) (int, error) {
	w.w.mu.Lock()
	defer w.w.mu.Unlock()
	if !w.w.ended {
		w.w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// instance returns an instance on a free port whose server is removed when the test ends.
func (b *testBundle) instance(t *testing.T, id int, persistence string) clouddb.Instance {
	t.Helper()
	t.Cleanup(func() {
		require.NoError(t, b.driver.Remove(context.Background(), id))
	})
	return clouddb.Instance{
		DatabaseID:      id,
		Port:            freePort(t),
		Password:        "s3cret-" + strconv.Itoa(id),
		MaxMemoryBytes:  64 * mb,
		EvictionPolicy:  "volatile-lru",
		DataPersistence: persistence,
	}
}

// freePort returns a free port below Linux's ephemeral range, from a block of this
// process's: the driver picks its cluster nodes' ports among the ephemeral ones (as it
// does outside the databases' range), and a test's endpoint port, free while its server
// restarts, must not be one of them. No port is handed out twice in a process: a port
// that looks free may be a killed server's, about to start again there (the block once
// wrapped around within a run and gave one to another test in that moment).
func freePort(t *testing.T) int {
	t.Helper()
	const block = 1000
	base := 12000 + (os.Getpid()%8)*block
	portsMu.Lock()
	defer portsMu.Unlock()
	for port := base; port < base+block; port++ {
		if portsGiven[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		portsGiven[port] = true
		return port
	}
	t.Fatalf("no free port left in %d-%d", base, base+block-1)
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

func client(t *testing.T, port int, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:            fmt.Sprintf("127.0.0.1:%d", port),
		Password:        password,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		DialTimeout:     2 * time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// internalSecret reads the password of clouddb's internal user from a database's
// redis.conf, where clouddb keeps it.
func internalSecret(t *testing.T, dbDir string) string {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(dbDir, "redis.conf"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(conf), "\n") {
		if !strings.HasPrefix(line, `user "clouddb-internal" `) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if s, ok := strings.CutPrefix(f, `">`); ok {
				return strings.TrimSuffix(s, `"`)
			}
		}
	}
	t.Fatalf("no internal user in %s/redis.conf", dbDir)
	return ""
}

// admin returns a client logged in as clouddb's internal user: what the tests need to
// look at (or tamper with) the server's configuration, which tenants may not.
func admin(t *testing.T, dbDir string, port int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:            fmt.Sprintf("127.0.0.1:%d", port),
		Username:        "clouddb-internal",
		Password:        internalSecret(t, dbDir),
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		DialTimeout:     2 * time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func pid(t *testing.T, d *local.Driver, id int) int {
	t.Helper()
	p, err := d.Pid(id)
	require.NoError(t, err)
	return p
}

// serversIn counts the live processes whose working directory is dir.
func serversIn(t *testing.T, dir string) int {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == real {
			n++
		}
	}
	return n
}

func processGone(p int) bool {
	if err := syscall.Kill(p, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
	return err != nil || strings.Contains(string(stat), ") Z ")
}

func TestEnsure_StartConnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")

	require.NoError(t, b.driver.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.Equal(t, "v", c.Get(ctx, "k").Val())

	err := client(t, in.Port, "wrong").Ping(ctx).Err()
	require.Error(t, err)
	require.Contains(t, err.Error(), "WRONGPASS")
	require.Error(t, client(t, in.Port, "").Get(ctx, "k").Err(), "no password must be refused")

	requireRunning(t, b.driver, in, true)

	dbDir := filepath.Join(b.dir, "1")
	st, err := os.Stat(dbDir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	st, err = os.Stat(filepath.Join(dbDir, "redis.conf"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	cfg, err := admin(t, dbDir, in.Port).ConfigGet(ctx, "*").Result()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(64*mb), cfg["maxmemory"])
	require.Equal(t, "volatile-lru", cfg["maxmemory-policy"])
	require.Equal(t, "no", cfg["appendonly"])
	require.Equal(t, "", cfg["save"])
	require.Equal(t, "yes", cfg["protected-mode"])
	require.Equal(t, "0", cfg["repl-diskless-sync-delay"])
	require.Equal(t, "127.0.0.1", cfg["bind"])

	// A wrong password makes Running false.
	wrong := in
	wrong.Password = "nope"
	requireRunning(t, b.driver, wrong, false)
}

func TestEnsure_Idempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 2, "none")

	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 2)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, p, pid(t, b.driver, 2))

	// Concurrent calls for the same database are serialised: still one server.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = b.driver.Ensure(ctx, in) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, p, pid(t, b.driver, 2))
	require.Equal(t, 1, serversIn(t, filepath.Join(b.dir, "2")))
}

func TestEnsure_LiveUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 3, "none")

	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 3)
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "kept", 0).Err())

	up := in
	up.MaxMemoryBytes = 128 * mb
	up.EvictionPolicy = "allkeys-lfu"
	up.Password = "n3w-password"
	up.DataPersistence = "aof-every-write"
	require.NoError(t, b.driver.Ensure(ctx, up))
	require.Equal(t, p, pid(t, b.driver, 3), "a live update must not restart the server")

	c := client(t, in.Port, up.Password)
	cfg, err := admin(t, filepath.Join(b.dir, "3"), in.Port).ConfigGet(ctx, "*").Result()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(128*mb), cfg["maxmemory"])
	require.Equal(t, "allkeys-lfu", cfg["maxmemory-policy"])
	require.Equal(t, "yes", cfg["appendonly"])
	require.Equal(t, "always", cfg["appendfsync"])
	require.Equal(t, "kept", c.Get(ctx, "k").Val())

	err = client(t, in.Port, in.Password).Ping(ctx).Err()
	require.Error(t, err, "the old password must be refused")
	require.Contains(t, err.Error(), "WRONGPASS")

	conf, err := os.ReadFile(filepath.Join(b.dir, "3", "redis.conf"))
	require.NoError(t, err)
	require.Contains(t, string(conf), `maxmemory-policy "allkeys-lfu"`)
	require.Contains(t, string(conf), `appendfsync "always"`)

	// The AOF written live survives a restart.
	require.NoError(t, b.driver.Stop(ctx, 3))
	require.NoError(t, b.driver.Ensure(ctx, up))
	require.Equal(t, "kept", client(t, in.Port, up.Password).Get(ctx, "k").Val())
}

func TestStopEnsure_Persistence(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		persistence string
		kept        bool
	}{
		{"aof-every-1-second", true},
		{"snapshot-every-1-hour", true},
		// Documented behaviour: without persistence a restart starts empty.
		{"none", false},
	} {
		t.Run(tc.persistence, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			id := 10 + i
			in := b.instance(t, id, tc.persistence)

			require.NoError(t, b.driver.Ensure(ctx, in))
			require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())
			require.NoError(t, b.driver.Stop(ctx, id))

			requireRunning(t, b.driver, in, false)
			_, err := b.driver.Pid(id)
			require.ErrorIs(t, err, os.ErrNotExist)
			require.NoError(t, b.driver.Stop(ctx, id), "stopping a stopped server is a no-op")

			require.NoError(t, b.driver.Ensure(ctx, in))
			got, err := client(t, in.Port, in.Password).Get(ctx, "k").Result()
			if tc.kept {
				require.NoError(t, err)
				require.Equal(t, "v", got)
			} else {
				require.ErrorIs(t, err, redis.Nil)
			}
		})
	}
}

func TestEnsure_PersistenceChangeWhileStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 4, "snapshot-every-6-hours")

	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())
	require.NoError(t, b.driver.Stop(ctx, 4))

	// The data is in the RDB; turning AOF on must not start from an empty AOF.
	in.DataPersistence = "aof-every-1-second"
	require.NoError(t, b.driver.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	require.Equal(t, "v", c.Get(ctx, "k").Val())
	require.Equal(t, "yes", admin(t, filepath.Join(b.dir, "4"), in.Port).ConfigGet(ctx, "appendonly").Val()["appendonly"])
}

func TestEnsure_AdoptAfterRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 5, "none")

	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 5)
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())

	// A new Driver, as after a restart of clouddb, adopts the running server.
	d2 := mustDriver(t, b.dir)
	requireRunning(t, d2, in, true)
	require.NoError(t, d2.Ensure(ctx, in))
	require.Equal(t, p, pid(t, d2, 5))
	require.Equal(t, 1, serversIn(t, filepath.Join(b.dir, "5")))

	// It changes the password using the old one it reads from redis.conf.
	in.Password = "changed-by-d2"
	require.NoError(t, d2.Ensure(ctx, in))
	require.Equal(t, p, pid(t, d2, 5))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
}

func TestEnsure_RestartAfterKill(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 6, "aof-every-write")

	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 6)
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())

	require.NoError(t, syscall.Kill(p, syscall.SIGKILL))
	require.Eventually(t, func() bool { return processGone(p) }, 5*time.Second, 20*time.Millisecond)
	requireRunning(t, b.driver, in, false)

	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NotEqual(t, p, pid(t, b.driver, 6))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
}

func TestEnsure_StalePidFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 7, "none")

	// The pid file names a live process that is not redis (this test binary).
	dbDir := filepath.Join(b.dir, "7")
	require.NoError(t, os.MkdirAll(dbDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dbDir, "redis.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600))
	requireRunning(t, b.driver, in, false)

	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NotEqual(t, os.Getpid(), pid(t, b.driver, 7))
	require.NoError(t, client(t, in.Port, in.Password).Ping(ctx).Err())
}

func TestEnsure_PortInUse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 8, "none")

	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", in.Port))
	require.NoError(t, err)
	defer l.Close()

	start := time.Now()
	err = b.driver.Ensure(ctx, in)
	require.Error(t, err)
	require.Less(t, time.Since(start), 3*time.Second)
	t.Log(err)
	require.Contains(t, err.Error(), strconv.Itoa(in.Port))
	require.Contains(t, err.Error(), "Address already in use")
}

func TestRemove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 9, "snapshot-every-1-hour")

	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 9)
	require.NoError(t, b.driver.Remove(ctx, 9))
	require.True(t, processGone(p))
	_, err := os.Stat(filepath.Join(b.dir, "9"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, b.driver.Remove(ctx, 9), "removing twice is a no-op")
	require.NoError(t, b.driver.Stop(ctx, 9))
}

func TestEnsure_PasswordCannotInjectConfig(t *testing.T) {
	t.Parallel()
	for i, password := range []string{
		`a"b\nrename-command`,
		"q'\"\\\\x41\"\nsave 1 1\r\nappendonly yes\n# ",
		`\x22 maxmemory-policy allkeys-random`,
	} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			id := 20 + i
			in := b.instance(t, id, "none")
			in.Password = password

			require.NoError(t, b.driver.Ensure(ctx, in))
			require.NoError(t, client(t, in.Port, password).Ping(ctx).Err())
			dbDir := filepath.Join(b.dir, strconv.Itoa(id))
			ac := admin(t, dbDir, in.Port)
			cfg, err := ac.ConfigGet(ctx, "*").Result()
			require.NoError(t, err)
			user, err := ac.Do(ctx, "acl", "getuser", "default").Slice()
			require.NoError(t, err)
			sum := sha256.Sum256([]byte(password))
			require.Equal(t, []any{hex.EncodeToString(sum[:])}, user[3], "the default user has exactly the password")
			require.Equal(t, "", cfg["save"])
			require.Equal(t, "no", cfg["appendonly"])
			require.Equal(t, "volatile-lru", cfg["maxmemory-policy"])

			conf, err := os.ReadFile(filepath.Join(b.dir, strconv.Itoa(id), "redis.conf"))
			require.NoError(t, err)
			for _, line := range strings.Split(string(conf), "\n") {
				require.False(t, strings.HasPrefix(line, "rename-command"), line)
				require.False(t, strings.HasPrefix(line, "save 1"), line)
			}
			require.Zero(t, strings.Count(string(conf), "requirepass"))
			require.Equal(t, 1, strings.Count(string(conf), "\nuser \"default\" "))

			// The password read back from redis.conf lets a new Driver change it.
			d2 := mustDriver(t, b.dir)
			p := pid(t, d2, id)
			in.Password = "plain"
			require.NoError(t, d2.Ensure(ctx, in))
			require.Equal(t, p, pid(t, d2, id))
			require.NoError(t, client(t, in.Port, "plain").Ping(ctx).Err())
		})
	}
}

func TestNew_MissingBinary(t *testing.T) {
	t.Parallel()
	_, err := local.New(local.Config{Dir: t.TempDir(), RedisServers: []local.RedisBinary{{Path: "no-such-redis-server-binary", Version: "7.0"}}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "apt-get install -y redis-server")
}

func TestEnsure_NoneIgnoresStaleSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 30, "snapshot-every-12-hours")

	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "old", 0).Err())
	require.NoError(t, b.driver.Stop(ctx, 30)) // writes dump.rdb
	require.NoError(t, b.driver.Ensure(ctx, in))

	// Switched live to no persistence, a restart starts empty, not from the old RDB.
	in.DataPersistence = "none"
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, b.driver.Stop(ctx, 30))
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.ErrorIs(t, client(t, in.Port, in.Password).Get(ctx, "k").Err(), redis.Nil)
}

func TestEnsure_ServerOutlivesCrashedClouddb(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 31, "aof-every-1-second")

	p := startedByCrashedClouddb(t, b, in)

	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err(), "the server must outlive its clouddb")

	// The next clouddb adopts it.
	requireRunning(t, b.driver, in, true)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, p, pid(t, b.driver, 31))
	require.Equal(t, 1, serversIn(t, filepath.Join(b.dir, "31")))

	// It can stop the server it did not start, and start it again with its data.
	require.NoError(t, b.driver.Stop(ctx, 31))
	require.True(t, processGone(p))
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
}

func TestEnsure_PortChangeRestarts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 32, "aof-every-write")

	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 32)
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())

	in.Port = freePort(t)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NotEqual(t, p, pid(t, b.driver, 32))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
}

func TestEnsure_UnknownPasswordIsReset(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 33, "aof-every-write")

	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 33)
	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	// Someone changed the password behind clouddb's back: clouddb gets in as its internal
	// user and sets the password back, without a restart.
	ac := admin(t, filepath.Join(b.dir, "33"), in.Port)
	require.NoError(t, ac.Do(ctx, "acl", "setuser", "default", "resetpass", ">unknown").Err())
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, p, pid(t, b.driver, 33))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())

	// Locked out of the internal user too: the server is ours (same directory), so
	// Ensure restarts it cleanly with its data.
	ac = admin(t, filepath.Join(b.dir, "33"), in.Port)
	require.NoError(t, ac.Do(ctx, "acl", "setuser", "default", "resetpass", ">unknown").Err())
	require.NoError(t, ac.Do(ctx, "acl", "setuser", "clouddb-internal", "resetpass", ">changed").Err())
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NotEqual(t, p, pid(t, b.driver, 33))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
}

// startedByCrashedClouddb has another process play clouddb: it starts the server of in,
// then its whole process group is killed, as in a crash. It returns the server's pid.
func startedByCrashedClouddb(t *testing.T, b *testBundle, in clouddb.Instance) int {
	t.Helper()
	spec, err := json.Marshal(helperSpec{Dir: b.dir, Instance: in})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = newTestWriter(t)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "helper did not report a pid")
	p, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	_ = cmd.Wait()
	return p
}

// requireRunning checks what d.Running says of in.
func requireRunning(t *testing.T, d *local.Driver, in clouddb.Instance, want bool, msgAndArgs ...any) {
	t.Helper()
	running, err := d.Running(ctxT(t), in)
	require.NoError(t, err)
	require.Equal(t, want, running, msgAndArgs...)
}
