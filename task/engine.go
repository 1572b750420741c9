// Package task is the processing phase: a durable queue in the store, worked by a few
// workers that claim tasks under a lease, one task at a time per account, in submission
// order. A task's state change and its completion commit in one transaction, so a task
// takes effect exactly once, even when a worker dies and another takes its task over.
package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"clouddb"
	"clouddb/blob"
)

// Defaults of the engine.
const (
	DefaultWorkers      = 2
	DefaultLease        = 30 * time.Second
	DefaultPollInterval = time.Second
	DefaultPurgeEvery   = time.Hour
)

// Engine runs the processing phase.
type Engine struct {
	Store clouddb.Store
	Ports *Ports
	// Driver and Blob serve the data jobs (backups and imports); TempDir receives the
	// files an import downloads.
	Driver  clouddb.Driver
	Blob    blob.Options
	TempDir string
	Logger  *slog.Logger
	// Now is the clock; tests may stub it.
	Now func() time.Time
	// Workers is how many tasks (of different accounts) may be processed at once.
	Workers int
	// Lease is how long a claimed task stays with its worker before another may take it.
	Lease time.Duration
	// PollInterval bounds how long a submitted task can wait when a wake-up is missed.
	PollInterval time.Duration
	// BackupCheck is how often the periodic-backup schedule is checked; it needs a
	// Driver.
	BackupCheck time.Duration
	// MemoryLimit is the memory, in bytes, that the databases may take together (the sum
	// of their maxmemory): a create or a size increase past it fails its task. 0 means
	// no limit.
	MemoryLimit int64
	// Processed is called after every task that reached a final state, to wake the
	// provisioning phase.
	Processed func(*clouddb.Task)

	owner string
	wake  chan struct{}
	once  sync.Once
}

func (e *Engine) init() {
	e.once.Do(func() {
		if e.Logger == nil {
			e.Logger = slog.Default()
		}
		if e.Now == nil {
			e.Now = func() time.Time { return time.Now().UTC() }
		}
		if e.Workers <= 0 {
			e.Workers = DefaultWorkers
		}
		if e.Lease <= 0 {
			e.Lease = DefaultLease
		}
		if e.PollInterval <= 0 {
			e.PollInterval = DefaultPollInterval
		}
		e.owner = uuid.NewString()
		e.wake = make(chan struct{}, 1)
	})
}

// Notify wakes an idle worker; handlers call it after enqueueing a task.
func (e *Engine) Notify() {
	e.init()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Submit stores a new task in the received state and wakes the engine.
func (e *Engine) Submit(ctx context.Context, t *clouddb.Task) error {
	e.init()
	t.ID = uuid.NewString()
	t.Status = clouddb.TaskReceived
	if err := e.Store.Update(ctx, func(tx clouddb.Tx) error { return tx.CreateTask(ctx, t) }); err != nil {
		return err
	}
	e.Notify()
	return nil
}

// Run works tasks until ctx is cancelled, then returns once the tasks in hand are
// finished: processing is short and transactional, so finishing beats handing back.
func (e *Engine) Run(ctx context.Context) error {
	e.init()
	var wg sync.WaitGroup
	for range e.Workers {
		wg.Go(func() { e.work(ctx) })
	}
	wg.Go(func() { e.purge(ctx) })
	if e.Driver != nil {
		wg.Go(func() { e.backupLoop(ctx) })
	}
	wg.Wait()
	return nil
}

func (e *Engine) work(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		case <-timer.C:
		}
		// Drain the queue before sleeping again.
		for ctx.Err() == nil {
			did, err := e.ProcessNext(context.WithoutCancel(ctx))
			if err != nil {
				e.Logger.Error("task engine", "err", err)
				break
			}
			if !did {
				break
			}
			// Another worker may be idle while more tasks wait.
			e.Notify()
		}
		timer.Reset(e.PollInterval)
	}
}

func (e *Engine) purge(ctx context.Context) {
	t := time.NewTicker(DefaultPurgeEvery)
	defer t.Stop()
	for {
		if n, err := e.Store.PurgeTasks(ctx, e.Now().Add(-clouddb.TaskHistory)); err != nil && ctx.Err() == nil {
			e.Logger.Error("purge tasks", "err", err)
		} else if n > 0 {
			e.Logger.Info("purged old tasks", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ProcessNext claims one task and processes it. It reports whether there was one.
func (e *Engine) ProcessNext(ctx context.Context) (bool, error) {
	e.init()
	t, err := e.Store.ClaimTask(ctx, e.owner, e.Now(), e.Lease)
	if err != nil || t == nil {
		return false, err
	}
	return true, e.process(ctx, t)
}

func (e *Engine) process(ctx context.Context, t *clouddb.Task) error {
	var herr error
	if j, ok := jobs[t.CommandType]; ok {
		herr = e.runJob(ctx, j, t)
	} else if h, ok := handlers[t.CommandType]; ok {
		// The handler's writes and the task's completion commit together.
		herr = e.Store.Update(ctx, func(tx clouddb.Tx) error {
			v := &env{Engine: e, tx: tx, task: t}
			id, err := h(ctx, v, tx, t)
			if err != nil {
				return err
			}
			return e.complete(ctx, tx, t, id, v.resource)
		})
	} else {
		herr = fmt.Errorf("no handler for command type %q", t.CommandType)
	}
	switch {
	case herr == nil:
	case errors.Is(herr, clouddb.ErrUnavailable):
		// The store is out of reach: nothing of the task was written, and the failure
		// could not be either. The task stays in progress until its lease expires, then
		// it is claimed again, when the store may be back.
		e.Logger.Warn("task left for later: the store is unavailable", "task", t.ID, "err", herr)
		return nil
	case errors.Is(herr, errLeaseLost):
		// Another worker took the task over and processes it itself.
		e.Logger.Warn("task lease lost", "task", t.ID)
		return nil
	default:
		if clouddb.AsError(herr) == nil {
			e.Logger.Error("task failed with an internal error", "task", t.ID, "command", t.CommandType, "err", herr)
		}
		t.Status = clouddb.TaskFailed
		t.ResourceID = 0
		t.Error = clouddb.NewTaskError(herr)
		if err := e.Store.Update(ctx, func(tx clouddb.Tx) error { return tx.FinishTask(ctx, t) }); err != nil {
			if errors.Is(err, clouddb.ErrConflict) {
				return nil
			}
			return fmt.Errorf("record failure of task %s: %w", t.ID, err)
		}
	}
	if e.Processed != nil {
		e.Processed(t)
	}
	return nil
}

// complete ends t as processing-completed with its resource id and resource.
func (e *Engine) complete(ctx context.Context, tx clouddb.Tx, t *clouddb.Task, id int, resource any) error {
	t.Status = clouddb.TaskCompleted
	t.ResourceID = id
	t.Error = nil
	t.Resource = nil
	if resource != nil {
		b, err := json.Marshal(resource)
		if err != nil {
			return err
		}
		t.Resource = b
	}
	return finish(ctx, tx, t)
}

// errLeaseLost means another worker took the task over (its lease expired): this worker
// must leave it alone.
var errLeaseLost = errors.New("task lease lost")

// finish writes t's end; a conflict there means the lease was lost.
func finish(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) error {
	if err := tx.FinishTask(ctx, t); errors.Is(err, clouddb.ErrConflict) {
		return errLeaseLost
	} else if err != nil {
		return err
	}
	return nil
}

// job is a command whose work takes long (a backup, an import): it reads what it needs,
// works outside any transaction while the engine keeps its lease alive, and returns an
// outcome that is committed together with the task's end. An error returned directly
// fails the task before any work was done.
type job func(ctx context.Context, e *Engine, t *clouddb.Task) (*outcome, error)

// outcome is how a job ended.
type outcome struct {
	resourceID int
	resource   any
	// err, when set, fails the task with it (a *clouddb.Error names the cause).
	err error
	// record writes what the work left (e.g. the database's backup status); it commits
	// with the task's end, success or failure.
	record func(ctx context.Context, tx clouddb.Tx) error
}

// runJob runs j while renewing t's lease; if the lease is lost, the work is cancelled
// and the task left to the worker that took it over.
func (e *Engine) runJob(ctx context.Context, j job, t *clouddb.Task) error {
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(e.Lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if err := e.Store.ExtendLease(ctx, t.ID, t.LeaseOwner, e.Now().Add(e.Lease)); errors.Is(err, clouddb.ErrConflict) {
					close(lost)
					cancel()
					return
				} else if err != nil {
					e.Logger.Warn("renew task lease", "task", t.ID, "err", err)
				}
			}
		}
	}()
	out, err := j(workCtx, e, t)
	close(stop)
	select {
	case <-lost:
		return errLeaseLost
	default:
	}
	if err != nil {
		return err
	}
	return e.Store.Update(ctx, func(tx clouddb.Tx) error {
		if out.record != nil {
			if err := out.record(ctx, tx); err != nil {
				return err
			}
		}
		if out.err != nil {
			t.Status = clouddb.TaskFailed
			t.ResourceID = 0
			t.Resource = nil
			t.Error = clouddb.NewTaskError(out.err)
			return finish(ctx, tx, t)
		}
		return e.complete(ctx, tx, t, out.resourceID, out.resource)
	})
}

// handler runs the processing phase of one command type inside the task's transaction. It
// returns the id of the resource it created or changed, or an error: a *clouddb.Error
// fails the task with that cause; anything else fails it as GENERAL_ERROR.
type handler func(ctx context.Context, env *env, tx clouddb.Tx, t *clouddb.Task) (int, error)

var handlers = map[string]handler{
	clouddb.CommandSubscriptionCreate:   createSubscription,
	clouddb.CommandSubscriptionUpdate:   updateSubscription,
	clouddb.CommandSubscriptionDelete:   deleteSubscription,
	clouddb.CommandDatabaseCreate:       createDatabase,
	clouddb.CommandDatabaseUpdate:       updateDatabase,
	clouddb.CommandDatabaseDelete:       deleteDatabase,
	clouddb.CommandCloudAccountCreate:   createCloudAccount,
	clouddb.CommandCloudAccountUpdate:   updateCloudAccount,
	clouddb.CommandCloudAccountDelete:   deleteCloudAccount,
	clouddb.CommandDatabaseBackupStatus: backupStatus,
	clouddb.CommandDatabaseImportStatus: importStatus,
}

// jobs are the command types whose work takes long.
var jobs = map[string]job{
	clouddb.CommandDatabaseBackup: backupDatabase,
	clouddb.CommandDatabaseImport: importDatabase,
}

// env is what a handler may use besides the transaction.
type env struct {
	*Engine
	tx   clouddb.Tx
	task *clouddb.Task
	// resource, when a handler sets it, becomes the task's response.resource.
	resource any
}

// log writes a system log entry for a change made through the API.
func (v *env) log(ctx context.Context, typ, resource string, resourceID int, format string, args ...any) error {
	return v.tx.CreateLogEntry(ctx, &clouddb.LogEntry{
		AccountID:   v.task.AccountID,
		Time:        v.Now(),
		Originator:  "API",
		APIKeyName:  v.task.APIKeyName,
		Resource:    resource,
		ResourceID:  resourceID,
		Type:        typ,
		Description: fmt.Sprintf(format, args...),
	})
}
