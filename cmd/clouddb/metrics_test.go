package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// The databases' figures are read every half second in this package's tests (10s by
// default), so that a test sees them soon after it wrote.
func init() { defaultMetricsInterval = 500 * time.Millisecond }

// family is one metric's series, scraped.
type family = map[string]*dto.MetricFamily

// scrape reads /metrics as Prometheus does, from loopback.
func scrape(t *testing.T, s *service) family {
	t.Helper()
	resp, err := http.Get("http://" + s.m.Addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// seriesValue is the value of the series of name whose labels include labels (a histogram's
// count of observations); ok is false when there is no such series.
func seriesValue(fams family, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		default:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// TestMetrics: /metrics of a live service has the requests by route, the tasks, the
// databases by status, a provisioning time and the figures of a database a tenant wrote
// to, which go when the database is deleted.
func TestMetrics(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	sub, db := s.activeSubscription(ctx, "metrics", 1)
	r := redisOf(t, db)
	const keys = 17
	for i := range keys {
		require.NoError(t, r.Set(ctx, "key:"+strconv.Itoa(i), i, 0).Err())
	}
	// A path no route takes.
	_, err := s.c.GetDatabase(ctx, sub, 999999)
	require.Error(t, err)
	resp, err := http.Get("http://" + s.m.Addr + "/v1/no/such/thing/" + strconv.Itoa(int(time.Now().UnixNano())))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	dbLabels := map[string]string{"database_id": strconv.Itoa(db.ID), "subscription_id": strconv.Itoa(sub)}
	var fams family
	eventually(t, 30*time.Second, "the database's figures in /metrics", func() bool {
		fams = scrape(t, s)
		n, ok := seriesValue(fams, "clouddb_database_keys", dbLabels)
		return ok && n == keys
	})

	for _, c := range []struct {
		route, method, code string
	}{
		{"POST /v1/subscriptions", "POST", "202"},
		{"GET /v1/tasks/{taskId}", "GET", "200"},
		{"GET /v1/subscriptions/{subscriptionId}", "GET", "200"},
		{"GET /v1/subscriptions/{subscriptionId}/databases/{databaseId}", "GET", "404"},
		{"unmatched", "GET", "404"},
	} {
		n, ok := seriesValue(fams, "clouddb_http_requests_total", map[string]string{"route": c.route, "method": c.method, "code": c.code})
		require.True(t, ok, "requests of %+v", c)
		require.Positive(t, n, "requests of %+v", c)
		n, ok = seriesValue(fams, "clouddb_http_request_duration_seconds", map[string]string{"route": c.route, "method": c.method, "code": c.code})
		require.True(t, ok && n > 0, "latency of %+v", c)
	}
	for _, m := range fams["clouddb_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			require.NotContains(t, l.GetValue(), "/no/such/thing", "a raw path as a label")
		}
	}

	n, ok := seriesValue(fams, "clouddb_tasks_processed_total", map[string]string{"command": "subscriptionCreateRequest", "status": "processing-completed"})
	require.True(t, ok)
	require.EqualValues(t, 1, n)
	n, ok = seriesValue(fams, "clouddb_task_duration_seconds", map[string]string{"command": "subscriptionCreateRequest"})
	require.True(t, ok)
	require.EqualValues(t, 1, n)
	n, ok = seriesValue(fams, "clouddb_databases", map[string]string{"status": "active"})
	require.True(t, ok)
	require.EqualValues(t, 1, n)
	n, ok = seriesValue(fams, "clouddb_databases", map[string]string{"status": "error"})
	require.True(t, ok, "every status is reported, zeros too")
	require.Zero(t, n)
	n, ok = seriesValue(fams, "clouddb_database_provisioning_seconds", nil)
	require.True(t, ok)
	require.EqualValues(t, 1, n, "one database provisioned")
	for name, want := range map[string]float64{"clouddb_store_up": 1, "clouddb_task_queue_depth": 0, "clouddb_tasks_in_progress": 0, "clouddb_task_queue_oldest_age_seconds": 0} {
		n, ok = seriesValue(fams, name, nil)
		require.True(t, ok, name)
		require.Equal(t, want, n, name)
	}

	n, _ = seriesValue(fams, "clouddb_database_up", dbLabels)
	require.EqualValues(t, 1, n)
	used, ok := seriesValue(fams, "clouddb_database_memory_used_bytes", dbLabels)
	require.True(t, ok)
	require.Positive(t, used)
	maxMem, ok := seriesValue(fams, "clouddb_database_memory_max_bytes", dbLabels)
	require.True(t, ok)
	require.EqualValues(t, int64(db.DatasetSizeInGB*(1<<30)), maxMem)
	clients, ok := seriesValue(fams, "clouddb_database_connected_clients", dbLabels)
	require.True(t, ok)
	require.GreaterOrEqual(t, clients, 1.0, "the test's connection")
	_, ok = seriesValue(fams, "clouddb_database_ops_per_second", dbLabels)
	require.True(t, ok)
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "clouddb_build_info"} {
		_, ok = seriesValue(fams, name, nil)
		require.True(t, ok, name)
	}

	// Deleted, the database's series go.
	task, err := s.c.DeleteDatabase(ctx, sub, db.ID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the deleted database's series gone", func() bool {
		fams = scrape(t, s)
		_, up := seriesValue(fams, "clouddb_database_up", dbLabels)
		_, keys := seriesValue(fams, "clouddb_database_keys", dbLabels)
		return !up && !keys
	})
	n, ok = seriesValue(fams, "clouddb_tasks_processed_total", map[string]string{"command": "databaseDeleteRequest", "status": "processing-completed"})
	require.True(t, ok)
	require.EqualValues(t, 1, n)
}

// TestMetricsAccess: the metrics span every tenant; a client that is not on loopback is
// refused without a token, and so is an API key pair.
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	h := s.m.metricsHandler()
	get := func(remote string, header http.Header) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = remote
		for k, v := range header {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	creds := readCredentials(t, s.dir)
	for _, remote := range []string{"203.0.113.7:4242", "[2001:db8::1]:4242", "10.0.0.2:1"} {
		rec := get(remote, http.Header{"X-Api-Key": {creds.APIKey}, "X-Api-Secret-Key": {creds.SecretKey}})
		require.Equal(t, http.StatusForbidden, rec.Code, remote)
		require.Contains(t, rec.Body.String(), "--metrics-token")
		require.NotContains(t, rec.Body.String(), "clouddb_")
	}
	for _, remote := range []string{"127.0.0.1:4242", "[::1]:4242", "[::ffff:127.0.0.1]:4242"} {
		rec := get(remote, nil)
		require.Equal(t, http.StatusOK, rec.Code, remote)
		require.Contains(t, rec.Body.String(), "clouddb_store_up 1")
	}
}

// TestMetricsDoNotBlockOnServers: a scrape answers from what the background round read;
// it does not wait on a database server, even one that stopped answering.
func TestMetricsDoNotBlockOnServers(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	sub, db := s.activeSubscription(ctx, "frozen", 1)
	dbLabels := map[string]string{"database_id": strconv.Itoa(db.ID), "subscription_id": strconv.Itoa(sub)}
	eventually(t, 30*time.Second, "the database's figures", func() bool {
		_, ok := seriesValue(scrape(t, s), "clouddb_database_keys", dbLabels)
		return ok
	})
	// A server that hangs (stopped by SIGSTOP) for a few seconds: the rounds that read it
	// wait out their timeout; the scrapes do not.
	pid, err := s.m.Driver.Pid(db.ID)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT) // it may have been replaced meanwhile
		}
	}
	defer resume()
	for range 6 {
		start := time.Now()
		fams := scrape(t, s)
		require.Less(t, time.Since(start), time.Second, "a scrape while a server hangs")
		_, ok := seriesValue(fams, "clouddb_database_up", dbLabels)
		require.True(t, ok)
		time.Sleep(400 * time.Millisecond)
	}
	resume()
	eventually(t, 30*time.Second, "the figures read again", func() bool {
		n, _ := seriesValue(scrape(t, s), "clouddb_database_up", dbLabels)
		return n == 1
	})
}

// TestMetricsFlags: the token and the interval are checked, and the token may come from
// the environment.
func TestMetricsFlags(t *testing.T) {
	parse := func(args ...string) (*Main, error) {
		m := NewMain(io.Discard, io.Discard)
		return m, m.ParseFlags(args)
	}
	_, err := parse("--metrics-token", "short")
	require.ErrorContains(t, err, "--metrics-token")
	_, err = parse("--metrics-token", "a token with spaces in it")
	require.ErrorContains(t, err, "--metrics-token")
	_, err = parse("--metrics-interval", "1ms")
	require.ErrorContains(t, err, "--metrics-interval")
	m, err := parse("--metrics-interval", "30s")
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, m.Config.MetricsInterval)

	t.Setenv("CLOUDDB_METRICS_TOKEN", "token-from-the-environment")
	m, err = parse()
	require.NoError(t, err)
	require.Equal(t, "token-from-the-environment", m.Config.MetricsToken)
}
