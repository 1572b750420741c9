package local

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestCwdScanShared: callers that ask while a scan runs share the next scan, and each
// answer comes from a scan that began after its question (the running one may have
// missed a server started since).
func TestCwdScanShared(t *testing.T) {
	s := newCwdScan()
	started := make(chan int)
	release := make(chan struct{})
	var scans atomic.Int32
	s.scan = func() map[string][]int {
		k := int(scans.Add(1))
		started <- k
		<-release
		return map[string][]int{"/d": {k}}
	}
	first := make(chan []int, 1)
	go func() { first <- s.pids("/d") }()
	require.Equal(t, 1, <-started)

	const late = 5
	var wg sync.WaitGroup
	got := make([][]int, late)
	for i := range late {
		wg.Go(func() { got[i] = s.pids("/d") })
	}
	waiting := func(n int) func() bool {
		return func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == n }
	}
	require.Eventually(t, waiting(late), 10*time.Second, time.Millisecond)

	release <- struct{}{} // the first scan ends
	require.Equal(t, []int{1}, <-first)
	require.Equal(t, 2, <-started, "the late callers' scan")
	require.Eventually(t, waiting(late-1), 10*time.Second, time.Millisecond)
	release <- struct{}{}
	wg.Wait()
	for _, pids := range got {
		require.Equal(t, []int{2}, pids, "from the scan begun after the question")
	}
	require.Equal(t, int32(2), scans.Load())
}

// TestRestartScansNoProcesses: a server stopped cleanly leaves no pid file; starting it
// again finds that none runs from its unlocked lock file, without a scan of /proc, whose
// cost grows with the servers running (a new database, from its missing config file). A server that runs without its pid file holds the
// lock, and a scan finds it.
func TestRestartScansNoProcesses(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not found")
	}
	d, err := New(Config{Dir: t.TempDir(), Host: "127.0.0.1", StartTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	var scans atomic.Int32
	d.cwds.scan = func() map[string][]int { scans.Add(1); return scanCwds() }
	ctx := t.Context()
	in := clouddb.Instance{DatabaseID: 1, Port: freeTCPPort(t), Password: "pw-1", MaxMemoryBytes: 64 << 20,
		EvictionPolicy: "volatile-lru", DataPersistence: "none"}
	t.Cleanup(func() { require.NoError(t, d.Remove(context.Background(), 1)) })

	require.NoError(t, d.Ensure(ctx, in))
	require.Zero(t, scans.Load(), "no scan for a new database either: no server ever ran on its directory")
	require.NoError(t, d.Stop(ctx, 1))
	n := d.primaryNode(1)
	require.NoFileExists(t, filepath.Join(n.dir, pidFile))
	require.NoError(t, d.Ensure(ctx, in))
	require.Zero(t, scans.Load(), "no scan of /proc")

	pid := d.livePid(n)
	require.NotZero(t, pid)
	require.NoError(t, os.Remove(filepath.Join(n.dir, pidFile)))
	require.Equal(t, pid, d.livePid(n), "found without its pid file")
	require.Equal(t, int32(1), scans.Load())
	require.NoError(t, d.Ensure(ctx, in))
	require.Equal(t, pid, d.livePid(n), "adopted, not started twice")
}

// freeTCPPort returns a port that was free a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
