// Package metrics is clouddb's Prometheus instrumentation: the cloud API's requests, the
// tasks, the store's counts read at scrape time, and each database's figures, read from
// its servers in the background so that a scrape never waits on a Redis server. Every
// series is on a registry of the service's own, never the global one, and its labels take
// a bounded set of values: routes are the API's patterns, never raw paths, and databases
// are named by id, never by name or password.
package metrics

import (
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"clouddb"
)

// Namespace prefixes every metric of clouddb's own.
const Namespace = "clouddb"

// Metrics are the service's metrics and the registry that serves them.
type Metrics struct {
	Registry *prometheus.Registry
	// Stats holds the databases' figures; Stats.Run fills it.
	Stats *StatsCollector

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	// requestSeries caches the series of requests and requestDuration by seriesKey.
	requestSeries sync.Map
	tasks         *prometheus.CounterVec
	taskDuration  *prometheus.HistogramVec
	provisioning  prometheus.Histogram
}

// Buckets of the histograms, in seconds. A request is milliseconds; a task waits its
// turn, and a data job (an import, a backup) may take many minutes; a database starts in
// about a second, a cluster with replicas in several.
var (
	taskBuckets         = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	provisioningBuckets = []float64{0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600}
)

// New makes the metrics and registers them, with the Go runtime's and the process's, on
// a new registry. statsInterval is how often the databases' figures are read.
func New(statsInterval time.Duration) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Stats:    &StatsCollector{Interval: statsInterval},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "http_requests_total",
			Help: "Requests to the cloud API, by route (the API's pattern, or \"unmatched\"), method and status code.",
		}, []string{"route", "method", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "http_request_duration_seconds",
			Help:    "Time the cloud API took to answer, by route, method and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method", "code"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tasks_processed_total",
			Help: "Tasks this process brought to a final state, by command type and status (processing-completed or processing-error).",
		}, []string{"command", "status"}),
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "task_duration_seconds",
			Help:    "Time from a task's submission to its final state, by command type.",
			Buckets: taskBuckets,
		}, []string{"command"}),
		provisioning: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "database_provisioning_seconds",
			Help:    "Time from a database's creation (its create task making it) to its first time active.",
			Buckets: provisioningBuckets,
		}),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; its labels say which clouddb runs.",
		ConstLabels: prometheus.Labels{"version": clouddb.Version(), "goversion": runtime.Version()},
	})
	build.Set(1)
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		build, m.requests, m.requestDuration, m.tasks, m.taskDuration, m.provisioning, m.Stats,
	)
	return m
}

// Handler serves the registry in Prometheus' text format (or OpenMetrics, when asked).
// A collector that fails leaves its series out, not the whole answer.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
		// A scraper that asks again while answers pile up is refused, not served late.
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// TaskProcessed counts a task that reached its final state.
func (m *Metrics) TaskProcessed(t *clouddb.Task) {
	if !t.Status.Final() {
		return
	}
	m.tasks.WithLabelValues(t.CommandType, string(t.Status)).Inc()
	if !t.CreatedAt.IsZero() && !t.UpdatedAt.Before(t.CreatedAt) {
		m.taskDuration.WithLabelValues(t.CommandType).Observe(t.UpdatedAt.Sub(t.CreatedAt).Seconds())
	}
}

// DatabaseProvisioned records how long a new database took to become active.
func (m *Metrics) DatabaseProvisioned(took time.Duration) {
	m.provisioning.Observe(max(took, 0).Seconds())
}
