package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"clouddb/cloudapi/client"
)

// settleWait is how long a form post waits for the task it submitted to end. The API
// checks a request in the task's processing phase, which for a create or a delete takes
// milliseconds (the servers start afterwards), so within this wait a refused request is
// shown next to its form; a task still running is followed on its page.
const settleWait = 2 * time.Second

// settlePoll is how often that wait asks.
const settlePoll = 100 * time.Millisecond

// settle waits up to settleWait for a task to end and returns the error of a task that
// failed (a *client.Error with the task's status code), or nil when it completed or still
// runs. The request was accepted: when asking for the task fails (the rate limit, the
// key deleted meanwhile), that is no refusal of it, and the task is followed on its page.
func (c *Console) settle(r *http.Request, p *pageContext, t *client.Task) error {
	ctx, cancel := context.WithTimeout(r.Context(), settleWait)
	defer cancel()
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for !taskFinal(t.Status) {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		next, err := p.api.GetTask(ctx, t.ID)
		if err != nil {
			if r.Context().Err() != nil {
				return r.Context().Err()
			}
			return nil // follow the task on its page
		}
		t = next
	}
	if t.Status == client.TaskFailed || (t.Response != nil && t.Response.Error != nil) {
		return taskError(t)
	}
	return nil
}

func taskFinal(status string) bool {
	return status == client.TaskCompleted || status == client.TaskFailed
}

// taskError is a failed task's error as the API gave it.
func taskError(t *client.Task) *client.Error {
	e := &client.Error{TaskID: t.ID, Status: t.Status, Description: t.Description}
	if t.Response != nil && t.Response.Error != nil {
		te := t.Response.Error
		e.StatusCode, e.Type, e.Status, e.Description = te.StatusCode(), te.Type, te.Status, te.Description
	}
	return e
}

// taskProgress is how far a task is along its statuses, out of 3.
func taskProgress(status string) int {
	switch status {
	case client.TaskInitialized:
		return 0
	case client.TaskReceived:
		return 1
	case client.TaskInProgress:
		return 2
	}
	return 3
}

// commandNames are the task commands as the pages name them.
var commandNames = map[string]string{
	"subscriptionCreateRequest": "Create subscription",
	"subscriptionUpdateRequest": "Update subscription",
	"subscriptionDeleteRequest": "Delete subscription",
	"databaseCreateRequest":     "Create database",
	"databaseUpdateRequest":     "Update database",
	"databaseDeleteRequest":     "Delete database",
	"databaseBackupRequest":     "Back up database",
	"databaseImportRequest":     "Import into database",
	"databaseUpgradeRequest":    "Upgrade database",
}

// taskView is a task as the pages show it.
type taskView struct {
	client.Task
	Name     string
	Progress int
	Final    bool
	Failed   bool
	// ErrorText is a failed task's error: its type and description.
	ErrorCode, ErrorText string
	// SubscriptionHref and DatabaseHref are the console pages of the task's resource.
	SubscriptionHref, DatabaseHref string
	subID, dbID                    int
}

// resourcePath reads a task's resource link: /subscriptions/{s} or
// /subscriptions/{s}/databases/{d}, after the API root.
var resourcePath = regexp.MustCompile(`/v1/subscriptions/(\d+)(?:/databases/(\d+))?$`)

func newTaskView(t *client.Task) taskView {
	v := taskView{Task: *t, Name: commandNames[t.CommandType], Progress: taskProgress(t.Status), Final: taskFinal(t.Status)}
	if v.Name == "" {
		v.Name = t.CommandType
	}
	if t.Response != nil && t.Response.Error != nil {
		v.Failed = true
		v.ErrorCode, v.ErrorText = t.Response.Error.Type, t.Response.Error.Description
	} else if t.Status == client.TaskFailed {
		v.Failed = true
	}
	if link, ok := t.Links["resource"]; ok {
		if u, err := url.Parse(link.Href); err == nil {
			if m := resourcePath.FindStringSubmatch(u.Path); m != nil {
				v.subID, _ = strconv.Atoi(m[1])
				v.SubscriptionHref = fmt.Sprintf("/console/subscriptions/%d", v.subID)
				if m[2] != "" {
					v.dbID, _ = strconv.Atoi(m[2])
					v.DatabaseHref = databaseHref(v.subID, v.dbID)
				}
			}
		}
	}
	return v
}

// taskIDPattern is what a task id may be (the API's are UUIDs). The page's path segment is
// decoded: a %3F or %2F in it would be a query or more path segments in the API's path.
var taskIDPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_-]{0,127}$`)

// maxListedTasks is how many tasks the tasks page shows: the most recently updated.
const maxListedTasks = 100

// tasks lists the account's tasks; the page reloads while one has not ended.
func (c *Console) tasks(w http.ResponseWriter, r *http.Request, p *pageContext) {
	list, err := p.api.ListTasks(r.Context())
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	list = list[:min(len(list), maxListedTasks)]
	views := make([]taskView, 0, len(list))
	refresh := false
	for i := range list {
		v := newTaskView(&list[i])
		views = append(views, v)
		refresh = refresh || !v.Final
	}
	data := p.data("Tasks")
	data["Tasks"] = views
	data["Refresh"] = refresh
	c.render(w, r, http.StatusOK, "tasks", data)
}

// task follows one task to its end, and then what it made: the page reloads while the
// task runs and, once it completed, while its database or subscription is pending, so
// the user sees it become active (or, for a delete, go).
func (c *Console) task(w http.ResponseWriter, r *http.Request, p *pageContext) {
	id := r.PathValue("id")
	if !taskIDPattern.MatchString(id) {
		c.renderError(w, r, p, &pageError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "no such page: not a task id: " + strconv.Quote(id)})
		return
	}
	t, err := p.api.GetTask(r.Context(), id)
	if err != nil {
		c.apiError(w, r, p, err)
		return
	}
	v := newTaskView(t)
	data := p.data("Task " + t.ID)
	data["Task"] = v
	refresh := !v.Final
	if v.Final && !v.Failed {
		switch {
		case v.dbID != 0:
			d, derr := p.api.GetDatabase(r.Context(), v.subID, v.dbID)
			switch {
			case client.IsNotFound(derr):
				data["Gone"] = true
			case derr != nil:
				c.apiError(w, r, p, derr)
				return
			default:
				dv := newDatabaseView(v.subID, d)
				data["DB"] = dv
				refresh = !dv.Settled
			}
		case v.subID != 0:
			s, serr := p.api.GetSubscription(r.Context(), v.subID)
			switch {
			case client.IsNotFound(serr):
				data["Gone"] = true
			case serr != nil:
				c.apiError(w, r, p, serr)
				return
			default:
				data["Subscription"] = s
				refresh = !subscriptionSettled(s.Status)
			}
		}
	}
	data["Refresh"] = refresh
	c.render(w, r, http.StatusOK, "task", data)
}
