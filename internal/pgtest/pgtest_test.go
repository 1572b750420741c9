package pgtest_test

import (
	"bufio"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"clouddb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestURL: each call gives a separate, empty, writable database.
func TestURL(t *testing.T) {
	ctx := t.Context()
	a, b := pgtest.URL(t), pgtest.URL(t)
	require.NotEqual(t, a, b)
	ca, err := pgx.Connect(ctx, a)
	require.NoError(t, err)
	defer ca.Close(ctx)
	_, err = ca.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	cb, err := pgx.Connect(ctx, b)
	require.NoError(t, err)
	defer cb.Close(ctx)
	var n int
	require.NoError(t, cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n))
	require.Zero(t, n, "the second database does not see the first one's table")
}

// TestClusterDiesWithItsProcess: a test binary killed outright (a timeout, kill -9) takes
// its throwaway server with it.
func TestClusterDiesWithItsProcess(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		url, _, err := pgtest.Start()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(url)
		select {} // until killed
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterDiesWithItsProcess$")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	url := strings.TrimSpace(line)
	require.True(t, strings.HasPrefix(url, "postgres://"), line)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err, "the child's server runs")
	conn.Close(ctx)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // "signal: killed", as intended
	require.Eventually(t, func() bool {
		c, connErr := pgx.Connect(ctx, url)
		if connErr == nil {
			c.Close(ctx)
		}
		return connErr != nil
	}, 15*time.Second, 100*time.Millisecond, "the server stopped with the process that started it")

	// The child could not remove its cluster's directory: this test does, found by the
	// port its server's log names.
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "clouddb-pgtest-*"))
	removed := 0
	for _, dir := range dirs {
		if b, err := os.ReadFile(filepath.Join(dir, "log")); err == nil && strings.Contains(string(b), "port "+u.Port()+"\n") {
			require.NoError(t, os.RemoveAll(dir))
			removed++
		}
	}
	require.Equal(t, 1, removed, "the child's cluster directory")
}
