package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogEntry is an entry of GET /logs.
type LogEntry struct {
	ID         int       `json:"id"`
	Time       time.Time `json:"time"`
	Originator string    `json:"originator"`
	// APIKeyName is set only for changes made through the API.
	APIKeyName  string `json:"apiKeyName,omitempty"`
	Resource    string `json:"resource,omitempty"`
	ResourceID  int    `json:"resourceId,omitempty"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

// LogQuery selects log entries; zero fields are not sent, so the server's defaults
// (offset 0 = newest, limit 100) apply.
type LogQuery struct {
	Offset     int
	Limit      int
	ResourceID int
}

// Logs lists the account's system log, newest first.
func (c *Client) Logs(ctx context.Context, q LogQuery) ([]LogEntry, error) {
	v := url.Values{}
	for name, n := range map[string]int{"offset": q.Offset, "limit": q.Limit, "resourceId": q.ResourceID} {
		if n != 0 {
			v.Set(name, strconv.Itoa(n))
		}
	}
	path := "/logs"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out struct {
		Entries []LogEntry `json:"entries"`
	}
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}
