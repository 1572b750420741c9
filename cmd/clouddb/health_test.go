package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/pgtest"
	"clouddb/internal/syncbuf"
	"clouddb/sqlite"
)

// getJSON reads a JSON answer of the API listener.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	return resp.StatusCode
}

// TestHealth: /healthz of a live service says its version, its store and its databases
// by status, to anyone; /readyz answers 200; the typed client's Health still works.
func TestHealth(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	s.activeSubscription(ctx, "health", 1)

	var h health
	require.Equal(t, http.StatusOK, getJSON(t, "http://"+s.m.Addr+"/healthz", &h))
	require.Equal(t, "ok", h.Status)
	require.Equal(t, clouddb.Version(), h.Version)
	require.NotEmpty(t, h.Version)
	require.Equal(t, storeHealth{Kind: "sqlite", Reachable: true, LatencyMs: h.Store.LatencyMs}, h.Store)
	require.Equal(t, map[clouddb.DatabaseStatus]int{"active": 1, "pending": 0, "active-change-pending": 0, "deleting": 0, "error": 0}, h.Databases)
	require.True(t, h.Workers)
	require.Empty(t, h.Reason)

	var rd ready
	require.Equal(t, http.StatusOK, getJSON(t, "http://"+s.m.Addr+"/readyz", &rd))
	require.Equal(t, ready{Status: "ready"}, rd)

	require.NoError(t, s.c.Health(ctx))
}

// TestHealthStoreDown: with a store that cannot be read (closed here), /healthz and
// /readyz answer 503 with the reason, and no error text or count; a service not started
// yet is not ready.
func TestHealthStoreDown(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	m := NewMain(io.Discard, io.Discard)
	m.logger = slog.New(slog.DiscardHandler)
	m.Store = db
	hc := &healthCheck{m: m}
	call := func(serve http.HandlerFunc, path string, v any) int {
		rec := httptest.NewRecorder()
		serve(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), v))
		return rec.Code
	}

	var rd ready
	require.Equal(t, http.StatusServiceUnavailable, call(hc.serveReady, "/readyz", &rd), "not serving yet")
	require.Equal(t, "starting", rd.Status)
	m.readyOnce.Do(func() { close(m.ready) })
	require.Equal(t, http.StatusOK, call(hc.serveReady, "/readyz", &rd))
	var h health
	require.Equal(t, http.StatusOK, call(hc.serveHealth, "/healthz", &h))
	require.Equal(t, "ok", h.Status)

	require.NoError(t, db.Close())
	rd = ready{}
	require.Equal(t, http.StatusServiceUnavailable, call(hc.serveReady, "/readyz", &rd))
	require.Equal(t, ready{Status: "unavailable", Reason: "the store cannot be read"}, rd)
	h = health{}
	require.Equal(t, http.StatusServiceUnavailable, call(hc.serveHealth, "/healthz", &h))
	require.Equal(t, "unavailable", h.Status)
	require.Equal(t, clouddb.Version(), h.Version)
	require.Equal(t, "the store cannot be read", h.Reason)
	require.False(t, h.Store.Reachable)
	require.Equal(t, "sqlite", h.Store.Kind)
	require.Nil(t, h.Databases)
}

// TestHealthPostgres: on a shared store /healthz names its kind, never its URL, and the
// metrics count from it too.
func TestHealthPostgres(t *testing.T) {
	t.Parallel()
	pg := pgtest.URL(t)
	s := startService(t, t.TempDir(), options{store: pg, key: clouddb.NewKey()})
	resp, err := http.Get("http://" + s.m.Addr + "/healthz")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, string(body), pg)
	u, err := url.Parse(pg)
	require.NoError(t, err)
	require.NotContains(t, string(body), u.Host)
	var h health
	require.NoError(t, json.Unmarshal(body, &h))
	require.Equal(t, storeHealth{Kind: "postgres", Reachable: true, LatencyMs: h.Store.LatencyMs}, h.Store)
	require.Zero(t, h.Databases["active"])

	n, ok := seriesValue(scrape(t, s), "clouddb_store_up", nil)
	require.True(t, ok)
	require.EqualValues(t, 1, n)
}

// TestHealthClientGone: a client that goes away before /healthz or /readyz answered
// (its request's context ends) says nothing of the store: no "does not answer" logged,
// no change of state, so an anonymous client cannot fill the log with the store's
// failures and recoveries.
func TestHealthClientGone(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	logs := &syncbuf.Buffer{}
	m := NewMain(io.Discard, io.Discard)
	m.logger = slog.New(slog.NewTextHandler(logs, nil))
	m.Store = db
	m.readyOnce.Do(func() { close(m.ready) })
	hc := &healthCheck{m: m}
	for range 3 {
		for _, serve := range []http.HandlerFunc{hc.serveHealth, hc.serveReady} {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			serve(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/healthz", nil))
			rec := httptest.NewRecorder()
			serve(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			require.Equal(t, http.StatusOK, rec.Code)
		}
	}
	require.Empty(t, logs.String())
	require.False(t, hc.storeDown.Load())
}

// TestHealthCountsAreOperators: /healthz answers anyone, but the databases of every
// account are counted only for the clients /metrics lets in (loopback, or the metrics
// token): an anonymous client, or a tenant, learns nothing of the other accounts.
func TestHealthCountsAreOperators(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	const token = "a-long-metrics-token-0123456789"
	m := NewMain(io.Discard, io.Discard)
	m.logger = slog.New(slog.DiscardHandler)
	m.Store = db
	m.Config.MetricsToken = token
	hc := &healthCheck{m: m}
	get := func(remote, auth string) health {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		req.RemoteAddr = remote
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		hc.serveHealth(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.NotContains(t, rec.Body.String(), `"databases"`)
		var h health
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &h))
		return h
	}
	var h health
	for _, c := range []struct{ remote, auth string }{
		{"203.0.113.7:4242", ""},
		{"203.0.113.7:4242", "Bearer wrong-token-0123456789"},
		{"[2001:db8::1]:4242", ""},
	} {
		h = get(c.remote, c.auth)
		require.Equal(t, "ok", h.Status, c)
		require.True(t, h.Store.Reachable, c)
	}
	full := func(remote, auth string) map[clouddb.DatabaseStatus]int {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		req.RemoteAddr = remote
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		hc.serveHealth(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		var h health
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &h))
		return h.Databases
	}
	zero := map[clouddb.DatabaseStatus]int{"active": 0, "pending": 0, "active-change-pending": 0, "deleting": 0, "error": 0}
	require.Equal(t, zero, full("127.0.0.1:4242", ""))
	require.Equal(t, zero, full("203.0.113.7:4242", "Bearer "+token))
}

// slowStore is a store whose counts and reads wait for release, counting the calls.
type slowStore struct {
	*sqlite.DB
	release chan struct{}
	calls   atomic.Int32
}

func (s *slowStore) DatabaseCounts(ctx context.Context) (map[clouddb.DatabaseStatus]int, error) {
	s.calls.Add(1)
	<-s.release
	return s.DB.DatabaseCounts(ctx)
}

func (s *slowStore) View(ctx context.Context, fn func(clouddb.Tx) error) error {
	s.calls.Add(1)
	<-s.release
	return s.DB.View(ctx, fn)
}

// TestHealthProbesShareTheStore: probes that arrive while the store is being asked wait
// for that answer instead of asking again, so that anonymous clients cannot load the
// store with as many queries as they send requests.
func TestHealthProbesShareTheStore(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	store := &slowStore{DB: db, release: make(chan struct{})}
	m := NewMain(io.Discard, io.Discard)
	m.logger = slog.New(slog.DiscardHandler)
	m.Store = store
	m.readyOnce.Do(func() { close(m.ready) })
	hc := &healthCheck{m: m}
	const probes = 20
	for _, serve := range []http.HandlerFunc{hc.serveHealth, hc.serveReady} {
		store.calls.Store(0)
		var wg sync.WaitGroup
		codes := make(chan int, probes)
		for range probes {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				serve(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
				codes <- rec.Code
			})
		}
		time.Sleep(200 * time.Millisecond) // the probes arrive and wait
		close(store.release)
		wg.Wait()
		close(codes)
		for c := range codes {
			require.Equal(t, http.StatusOK, c)
		}
		require.EqualValues(t, 1, store.calls.Load())
		store.release = make(chan struct{})
	}
}

// TestHealthQueryPanicIsAFailure: the store question runs in a goroutine of its own; a
// panic there is that question's failure (503 for its probes), not the service's end.
func TestHealthQueryPanicIsAFailure(t *testing.T) {
	var h healthCheck
	var slot *storeCheck
	c := h.ask(&slot, func(context.Context) (map[clouddb.DatabaseStatus]int, error) { panic("a bug in the store") })
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the question never ended")
	}
	var p *clouddb.PanicError
	require.ErrorAs(t, c.err, &p)
	require.Nil(t, slot, "the slot is free for the next question")
}
