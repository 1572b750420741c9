package clouddb

import "time"

// LogEntry is one line of an account's system log: a change made through the API or an
// event of the provisioning phase.
type LogEntry struct {
	ID          int
	AccountID   int
	Time        time.Time
	Originator  string
	APIKeyName  string
	Resource    string
	ResourceID  int
	Type        string
	Description string
}

// Log entry types.
const (
	LogTypeAccount      = "Account"
	LogTypeSubscription = "Subscription"
	LogTypeDatabase     = "Database"
	LogTypeCloudAccount = "CloudAccount"
)

// LogFilter selects log entries, newest first.
type LogFilter struct {
	AccountID  int
	ResourceID int
	Offset     int
	Limit      int
}
