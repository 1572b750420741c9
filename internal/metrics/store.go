package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"clouddb"
)

// DatabaseStatuses are the statuses databases are counted by; each is reported, zero
// included, so that a status that empties shows 0 rather than vanishing.
var DatabaseStatuses = []clouddb.DatabaseStatus{
	clouddb.DatabasePending, clouddb.DatabaseActive, clouddb.DatabaseChangePending,
	clouddb.DatabaseDeleting, clouddb.DatabaseError,
}

// CountDatabases counts the databases by status, every status of DatabaseStatuses
// present: in one query on a store that is a clouddb.StatusCounter, else one count per
// status in one read transaction.
func CountDatabases(ctx context.Context, store clouddb.Store) (map[clouddb.DatabaseStatus]int, error) {
	counts := make(map[clouddb.DatabaseStatus]int, len(DatabaseStatuses))
	if sc, ok := store.(clouddb.StatusCounter); ok {
		got, err := sc.DatabaseCounts(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range DatabaseStatuses {
			counts[s] = got[s]
		}
		return counts, nil
	}
	err := store.View(ctx, func(tx clouddb.Tx) error {
		for _, s := range DatabaseStatuses {
			_, n, err := tx.Databases(ctx, clouddb.DatabaseFilter{Statuses: []clouddb.DatabaseStatus{s}, Limit: 1})
			if err != nil {
				return err
			}
			counts[s] = n
		}
		return nil
	})
	return counts, err
}

// storeCollector reads the store's counts at each scrape: two cheap queries (see
// clouddb.StatusCounter), bounded by a timeout. A store that does not answer in time
// reports clouddb_store_up 0 and leaves the counts out.
type storeCollector struct {
	store   func() clouddb.Store
	timeout time.Duration
	now     func() time.Time
}

var (
	storeUpDesc = prometheus.NewDesc(Namespace+"_store_up",
		"1 when the store answered this scrape's queries in time, else 0.", nil, nil)
	databasesDesc = prometheus.NewDesc(Namespace+"_databases",
		"Databases by status (all accounts).", []string{"status"}, nil)
	queueDepthDesc = prometheus.NewDesc(Namespace+"_task_queue_depth",
		"Tasks received and waiting to be processed.", nil, nil)
	queueAgeDesc = prometheus.NewDesc(Namespace+"_task_queue_oldest_age_seconds",
		"Age of the oldest task waiting to be processed; 0 when none waits.", nil, nil)
	tasksInProgressDesc = prometheus.NewDesc(Namespace+"_tasks_in_progress",
		"Tasks being processed now.", nil, nil)
)

// WatchStore registers the store's counts, read at each scrape within timeout from the
// store that store returns then (the service opens its store after it made its metrics).
func (m *Metrics) WatchStore(store func() clouddb.Store, timeout time.Duration) {
	m.Registry.MustRegister(&storeCollector{store: store, timeout: timeout, now: time.Now})
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storeUpDesc
	ch <- databasesDesc
	ch <- queueDepthDesc
	ch <- queueAgeDesc
	ch <- tasksInProgressDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	up := 1.0
	defer func() { ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, up) }()
	store := c.store()
	counts, err := CountDatabases(ctx, store)
	if err != nil {
		up = 0
		return
	}
	for _, s := range DatabaseStatuses {
		ch <- prometheus.MustNewConstMetric(databasesDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	sc, ok := store.(clouddb.StatusCounter)
	if !ok {
		return
	}
	q, err := sc.TaskQueue(ctx)
	if err != nil {
		up = 0
		return
	}
	age := 0.0
	if !q.OldestReceived.IsZero() {
		age = max(c.now().Sub(q.OldestReceived).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(q.Received))
	ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(tasksInProgressDesc, prometheus.GaugeValue, float64(q.InProgress))
}
