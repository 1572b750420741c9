package metrics_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/metrics"
	"clouddb/sqlite"
)

// createDatabases makes n active databases in one subscription and returns their ids,
// in order.
func createDatabases(t *testing.T, db *sqlite.DB, n int) []int {
	t.Helper()
	ctx := t.Context()
	var ids []int
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		if err := tx.CreateAccount(ctx, a); err != nil {
			return err
		}
		if err := tx.CreateCloudAccount(ctx, &clouddb.CloudAccount{ID: clouddb.InternalCloudAccountID, Name: "i", Provider: "AWS", Status: clouddb.CloudAccountActive}); err != nil {
			return err
		}
		s := &clouddb.Subscription{AccountID: a.ID, Name: "s", Status: clouddb.SubscriptionActive}
		if err := tx.CreateSubscription(ctx, s); err != nil {
			return err
		}
		for i := range n {
			d := &clouddb.Database{SubscriptionID: s.ID, AccountID: a.ID, Status: clouddb.DatabaseActive, Port: 10000 + i, Password: "p", Spec: clouddb.DatabaseSpec{Name: "d" + strconv.Itoa(i), Protocol: "redis"}}
			if err := tx.CreateDatabase(ctx, d); err != nil {
				return err
			}
			ids = append(ids, d.ID)
		}
		return nil
	}))
	return ids
}

// hangingReader: the databases in hang never answer (a server stopped, or busy with a
// tenant's script) until the read's context ends; the others answer at once, their keys
// counting the reads so far.
type hangingReader struct {
	hang  map[int]bool
	mu    sync.Mutex
	reads map[int]int
}

func (h *hangingReader) Stats(ctx context.Context, in clouddb.Instance) (clouddb.DatabaseStats, error) {
	if h.hang[in.DatabaseID] {
		<-ctx.Done()
		return clouddb.DatabaseStats{}, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads[in.DatabaseID]++
	return clouddb.DatabaseStats{Keys: int64(h.reads[in.DatabaseID])}, nil
}

// TestStatsSlowDatabasesDoNotHoldUpOthers: a tenant whose servers hang (as many as the
// reads run at once) costs a round its timeout once; from the next round on, the other
// databases' figures are read without waiting behind them, and the hanging ones stay
// reported down.
func TestStatsSlowDatabasesDoNotHoldUpOthers(t *testing.T) {
	db := openStore(t)
	ids := createDatabases(t, db, 6)
	const timeout = 2 * time.Second
	reader := &hangingReader{hang: map[int]bool{ids[0]: true, ids[1]: true, ids[2]: true, ids[3]: true}, reads: map[int]int{}}
	c := &metrics.StatsCollector{Timeout: timeout}
	log := slog.New(slog.DiscardHandler)
	ctx := t.Context()

	require.NoError(t, c.Refresh(ctx, db, reader, log))
	for range 3 {
		start := time.Now()
		require.NoError(t, c.Refresh(ctx, db, reader, log))
		require.Less(t, time.Since(start), timeout/2, "a round behind servers that hung before")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	out := serve(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), "GET", "/metrics", "", nil).Body.String()
	for _, id := range ids[:4] {
		require.Contains(t, out, `clouddb_database_up{database_id="`+strconv.Itoa(id)+`",subscription_id="1"} 0`)
	}
	for _, id := range ids[4:] {
		require.Contains(t, out, `clouddb_database_keys{database_id="`+strconv.Itoa(id)+`",subscription_id="1"} 4`)
	}
}
