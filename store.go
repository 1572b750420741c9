package clouddb

import (
	"context"
	"time"
)

// Store is the durable state of clouddb. Every read and write goes through a transaction,
// so a task's state change and its completion commit together.
type Store interface {
	// View runs fn in a read-only transaction. fn may run more than once (a shared store
	// runs a read again when its connection broke under it), so it must assign what it
	// reads, not accumulate it.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a read-write transaction; it commits when fn returns nil.
	Update(ctx context.Context, fn func(Tx) error) error
	// ClaimTask takes the oldest task that may be processed now and marks it in progress
	// under a lease for owner: a received task of an account that has no task in progress,
	// or an in-progress task whose lease expired before now. It returns nil, nil when there
	// is none.
	ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration) (*Task, error)
	// ProcessTasks claims tasks as ClaimTask does and calls fn with each in one write
	// transaction, claiming the next as long as fn asks for more and a task is waiting
	// (a task fn finished frees its account's next one), so that many tasks cost one
	// commit instead of two each. When every fn returned nil, the claims and whatever fn
	// wrote (each task's end with FinishTask, say) commit together; when one returns an
	// error, or the process dies before the commit, everything is rolled back, every
	// task waits again as if never claimed, and that error is returned. A task fn leaves
	// unfinished commits as a bare claim, under its lease: work that must not hold the
	// write transaction (a data job) goes on from there as after ClaimTask. It returns
	// the tasks as fn left them, in the order claimed, or none when no task was waiting
	// (fn is not called). Like Update, fn must not call Store methods.
	ProcessTasks(ctx context.Context, owner string, now time.Time, lease time.Duration, fn func(tx Tx, t *Task) (more bool, err error)) ([]*Task, error)
	// ExtendLease moves the lease of an in-progress task held by owner to until; it
	// returns ErrConflict when the task is no longer in progress under owner. Long work (a
	// backup, an import) keeps its task this way.
	ExtendLease(ctx context.Context, id, owner string, until time.Time) error
	// PurgeTasks deletes finished tasks last updated before the given time; a task that
	// has not been processed is never purged.
	PurgeTasks(ctx context.Context, before time.Time) (int64, error)
	// Version is a counter that changes with every write this process commits (task
	// claims included): what was read at one version is still true while it stays.
	Version() uint64
	// Close releases the store.
	Close() error
}

// Tx is a transaction. Getters return ErrNotFound for a missing row (or one that belongs
// to another account); creates and updates return ErrConflict when a uniqueness rule is
// broken. Creates assign the ID, CreatedAt and UpdatedAt unless the caller preset them
// (times are stored in UTC with microsecond precision and written back); updates set
// UpdatedAt. Generation belongs to the caller: updates store the value they are given
// (a create turns 0 into 1). An account id of 0, in a getter or a filter, means every
// account (internal callers only). Do not call Store methods from inside a transaction:
// the SQLite store has a single writer connection.
type Tx interface {
	// Savepoint runs fn within the transaction under a savepoint: when fn returns an
	// error, what fn wrote is undone, the transaction goes on as it was before fn (a
	// failed statement inside fn included), and fn's error is returned. A failure to undo
	// is returned too: the transaction is then unusable and must be rolled back.
	Savepoint(ctx context.Context, fn func(Tx) error) error

	CreateAccount(ctx context.Context, a *Account) error
	Account(ctx context.Context, id int) (*Account, error)
	Accounts(ctx context.Context) ([]*Account, error)

	CreateAPIKey(ctx context.Context, k *APIKey) error
	// APIKey finds a key by its public key string.
	APIKey(ctx context.Context, key string) (*APIKey, error)
	// APIKeys lists an account's keys by id (every account's for 0).
	APIKeys(ctx context.Context, accountID int) ([]*APIKey, error)
	// DeleteAPIKey removes a key by its public key string (ErrNotFound when there is
	// none): it stops authenticating.
	DeleteAPIKey(ctx context.Context, key string) error

	CreatePaymentMethod(ctx context.Context, p *PaymentMethod) error
	PaymentMethods(ctx context.Context, accountID int) ([]*PaymentMethod, error)

	CreateCloudAccount(ctx context.Context, c *CloudAccount) error
	// CloudAccount finds a cloud account of the account, or the internal one.
	CloudAccount(ctx context.Context, accountID, id int) (*CloudAccount, error)
	CloudAccounts(ctx context.Context, f CloudAccountFilter) ([]*CloudAccount, error)
	UpdateCloudAccount(ctx context.Context, c *CloudAccount) error
	DeleteCloudAccount(ctx context.Context, id int) error
	// SetCloudAccountStatus sets the status if the generation still matches; it reports
	// whether it did.
	SetCloudAccountStatus(ctx context.Context, id, generation int, s CloudAccountStatus) (bool, error)

	CreateSubscription(ctx context.Context, s *Subscription) error
	Subscription(ctx context.Context, accountID, id int) (*Subscription, error)
	Subscriptions(ctx context.Context, f SubscriptionFilter) ([]*Subscription, error)
	UpdateSubscription(ctx context.Context, s *Subscription) error
	DeleteSubscription(ctx context.Context, id int) error
	SetSubscriptionStatus(ctx context.Context, id, generation int, s SubscriptionStatus) (bool, error)

	// CreateDatabase returns ErrConflict when the name is taken in the subscription by a
	// database that is not being deleted, or the port is taken.
	CreateDatabase(ctx context.Context, d *Database) error
	Database(ctx context.Context, accountID, id int) (*Database, error)
	// Databases lists databases by id; it also returns the count before Offset/Limit.
	Databases(ctx context.Context, f DatabaseFilter) ([]*Database, int, error)
	UpdateDatabase(ctx context.Context, d *Database) error
	DeleteDatabase(ctx context.Context, id int) error
	// SetDatabaseStatus sets status and detail if the generation still matches; moving to
	// active also sets ActivatedOn the first time. It reports whether it did.
	SetDatabaseStatus(ctx context.Context, id, generation int, s DatabaseStatus, detail string) (bool, error)
	// SetDatabaseState records the outcome of data operations on a database (its latest
	// backup and import) without touching its configuration or status.
	SetDatabaseState(ctx context.Context, id int, s DatabaseState) error
	// UsedPorts lists the ports held by databases, including those being deleted.
	UsedPorts(ctx context.Context) ([]int, error)

	// ACL rules, roles and users. Names are unique in an account (ErrConflict); the
	// default rules (AccountID 0) are listed with every account's rules and cannot be
	// updated or deleted here (ErrConflict). A getter with accountID 0 finds the row of
	// any account; ACLRules with 0 lists every account's rules.
	CreateACLRule(ctx context.Context, r *ACLRule) error
	ACLRule(ctx context.Context, accountID, id int) (*ACLRule, error)
	ACLRules(ctx context.Context, accountID int) ([]*ACLRule, error)
	UpdateACLRule(ctx context.Context, r *ACLRule) error
	DeleteACLRule(ctx context.Context, id int) error
	SetACLRuleStatus(ctx context.Context, id, generation int, s ACLStatus) (bool, error)

	CreateACLRole(ctx context.Context, r *ACLRole) error
	ACLRole(ctx context.Context, accountID, id int) (*ACLRole, error)
	ACLRoles(ctx context.Context, accountID int) ([]*ACLRole, error)
	UpdateACLRole(ctx context.Context, r *ACLRole) error
	DeleteACLRole(ctx context.Context, id int) error
	SetACLRoleStatus(ctx context.Context, id, generation int, s ACLStatus) (bool, error)

	// ACL users' passwords are sealed at rest, like databases'.
	CreateACLUser(ctx context.Context, u *ACLUser) error
	ACLUser(ctx context.Context, accountID, id int) (*ACLUser, error)
	ACLUsers(ctx context.Context, accountID int) ([]*ACLUser, error)
	UpdateACLUser(ctx context.Context, u *ACLUser) error
	DeleteACLUser(ctx context.Context, id int) error
	SetACLUserStatus(ctx context.Context, id, generation int, s ACLStatus) (bool, error)

	CreateTask(ctx context.Context, t *Task) error
	Task(ctx context.Context, accountID int, id string) (*Task, error)
	// Tasks lists tasks, most recently updated first.
	Tasks(ctx context.Context, f TaskFilter) ([]*Task, error)
	// FinishTask writes the task's final status, resource id, resource and error, provided the task
	// is still in progress under t.LeaseOwner; otherwise it returns ErrConflict (the lease
	// was lost and another worker owns the task).
	FinishTask(ctx context.Context, t *Task) error

	CreateLogEntry(ctx context.Context, e *LogEntry) error
	LogEntries(ctx context.Context, f LogFilter) ([]*LogEntry, error)

	// Setting reads a value the service keeps for itself; ErrNotFound when it is unset.
	Setting(ctx context.Context, name string) (string, error)
	// PutSetting writes a setting, replacing any value it had.
	PutSetting(ctx context.Context, name, value string) error
}

// CloudAccountFilter selects cloud accounts; the internal account is included for any
// AccountID.
type CloudAccountFilter struct {
	AccountID int
	Statuses  []CloudAccountStatus
}

// SubscriptionFilter selects subscriptions, by id.
type SubscriptionFilter struct {
	AccountID      int
	Statuses       []SubscriptionStatus
	CloudAccountID int
}

// DatabaseFilter selects databases, by id.
type DatabaseFilter struct {
	AccountID      int
	SubscriptionID int
	Statuses       []DatabaseStatus
	// ExcludeDeleting leaves out databases being deleted (what the API shows).
	ExcludeDeleting bool
	Offset          int
	Limit           int // 0 means no limit
}
