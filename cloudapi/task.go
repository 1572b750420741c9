package cloudapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"clouddb"
)

func (s *Server) registerTaskRoutes() {
	s.route("GET /tasks", s.listTasks)
	s.route("GET /tasks/{taskId}", s.getTask)
}

// taskView is a task on the wire.
type taskView struct {
	TaskID      string               `json:"taskId"`
	CommandType string               `json:"commandType"`
	Status      string               `json:"status"`
	Description string               `json:"description"`
	Timestamp   string               `json:"timestamp"`
	Response    *taskResponseView    `json:"response,omitempty"`
	Links       map[string]*linkView `json:"_links"`
}

type taskResponseView struct {
	ResourceID int                `json:"resourceId,omitempty"`
	Resource   json.RawMessage    `json:"resource,omitempty"`
	Error      *clouddb.TaskError `json:"error,omitempty"`
	// AdditionalInfo is the error's second code; the API puts it beside error, not in it.
	AdditionalInfo string `json:"additionalInfo,omitempty"`
}

type linkView struct {
	Href  string `json:"href"`
	Title string `json:"title,omitempty"`
	Type  string `json:"type"`
}

// timestamp renders a time as the API does: RFC 3339 in UTC with milliseconds.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// baseURL is the absolute /v1 root as the client reached it, for links.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/v1"
}

func newTaskView(r *http.Request, t *clouddb.Task) *taskView {
	base := baseURL(r)
	v := &taskView{
		TaskID:      t.ID,
		CommandType: t.CommandType,
		Status:      string(t.Status),
		Description: t.Status.Description(),
		Timestamp:   timestamp(t.UpdatedAt),
		Links:       map[string]*linkView{},
	}
	self := base + "/tasks/" + t.ID
	if !t.Status.Final() {
		v.Links["task"] = &linkView{Href: self, Title: "getTaskStatusUpdates", Type: http.MethodGet}
		return v
	}
	v.Links["self"] = &linkView{Href: self, Type: http.MethodGet}
	v.Response = &taskResponseView{}
	if t.Error != nil {
		e := *t.Error
		v.Response.AdditionalInfo, e.AdditionalInfo = e.AdditionalInfo, ""
		v.Response.Error = &e
	}
	if t.Status == clouddb.TaskCompleted {
		v.Response.ResourceID = t.ResourceID
		v.Response.Resource = t.Resource
		if href, title := resourceLink(base, t); href != "" {
			v.Links["resource"] = &linkView{Href: href, Title: title, Type: http.MethodGet}
		}
	}
	return v
}

// resourceLink points at the resource a completed task created or changed.
func resourceLink(base string, t *clouddb.Task) (string, string) {
	if t.ResourceID == 0 {
		return "", ""
	}
	switch t.CommandType {
	case clouddb.CommandSubscriptionCreate, clouddb.CommandSubscriptionUpdate, clouddb.CommandSubscriptionDelete,
		clouddb.CommandMaintenanceWindowsUpdate, clouddb.CommandCIDRUpdate, clouddb.CommandCIDRGet:
		return fmt.Sprintf("%s/subscriptions/%d", base, t.ResourceID), "getSubscriptionInformation"
	case clouddb.CommandDatabaseCreate, clouddb.CommandDatabaseUpdate, clouddb.CommandDatabaseDelete,
		clouddb.CommandDatabaseBackup, clouddb.CommandDatabaseImport, clouddb.CommandDatabaseBackupStatus, clouddb.CommandDatabaseImportStatus:
		return fmt.Sprintf("%s/subscriptions/%d/databases/%d", base, t.SubscriptionID, t.ResourceID), "getDatabaseInformation"
	case clouddb.CommandCloudAccountCreate, clouddb.CommandCloudAccountUpdate, clouddb.CommandCloudAccountDelete:
		return fmt.Sprintf("%s/cloud-accounts/%d", base, t.ResourceID), "getCloudAccountInformation"
	case clouddb.CommandACLUserCreate, clouddb.CommandACLUserUpdate:
		return fmt.Sprintf("%s/acl/users/%d", base, t.ResourceID), "getUserById"
	}
	return "", ""
}

// enqueue stores a task for the caller and answers with it in the received state.
func (s *Server) enqueue(r *http.Request, c *caller, status int, t *clouddb.Task, payload any) (int, any, error) {
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return 0, nil, err
		}
		t.Payload = b
	}
	t.AccountID = c.account.ID
	t.APIKeyName = c.key.Name
	if err := s.Tasks.Submit(r.Context(), t); err != nil {
		return 0, nil, err
	}
	return status, newTaskView(r, t), nil
}

func (s *Server) getTask(r *http.Request, c *caller) (int, any, error) {
	id := r.PathValue("taskId")
	var t *clouddb.Task
	err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var err error
		t, err = tx.Task(r.Context(), c.account.ID, id)
		return err
	})
	if errors.Is(err, clouddb.ErrNotFound) {
		return 0, nil, clouddb.NotFound(clouddb.ErrTypeTaskNotFound, "task %q not found", id)
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, newTaskView(r, t), nil
}

// MaxListedTasks is how many tasks GET /tasks lists at most: the most recently updated.
// An account may run tens of thousands of tasks in the history's ten days, and one answer
// listing them all took megabytes.
const MaxListedTasks = 1000

// listTasks answers a bare JSON array of the account's tasks of the past ten days, most
// recently updated first (the form real clients such as redisctl read), at most
// MaxListedTasks of them.
func (s *Server) listTasks(r *http.Request, c *caller) (int, any, error) {
	var tasks []*clouddb.Task
	err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
		var err error
		tasks, err = tx.Tasks(r.Context(), clouddb.TaskFilter{AccountID: c.account.ID, UpdatedSince: s.Now().Add(-clouddb.TaskHistory),
			Limit: MaxListedTasks})
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	views := make([]*taskView, 0, len(tasks))
	for _, t := range tasks {
		views = append(views, newTaskView(r, t))
	}
	return http.StatusOK, views, nil
}
