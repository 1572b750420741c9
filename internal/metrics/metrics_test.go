package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi"
	"clouddb/internal/metrics"
	"clouddb/sqlite"
)

func openStore(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// serve answers one request of remote through h.
func serve(h http.Handler, method, path, remote string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if remote != "" {
		req.RemoteAddr = remote
	}
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestInstrumentRoutes: behind a listener's mux, as clouddb serves it, the cloud API's
// requests are counted by the pattern its own mux matched, never by the raw path; a
// method no route knows is one fixed label.
func TestInstrumentRoutes(t *testing.T) {
	m := metrics.New(0)
	api := (&cloudapi.Server{Store: openStore(t), Logger: slog.New(slog.DiscardHandler)}).Handler()
	outer := http.NewServeMux()
	outer.Handle("/", m.InstrumentRoutes(api))

	require.Equal(t, http.StatusOK, serve(outer, "GET", "/healthz", "", nil).Code)
	require.Equal(t, http.StatusUnauthorized, serve(outer, "GET", "/v1/subscriptions/42", "", nil).Code)
	require.Equal(t, http.StatusUnauthorized, serve(outer, "GET", "/subscriptions/43", "", nil).Code, "a bare path the API normalises")
	require.Equal(t, http.StatusNotFound, serve(outer, "GET", "/v1/nothing/here/123", "", nil).Code)
	serve(outer, "BREW", "/v1/subscriptions", "", nil)

	expected := `
# HELP clouddb_http_requests_total Requests to the cloud API, by route (the API's pattern, or "unmatched"), method and status code.
# TYPE clouddb_http_requests_total counter
clouddb_http_requests_total{code="200",method="GET",route="GET /healthz"} 1
clouddb_http_requests_total{code="401",method="GET",route="GET /v1/subscriptions/{subscriptionId}"} 2
clouddb_http_requests_total{code="404",method="GET",route="unmatched"} 1
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(expected+otherMethod(t, m)), "clouddb_http_requests_total"))
	n, err := testutil.GatherAndCount(m.Registry, "clouddb_http_request_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 4, n, "one histogram per series of the counter")
}

// TestInstrumentRoutesSeries: every route, method and code has a series of its own, also
// once each has been seen (the series are remembered after a route's first request).
func TestInstrumentRoutesSeries(t *testing.T) {
	m := metrics.New(0)
	api := http.NewServeMux()
	api.HandleFunc("GET /x/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.PathValue("code"))
		require.NoError(t, err)
		w.WriteHeader(code)
	})
	h := m.InstrumentRoutes(api)
	for _, req := range [][2]string{{"GET", "/x/200"}, {"GET", "/x/404"}, {"GET", "/x/200"}, {"HEAD", "/x/404"}, {"GET", "/x/200"}, {"GET", "/y"}} {
		serve(h, req[0], req[1], "", nil)
	}
	expected := `
# HELP clouddb_http_requests_total Requests to the cloud API, by route (the API's pattern, or "unmatched"), method and status code.
# TYPE clouddb_http_requests_total counter
clouddb_http_requests_total{code="200",method="GET",route="GET /x/{code}"} 3
clouddb_http_requests_total{code="404",method="GET",route="GET /x/{code}"} 1
clouddb_http_requests_total{code="404",method="HEAD",route="GET /x/{code}"} 1
clouddb_http_requests_total{code="404",method="GET",route="unmatched"} 1
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(expected), "clouddb_http_requests_total"))
	n, err := testutil.GatherAndCount(m.Registry, "clouddb_http_request_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 4, n, "one histogram per series of the counter")
}

// otherMethod is the expected series of the BREW request, whatever code the API gave it.
func otherMethod(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "clouddb_http_requests_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == "other" {
				require.Equal(t, metrics.UnmatchedRoute, labels["route"])
				return `clouddb_http_requests_total{code="` + labels["code"] + `",method="other",route="unmatched"} 1` + "\n"
			}
		}
	}
	t.Fatal("no series with method other")
	return ""
}

// TestGuard: loopback clients read freely; others need the bearer token when there is
// one, and are refused when there is none.
func TestGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "figures") })
	open := metrics.Guard("", ok)
	require.Equal(t, http.StatusOK, serve(open, "GET", "/metrics", "127.0.0.1:1234", nil).Code)
	require.Equal(t, http.StatusOK, serve(open, "GET", "/metrics", "[::1]:1234", nil).Code)
	rec := serve(open, "GET", "/metrics", "192.0.2.1:1234", http.Header{"Authorization": {"Bearer anything"}})
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.NotContains(t, rec.Body.String(), "figures")

	const token = "a-long-metrics-token-0123456789"
	guarded := metrics.Guard(token, ok)
	require.Equal(t, http.StatusOK, serve(guarded, "GET", "/metrics", "127.0.0.1:1234", nil).Code)
	rec = serve(guarded, "GET", "/metrics", "192.0.2.1:1234", http.Header{"Authorization": {"Bearer " + token}})
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "figures", rec.Body.String())
	for _, h := range []string{"", "Bearer ", "Bearer " + token + "x", "Bearer " + token[:10], "Basic " + token, token} {
		rec = serve(guarded, "GET", "/metrics", "192.0.2.1:1234", http.Header{"Authorization": {h}})
		require.Equal(t, http.StatusUnauthorized, rec.Code, "Authorization %q", h)
		require.NotContains(t, rec.Body.String(), "figures")
		require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")
	}
}

// TestStoreCounts: the counts come from the store at each scrape; a store that cannot
// be read reports clouddb_store_up 0 and no counts, and the scrape still answers.
func TestStoreCounts(t *testing.T) {
	db := openStore(t)
	m := metrics.New(0)
	m.WatchStore(func() clouddb.Store { return db }, time.Second)
	require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP clouddb_store_up 1 when the store answered this scrape's queries in time, else 0.
# TYPE clouddb_store_up gauge
clouddb_store_up 1
# HELP clouddb_task_queue_depth Tasks received and waiting to be processed.
# TYPE clouddb_task_queue_depth gauge
clouddb_task_queue_depth 0
`), "clouddb_store_up", "clouddb_task_queue_depth"))
	n, err := testutil.GatherAndCount(m.Registry, "clouddb_databases")
	require.NoError(t, err)
	require.Equal(t, 5, n, "every status")

	require.NoError(t, db.Close())
	require.NoError(t, testutil.GatherAndCompare(m.Registry, strings.NewReader(`
# HELP clouddb_store_up 1 when the store answered this scrape's queries in time, else 0.
# TYPE clouddb_store_up gauge
clouddb_store_up 0
`), "clouddb_store_up", "clouddb_databases", "clouddb_task_queue_depth"))
	rec := serve(m.Handler(), "GET", "/metrics", "", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "clouddb_store_up 0")
}

// failingReader reads the figures of the databases it knows, and fails the others.
type failingReader map[int]clouddb.DatabaseStats

func (f failingReader) Stats(_ context.Context, in clouddb.Instance) (clouddb.DatabaseStats, error) {
	s, ok := f[in.DatabaseID]
	if !ok {
		return clouddb.DatabaseStats{}, errors.New("no server")
	}
	return s, nil
}

// TestStatsRounds: a round keeps the figures of the running databases (up 0 for one it
// could not read), drops those of databases gone, and the end of Run forgets them all.
func TestStatsRounds(t *testing.T) {
	db := openStore(t)
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
		for i, st := range []clouddb.DatabaseStatus{clouddb.DatabaseActive, clouddb.DatabaseActive, clouddb.DatabasePending} {
			d := &clouddb.Database{SubscriptionID: s.ID, AccountID: a.ID, Status: st, Port: 10000 + i, Password: "secret-password", Spec: clouddb.DatabaseSpec{Name: "d" + string(rune('0'+i)), Protocol: "redis"}}
			if err := tx.CreateDatabase(ctx, d); err != nil {
				return err
			}
			ids = append(ids, d.ID)
		}
		return nil
	}))
	m := metrics.New(0)
	reader := failingReader{ids[0]: {UsedMemoryBytes: 1000, MaxMemoryBytes: 2000, Keys: 7, OpsPerSecond: 3, ConnectedClients: 2}}
	log := slog.New(slog.DiscardHandler)
	require.NoError(t, m.Stats.Refresh(ctx, db, reader, log))
	out := serve(m.Handler(), "GET", "/metrics", "", nil).Body.String()
	first, second := `database_id="`+strconv.Itoa(ids[0])+`"`, `database_id="`+strconv.Itoa(ids[1])+`"`
	require.Contains(t, out, `clouddb_database_keys{`+first+`,subscription_id="1"} 7`)
	require.Contains(t, out, `clouddb_database_up{`+first+`,subscription_id="1"} 1`)
	require.Contains(t, out, `clouddb_database_up{`+second+`,subscription_id="1"} 0`)
	require.NotContains(t, out, `clouddb_database_keys{`+second)
	require.NotContains(t, out, `database_id="`+strconv.Itoa(ids[2])+`"`, "a pending database is not read")
	require.NotContains(t, out, "secret-password")

	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error { return tx.DeleteDatabase(ctx, ids[0]) }))
	require.NoError(t, m.Stats.Refresh(ctx, db, reader, log))
	out = serve(m.Handler(), "GET", "/metrics", "", nil).Body.String()
	require.NotContains(t, out, first, "a deleted database's series")
	require.Contains(t, out, second)

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { m.Stats.Run(runCtx, db, reader, log); close(done) }()
	cancel()
	<-done
	require.Zero(t, testutil.CollectAndCount(m.Stats))
}

// panickingReader panics for one database and reads the others from failingReader.
type panickingReader struct {
	failingReader
	panics int
}

func (p panickingReader) Stats(ctx context.Context, in clouddb.Instance) (clouddb.DatabaseStats, error) {
	if in.DatabaseID == p.panics {
		panic("a bug met reading one server")
	}
	return p.failingReader.Stats(ctx, in)
}

// TestStatsReadPanicIsThatDatabasesFailure: the reads run in goroutines of their own, so
// a panic in one (a driver bug met on one tenant's server) must be that database's
// failure, logged with its stack, not the end of the process.
func TestStatsReadPanicIsThatDatabasesFailure(t *testing.T) {
	db := openStore(t)
	ids := createDatabases(t, db, 2)
	m := metrics.New(0)
	reader := panickingReader{failingReader: failingReader{ids[0]: {Keys: 5}}, panics: ids[1]}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	require.NoError(t, m.Stats.Refresh(t.Context(), db, reader, log))
	out := serve(m.Handler(), "GET", "/metrics", "", nil).Body.String()
	require.Contains(t, out, `clouddb_database_up{database_id="`+strconv.Itoa(ids[0])+`"`)
	require.Regexp(t, `clouddb_database_keys\{database_id="`+strconv.Itoa(ids[0])+`",subscription_id="\d+"\} 5`, out)
	require.Regexp(t, `clouddb_database_up\{database_id="`+strconv.Itoa(ids[1])+`",subscription_id="\d+"\} 0`, out)
	require.Contains(t, logs.String(), "reading a database's figures panicked")
	require.Contains(t, logs.String(), "a bug met reading one server")
}

// TestGuardSchemeCase: the authentication scheme is case-insensitive (RFC 9110 11.1):
// a scraper that sends "bearer" gets in with the token, and with nothing else.
func TestGuardSchemeCase(t *testing.T) {
	const token = "a-long-metrics-token-0123456789"
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "figures") })
	guarded := metrics.Guard(token, ok)
	for _, h := range []string{"bearer " + token, "BEARER " + token} {
		require.Equal(t, http.StatusOK, serve(guarded, "GET", "/metrics", "192.0.2.1:1234", http.Header{"Authorization": {h}}).Code, h)
	}
	for _, h := range []string{"bearer", "bearer x" + token, "Bearer" + token, "bearer  " + token} {
		require.Equal(t, http.StatusUnauthorized, serve(guarded, "GET", "/metrics", "192.0.2.1:1234", http.Header{"Authorization": {h}}).Code, h)
	}
}
