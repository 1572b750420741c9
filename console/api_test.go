package console

import (
	"io"
	"net/http"
	"net/http/httptest"
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
