package cloudapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
)

// rawTask decodes a task answer keeping the JSON types: numbers stay json.Number so that
// an integer can be told from a float or a string.
func rawTask(t *testing.T, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), "%s", b)
	return m
}

func requireTimestamp(t *testing.T, v any) time.Time {
	t.Helper()
	s, ok := v.(string)
	require.True(t, ok, "timestamp %v is not a string", v)
	ts, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	require.Equal(t, time.UTC, ts.Location(), "timestamp %s is not UTC", s)
	return ts
}

func requireLink(t *testing.T, links map[string]any, rel, href, title string) {
	t.Helper()
	l, ok := links[rel].(map[string]any)
	require.True(t, ok, "no %s link in %v", rel, links)
	require.Equal(t, href, l["href"])
	require.Equal(t, "GET", l["type"])
	if title != "" {
		require.Equal(t, title, l["title"])
	}
}

// A task reads received with a task link right after the request; completed with an
// integer resourceId and self and resource links; failed with response.error alone.
func TestTaskShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)

	// Received: the POST answer.
	body, err := json.Marshal(cloudAccountBody("shape"))
	require.NoError(t, err)
	res := e.do(http.MethodPost, "/v1/cloud-accounts", mainKey, mainSecret, body)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	received := rawTask(t, res.body)
	id, _ := received["taskId"].(string)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, id)
	require.Equal(t, "cloudAccountCreateRequest", received["commandType"])
	require.Equal(t, "received", received["status"])
	require.Equal(t, "Task request received and is being queued for processing.", received["description"])
	requireTimestamp(t, received["timestamp"])
	require.NotContains(t, received, "response")
	links := received["_links"].(map[string]any)
	require.Len(t, links, 1)
	requireLink(t, links, "task", e.base+"/tasks/"+id, "getTaskStatusUpdates")

	// Completed.
	done, err := e.main.WaitForTask(ctx, id)
	require.NoError(t, err)
	res = e.do(http.MethodGet, "/v1/tasks/"+id, mainKey, mainSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	completed := rawTask(t, res.body)
	require.Equal(t, "processing-completed", completed["status"])
	require.Equal(t, "Request processing completed successfully and its resources are now being provisioned / de-provisioned.", completed["description"])
	require.Equal(t, map[string]any{"resourceId": json.Number(fmt.Sprint(done.ResourceID()))}, completed["response"])
	links = completed["_links"].(map[string]any)
	requireLink(t, links, "self", e.base+"/tasks/"+id, "")
	requireLink(t, links, "resource", fmt.Sprintf("%s/cloud-accounts/%d", e.base, done.ResourceID()), "")
	require.NotContains(t, links, "task")
	requireTimestamp(t, completed["timestamp"])
	ca, err := e.main.GetCloudAccount(ctx, done.ResourceID())
	require.NoError(t, err)
	require.Equal(t, client.CloudAccountDraft, ca.Status)

	// Failed: response.error only, no resourceId, no resource link.
	tk, err := e.main.CreateSubscription(ctx, e.subscriptionBody("shape", 999999, 1, 1))
	require.NoError(t, err)
	_, err = e.main.WaitForTask(ctx, tk.ID)
	requireClientError(t, err, http.StatusBadRequest, "SUBSCRIPTION_PI_NOT_FOUND")
	res = e.do(http.MethodGet, "/v1/tasks/"+tk.ID, mainKey, mainSecret, nil)
	failed := rawTask(t, res.body)
	require.Equal(t, "processing-error", failed["status"])
	require.Equal(t, "Task request failed during processing. See error information for failure details.", failed["description"])
	resp := failed["response"].(map[string]any)
	require.Len(t, resp, 1, "response: %v", resp)
	require.Equal(t, "400 BAD_REQUEST", resp["error"].(map[string]any)["status"])
	links = failed["_links"].(map[string]any)
	requireLink(t, links, "self", e.base+"/tasks/"+tk.ID, "")
	require.NotContains(t, links, "resource")
}

// GET /tasks is a bare JSON array, [] when there is none, most recently updated first,
// with RFC 3339 timestamps.
func TestTaskList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)

	res := e.do(http.MethodGet, "/v1/tasks", otherKey, otherSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `[]`, string(res.body))

	var want []string
	for i := range 3 {
		tk, err := e.main.Wait(ctx)(e.main.CreateCloudAccount(ctx, cloudAccountBody(fmt.Sprintf("list-%d", i))))
		require.NoError(t, err)
		want = append([]string{tk.ID}, want...)
		time.Sleep(2 * time.Millisecond) // distinct update times
	}
	res = e.do(http.MethodGet, "/v1/tasks", mainKey, mainSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	var list []map[string]any
	require.NoError(t, json.Unmarshal(res.body, &list), "%s", res.body)
	var got []string
	var last time.Time
	for i, m := range list {
		got = append(got, m["taskId"].(string))
		ts := requireTimestamp(t, m["timestamp"])
		if i > 0 {
			require.False(t, ts.After(last), "tasks are not most recently updated first")
		}
		last = ts
	}
	require.Equal(t, want, got)

	tasks, err := e.main.ListTasks(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	require.Equal(t, want[0], tasks[0].ID)
}

// Tasks of one account are processed one at a time, in submission order: tasks submitted
// back to back complete in that order, and the store never holds two of the account's
// tasks in progress at once. A later task sees the effect of an earlier one.
func TestTasksOfAnAccountRunInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	subID, _ := e.activeSubscription("fifo")

	// Watch the store while the tasks run.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var (
		wg        sync.WaitGroup
		maxInProg int
		samples   int
	)
	wg.Go(func() {
		for watchCtx.Err() == nil {
			n := 0
			for _, tk := range e.tasks(e.mainAccount) {
				if tk.Status == clouddb.TaskInProgress {
					n++
				}
			}
			maxInProg = max(maxInProg, n)
			samples++
			time.Sleep(time.Millisecond)
		}
	})

	const n = 12
	var submitted []*client.Task
	for i := range n {
		tk, err := e.main.CreateCloudAccount(ctx, cloudAccountBody(fmt.Sprintf("fifo-%02d", i)))
		require.NoError(t, err)
		submitted = append(submitted, tk)
	}
	// The same name twice: only the first may win, and only if it ran first.
	first, err := e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("twin"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-one")})
	require.NoError(t, err)
	second, err := e.main.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("twin"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-two")})
	require.NoError(t, err)

	var ids []int
	for _, tk := range submitted {
		done, waitErr := e.main.WaitForTask(ctx, tk.ID)
		require.NoError(t, waitErr)
		ids = append(ids, done.ResourceID())
	}
	firstDone, err := e.main.WaitForTask(ctx, first.ID)
	require.NoError(t, err)
	_, err = e.main.WaitForTask(ctx, second.ID)
	requireClientError(t, err, http.StatusConflict, "DATABASE_NAME_ALREADY_EXISTS")
	stopWatch()
	wg.Wait()

	for i := 1; i < n; i++ {
		require.Greater(t, ids[i], ids[i-1], "cloud accounts were created out of submission order: %v", ids)
	}
	db, err := e.main.GetDatabase(ctx, subID, firstDone.ResourceID())
	require.NoError(t, err)
	require.Equal(t, "pw-one", db.Security.Password)
	require.LessOrEqual(t, maxInProg, 1)
	require.Positive(t, samples)

	// Completion times follow submission order too.
	byID := map[string]*clouddb.Task{}
	for _, tk := range e.tasks(e.mainAccount) {
		byID[tk.ID] = tk
	}
	for i := 1; i < n; i++ {
		a, b := byID[submitted[i-1].ID], byID[submitted[i].ID]
		require.Less(t, a.Seq, b.Seq)
		require.False(t, b.UpdatedAt.Before(a.UpdatedAt), "task %d finished before task %d", i, i-1)
	}
}

// Two accounts' tasks do not wait for each other's: each account's queue is its own.
func TestAccountsProceedIndependently(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for _, c := range []*client.Client{e.main, e.other} {
		wg.Go(func() {
			for i := range 4 {
				_, err := c.Wait(ctx)(c.CreateCloudAccount(ctx, cloudAccountBody(fmt.Sprintf("par-%d", i))))
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	cas, err := e.other.ListCloudAccounts(ctx)
	require.NoError(t, err)
	require.Len(t, cas.CloudAccounts, 5) // the internal one and four
}

// GET /tasks lists at most MaxListedTasks tasks, the most recently updated: an account's
// ten days of tasks may be tens of thousands.
func TestTaskListBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	now := time.Now().UTC()
	n := cloudapi.MaxListedTasks + 5
	require.NoError(t, e.store.Update(ctx, func(tx clouddb.Tx) error {
		for i := range n {
			at := now.Add(-time.Duration(i) * time.Second)
			if err := tx.CreateTask(ctx, &clouddb.Task{ID: bulkTaskID(i), AccountID: e.otherAccount,
				CommandType: clouddb.CommandCloudAccountCreate, Status: clouddb.TaskCompleted, CreatedAt: at, UpdatedAt: at}); err != nil {
				return err
			}
		}
		return nil
	}))
	res := e.do(http.MethodGet, "/v1/tasks", otherKey, otherSecret, nil)
	require.Equal(t, http.StatusOK, res.status)
	var list []struct {
		TaskID string `json:"taskId"`
	}
	require.NoError(t, json.Unmarshal(res.body, &list))
	require.Len(t, list, cloudapi.MaxListedTasks)
	require.Equal(t, bulkTaskID(0), list[0].TaskID, "the newest first")
	require.Equal(t, bulkTaskID(cloudapi.MaxListedTasks-1), list[len(list)-1].TaskID, "the oldest are left out")
}

// bulkTaskID is the i-th task id of a test's bulk insert, a UUID as every task id is.
func bulkTaskID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
