package local_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
)

// watchedDriver is a driver on dir that reports exits on the returned channel and counts
// the looks at the pid files of database id.
func watchedDriver(t *testing.T, dir string, id int) (*local.Driver, chan int, *atomic.Int64) {
	t.Helper()
	exited := make(chan int, 16)
	d, err := local.New(local.Config{
		Dir:    dir,
		Host:   "127.0.0.1",
		Logger: slog.New(slog.NewTextHandler(newTestWriter(t), nil)),
		Exited: func(id int) { exited <- id },
	})
	require.NoError(t, err)
	var looks atomic.Int64
	d.SetTestHook(func(point string, hid, _ int) {
		if point == local.HookLivePid && hid == id {
			looks.Add(1)
		}
	})
	return d, exited, &looks
}

// requireExit waits for the exit report of database id.
func requireExit(t *testing.T, exited chan int, id int) {
	t.Helper()
	select {
	case got := <-exited:
		require.Equal(t, id, got)
	case <-time.After(10 * time.Second):
		t.Fatal("the server's exit was not reported")
	}
}

// A server whose exit the driver watches, its own child or one it adopted, is running
// for Running without a look at its pid file or /proc until its next deep check; once
// it is killed (SIGKILL, as a crash or the OOM killer would), its exit is reported and
// the very next Running says it is not running.
func TestRunning_WatchedServerIsTrustedUntilItsExit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = 1
	in := b.instance(t, id, "none")

	d, exited, looks := watchedDriver(t, b.dir, id)
	require.NoError(t, d.Ensure(ctxT(t), in))
	requireRunning(t, d, in, true) // the deep check
	looks.Store(0)
	for range 5 {
		requireRunning(t, d, in, true)
	}
	require.Zero(t, looks.Load(), "a watched child's pid file is not read")
	child := pid(t, d, id)
	require.NoError(t, syscall.Kill(child, syscall.SIGKILL))
	requireExit(t, exited, id)
	requireRunning(t, d, in, false, "a killed child is noticed at once")

	// Started again, then adopted by another driver (clouddb restarted).
	require.NoError(t, d.Ensure(ctxT(t), in))
	started := pid(t, d, id)
	d2, exited2, looks2 := watchedDriver(t, b.dir, id)
	require.NoError(t, d2.Ensure(ctxT(t), in))
	require.Equal(t, started, pid(t, d2, id), "adopted, not started again")
	requireRunning(t, d2, in, true)
	looks2.Store(0)
	for range 5 {
		requireRunning(t, d2, in, true)
	}
	require.Zero(t, looks2.Load(), "an adopted, watched server's pid file is not read")
	require.NoError(t, syscall.Kill(started, syscall.SIGKILL))
	requireExit(t, exited2, id)
	requireRunning(t, d2, in, false, "a killed adopted server is noticed at once")
	requireExit(t, exited, id) // the first driver's child, reaped there
}

// A driver without an exit callback cannot count on anyone hearing of an exit: it looks
// at the server every time.
func TestRunning_UnwatchedServerIsLookedAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = 1
	in := b.instance(t, id, "none")
	var looks atomic.Int64
	d := mustDriver(t, b.dir)
	d.SetTestHook(func(point string, hid, _ int) {
		if point == local.HookLivePid && hid == id {
			looks.Add(1)
		}
	})
	require.NoError(t, d.Ensure(ctxT(t), in))
	requireRunning(t, d, in, true)
	looks.Store(0)
	requireRunning(t, d, in, true)
	require.Positive(t, looks.Load())
	require.NoError(t, syscall.Kill(pid(t, d, id), syscall.SIGKILL))
	require.Eventually(t, func() bool {
		up, err := d.Running(ctxT(t), in)
		return err == nil && !up
	}, 10*time.Second, 10*time.Millisecond)
}

// threads is the number of OS threads of this process.
func threads(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// The servers a driver starts do not each hold a thread of clouddb while they run (a
// wait for their exit blocked in the kernel did: a thousand threads, and their stacks,
// at a thousand databases). Not parallel: other tests' threads would blur the count.
func TestSpawn_NoThreadPerServer(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	b := setup(t)
	d, exited, _ := watchedDriver(t, b.dir, 0)
	const n = 24
	var ins []clouddb.Instance
	for id := 1; id <= n; id++ {
		in := b.instance(t, id, "none")
		ins = append(ins, in)
	}
	before := threads(t)
	for _, in := range ins {
		require.NoError(t, d.Ensure(ctxT(t), in))
	}
	require.Less(t, threads(t)-before, n/2, "threads grew with the servers started")
	// Their exits are still heard of, and each is reaped.
	for _, in := range ins[:4] {
		require.NoError(t, syscall.Kill(pid(t, d, in.DatabaseID), syscall.SIGKILL))
		requireExit(t, exited, in.DatabaseID)
	}
}

// connectionsReceived is the server's count of the connections it accepted.
func connectionsReceived(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(ctxT(t), "stats").Result()
	require.NoError(t, err)
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no total_connections_received in INFO stats")
	return 0
}

// A deep check of a server, which pipelines its questions, holds one conversation on one
// connection (a second one, with large buffers, was dialled for the pipelines).
func TestRunning_DeepCheckOnOneConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = 1
	in := b.instance(t, id, "none")
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	adm := admin(t, filepath.Join(b.dir, strconv.Itoa(id)), in.Port)
	before := connectionsReceived(t, adm)
	fresh := mustDriver(t, b.dir) // knows nothing yet: its check is a deep one
	requireRunning(t, fresh, in, true)
	require.Equal(t, 1, connectionsReceived(t, adm)-before)
}

// A server just started from the config file clouddb wrote is found as wanted and left
// as it is: no user is defined again (ACL SETUSER) and no setting set (CONFIG SET), which
// a full reconfiguration does, some ten round trips that every create waited for.
func TestEnsure_StartedServerIsNotReconfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = 1
	in := b.instance(t, id, "none")
	in.Users = []clouddb.DatabaseUser{{Name: "app", Password: "App.passw0rd", Rule: "+@read ~*"}}
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	stats, err := admin(t, filepath.Join(b.dir, strconv.Itoa(id)), in.Port).Info(ctxT(t), "commandstats").Result()
	require.NoError(t, err)
	require.NotContains(t, stats, "cmdstat_acl|setuser:")
	require.NotContains(t, stats, "cmdstat_config|set:")
	requireRunning(t, b.driver, in, true)
	app := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(in.Port), Username: "app", Password: "App.passw0rd", Protocol: 2, DisableIdentity: true})
	defer app.Close()
	require.ErrorIs(t, app.Get(ctxT(t), "k").Err(), redis.Nil, "the named user logs in and reads")
}

// A supervisor slow to take an exit report (its Exited blocks, say on a full channel)
// does not hold up the reaping and reports of the other servers: one goroutine watches
// every server's exit, and a callback that blocked it left every later exit unreaped,
// unreported, and its server trusted as running until its next deep check.
func TestExited_SlowSupervisorHoldsUpNoOtherExit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in1 := b.instance(t, 1, "none")
	in2 := b.instance(t, 2, "none")
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{})
	exited := make(chan int, 16)
	d, err := local.New(local.Config{
		Dir:    b.dir,
		Host:   "127.0.0.1",
		Logger: slog.New(slog.NewTextHandler(newTestWriter(t), nil)),
		Exited: func(id int) {
			if id == 1 {
				close(entered)
				<-release // a supervisor that takes its time
			}
			exited <- id
		},
	})
	require.NoError(t, err)
	require.NoError(t, d.Ensure(ctxT(t), in1))
	require.NoError(t, d.Ensure(ctxT(t), in2))
	requireRunning(t, d, in2, true)
	require.NoError(t, syscall.Kill(pid(t, d, 1), syscall.SIGKILL))
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first server's exit was not reported")
	}
	require.NoError(t, syscall.Kill(pid(t, d, 2), syscall.SIGKILL))
	requireExit(t, exited, 2)
	requireRunning(t, d, in2, false, "a killed server is noticed though another's report is still being taken")
}
