package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is a failure the server reported: a non-2xx answer, whose body is
// {"error":{"type","status","description"}}, or a task that ended in processing-error,
// whose response.error is {type, status "NNN REASON", description}. Keeping the two in one
// type lets callers handle a 404 or a 409 the same way whichever phase reported it.
type Error struct {
	// StatusCode is the HTTP status of the answer, or the code a task error's status
	// starts with.
	StatusCode int
	// Type is the machine code, e.g. SUBSCRIPTION_NOT_FOUND.
	Type string
	// Description is the human text.
	Description string
	// Status is a task error's status text, e.g. "404 NOT_FOUND" (empty for HTTP errors).
	Status string
	// TaskID names the failed task (empty for HTTP errors).
	TaskID string
	// Body is the raw body of the answer (the task's JSON for a task error).
	Body []byte
	// RetryAfter is how long a 429 asks to wait (its X-Rate-Limit-Retry-After-Seconds, or
	// Retry-After), 0 when it does not say.
	RetryAfter time.Duration
}

// Error formats as the official client does, "<status> - <type>: <description>", so logs
// read alike whichever client produced them.
func (e *Error) Error() string {
	status := e.Status
	if status == "" {
		status = strconv.Itoa(e.StatusCode)
		if t := http.StatusText(e.StatusCode); t != "" {
			status += " " + strings.ToUpper(strings.ReplaceAll(t, " ", "_"))
		}
	}
	if e.Type == "" && e.Description == "" {
		return status + " - " + strings.TrimSpace(string(e.Body))
	}
	msg := status + " - " + e.Type + ": " + e.Description
	if e.TaskID != "" {
		msg = "task " + e.TaskID + ": " + msg
	}
	return msg
}

// errorBody is the server's synchronous error envelope.
type errorBody struct {
	Error *struct {
		Type        string `json:"type"`
		Status      any    `json:"status"`
		Description string `json:"description"`
	} `json:"error"`
}

// newHTTPError parses our error envelope; a body that is not one (a proxy's HTML page,
// say) is kept raw in Body.
func newHTTPError(status int, header http.Header, body []byte) *Error {
	e := &Error{StatusCode: status, Body: body}
	for _, h := range []string{"X-Rate-Limit-Retry-After-Seconds", "Retry-After"} {
		if n, err := strconv.Atoi(strings.TrimSpace(header.Get(h))); err == nil && n > 0 {
			e.RetryAfter = time.Duration(n) * time.Second
			break
		}
	}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != nil {
		e.Type = eb.Error.Type
		e.Description = eb.Error.Description
	}
	return e
}

// newTaskError builds the error of a task that ended in processing-error.
func newTaskError(t *Task, raw []byte) *Error {
	e := &Error{TaskID: t.ID, Body: raw}
	if t.Response != nil && t.Response.Error != nil {
		te := t.Response.Error
		e.Type, e.Status, e.Description = te.Type, te.Status, te.Description
		e.StatusCode = te.StatusCode()
		return e
	}
	e.Status = t.Status
	e.Description = fmt.Sprintf("task ended in %s without an error: %s", t.Status, t.Description)
	return e
}

// IsNotFound reports whether err is (or wraps) an *Error with status 404: the resource is
// missing, gone, or belongs to another account.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// StatusCode returns the status of the *Error inside err, or 0.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// maxRetryAfter bounds the wait RetryDelay asks for, whatever a server says.
const maxRetryAfter = time.Minute

// RetryDelay reports whether a poll that failed with err is worth repeating, as a wait
// does, and after how long at least: a 429 (the rate limit, which two waits of one key in
// parallel reach) after the time it asks, and a 502, 503 or 504 (a proxy before a
// restarting service) after fallback. Any other error is final.
func RetryDelay(err error, fallback time.Duration) (time.Duration, bool) {
	var e *Error
	if !errors.As(err, &e) || e.TaskID != "" {
		return 0, false
	}
	switch e.StatusCode {
	case http.StatusTooManyRequests:
		if e.RetryAfter > 0 {
			return min(e.RetryAfter, maxRetryAfter), true
		}
		return max(fallback, time.Second), true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return fallback, true
	}
	return 0, false
}
