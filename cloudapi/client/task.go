package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Task statuses.
const (
	TaskInitialized = "initialized"
	TaskReceived    = "received"
	TaskInProgress  = "processing-in-progress"
	TaskCompleted   = "processing-completed"
	TaskFailed      = "processing-error"
)

// Task is an asynchronous request: what every POST, PUT and DELETE answers, and what
// GET /tasks/{id} returns while it is processed.
type Task struct {
	ID          string `json:"taskId"`
	CommandType string `json:"commandType"`
	Status      string `json:"status"`
	Description string `json:"description"`
	// Timestamp is the time of the last status change; a time.Time so that a server
	// sending anything but RFC 3339 fails to decode, as it would in the official client.
	Timestamp time.Time       `json:"timestamp"`
	Response  *TaskResponse   `json:"response,omitempty"`
	Links     map[string]Link `json:"_links,omitempty"`
	// Raw is the task's JSON as the server sent it, for callers that show it as is (the
	// CLI's -o json). It is set by the calls that return a task.
	Raw json.RawMessage `json:"-"`
}

// TaskResponse is a finished task's outcome: a resource id on success, an error on
// failure (and only then).
type TaskResponse struct {
	ResourceID           *int            `json:"resourceId,omitempty"`
	AdditionalResourceID *int            `json:"additionalResourceId,omitempty"`
	Resource             json.RawMessage `json:"resource,omitempty"`
	Error                *TaskError      `json:"error,omitempty"`
	// AdditionalInfo is a second code some failures carry (an ACL rule or password that is
	// not valid), beside error as the API sends it.
	AdditionalInfo string `json:"additionalInfo,omitempty"`
}

// TaskError is a failed task's response.error.
type TaskError struct {
	Type string `json:"type"`
	// Status is "<code> <REASON>", e.g. "400 BAD_REQUEST".
	Status         string `json:"status"`
	Description    string `json:"description"`
	AdditionalInfo string `json:"additionalInfo,omitempty"`
}

// StatusCode is the leading number of Status, as the official client reads it.
func (e *TaskError) StatusCode() int {
	code, _, _ := strings.Cut(e.Status, " ")
	n, _ := strconv.Atoi(code)
	return n
}

// Link is one entry of _links.
type Link struct {
	Href  string `json:"href"`
	Title string `json:"title,omitempty"`
	Type  string `json:"type"`
}

// ResourceID returns response.resourceId, or 0 when the task has none (yet).
func (t *Task) ResourceID() int {
	if t.Response == nil || t.Response.ResourceID == nil {
		return 0
	}
	return *t.Response.ResourceID
}

// GetTask reads a task of the caller's account.
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := c.Do(ctx, http.MethodGet, "/tasks/"+url.PathEscape(id), nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// ListTasks lists the account's tasks of the past ten days, most recently updated first.
// Our server answers a bare array; the real API answers {} when there is none and its
// OpenAPI describes {"tasks": [...]}, so both object forms are read too.
func (c *Client) ListTasks(ctx context.Context) ([]Task, error) {
	var raw json.RawMessage
	if err := c.Do(ctx, http.MethodGet, "/tasks", nil, &raw); err != nil {
		return nil, err
	}
	if b := bytes.TrimSpace(raw); len(b) > 0 && b[0] == '{' {
		var obj struct {
			Tasks []Task `json:"tasks"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return nil, fmt.Errorf("GET /tasks: decode response: %w", err)
		}
		return obj.Tasks, nil
	}
	var tasks []Task
	if err := json.Unmarshal(raw, &tasks); err != nil {
		return nil, fmt.Errorf("GET /tasks: decode response: %w", err)
	}
	return tasks, nil
}

// WaitForTask polls a task until its processing phase ends. A completed task is returned
// with a nil error. A failed one is returned together with an *Error built from its
// response.error, so callers get both the typed error and the exact wire object. As in
// the official client, a response.error stops the wait whatever the status says, and an
// unknown status is a failure. An answer that asks to retry (a 429 of the rate limit, a
// 502, 503 or 504; see RetryDelay) is waited out. The wait is bounded only by ctx.
func (c *Client) WaitForTask(ctx context.Context, id string) (*Task, error) {
	return c.WatchTask(ctx, id, nil)
}

// WatchTask is WaitForTask that calls seen with every state of the task it reads, the
// last one included, so that a caller can show the progress; seen may be nil.
func (c *Client) WatchTask(ctx context.Context, id string, seen func(*Task)) (*Task, error) {
	path := "/tasks/" + url.PathEscape(id)
	for {
		var raw json.RawMessage
		if err := c.Do(ctx, http.MethodGet, path, nil, &raw); err != nil {
			d, retry := RetryDelay(err, c.poll)
			if !retry {
				return nil, err
			}
			if serr := sleepFor(ctx, d); serr != nil {
				return nil, fmt.Errorf("waiting for task %s (last answer: %v): %w", id, err, serr)
			}
			continue
		}
		t := Task{Raw: raw}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("GET %s: decode response: %w", path, err)
		}
		if seen != nil {
			seen(&t)
		}
		if t.Response != nil && t.Response.Error != nil {
			return &t, newTaskError(&t, raw)
		}
		switch t.Status {
		case TaskCompleted:
			return &t, nil
		case TaskInitialized, TaskReceived, TaskInProgress:
		default:
			return &t, newTaskError(&t, raw)
		}
		if err := c.sleep(ctx); err != nil {
			return &t, fmt.Errorf("waiting for task %s (last status %s): %w", id, t.Status, err)
		}
	}
}

// Wait is WaitForTask for a task just returned by an asynchronous call, so that a call
// and its wait chain: c.Wait(ctx)(c.CreateSubscription(ctx, req)).
func (c *Client) Wait(ctx context.Context) func(*Task, error) (*Task, error) {
	return func(t *Task, err error) (*Task, error) {
		if err != nil {
			return nil, err
		}
		return c.WaitForTask(ctx, t.ID)
	}
}

func (c *Client) sleep(ctx context.Context) error { return sleepFor(ctx, c.poll) }

// sleepFor waits for d or the end of ctx, and says which.
func sleepFor(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
