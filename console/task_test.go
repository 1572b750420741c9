package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

func TestTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	b.signIn(ownerKey, ownerSecret)
	p := b.getOK("/console/tasks")
	require.Empty(t, all(p.doc, "task-row"))
	require.False(t, refreshes(p))

	// A creation with a subscription that is not active yet fails in its processing: on
	// the tasks page with the API's error.
	subTask := taskID(t, b.post("/console/subscriptions", url.Values{"name": {"s"}, "dbName": {"d"}, "dbMemory": {"0.5"}}))
	tk, err := e.owner.GetTask(testCtx(t), subTask)
	require.NoError(t, err)
	body := client.CreateDatabase{Name: client.Ptr("early"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("Early-pass1")}
	failed, err := e.owner.Wait(testCtx(t))(e.owner.CreateDatabase(testCtx(t), tk.ResourceID(), body))
	require.Error(t, err)

	p = b.getOK("/console/tasks")
	rows := all(p.doc, "task-row")
	require.Len(t, rows, 2)
	require.Equal(t, failed.ID, attr(rows[0], "data-id"), "most recent first")
	require.Equal(t, "Create database", text(one(t, rows[0], "task-command")))
	require.Equal(t, "processing-error", text(one(t, rows[0], "status")))
	require.Contains(t, text(one(t, rows[0], "task-error")), failed.Response.Error.Description)
	require.Equal(t, "Create subscription", text(one(t, rows[1], "task-command")))
	require.Empty(t, text(one(t, rows[1], "task-error")))
	require.False(t, refreshes(p), "every task ended")

	p = b.getOK("/console/tasks/" + failed.ID)
	require.Equal(t, "processing-error", text(one(t, p.doc, "task-status")))
	require.Equal(t, failed.Response.Error.Type+": "+failed.Response.Error.Description, text(one(t, p.doc, "task-error")))
	require.Empty(t, all(p.doc, "task-database-open"))
	require.False(t, refreshes(p))

	res := b.get("/console/tasks/no-such-task")
	require.Equal(t, http.StatusNotFound, res.status)
	require.Contains(t, text(one(t, res.doc, "form-error")), "TASK_NOT_FOUND")
}

func TestTaskProgress(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]int{
		client.TaskInitialized: 0, client.TaskReceived: 1, client.TaskInProgress: 2, client.TaskCompleted: 3, client.TaskFailed: 3,
	} {
		require.Equal(t, want, taskProgress(status), status)
	}
	// A task still running refreshes its page and links nowhere yet.
	v := newTaskView(&client.Task{ID: "x", CommandType: "databaseCreateRequest", Status: client.TaskReceived})
	require.False(t, v.Final)
	require.Empty(t, v.DatabaseHref)
	v = newTaskView(&client.Task{ID: "x", CommandType: "databaseCreateRequest", Status: client.TaskCompleted,
		Links: map[string]client.Link{"resource": {Href: "https://h:1/v1/subscriptions/4/databases/9"}}})
	require.Equal(t, "/console/subscriptions/4/databases/9", v.DatabaseHref)
	require.Equal(t, "/console/subscriptions/4", v.SubscriptionHref)
}

// A task id in the page's path is one path segment of the API's: a %3F or %2F in it would
// become a query or more path segments once the API decodes the path, so anything that is
// no task id is a page that does not exist, and the API is not called.
func TestTaskIDNotAPath(t *testing.T) {
	t.Parallel()
	var seen []string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"type":"TASK_NOT_FOUND","status":"404 NOT_FOUND","description":"no"}}`))
	})
	c := New(api, nil)
	mux := http.NewServeMux()
	c.Register(mux, api)
	cookie := &http.Cookie{Name: sessionCookie, Value: c.seal.seal(session{Key: "k", Secret: "s", Account: "a", Issued: c.seal.now().UnixNano()})}
	for _, id := range []string{"abc%3Fx=1", "a%2Fb", "%2e%2e%2Fsubscriptions", "a%20b", "%00", strings.Repeat("a", 129), "a.b"} {
		req := httptest.NewRequest(http.MethodGet, "/console/tasks/"+id, nil)
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		require.Equal(t, http.StatusNotFound, rec.Code, id)
		require.Contains(t, rec.Body.String(), "no such page: not a task id", id)
		require.Empty(t, seen, id)
	}
	// A task id as the API makes them reaches the API, as one segment.
	id := "0f8c2b6e-3c1d-4a57-9a0e-5b7d2f1c9e42"
	req := httptest.NewRequest(http.MethodGet, "/console/tasks/"+id, nil)
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Contains(t, rec.Body.String(), "TASK_NOT_FOUND")
	require.Equal(t, []string{"/v1/tasks/" + id + "?"}, seen)
}
