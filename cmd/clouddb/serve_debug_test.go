package main

import (
	"io"
	"net"
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

// TestDebugHandler_RefusesWebPages: a web page the operator opens on the machine reaches
// a loopback listener too: by DNS rebinding (a Host that is not a loopback name) it could
// read the profiles and the command line, and across sites start a CPU profile or a trace.
// The browser API refuses those requests; so do the profiles.
func TestDebugHandler_RefusesWebPages(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(debugHandler())
	defer srv.Close()
	get := func(header map[string]string, host string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/debug/pprof/cmdline", nil)
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(nil, ""))
	require.Equal(t, http.StatusOK, get(nil, "localhost:6060"))
	require.Equal(t, http.StatusForbidden, get(nil, "attacker.example:6060"), "DNS rebinding")
	require.Equal(t, http.StatusForbidden, get(map[string]string{"Origin": "http://attacker.example"}, ""), "cross-site")
	require.Equal(t, http.StatusForbidden, get(map[string]string{"Sec-Fetch-Site": "cross-site"}, ""), "cross-site")
}

// TestBoundToLoopback: the profiles' listener must be bound to a loopback address,
// whatever name it was given.
func TestBoundToLoopback(t *testing.T) {
	require.NoError(t, boundToLoopback(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6060}))
	require.NoError(t, boundToLoopback(&net.TCPAddr{IP: net.IPv6loopback, Port: 6060}))
	require.ErrorContains(t, boundToLoopback(&net.TCPAddr{IP: net.IPv4(192, 168, 1, 5), Port: 6060}), "not a loopback address")
	require.Error(t, boundToLoopback(&net.UnixAddr{Name: "/tmp/x", Net: "unix"}))
}
