package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// recorded is what the fake server saw of one request.
type recorded struct {
	method, path, rawPath, query string
	header                       http.Header
	body                         string
}

// fake serves canned answers keyed by "METHOD path" and records every request.
type fake struct {
	mu   sync.Mutex
	seen []recorded
	h    func(w http.ResponseWriter, r *http.Request)
}

func newFake(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *fake) {
	t.Helper()
	f := &fake{h: h}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, recorded{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Header.Clone(), string(b)})
		f.mu.Unlock()
		f.h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, f
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.seen...)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body) // a failed write is the client's error, which the tests check
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

const receivedTask = `{"taskId":"t-1","commandType":"x","status":"received","description":"d","timestamp":"2026-01-02T03:04:05.000Z","_links":{"task":{"href":"http://h/v1/tasks/t-1","title":"getTaskStatusUpdates","type":"GET"}}}`

// The official client sends both keys, Accept and Content-Type on every request, GET and
// DELETE included, and bodies only where there is one.
func TestHeadersOnEveryRequest(t *testing.T) {
	t.Parallel()
	srv, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			writeJSON(w, 200, `{"id":1,"name":"s","status":"active","cloudDetails":[]}`)
			return
		}
		writeJSON(w, 200, receivedTask)
	})
	c := client.New(srv.URL+"/v1", "key", "secret", client.WithUserAgent("tests/1"))
	_, err := c.GetSubscription(ctx(t), 1)
	require.NoError(t, err)
	_, err = c.DeleteSubscription(ctx(t), 1)
	require.NoError(t, err)
	_, err = c.UpdateSubscription(ctx(t), 1, client.UpdateSubscription{Name: client.Ptr("n")})
	require.NoError(t, err)

	reqs := f.requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs {
		require.Equal(t, "key", r.header.Get("X-Api-Key"), r.method)
		require.Equal(t, "secret", r.header.Get("X-Api-Secret-Key"), r.method)
		require.Equal(t, "application/json", r.header.Get("Accept"), r.method)
		require.Equal(t, "application/json", r.header.Get("Content-Type"), r.method)
		require.Regexp(t, `^clouddb-client/\S+ \(go.*\) tests/1$`, r.header.Get("User-Agent"))
		require.Equal(t, "/v1/subscriptions/1", r.path)
	}
	require.Empty(t, reqs[0].body)
	require.Empty(t, reqs[1].body)
	require.Equal(t, "{\"name\":\"n\"}\n", reqs[2].body)
}

func TestEmptyCredentialsAreNotSent(t *testing.T) {
	t.Parallel()
	srv, f := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, `{}`) })
	c := client.New(srv.URL+"/v1", "", "")
	require.NoError(t, c.Do(ctx(t), http.MethodGet, "/", nil, nil))
	h := f.requests()[0].header
	require.NotContains(t, h, "X-Api-Key")
	require.NotContains(t, h, "X-Api-Secret-Key")
}

func TestErrorParsesEnvelope(t *testing.T) {
	t.Parallel()
	body := `{"error":{"type":"SUBSCRIPTION_NOT_FOUND","status":404,"description":"subscription 7 not found"}}`
	srv, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 404, body) })
	c := client.New(srv.URL+"/v1", "k", "s")
	_, err := c.GetSubscription(ctx(t), 7)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 404, e.StatusCode)
	require.Equal(t, "SUBSCRIPTION_NOT_FOUND", e.Type)
	require.Equal(t, "subscription 7 not found", e.Description)
	require.Equal(t, body, string(e.Body))
	require.True(t, client.IsNotFound(err))
	require.True(t, client.IsNotFound(fmt.Errorf("wrapped: %w", err)))
	require.False(t, client.IsNotFound(errors.New("other")))
	require.Equal(t, "404 NOT_FOUND - SUBSCRIPTION_NOT_FOUND: subscription 7 not found", e.Error())
}

// A non-JSON error body (a proxy's HTML page) is kept raw.
func TestErrorKeepsForeignBody(t *testing.T) {
	t.Parallel()
	srv, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		_, _ = io.WriteString(w, "<html>401 Authorization Required</html>")
	})
	err := client.New(srv.URL, "k", "s").Do(ctx(t), http.MethodGet, "/", nil, nil)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 401, e.StatusCode)
	require.Empty(t, e.Type)
	require.Contains(t, e.Error(), "Authorization Required")
}

// A 2xx without a body fails, as it does in the official client.
func TestEmpty2xxFails(t *testing.T) {
	t.Parallel()
	srv, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	_, err := client.New(srv.URL, "k", "s").DeleteSubscription(ctx(t), 1)
	require.Error(t, err)
}

func TestUpdateDatabaseSerialisesReplicaOf(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(client.UpdateDatabase{Name: client.Ptr("x")})
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"x","replicaOf":null}`, string(b))

	b, err = json.Marshal(client.UpdateDatabase{ReplicaOf: []string{}, Alerts: &[]client.Alert{}})
	require.NoError(t, err)
	require.JSONEq(t, `{"replicaOf":[],"alerts":[]}`, string(b))

	b, err = json.Marshal(client.CreateDatabase{Name: client.Ptr("x")})
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"x"}`, string(b))
}

func TestCreateSubscriptionNetworkingIsAnObject(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(client.CreateSubscription{CloudProviders: []client.CreateCloudProvider{{
		CloudAccountID: client.Ptr(1),
		Regions: []client.CreateRegion{{Region: client.Ptr("us-east-1"),
			Networking: &client.CreateNetworking{DeploymentCIDR: client.Ptr("10.0.0.0/24")}}},
	}}})
	require.NoError(t, err)
	require.JSONEq(t, `{"cloudProviders":[{"cloudAccountId":1,"regions":[{"region":"us-east-1","networking":{"deploymentCIDR":"10.0.0.0/24"}}]}]}`, string(b))
}

func TestWaitForTask(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	polls := map[string]int{}
	srv, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		polls[r.URL.Path]++
		n := polls[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/tasks/ok" && n < 3:
			writeJSON(w, 200, `{"taskId":"ok","status":"processing-in-progress","timestamp":"2026-01-02T03:04:05Z"}`)
		case r.URL.Path == "/tasks/ok":
			writeJSON(w, 200, `{"taskId":"ok","status":"processing-completed","timestamp":"2026-01-02T03:04:05Z","response":{"resourceId":42}}`)
		case r.URL.Path == "/tasks/bad":
			writeJSON(w, 200, `{"taskId":"bad","status":"processing-error","timestamp":"2026-01-02T03:04:05Z","response":{"error":{"type":"SUBSCRIPTION_PI_NOT_FOUND","status":"400 BAD_REQUEST","description":"no card"}}}`)
		case r.URL.Path == "/tasks/weird":
			writeJSON(w, 200, `{"taskId":"weird","status":"exploded","description":"boom","timestamp":"2026-01-02T03:04:05Z"}`)
		default:
			writeJSON(w, 200, `{"taskId":"slow","status":"received","timestamp":"2026-01-02T03:04:05Z"}`)
		}
	})
	c := client.New(srv.URL, "k", "s", client.WithPollInterval(time.Millisecond))

	task, err := c.WaitForTask(ctx(t), "ok")
	require.NoError(t, err)
	require.Equal(t, 42, task.ResourceID())
	require.Equal(t, 3, polls["/tasks/ok"])

	task, err = c.WaitForTask(ctx(t), "bad")
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 400, e.StatusCode)
	require.Equal(t, "400 BAD_REQUEST", e.Status)
	require.Equal(t, "SUBSCRIPTION_PI_NOT_FOUND", e.Type)
	require.Equal(t, "no card", e.Description)
	require.Equal(t, "bad", e.TaskID)
	require.Equal(t, client.TaskFailed, task.Status)

	_, err = c.WaitForTask(ctx(t), "weird")
	require.ErrorAs(t, err, &e)
	require.Contains(t, e.Error(), "exploded")

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.WaitForTask(short, "slow")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// WatchTask shows every state it reads, the final one included, in order.
func TestWatchTask(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	srv, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		status := []string{"received", "processing-in-progress", "processing-in-progress", "processing-completed"}[min(i, 4)-1]
		writeJSON(w, 200, `{"taskId":"t","status":"`+status+`","timestamp":"2026-01-02T03:04:05Z"}`)
	})
	c := client.New(srv.URL, "k", "s", client.WithPollInterval(time.Millisecond))
	var seen []string
	task, err := c.WatchTask(ctx(t), "t", func(tk *client.Task) { seen = append(seen, tk.Status) })
	require.NoError(t, err)
	require.Equal(t, client.TaskCompleted, task.Status)
	require.Equal(t, []string{"received", "processing-in-progress", "processing-in-progress", "processing-completed"}, seen)
	require.JSONEq(t, `{"taskId":"t","status":"processing-completed","timestamp":"2026-01-02T03:04:05Z"}`, string(task.Raw), "the JSON as received")
}

// A call that makes a task keeps its JSON as received, fields the wire type lacks
// included.
func TestTaskRaw(t *testing.T) {
	t.Parallel()
	const body = `{"taskId":"t1","commandType":"subscriptionCreateRequest","status":"received","timestamp":"2026-01-02T03:04:05.000001Z","extra":{"a":1}}`
	srv, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 202, body) })
	task, err := client.New(srv.URL, "k", "s").DeleteSubscription(ctx(t), 1)
	require.NoError(t, err)
	require.Equal(t, "t1", task.ID)
	require.Equal(t, body, string(task.Raw))
}

// AllDatabases pages with limit 100 until an empty page, and refuses a page that does not
// name the subscription (a server ignoring offset would make it loop forever).
func TestAllDatabasesPages(t *testing.T) {
	t.Parallel()
	srv, f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		var dbs []string
		if offset < 200 {
			for i := range 100 {
				dbs = append(dbs, fmt.Sprintf(`{"databaseId":%d,"name":"d%d","status":"active"}`, offset+i+1, offset+i+1))
			}
		} else if offset == 200 {
			dbs = append(dbs, `{"databaseId":201,"name":"d201","status":"active"}`)
		}
		sub := 5
		if r.URL.Path == "/subscriptions/6/databases" {
			sub = 99
		}
		writeJSON(w, 200, fmt.Sprintf(`{"accountId":1,"subscription":[{"subscriptionId":%d,"databases":[%s]}]}`, sub, strings.Join(dbs, ",")))
	})
	c := client.New(srv.URL, "k", "s")
	dbs, err := c.AllDatabases(ctx(t), 5)
	require.NoError(t, err)
	require.Len(t, dbs, 201)
	require.Equal(t, 201, dbs[200].ID)
	var queries []string
	for _, r := range f.requests() {
		queries = append(queries, r.query)
	}
	require.Equal(t, []string{"limit=100&offset=0", "limit=100&offset=100", "limit=100&offset=200", "limit=100&offset=300"}, queries)

	_, err = c.AllDatabases(ctx(t), 6)
	require.ErrorContains(t, err, "single subscription")
}

// A trailing slash on the base URL doubles the slash, as plain concatenation does in the
// official client; Health strips /v1 to reach the root.
func TestBaseURLJoining(t *testing.T) {
	t.Parallel()
	srv, f := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, `{"status":"ok"}`) })
	c := client.New(srv.URL+"/v1/", "k", "s")
	require.NoError(t, c.Do(ctx(t), http.MethodGet, "/regions", nil, nil))
	require.NoError(t, c.Health(ctx(t)))
	reqs := f.requests()
	require.Equal(t, "/v1//regions", reqs[0].path)
	require.Equal(t, "/healthz", reqs[1].path)
}

// The official client's percent-encoded query travels inside the path.
func TestRawPathIsKept(t *testing.T) {
	t.Parallel()
	srv, f := newFake(t, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, `{"redisVersions":[]}`) })
	c := client.New(srv.URL+"/v1", "k", "s")
	require.NoError(t, c.Do(ctx(t), http.MethodGet, "/subscriptions/redis-versions%3FsubscriptionId=3", nil, nil))
	r := f.requests()[0]
	require.Equal(t, "/v1/subscriptions/redis-versions?subscriptionId=3", r.path)
	require.Empty(t, r.query)
}

// A poll of a wait answered 429 (the rate limit) waits the time the answer asks and goes
// on; a 503 after the poll interval; a 404 ends the wait. RetryDelay says which.
func TestWatchTaskOutlastsRateLimit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	srv, _ := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		switch i {
		case 1:
			w.Header().Set("X-Rate-Limit-Retry-After-Seconds", "1")
			writeJSON(w, 429, `{"error":{"type":"RATE_LIMIT_EXCEEDED","status":429,"description":"retry in 1 seconds"}}`)
		case 2:
			writeJSON(w, 503, `{"error":{"type":"SERVICE_UNAVAILABLE","status":503,"description":"restarting"}}`)
		default:
			writeJSON(w, 200, `{"taskId":"t","status":"processing-completed","timestamp":"2026-01-02T03:04:05Z"}`)
		}
	})
	c := client.New(srv.URL, "k", "s", client.WithPollInterval(time.Millisecond))
	start := time.Now()
	task, err := c.WatchTask(ctx(t), "t", nil)
	require.NoError(t, err)
	require.Equal(t, client.TaskCompleted, task.Status)
	require.GreaterOrEqual(t, time.Since(start), time.Second)
	require.Equal(t, 3, n)

	d, ok := client.RetryDelay(&client.Error{StatusCode: 429, RetryAfter: time.Hour}, time.Millisecond)
	require.True(t, ok)
	require.Equal(t, time.Minute, d, "bounded")
	d, ok = client.RetryDelay(&client.Error{StatusCode: 429}, time.Millisecond)
	require.True(t, ok)
	require.Equal(t, time.Second, d)
	_, ok = client.RetryDelay(&client.Error{StatusCode: 404}, time.Millisecond)
	require.False(t, ok)
	_, ok = client.RetryDelay(&client.Error{StatusCode: 503, TaskID: "t"}, time.Millisecond)
	require.False(t, ok, "a task that failed is final")
	_, ok = client.RetryDelay(errors.New("dial tcp: connection refused"), time.Millisecond)
	require.False(t, ok)
}
