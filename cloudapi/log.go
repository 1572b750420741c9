package cloudapi

import (
	"net/http"

	"clouddb"
)

func (s *Server) registerLogRoutes() {
	s.route("GET /logs", s.listLogs)
}

type logEntryView struct {
	ID          int    `json:"id"`
	Time        string `json:"time"`
	Originator  string `json:"originator"`
	APIKeyName  string `json:"apiKeyName,omitempty"`
	Resource    string `json:"resource,omitempty"`
	ResourceID  int    `json:"resourceId,omitempty"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

func (s *Server) listLogs(r *http.Request, c *caller) (int, any, error) {
	offset, err := queryInt(r, "offset", 0, 0, 1<<30)
	if err != nil {
		return 0, nil, err
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return 0, nil, err
	}
	resourceID, err := queryInt(r, "resourceId", 0, 0, 1<<31-1)
	if err != nil {
		return 0, nil, err
	}
	var entries []*clouddb.LogEntry
	err = s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var txErr error
		entries, txErr = tx.LogEntries(r.Context(), clouddb.LogFilter{AccountID: c.account.ID, ResourceID: resourceID, Offset: offset, Limit: limit})
		return txErr
	})
	if err != nil {
		return 0, nil, err
	}
	views := make([]logEntryView, 0, len(entries))
	for _, e := range entries {
		views = append(views, logEntryView{ID: e.ID, Time: timestamp(e.Time), Originator: e.Originator, APIKeyName: e.APIKeyName,
			Resource: e.Resource, ResourceID: e.ResourceID, Type: e.Type, Description: e.Description})
	}
	return http.StatusOK, map[string]any{"entries": views, "links": []any{}}, nil
}
