package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDebugListen: the profiles are served on loopback only (they have no
// authentication, and a heap profile may hold secrets); off unless asked for.
func TestDebugListen(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "127.0.0.1:0", "[::1]:6060", "localhost:6060"} {
		require.NoError(t, validateDebugListen(ok), ok)
	}
	for _, bad := range []string{"0.0.0.0:6060", ":6060", "10.1.2.3:6060", "[::]:6060", "example.com:6060", "127.0.0.1"} {
		require.Error(t, validateDebugListen(bad), bad)
	}
	m := NewMain(io.Discard, io.Discard)
	require.ErrorContains(t, m.ParseFlags([]string{"--debug-listen", "0.0.0.0:6060"}), "loopback")
	require.Empty(t, NewMain(io.Discard, io.Discard).Config.DebugListen, "off by default")

	srv := httptest.NewServer(debugHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "goroutine profile")
}
