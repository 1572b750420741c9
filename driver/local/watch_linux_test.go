package local_test

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.NoError(t, syscall.Kill(pid(t, d, 2), syscall.SIGKILL))
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
