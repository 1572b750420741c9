package console

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The in-process transport hands the API the browser's address, the host it reached and
// the request as sent.
func TestInProcessTransport(t *testing.T) {
	t.Parallel()
	var seen *http.Request
	var body string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		body = string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"taskId":"t1","status":"received"}`))
	})
	c := New(api, nil)
	browserReq := httptest.NewRequest(http.MethodPost, "http://console.example:8080/console/x", nil)
	browserReq.RemoteAddr = "192.0.2.7:51234"
	var out map[string]any
	err := c.apiClient(browserReq, "k", "s").Do(browserReq.Context(), http.MethodPost, "/subscriptions/3/databases?x=1", map[string]any{"name": "n"}, &out)
	require.NoError(t, err)
	require.Equal(t, "t1", out["taskId"])
	require.Equal(t, "192.0.2.7:51234", seen.RemoteAddr)
	require.Equal(t, "console.example:8080", seen.Host)
	require.Equal(t, "/v1/subscriptions/3/databases", seen.URL.Path)
	require.Equal(t, "x=1", seen.URL.RawQuery)
	require.Equal(t, "/v1/subscriptions/3/databases?x=1", seen.RequestURI)
	require.Equal(t, "k", seen.Header.Get("x-api-key"))
	require.Equal(t, "s", seen.Header.Get("x-api-secret-key"))
	require.JSONEq(t, `{"name":"n"}`, body)
	require.Nil(t, seen.TLS)
}

// The browser's Host header is handed to the API as it came, but the console's client
// does not parse it: a Host that is no URL host (the server accepts a%zz, x:y:z, [::1) is
// no 500 and no error in the log, before or after sign-in.
func TestHostNotAURLHost(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	e := newEnv(t)
	e.console.logger = slog.New(slog.NewTextHandler(&logs, nil))
	for _, host := range []string{"a%zz", "x:y:z", "[::1"} {
		b := e.browser()
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/console/signin", strings.NewReader(url.Values{"apiKey": {ownerKey}, "secretKey": {ownerSecret}}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Host = host
		res, err := b.hc.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		require.Equal(t, http.StatusSeeOther, res.StatusCode, host)
		require.Equal(t, "/console/subscriptions", res.Header.Get("Location"), host)
		cookies := res.Cookies()
		require.Len(t, cookies, 1, host)

		req, err = http.NewRequest(http.MethodGet, e.srv.URL+"/console/subscriptions", nil)
		require.NoError(t, err)
		req.Host = host
		req.AddCookie(cookies[0])
		res, err = b.hc.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		require.Equal(t, http.StatusOK, res.StatusCode, host)
	}
	require.Empty(t, logs.String())
}
