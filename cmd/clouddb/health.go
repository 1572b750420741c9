package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"clouddb"
	"clouddb/internal/metrics"
)

// /healthz and /readyz answer anyone, without authentication, in JSON: they say whether
// this process serves and its store answers, never anything secret (no store URL, no
// error text, which may name hosts; those go to the log). The databases of every account
// are counted only for the clients /metrics lets in.

// health is the body of /healthz.
type health struct {
	// Status is "ok", or "unavailable" (503) when the store does not answer.
	Status  string      `json:"status"`
	Version string      `json:"version"`
	Store   storeHealth `json:"store"`
	// Databases counts the databases of every account by status; absent when the store
	// does not answer, and for a client /metrics would not let in: the counts span every
	// tenant.
	Databases map[clouddb.DatabaseStatus]int `json:"databases,omitempty"`
	// Workers says whether this process runs the task engine and the databases (with a
	// shared store, one replica at a time does).
	Workers bool `json:"workers"`
	// Reason says what is wrong when Status is not "ok".
	Reason string `json:"reason,omitempty"`
}

type storeHealth struct {
	// Kind is "sqlite" or "postgres".
	Kind      string `json:"kind"`
	Reachable bool   `json:"reachable"`
	// LatencyMs is how long the store took to count the databases.
	LatencyMs float64 `json:"latencyMs"`
}

// ready is the body of /readyz.
type ready struct {
	// Status is "ready", or "starting" or "unavailable" (503).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// healthCheck serves both endpoints; storeDown remembers the last outcome, so that the
// store's failures are logged when they begin and end, not at every probe. The probes
// that arrive while the store is being asked share that answer: anyone may probe, and
// must not make the store run as many queries as they send requests.
type healthCheck struct {
	m         *Main
	storeDown atomic.Bool

	mu               sync.Mutex
	counting, taking *storeCheck
}

// storeCheck is one question to the store, which the probes that arrive meanwhile wait for.
type storeCheck struct {
	done    chan struct{}
	counts  map[clouddb.DatabaseStatus]int
	err     error
	latency time.Duration
}

// ask returns the question under way in slot, or starts one that runs ask within
// storeQueryTimeout, whoever waits for it.
func (h *healthCheck) ask(slot **storeCheck, ask func(context.Context) (map[clouddb.DatabaseStatus]int, error)) *storeCheck {
	h.mu.Lock()
	defer h.mu.Unlock()
	if *slot != nil {
		return *slot
	}
	c := &storeCheck{done: make(chan struct{})}
	*slot = c
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeQueryTimeout)
		defer cancel()
		start := time.Now()
		func() {
			// Out of the request's goroutine: a panic here would end the service.
			defer func() {
				if p := clouddb.Recovered(recover()); p != nil {
					c.err = p
				}
			}()
			c.counts, c.err = ask(ctx)
		}()
		c.latency = time.Since(start)
		h.mu.Lock()
		*slot = nil
		h.mu.Unlock()
		close(c.done)
	}()
	return c
}

// wait waits for c, or for the client to go away (false).
func wait(r *http.Request, c *storeCheck) bool {
	select {
	case <-c.done:
		return true
	case <-r.Context().Done():
		return false
	}
}

// mountHealth serves /healthz and /readyz. The cloud API's own /healthz (bare status)
// is shadowed on this listener by this fuller one, which answers the typed client's
// Health the same way while the store answers.
func (m *Main) mountHealth(mux *http.ServeMux) {
	h := &healthCheck{m: m}
	mux.HandleFunc("GET /healthz", h.serveHealth)
	mux.HandleFunc("GET /readyz", h.serveReady)
}

func (h *healthCheck) serveHealth(w http.ResponseWriter, r *http.Request) {
	body := health{Status: "ok", Version: clouddb.Version(), Store: storeHealth{Kind: storeKind(h.m.Config.Store)}, Workers: h.m.Leading()}
	c := h.ask(&h.counting, func(ctx context.Context) (map[clouddb.DatabaseStatus]int, error) {
		return metrics.CountDatabases(ctx, h.m.Store)
	})
	if !wait(r, c) {
		// The client went away: that says nothing of the store.
		return
	}
	body.Store.LatencyMs = float64(c.latency.Microseconds()) / 1000
	if reason := h.storeOutcome(c.err); reason != "" {
		body.Status, body.Reason = "unavailable", reason
		writeHealthJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	body.Store.Reachable = true
	if metrics.Checker(h.m.Config.MetricsToken)(r) {
		body.Databases = c.counts
	}
	writeHealthJSON(w, http.StatusOK, body)
}

// serveReady answers 200 once the service serves and its store answers a read (one
// row), 503 otherwise.
func (h *healthCheck) serveReady(w http.ResponseWriter, r *http.Request) {
	select {
	case <-h.m.Ready():
	default:
		writeHealthJSON(w, http.StatusServiceUnavailable, ready{Status: "starting", Reason: "clouddb is starting"})
		return
	}
	c := h.ask(&h.taking, func(ctx context.Context) (map[clouddb.DatabaseStatus]int, error) {
		return nil, h.m.Store.View(ctx, func(tx clouddb.Tx) error {
			_, err := tx.Setting(ctx, keyCheck)
			if errors.Is(err, clouddb.ErrNotFound) {
				return nil
			}
			return err
		})
	})
	if !wait(r, c) {
		return
	}
	if reason := h.storeOutcome(c.err); reason != "" {
		writeHealthJSON(w, http.StatusServiceUnavailable, ready{Status: "unavailable", Reason: reason})
		return
	}
	writeHealthJSON(w, http.StatusOK, ready{Status: "ready"})
}

// storeOutcome logs a change of the store's state and returns what a client is told of a
// failure ("" for none).
func (h *healthCheck) storeOutcome(err error) string {
	was := h.storeDown.Swap(err != nil)
	switch {
	case err != nil && !was:
		h.m.logger.Error("health check: the store does not answer", "err", err)
	case err == nil && was:
		h.m.logger.Info("health check: the store answers again")
	}
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "the store did not answer within " + storeQueryTimeout.String()
	}
	return "the store cannot be read"
}

// storeKind names the kind of --store, never its URL (which may hold a password).
func storeKind(store string) string {
	if isShared(store) {
		return "postgres"
	}
	return "sqlite"
}

func writeHealthJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	// A probe must see the state of now, not a cached one.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
