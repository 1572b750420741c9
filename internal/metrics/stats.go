package metrics

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"clouddb"
)

// Bounds of a round of the databases' figures.
const (
	// DefaultStatsInterval is how often the figures are read: about as often as
	// Prometheus scrapes.
	DefaultStatsInterval = 10 * time.Second
	// statsTimeout bounds the reading of one database (all its shards).
	statsTimeout = 3 * time.Second
	// statsConcurrency bounds the databases read at once.
	statsConcurrency = 4
)

// StatsCollector keeps the last figures read from each database's servers and serves
// them at each scrape: a scrape only reads this cache, so it never waits on a Redis
// server. Run fills it while this process runs the databases; it holds the figures of the
// databases that exist at the last round only, so a deleted database's series go with
// it.
//
// A tenant can make its servers hang or answer slowly (a long script, a slow command):
// a database whose last read failed is read in the background, in a lane of its own, and
// a round neither waits for it nor reads it again while that read is under way. So such
// databases cost a round their timeout once, when they begin to fail, and never delay
// the other databases' figures.
type StatsCollector struct {
	// Interval is the time between rounds; 0 means DefaultStatsInterval.
	Interval time.Duration
	// Timeout bounds the reading of one database; 0 means statsTimeout.
	Timeout time.Duration

	mu      sync.RWMutex
	figures map[int]databaseFigures
	// listed are the databases the last round listed: a read that ends after its
	// database went (or after Run ended) is dropped.
	listed map[int]bool
	// reading are the databases whose read is under way.
	reading map[int]bool
	// down remembers the databases whose last read failed, to log a failure once.
	down map[int]bool
	// failing bounds the background reads of the databases whose last read failed.
	failing chan struct{}
	// background are those reads.
	background sync.WaitGroup
}

// databaseFigures are what a round learnt of one database.
type databaseFigures struct {
	subscriptionID int
	stats          clouddb.DatabaseStats
	ok             bool
}

// statsStatuses are the statuses of databases whose servers run and are read.
var statsStatuses = []clouddb.DatabaseStatus{clouddb.DatabaseActive, clouddb.DatabaseChangePending}

// Run reads the figures every Interval until ctx ends, then forgets them: another
// process may run the databases from then on.
func (c *StatsCollector) Run(ctx context.Context, store clouddb.Store, reader clouddb.StatsReader, log *slog.Logger) {
	defer func() {
		// The background reads end with ctx; none may fill the cache after it is emptied.
		c.background.Wait()
		c.forget()
	}()
	interval := c.Interval
	if interval <= 0 {
		interval = DefaultStatsInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	// A store out of reach fails every round: that is logged when it begins and ends.
	failing := false
	for {
		err := c.Refresh(ctx, store, reader, log)
		switch {
		case ctx.Err() != nil:
		case err != nil && !failing:
			log.Warn("cannot list the databases to read their figures; the last ones read are kept", "err", err)
		case err == nil && failing:
			log.Info("listing the databases to read their figures again")
		}
		failing = err != nil && ctx.Err() == nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh reads the running databases' figures, a few at a time, each within a timeout:
// it waits for those whose last read did not fail, and starts in the background the
// reading of the others (but those still being read). Each database's figures replace
// its last ones as soon as they are read; those of the databases no longer listed go.
// When the store cannot list the databases, the cache is left as it was.
func (c *StatsCollector) Refresh(ctx context.Context, store clouddb.Store, reader clouddb.StatsReader, log *slog.Logger) error {
	var dbs []*clouddb.Database
	err := store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		dbs, _, err = tx.Databases(ctx, clouddb.DatabaseFilter{Statuses: statsStatuses})
		return err
	})
	if err != nil {
		return err
	}
	var now, later []*clouddb.Database
	c.mu.Lock()
	c.listed = make(map[int]bool, len(dbs))
	for _, d := range dbs {
		c.listed[d.ID] = true
	}
	for id := range c.figures {
		if !c.listed[id] {
			delete(c.figures, id)
		}
	}
	for id := range c.down {
		if !c.listed[id] {
			delete(c.down, id)
		}
	}
	if c.reading == nil {
		c.reading = map[int]bool{}
	}
	if c.failing == nil {
		c.failing = make(chan struct{}, statsConcurrency)
	}
	for _, d := range dbs {
		if c.reading[d.ID] {
			continue
		}
		c.reading[d.ID] = true
		if f, ok := c.figures[d.ID]; ok && !f.ok {
			later = append(later, d)
		} else {
			now = append(now, d)
		}
	}
	failingSem := c.failing
	c.mu.Unlock()

	for _, d := range later {
		c.background.Go(func() {
			select {
			case failingSem <- struct{}{}:
				defer func() { <-failingSem }()
				c.read(ctx, reader, log, d)
			case <-ctx.Done():
				c.done(d.ID)
			}
		})
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, statsConcurrency)
	for i, d := range now {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			for _, d := range now[i:] {
				c.done(d.ID)
			}
			wg.Wait()
			return ctx.Err()
		}
		wg.Go(func() {
			defer func() { <-sem }()
			c.read(ctx, reader, log, d)
		})
	}
	wg.Wait()
	return ctx.Err()
}

// read reads one database's figures within the timeout and keeps them, if the database
// is still listed.
func (c *StatsCollector) read(ctx context.Context, reader clouddb.StatsReader, log *slog.Logger, d *clouddb.Database) {
	defer c.done(d.ID)
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = statsTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := readStats(rctx, reader, d)
	var p *clouddb.PanicError
	if errors.As(err, &p) {
		log.Error("reading a database's figures panicked", "database_id", d.ID, "panic", p.Value, "stack", string(p.Stack))
	}
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	if !c.listed[d.ID] {
		c.mu.Unlock()
		return
	}
	if c.figures == nil {
		c.figures = map[int]databaseFigures{}
	}
	c.figures[d.ID] = databaseFigures{subscriptionID: d.SubscriptionID, stats: s, ok: err == nil}
	c.mu.Unlock()
	c.logChange(log, d.ID, err)
}

// readStats reads d's figures; a panic (a bug met while reading one server) is that
// database's failure: these reads run in goroutines of their own, where it would end the
// service for every tenant.
func readStats(ctx context.Context, reader clouddb.StatsReader, d *clouddb.Database) (s clouddb.DatabaseStats, err error) {
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			err = p
		}
	}()
	return reader.Stats(ctx, clouddb.InstanceOf(d))
}

// done marks a database's read as ended.
func (c *StatsCollector) done(id int) {
	c.mu.Lock()
	delete(c.reading, id)
	c.mu.Unlock()
}

// logChange logs a database whose figures could not be read, once until they can again:
// a server restarting fails a round or two, and would fill the log every interval.
func (c *StatsCollector) logChange(log *slog.Logger, id int, err error) {
	c.mu.Lock()
	was := c.down[id]
	if err != nil {
		if c.down == nil {
			c.down = map[int]bool{}
		}
		c.down[id] = true
	} else {
		delete(c.down, id)
	}
	c.mu.Unlock()
	switch {
	case err != nil && !was:
		// Debug: every database of a restart is unreadable while its server starts, which
		// at 1,000 databases was 2,000 lines; clouddb_database_up says it to operators.
		log.Debug("cannot read a database's figures; its clouddb_database_up is 0 until it can", "database_id", id, "err", err)
	case err == nil && was:
		log.Debug("reading a database's figures again", "database_id", id)
	}
}

// forget drops every database's figures.
func (c *StatsCollector) forget() {
	c.mu.Lock()
	c.figures, c.down, c.listed = nil, nil, nil
	c.mu.Unlock()
}

var (
	databaseLabels = []string{"database_id", "subscription_id"}
	databaseUpDesc = prometheus.NewDesc(Namespace+"_database_up",
		"1 when the last round read the database's figures from its servers, else 0.", databaseLabels, nil)
	usedMemoryDesc = prometheus.NewDesc(Namespace+"_database_memory_used_bytes",
		"Memory the database's data takes (INFO used_memory, summed over its shards' primaries).", databaseLabels, nil)
	maxMemoryDesc = prometheus.NewDesc(Namespace+"_database_memory_max_bytes",
		"The database's memory limit (INFO maxmemory, summed over its shards' primaries).", databaseLabels, nil)
	keysDesc = prometheus.NewDesc(Namespace+"_database_keys",
		"Keys in the database, every logical database and shard included (replicas not counted again).", databaseLabels, nil)
	opsDesc = prometheus.NewDesc(Namespace+"_database_ops_per_second",
		"Commands per second the database's primaries process (INFO instantaneous_ops_per_sec).", databaseLabels, nil)
	clientsDesc = prometheus.NewDesc(Namespace+"_database_connected_clients",
		"Client connections to the database's primaries (clouddb's own reading left out).", databaseLabels, nil)
)

func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{databaseUpDesc, usedMemoryDesc, maxMemoryDesc, keysDesc, opsDesc, clientsDesc} {
		ch <- d
	}
}

func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for id, f := range c.figures {
		labels := []string{strconv.Itoa(id), strconv.Itoa(f.subscriptionID)}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		if !f.ok {
			gauge(databaseUpDesc, 0)
			continue
		}
		gauge(databaseUpDesc, 1)
		gauge(usedMemoryDesc, float64(f.stats.UsedMemoryBytes))
		gauge(maxMemoryDesc, float64(f.stats.MaxMemoryBytes))
		gauge(keysDesc, float64(f.stats.Keys))
		gauge(opsDesc, f.stats.OpsPerSecond)
		gauge(clientsDesc, float64(f.stats.ConnectedClients))
	}
}
