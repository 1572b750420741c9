package cloudapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi"
)

// TestRateLimit: each API key has its own window; every authenticated answer says what is
// left; past the limit the answer is 429 with a retry delay and a JSON error, and the
// next window opens again.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, func(s *cloudapi.Server) { s.RateLimit = 3; s.Now = clock })

	get := func(key, secret string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, e.base+"/subscriptions", nil)
		require.NoError(t, err)
		req.Header.Set("x-api-key", key)
		req.Header.Set("x-api-secret-key", secret)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for want := 2; want >= 0; want-- {
		resp := get(mainKey, mainSecret)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, strconv.Itoa(want), resp.Header.Get("X-Rate-Limit-Remaining"))
	}
	resp := get(mainKey, mainSecret)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "0", resp.Header.Get("X-Rate-Limit-Remaining"))
	require.Equal(t, "60", resp.Header.Get("X-Rate-Limit-Retry-After-Seconds"))
	var body struct {
		Error struct {
			Type        string `json:"type"`
			Status      int    `json:"status"`
			Description string `json:"description"`
		} `json:"error"`
	}
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &body), string(b))
	require.Equal(t, "RATE_LIMIT_EXCEEDED", body.Error.Type)
	require.Equal(t, 429, body.Error.Status)

	// Another key of the same account has a window of its own.
	resp = get(viewerKey, viewerSecret)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "2", resp.Header.Get("X-Rate-Limit-Remaining"))

	// Requests that fail authentication spend nothing.
	resp = get(mainKey, "wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, resp.Header.Get("X-Rate-Limit-Remaining"))

	mu.Lock()
	now = now.Add(45 * time.Second)
	mu.Unlock()
	resp = get(mainKey, mainSecret)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "15", resp.Header.Get("X-Rate-Limit-Retry-After-Seconds"))

	mu.Lock()
	now = now.Add(15 * time.Second)
	mu.Unlock()
	resp = get(mainKey, mainSecret)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a new window opens after a minute")
	require.Equal(t, "2", resp.Header.Get("X-Rate-Limit-Remaining"))
}

// TestRateLimitConcurrent: requests of one key arriving together are admitted exactly up
// to the limit, and the others refused.
func TestRateLimitConcurrent(t *testing.T) {
	t.Parallel()
	const limit, requests = 20, 60
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newEnv(t, func(s *cloudapi.Server) { s.RateLimit = limit; s.Now = func() time.Time { return now } })
	var ok, refused atomic.Int32
	remaining := make([]atomic.Bool, limit)
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			r := e.do(http.MethodGet, "/v1/subscriptions", mainKey, mainSecret, nil)
			switch r.status {
			case http.StatusOK:
				ok.Add(1)
				n, err := strconv.Atoi(r.header.Get("X-Rate-Limit-Remaining"))
				if err == nil && n >= 0 && n < limit {
					remaining[n].Store(true)
				}
			case http.StatusTooManyRequests:
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(limit), ok.Load())
	require.Equal(t, int32(requests-limit), refused.Load())
	for n := range remaining {
		require.True(t, remaining[n].Load(), "no answer said %d remaining", n)
	}
}

// TestRateLimitOff: with no limit, no header is sent and nothing is refused.
func TestRateLimitOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 50 {
		req, err := http.NewRequest(http.MethodGet, e.base+"/subscriptions", nil)
		require.NoError(t, err)
		req.Header.Set("x-api-key", mainKey)
		req.Header.Set("x-api-secret-key", mainSecret)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, resp.Header.Get("X-Rate-Limit-Remaining"))
	}
}
