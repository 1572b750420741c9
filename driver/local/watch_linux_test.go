package local_test

import (
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// Once the watch of exits ends (its epoll instance failed, or its goroutine panicked), no
// adopted server is trusted for it any more (a dead one is noticed by the very next
// Running), and a child is reaped by a wait of its own, its exit reported as before.
func TestRunning_ExitWatchEndedTrustsNoServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in1 := b.instance(t, 1, "none")
	in2 := b.instance(t, 2, "none")

	d, exited, _ := watchedDriver(t, b.dir, 1)
	require.NoError(t, d.Ensure(ctxT(t), in1))
	require.NoError(t, b.driver.Ensure(ctxT(t), in2))
	require.NoError(t, d.Ensure(ctxT(t), in2)) // adopted: b.driver started it
	requireRunning(t, d, in1, true)
	requireRunning(t, d, in2, true)

	d.StopWatchingExits()
	killAndWait(t, pid(t, d, 2)) // gone (a zombie at most) before Running looks
	requireRunning(t, d, in2, false, "a dead adopted server is not trusted once its watch ended")

	requireRunning(t, d, in1, true)
	require.NoError(t, syscall.Kill(pid(t, d, 1), syscall.SIGKILL))
	requireExit(t, exited, 1)
	requireRunning(t, d, in1, false)

	// Started again: a child of its own wait, its exit reported all the same.
	require.NoError(t, d.Ensure(ctxT(t), in1))
	require.NoError(t, syscall.Kill(pid(t, d, 1), syscall.SIGKILL))
	requireExit(t, exited, 1)
	requireRunning(t, d, in1, false)
}

// A watched server is trusted only until its next deep check: one that hangs (SIGSTOP,
// which no exit watch sees) or moved off its port (an operator's CONFIG SET) is found
// not running by then, as before the watch.
func TestRunning_WatchedServerTrustedNoLongerThanADeepCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in1 := b.instance(t, 1, "none")
	in2 := b.instance(t, 2, "none")
	d, _, _ := watchedDriver(t, b.dir, 1)
	require.NoError(t, d.Ensure(ctxT(t), in1))
	require.NoError(t, d.Ensure(ctxT(t), in2))
	requireRunning(t, d, in1, true)
	requireRunning(t, d, in2, true)

	hung := pid(t, d, 1)
	require.NoError(t, syscall.Kill(hung, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGCONT) })
	adm := admin(t, filepath.Join(b.dir, strconv.Itoa(2)), in2.Port)
	require.NoError(t, adm.ConfigSet(ctxT(t), "port", strconv.Itoa(freePort(t))).Err())

	for _, in := range []clouddb.Instance{in1, in2} {
		require.Eventually(t, func() bool {
			up, err := d.Running(ctxT(t), in)
			return err == nil && !up
		}, 30*time.Second, 100*time.Millisecond, "database %d", in.DatabaseID)
	}
}
