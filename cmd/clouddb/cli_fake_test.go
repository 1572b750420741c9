package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/internal/syncbuf"
)

// fakeAPI is an API server whose answers a test scripts: path (with its query) → a queue
// of answers, the last of which repeats. It sees what the real service rarely does on
// cue: a rate limit, a page past 100, a server that hangs.
type fakeAPI struct {
	t       *testing.T
	mu      sync.Mutex
	answers map[string][]fakeAnswer
	seen    []string
}

type fakeAnswer struct {
	status int
	header map[string]string
	body   string
	// hang holds the answer until the request is canceled.
	hang bool
}

func newFakeAPI(t *testing.T) (*fakeAPI, *cliCase) {
	f := &fakeAPI{t: t, answers: map[string][]fakeAnswer{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	h := &cliCase{t: t, env: map[string]string{"CLOUDDB_URL": srv.URL, "CLOUDDB_API_KEY": "k", "CLOUDDB_API_SECRET_KEY": "s",
		"CLOUDDB_DATA_DIR": t.TempDir()}}
	return f, h
}

// on queues answers to "METHOD /v1/path?query".
func (f *fakeAPI) on(req string, answers ...fakeAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[req] = append(f.answers[req], answers...)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := r.Method + " " + r.URL.RequestURI()
	f.mu.Lock()
	f.seen = append(f.seen, req)
	q := f.answers[req]
	var a fakeAnswer
	found := len(q) > 0
	if found {
		a = q[0]
		if len(q) > 1 {
			f.answers[req] = q[1:]
		}
	}
	f.mu.Unlock()
	if !found {
		http.Error(w, `{"error":{"type":"NOT_FOUND","status":404,"description":"fake: no answer to `+req+`"}}`, http.StatusNotFound)
		return
	}
	if a.hang {
		<-r.Context().Done()
		return
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if a.status == 0 {
		a.status = http.StatusOK
	}
	w.WriteHeader(a.status)
	fmt.Fprint(w, a.body)
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func ok200(body string) fakeAnswer { return fakeAnswer{body: body} }

func fakeTask(id, status string, resourceID int) string {
	resp := ""
	if resourceID != 0 {
		resp = fmt.Sprintf(`,"response":{"resourceId":%d}`, resourceID)
	}
	return fmt.Sprintf(`{"taskId":%q,"commandType":"databaseCreateRequest","status":%q,"description":"d","timestamp":%q%s}`,
		id, status, time.Now().UTC().Format(time.RFC3339), resp)
}

// rateLimited is the service's answer past its requests per minute.
var rateLimited = fakeAnswer{status: http.StatusTooManyRequests, header: map[string]string{"X-Rate-Limit-Retry-After-Seconds": "1"},
	body: `{"error":{"type":"RATE_LIMIT_EXCEEDED","status":429,"description":"more than 400 requests in a minute with this API key; retry in 1 seconds"}}`}

// TestCLIWaitOutlastsRateLimit: a wait that meets the API's rate limit (two waits of one
// key in parallel reach it) waits for the time the API says and goes on, rather than
// failing while the work goes on.
func TestCLIWaitOutlastsRateLimit(t *testing.T) {
	t.Parallel()
	f, h := newFakeAPI(t)
	f.on("POST /v1/subscriptions/1/databases", fakeAnswer{status: http.StatusAccepted, body: fakeTask("t1", "received", 0)})
	f.on("GET /v1/tasks/t1", ok200(fakeTask("t1", "processing-in-progress", 0)), rateLimited, ok200(fakeTask("t1", "processing-completed", 5)))
	f.on("GET /v1/subscriptions/1/databases/5", rateLimited, ok200(`{"databaseId":5,"name":"cache","status":"active"}`))
	f.on("GET /v1/subscriptions/1", ok200(`{"id":1,"name":"s","status":"active"}`))

	start := time.Now()
	out := h.ok("databases", "create", "--subscription", "1", "--name", "cache", "--wait", "--field", "id")
	require.Equal(t, "5", out)
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second, "each 429 is waited out for the second it asks")
}

// fakeDatabases is a page of a subscription's databases: ids from..to, of total.
func fakeDatabases(sub, from, to, total int) string {
	var dbs []string
	for id := from; id <= to; id++ {
		dbs = append(dbs, fmt.Sprintf(`{"databaseId":%d,"name":"d%d","status":"active","memoryLimitInGb":0.1}`, id, id))
	}
	return fmt.Sprintf(`{"accountId":1,"subscription":[{"subscriptionId":%d,"numberOfDatabases":%d,"databases":[%s]}],"links":[]}`,
		sub, total, strings.Join(dbs, ","))
}

// TestCLIDatabasesListAllPages: databases list lists every database of the subscription,
// past the API's page of 100, in the table, --field and -o json alike (one list, as one
// page would be); --limit and --offset read one page.
func TestCLIDatabasesListAllPages(t *testing.T) {
	t.Parallel()
	f, h := newFakeAPI(t)
	f.on("GET /v1/subscriptions/3/databases?limit=100&offset=0", ok200(fakeDatabases(3, 1, 100, 150)))
	f.on("GET /v1/subscriptions/3/databases?limit=100&offset=100", ok200(fakeDatabases(3, 101, 150, 150)))
	f.on("GET /v1/subscriptions/3/databases?limit=10&offset=140", ok200(fakeDatabases(3, 141, 150, 150)))

	ids := strings.Split(h.ok("databases", "list", "--subscription", "3", "--field", "id"), "\n")
	require.Len(t, ids, 150)
	require.Equal(t, "1", ids[0])
	require.Equal(t, "150", ids[149])

	table := strings.Split(h.ok("databases", "list", "--subscription", "3"), "\n")
	require.Len(t, table, 151, "a head and 150 rows")

	var list struct {
		AccountID    int `json:"accountId"`
		Subscription []struct {
			SubscriptionID    int               `json:"subscriptionId"`
			NumberOfDatabases int               `json:"numberOfDatabases"`
			Databases         []json.RawMessage `json:"databases"`
		} `json:"subscription"`
	}
	require.NoError(t, json.Unmarshal([]byte(h.ok("databases", "list", "--subscription", "3", "-o", "json")), &list))
	require.Equal(t, 1, list.AccountID)
	require.Len(t, list.Subscription, 1)
	require.Equal(t, 3, list.Subscription[0].SubscriptionID)
	require.Equal(t, 150, list.Subscription[0].NumberOfDatabases)
	require.Len(t, list.Subscription[0].Databases, 150)

	page := strings.Split(h.ok("databases", "list", "--subscription", "3", "--limit", "10", "--offset", "140", "--field", "id"), "\n")
	require.Equal(t, []string{"141", "142", "143", "144", "145", "146", "147", "148", "149", "150"}, page)
}

// TestCLIInterruptedWait: Ctrl-C (the end of the command's context) during --wait exits
// 130, as a shell reports an interrupted command, and says that the work goes on and how
// to follow it; stdout stays empty.
func TestCLIInterruptedWait(t *testing.T) {
	t.Parallel()
	f, h := newFakeAPI(t)
	f.on("POST /v1/subscriptions/1/databases", fakeAnswer{status: http.StatusAccepted, body: fakeTask("t1", "received", 0)})
	f.on("GET /v1/tasks/t1", ok200(fakeTask("t1", "processing-in-progress", 0)), fakeAnswer{hang: true})

	ctx, cancel := context.WithCancel(testContext(t))
	var stdout, stderr syncbuf.Buffer
	c := &CLI{Stdout: &stdout, Stderr: &stderr, PollInterval: 10 * time.Millisecond,
		LookupEnv: func(k string) (string, bool) { v, ok := h.env[k]; return v, ok }}
	go func() {
		for !strings.Contains(stderr.String(), "task t1: processing-in-progress") {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // in the hanging poll
		cancel()
	}()
	code := c.Run(ctx, []string{"databases", "create", "--subscription", "1", "--name", "cache", "--wait"})
	require.Equal(t, exitInterrupted, code, stderr.String())
	require.Empty(t, stdout.String())
	require.Equal(t, "task t1: processing-in-progress\nclouddb: interrupted; the work goes on: clouddb tasks get t1\n", stderr.String())

	// Interrupted before anything was sent: no task to follow.
	var stderr2 syncbuf.Buffer
	c = &CLI{Stdout: &stdout, Stderr: &stderr2, LookupEnv: c.LookupEnv}
	code = c.Run(ctx, []string{"subscriptions", "list"})
	require.Equal(t, exitInterrupted, code, stderr2.String())
	require.Equal(t, "clouddb: interrupted\n", stderr2.String())
}

// TestCLIFieldIDOfATask: --field id never reads a task's taskId, so that
// SUB=$(clouddb subscriptions create … --field id) without --wait cannot capture a task id
// where a subscription id was meant. A command that would print a task refuses --field id
// before it sends anything (nothing is made by a command line that then fails); --field
// taskId reads the task's id.
func TestCLIFieldIDOfATask(t *testing.T) {
	t.Parallel()
	f, h := newFakeAPI(t)
	f.on("POST /v1/subscriptions/1/databases", fakeAnswer{status: http.StatusAccepted, body: fakeTask("t1", "received", 0)})
	f.on("GET /v1/tasks/t1", ok200(fakeTask("t1", "processing-completed", 5)))

	r := h.fails(exitUsage, "databases", "create", "--subscription", "1", "--name", "cache", "--field", "id")
	require.Equal(t, "clouddb: --field id: without --wait, clouddb databases create prints its task, whose id is taskId: "+
		"give --field taskId for the task's id, or --wait to print the resource, whose id --field id reads\n"+
		"Run 'clouddb databases create --help' for usage.\n", r.stderr)
	r = h.fails(exitUsage, "databases", "delete", "--subscription", "1", "5", "--wait", "--field", "id")
	require.Equal(t, "clouddb: --field id: clouddb databases delete prints the task, whose id is taskId: give --field taskId\n"+
		"Run 'clouddb databases delete --help' for usage.\n", r.stderr)
	h.fails(exitUsage, "subscriptions", "delete", "1", "--field", "id")
	h.fails(exitUsage, "acl", "users", "delete", "1", "--wait", "--field", "id")
	h.fails(exitUsage, "acl", "users", "update", "1", "--role", "r", "--field", "id")
	require.Empty(t, f.requests(), "nothing sent")

	require.Equal(t, "t1", h.ok("databases", "create", "--subscription", "1", "--name", "cache", "--field", "taskId"))
	r = h.fails(exitError, "tasks", "get", "t1", "--field", "id")
	require.Contains(t, r.stderr, "clouddb: --field id: the result has no id (it has commandType, description, response, status, taskId, timestamp)")
	require.Equal(t, "t1", h.ok("tasks", "get", "t1", "--field", "taskId"))
}

// TestCLIEmptyField: --field "" (a script's empty variable) is a usage error, not the
// table, which a $(...) capture would take for a value.
func TestCLIEmptyField(t *testing.T) {
	t.Parallel()
	f, h := newFakeAPI(t)
	r := h.fails(exitUsage, "subscriptions", "list", "--field", "")
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "clouddb: --field is empty: give a field's path, such as id\n")
	require.Empty(t, f.requests())
}
