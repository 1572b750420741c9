package clouddb

import "time"

// TaskStatus is where a task is in its processing phase.
type TaskStatus string

// Task states. Completed and error are final.
const (
	TaskReceived   TaskStatus = "received"
	TaskInProgress TaskStatus = "processing-in-progress"
	TaskCompleted  TaskStatus = "processing-completed"
	TaskFailed     TaskStatus = "processing-error"
)

// Final reports whether the processing phase of the task has ended.
func (s TaskStatus) Final() bool { return s == TaskCompleted || s == TaskFailed }

// Description is the canonical text the API shows for the status.
func (s TaskStatus) Description() string {
	switch s {
	case TaskReceived:
		return "Task request received and is being queued for processing."
	case TaskInProgress:
		return "Task request is being processed."
	case TaskCompleted:
		return "Request processing completed successfully and its resources are now being provisioned / de-provisioned."
	case TaskFailed:
		return "Task request failed during processing. See error information for failure details."
	}
	return ""
}

// TaskHistory is how long tasks are kept and listed.
const TaskHistory = 10 * 24 * time.Hour

// Command types: the request-schema name with a lower-case first letter.
const (
	CommandSubscriptionCreate   = "subscriptionCreateRequest"
	CommandSubscriptionUpdate   = "subscriptionUpdateRequest"
	CommandSubscriptionDelete   = "subscriptionDeleteRequest"
	CommandDatabaseCreate       = "databaseCreateRequest"
	CommandDatabaseUpdate       = "databaseUpdateRequest"
	CommandDatabaseDelete       = "databaseDeleteRequest"
	CommandCloudAccountCreate   = "cloudAccountCreateRequest"
	CommandCloudAccountUpdate   = "cloudAccountUpdateRequest"
	CommandCloudAccountDelete   = "cloudAccountDeleteRequest"
	CommandDatabaseBackup       = "databaseBackupRequest"
	CommandDatabaseImport       = "databaseImportRequest"
	CommandDatabaseBackupStatus = "databaseBackupStatusRequest"
	CommandDatabaseImportStatus = "databaseImportStatusRequest"
	CommandDatabaseUpgrade      = "databaseUpgradeRequest"
	CommandACLRuleCreate        = "aclRedisRuleCreateRequest"
	CommandACLRuleUpdate        = "aclRedisRuleUpdateRequest"
	CommandACLRuleDelete        = "aclRedisRuleDeleteRequest"
	CommandACLRoleCreate        = "aclRoleCreateRequest"
	CommandACLRoleUpdate        = "aclRoleUpdateRequest"
	CommandACLRoleDelete        = "aclRoleDeleteRequest"
	CommandACLUserCreate        = "aclUserCreateRequest"
	CommandACLUserUpdate        = "aclUserUpdateRequest"
	CommandACLUserDelete        = "aclUserDeleteRequest"
)

// Command types of the subscription settings. Resource tags go as a
// CommandSubscriptionUpdate, as on the real API.
const (
	CommandMaintenanceWindowsUpdate = "subscriptionMaintenanceWindowsUpdateRequest"
	CommandCIDRUpdate               = "cidrUpdateRequest"
	// CommandCIDRGet is what the real API's GET …/cidr task is called (its peering list
	// shares the name).
	CommandCIDRGet = "peeringListRequest"
)

// Task is an asynchronous request. Its processing phase runs in the task engine, one task
// at a time per account, in submission order.
type Task struct {
	ID          string
	AccountID   int
	APIKeyName  string
	CommandType string
	Status      TaskStatus
	// Target ids taken from the request path (0 when not applicable).
	SubscriptionID int
	DatabaseID     int
	CloudAccountID int
	// Payload is the command body as JSON (a SubscriptionSpec, DatabaseUpdate, ...).
	Payload []byte
	// ResourceID is the id of the resource the task created or changed (0 until completed).
	ResourceID int
	// Resource is the JSON answer of a task that reports on something (the status of a
	// database's latest backup or import), set when it completes; nil otherwise.
	Resource []byte
	// Error is set only in the final processing-error state.
	Error *TaskError
	// Seq orders tasks by submission; the store assigns it.
	Seq       int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// LeaseOwner and LeaseExpiresAt are set while a worker processes the task; a task whose
	// lease has expired is taken over by another worker.
	LeaseOwner     string
	LeaseExpiresAt time.Time
}

// TaskError is a failed task's response.error.
type TaskError struct {
	Type        string `json:"type"`
	Status      string `json:"status"`
	Description string `json:"description"`
	// AdditionalInfo is rendered beside the error in the task's response, not inside it.
	AdditionalInfo string `json:"additionalInfo,omitempty"`
}

// NewTaskError converts err into a task error; an internal error becomes GENERAL_ERROR
// with a generic description, so nothing internal leaks.
func NewTaskError(err error) *TaskError {
	if e := AsError(err); e != nil {
		return &TaskError{Type: e.Type, Status: e.StatusText(), Description: e.Description, AdditionalInfo: e.AdditionalInfo}
	}
	return &TaskError{Type: ErrTypeGeneral, Status: StatusText(500), Description: "internal error while processing the task"}
}

// TaskFilter selects tasks.
type TaskFilter struct {
	AccountID    int
	UpdatedSince time.Time
	// Limit keeps only the first (most recently updated) tasks; 0 keeps all.
	Limit int
}
