package main

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListenerLeavesAPIPathsToTheAPI: the pages beside the API (console, docs, metrics)
// must not change how the API answers the paths real clients send: a base URL ending in
// "/" doubles the slash, and a dot segment is refused with the API's JSON error, never
// redirected with an HTML body by the listener's own mux.
func TestListenerLeavesAPIPathsToTheAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startService(t, dir, options{})
	creds := readCredentials(t, dir)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, auth bool) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+s.m.Addr+path, nil)
		require.NoError(t, err)
		if auth {
			req.Header.Set("x-api-key", creds.APIKey)
			req.Header.Set("x-api-secret-key", creds.SecretKey)
		}
		res, err := noRedirect.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, res.Header.Get("Content-Type"), string(b)
	}
	for _, path := range []string{"//v1/subscriptions", "/v1//subscriptions", "//subscriptions"} {
		code, ctype, body := get(path, true)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		require.Equal(t, "application/json", ctype, path)
		require.Contains(t, body, `"subscriptions"`, path)
	}
	for _, path := range []string{"/v1/../v1/subscriptions", "/docs/../v1/subscriptions"} {
		code, ctype, body := get(path, true)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", path, body)
		require.Equal(t, "application/json", ctype, path)
		require.Contains(t, body, "segment", path)
	}
	// The listener's own pages are still its own.
	code, ctype, _ := get("/docs", false)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, ctype, "text/html")
	code, ctype, _ = get("/metrics", false)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, ctype, "text/plain")
	code, _, body := get("/console", false)
	require.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect}, code, "the console's directory")
	require.Contains(t, body, `href="/console/"`)
}
