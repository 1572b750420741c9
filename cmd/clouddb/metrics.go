package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"clouddb"
	"clouddb/internal/metrics"
)

// Who may read /metrics: its figures span every tenant (their databases' ids, sizes and
// traffic), so clients on loopback read it freely, and any other client only with
// "Authorization: Bearer <token>" when --metrics-token (CLOUDDB_METRICS_TOKEN) is set;
// without a token they get 403. A reverse proxy on this machine makes every client look
// like loopback: such a proxy must not pass /metrics on (docs/metrics.md).

// defaultMetricsInterval is how often the databases' figures are read when
// --metrics-interval is not set (tests shorten it).
var defaultMetricsInterval = metrics.DefaultStatsInterval

// storeQueryTimeout bounds the store's queries a scrape or a health check makes.
const storeQueryTimeout = 2 * time.Second

// minMetricsToken is the shortest --metrics-token taken: it guards every tenant's figures.
const minMetricsToken = 16

// validateMetrics checks the metrics flags.
func validateMetrics(c *Config) error {
	if c.MetricsToken != "" && (len(c.MetricsToken) < minMetricsToken || strings.ContainsAny(c.MetricsToken, " \t\r\n")) {
		return errors.New("--metrics-token: want at least 16 characters and no white space")
	}
	if c.MetricsInterval < 0 || (c.MetricsInterval > 0 && c.MetricsInterval < 100*time.Millisecond) {
		return errors.New("--metrics-interval must be at least 100ms")
	}
	return nil
}

// initMetrics makes the metrics and hooks them to the task engine and the reconciler;
// Run calls it once both exist.
func (m *Main) initMetrics() {
	interval := m.Config.MetricsInterval
	if interval == 0 {
		interval = defaultMetricsInterval
	}
	m.metrics = metrics.New(interval)
	processed := m.Engine.Processed
	m.Engine.Processed = func(t *clouddb.Task) {
		m.metrics.TaskProcessed(t)
		if processed != nil {
			processed(t)
		}
	}
	m.Reconciler.Provisioned = func(_ *clouddb.Database, took time.Duration) { m.metrics.DatabaseProvisioned(took) }
	// Run sets m.Store before it serves anything.
	m.metrics.WatchStore(func() clouddb.Store { return m.Store }, storeQueryTimeout)
}

// mountMetrics serves /metrics.
func (m *Main) mountMetrics(mux *http.ServeMux) { mux.Handle("GET /metrics", m.metricsHandler()) }

// metricsHandler serves the metrics to the clients metrics.Guard lets in.
func (m *Main) metricsHandler() http.Handler {
	return metrics.Guard(m.Config.MetricsToken, m.metrics.Handler())
}

// instrumentAPI counts and times the cloud API's requests by route.
func (m *Main) instrumentAPI(api http.Handler) http.Handler { return m.metrics.InstrumentRoutes(api) }

// collectStats reads the databases' figures while this process runs them (lead starts it
// with the workers and ends it with them; the figures are forgotten then, as another
// replica may take over).
func (m *Main) collectStats(ctx context.Context) {
	reader, ok := m.DataPlane.(clouddb.StatsReader)
	if !ok {
		// The kubernetes driver reads no figures yet: the gauges stay empty.
		<-ctx.Done()
		return
	}
	m.metrics.Stats.Run(ctx, m.Store, reader, m.logger)
}
