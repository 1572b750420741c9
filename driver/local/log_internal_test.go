package local

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCappedLog: the log rotates before it would pass its cap, the two files hold the
// newest bytes in order, and a huge log left by an older clouddb is cut to its tail.
func TestCappedLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), logFile)
	w := openCappedLog(path, 1000)
	var all bytes.Buffer
	for i := range 200 {
		line := []byte(strings.Repeat(string(rune('a'+i%26)), 99) + "\n")
		all.Write(line)
		n, err := w.Write(line)
		require.NoError(t, err)
		require.Equal(t, len(line), n)
	}
	require.NoError(t, w.Close())
	cur, err := os.ReadFile(path)
	require.NoError(t, err)
	old, err := os.ReadFile(path + ".1")
	require.NoError(t, err)
	require.LessOrEqual(t, len(cur), 1000)
	require.LessOrEqual(t, len(old), 1000)
	kept := append(old, cur...)
	require.True(t, bytes.HasSuffix(all.Bytes(), kept), "the newest lines, in order")
	require.Greater(t, len(kept), 1000)

	// An older clouddb's servers appended to redis.log themselves, without bound.
	dir := t.TempDir()
	path = filepath.Join(dir, logFile)
	huge := bytes.Repeat([]byte("0123456789"), 20_000)
	require.NoError(t, os.WriteFile(path, huge, 0o600))
	w = openCappedLog(path, 1000)
	_, err = w.Write([]byte("new\n"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	cur, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "new\n", string(cur))
	old, err = os.ReadFile(path + ".1")
	require.NoError(t, err)
	require.Equal(t, huge[len(huge)-1000:], old)
}

// TestLimitSettings: the client limits scale with the memory limit, within their bounds,
// and go into redis.conf with the log to stdout.
func TestLimitSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		maxMemory               int64
		clients, soft, queryBuf string
	}{
		{0, "67108864", "16777216", "67108864"},
		{64 << 20, "67108864", "16777216", "67108864"},
		{100_000_000, "67108864", "16777216", "100000000"},
		{1 << 30, "268435456", "67108864", "1073741824"},
		{8 << 30, "2147483648", "536870912", "1073741824"},
	} {
		got := map[string]string{}
		for _, s := range limitSettings(c.maxMemory) {
			got[s.Name] = s.Value
		}
		require.Equal(t, map[string]string{
			"sanitize-dump-payload":      "clients",
			"maxmemory-clients":          c.clients,
			"client-output-buffer-limit": "normal " + c.clients + " " + c.soft + " 60",
			"client-query-buffer-limit":  c.queryBuf,
		}, got, c.maxMemory)
	}
	data, err := serverConfig{Port: 1, Host: "127.0.0.1", Password: "p", MaxMemory: 1 << 30,
		Policy: "noeviction", Persistence: "none"}.render(1, "/d")
	require.NoError(t, err)
	require.Contains(t, string(data), "\nlogfile \"\"\n")
	require.Contains(t, string(data), "\nclient-output-buffer-limit \"normal\" \"268435456\" \"67108864\" \"60\"\n")
	require.Contains(t, string(data), "\nsanitize-dump-payload \"clients\"\n")
}

func TestOutputClass(t *testing.T) {
	t.Parallel()
	v := "normal 1 2 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
	require.Equal(t, "normal 1 2 3", outputClass(v, "normal"))
	require.Equal(t, "pubsub 33554432 8388608 60", outputClass(v, "pubsub"))
	require.Equal(t, "", outputClass("", "normal"))
}
