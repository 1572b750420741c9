package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMakeTempDir: each service gets a directory of its own; what a process that no
// longer runs left behind (its lock file unlocked) is removed, a running service's is
// kept, and release removes its own.
func TestMakeTempDir(t *testing.T) {
	parent := t.TempDir()
	left := filepath.Join(parent, "import-left")
	stray := filepath.Join(parent, "not-ours")
	for _, d := range []string{left, stray} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "part"), 0o700))
	}
	require.NoError(t, os.WriteFile(filepath.Join(left, ".lock"), nil, 0o600))
	a, releaseA, err := makeTempDir(parent)
	require.NoError(t, err)
	b, releaseB, err := makeTempDir(parent)
	require.NoError(t, err)
	require.NotEqual(t, a, b, "two services of one process do not share a directory")
	require.DirExists(t, a, "the first is kept: its service runs")
	require.NoDirExists(t, left)
	require.NoDirExists(t, stray)
	releaseB()
	require.NoDirExists(t, b)
	releaseA()
	require.NoDirExists(t, a)
}

// TestDBMemory: --db-memory takes auto (the machine's memory), 0 (no limit) or a size.
func TestDBMemory(t *testing.T) {
	auto, err := dbMemory("auto")
	require.NoError(t, err)
	require.Positive(t, auto, "this machine's MemTotal")
	for in, want := range map[string]int64{"": auto, "0": 0, "16GiB": 16 << 30, "512MiB": 512 << 20, "2GB": 2e9} {
		got, err := dbMemory(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"banana", "-1GiB", "0B"} {
		_, err := dbMemory(in)
		require.ErrorContains(t, err, "--db-memory", in)
	}
}

// TestBackupDirsDefault: without --backup-dirs, local backups go under <data-dir>/backups,
// made absolute; the flag takes a comma-separated list.
func TestBackupDirsDefault(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(wd, "clouddb-data", "backups")}, backupDirs(Config{DataDir: "./clouddb-data"}))
	require.Equal(t, []string{"/srv/a", "/srv/b"}, backupDirs(Config{DataDir: "x", BackupDirs: "/srv/a/, /srv/b"}))
}

// TestHTTPTimeouts: both APIs close an idle keep-alive connection and a connection that
// sent half a request header once their timeouts pass, instead of holding them for ever.
func TestHTTPTimeouts(t *testing.T) {
	t.Parallel()
	require.Positive(t, defaultHTTPTimeouts.ReadHeader)
	require.Positive(t, defaultHTTPTimeouts.Read)
	require.Positive(t, defaultHTTPTimeouts.Write)
	require.Positive(t, defaultHTTPTimeouts.Idle)
	short := httpTimeouts{ReadHeader: 300 * time.Millisecond, Read: 2 * time.Second, Write: 2 * time.Second, Idle: 300 * time.Millisecond}
	s := startService(t, t.TempDir(), options{timeouts: &short})
	// closedWithin reads c until the server closes it and says how long that took.
	closedWithin := func(c net.Conn, r io.Reader) time.Duration {
		start := time.Now()
		require.NoError(t, c.SetReadDeadline(start.Add(10*time.Second)))
		_, err := io.Copy(io.Discard, r)
		require.NoError(t, err, "the server closes the connection (a timeout here means it kept it)")
		return time.Since(start)
	}
	for name, addr := range map[string]string{"cloud API": s.m.Addr, "browser API": s.m.BrowserAddr} {
		idle, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer idle.Close()
		_, err = io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(idle)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err, name)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.False(t, resp.Close, "%s: the connection is kept alive after an answer", name)
		require.Less(t, closedWithin(idle, br), 3*time.Second, "%s: an idle keep-alive connection is closed", name)

		half, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer half.Close()
		_, err = io.WriteString(half, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		require.NoError(t, err)
		require.Less(t, closedWithin(half, half), 3*time.Second, "%s: a connection that sent half a header is closed", name)
	}
}
