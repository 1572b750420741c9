package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// sleeper starts a process that sleeps in dir, ended with the test.
func sleeper(t *testing.T, dir string) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Dir = dir
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}

// watchExit watches only a process that is the node's server when its pidfd is opened:
// the pid it is given was checked before, and a server that died since may have left its
// pid to another process, which Running would then trust as the node's server (and whose
// exit, not the server's, would be reported).
func TestWatchExit_OnlyTheNodesServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := New(Config{Dir: dir, Host: "127.0.0.1", Exited: func(int) {}})
	require.NoError(t, err)
	n := node{db: 1, dir: filepath.Join(dir, "1")}
	require.NoError(t, os.MkdirAll(n.dir, 0o700))

	stranger := sleeper(t, t.TempDir())
	d.watchExit(n, stranger)
	d.mu.Lock()
	watched := d.exitWatched(stranger, n.dir)
	d.mu.Unlock()
	require.False(t, watched, "a process that is not the node's server is not watched as it")

	own := sleeper(t, n.dir)
	d.watchExit(n, own)
	d.mu.Lock()
	watched = d.exitWatched(own, n.dir)
	d.mu.Unlock()
	require.True(t, watched)
}
