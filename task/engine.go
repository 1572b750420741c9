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
	"clouddb/internal/storehealth"
)

// Defaults of the engine.
const (
	DefaultWorkers      = 2
	DefaultLease        = 30 * time.Second
	DefaultPollInterval = time.Second
	DefaultPurgeEvery   = time.Hour
	DefaultDataTimeout  = time.Hour
	// DefaultMaxBatch stays below the 64 subtransactions PostgreSQL tracks per
	// transaction before its snapshots slow down (each task's handler runs under a
	// savepoint).
	DefaultMaxBatch = 32
	// DefaultBatchTime ends a batch early when its handlers are slow, so that the write
	// transaction, which submissions wait for, is not held long.
	DefaultBatchTime = 20 * time.Millisecond
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
	// MaxBatch is how many tasks a worker processes in one write transaction at most,
	// and BatchTime how long it goes on taking more into it.
	MaxBatch  int
	BatchTime time.Duration
	// Lease is how long a claimed task stays with its worker before another may take it.
	Lease time.Duration
	// PollInterval bounds how long a submitted task can wait when a wake-up is missed.
	PollInterval time.Duration
	// BackupCheck is how often the periodic-backup schedule is checked; it needs a
	// Driver.
	BackupCheck time.Duration
	// MemoryLimit is the memory, in bytes, that the databases may take together (the sum
	// of their maxmemory, each at least ServerFootprintBytes): a create or a size
	// increase past it fails its task. 0 means no limit.
	MemoryLimit int64
	// DataTimeout bounds a data job (an import, a backup) as a whole: past it, the work is
	// cancelled and the task fails saying so.
	DataTimeout time.Duration
	// RedisVersions are the versions databases may run; with none offered,
	// DefaultRedisVersion alone.
	RedisVersions clouddb.RedisVersions
	// Processed is called after every task that reached a final state, to wake the
	// provisioning phase.
	Processed func(*clouddb.Task)

	owner string
	wake  chan struct{}
	once  sync.Once
	// running holds the data jobs in progress: each runs in its own goroutine, so that
	// one account's slow import keeps no worker from other accounts' tasks. The store's
	// one-task-per-account rule bounds them to one per account.
	running sync.WaitGroup
	health  storehealth.Monitor
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
		if e.MaxBatch <= 0 {
			e.MaxBatch = DefaultMaxBatch
		}
		if e.BatchTime <= 0 {
			e.BatchTime = DefaultBatchTime
		}
		if e.Lease <= 0 {
			e.Lease = DefaultLease
		}
		if e.PollInterval <= 0 {
			e.PollInterval = DefaultPollInterval
		}
		if e.DataTimeout <= 0 {
			e.DataTimeout = DefaultDataTimeout
		}
		e.health = storehealth.Monitor{Logger: e.Logger, Component: "task engine"}
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

// Run works tasks until ctx is cancelled, then returns once the tasks in hand, data jobs
// included, are finished: processing is short and transactional, so finishing beats
// handing back, and a data job is bounded by DataTimeout.
func (e *Engine) Run(ctx context.Context) error {
	e.init()
	var wg sync.WaitGroup
	for range e.Workers {
		wg.Go(func() { clouddb.Keep(ctx, e.Logger, "task worker", e.work) })
	}
	wg.Go(func() { clouddb.Keep(ctx, e.Logger, "purge tasks", e.purge) })
	if e.Driver != nil {
		wg.Go(func() { clouddb.Keep(ctx, e.Logger, "periodic backups", e.backupLoop) })
	}
	wg.Wait()
	e.running.Wait()
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
		wait := e.PollInterval
		// Drain the queue before sleeping again.
		for ctx.Err() == nil {
			did, err := e.next(ctx)
			if err != nil {
				if storehealth.Down(err) {
					// Logged once per change of state, and tried again after a
					// growing pause rather than at every wake-up.
					wait = e.health.Failed(err)
				} else {
					e.Logger.Error("task engine", "err", err)
				}
				break
			}
			if !did {
				// A claim that found nothing wrote nothing: it proves no recovery.
				break
			}
			e.health.OK()
			// Another worker may be idle while more tasks wait.
			e.Notify()
		}
		if e.health.Down() {
			// Wake-ups do not shorten the pause: each would be another failed write.
			sleep(ctx, wait)
			timer.Reset(0)
			continue
		}
		timer.Reset(wait)
	}
}

// next takes waiting tasks: handlers' tasks are claimed and processed in one
// transaction (see take), a data job is claimed and then run in a goroutine of its own,
// so that the worker is free again for other accounts' tasks. The end of ctx (a
// shutdown) stops a data job, whose task is then taken over after its lease; a handler,
// short and transactional, is finished.
func (e *Engine) next(ctx context.Context) (bool, error) {
	n, t, j, err := e.take(context.WithoutCancel(ctx), e.MaxBatch)
	if err != nil || j == nil {
		return n > 0, err
	}
	e.running.Go(func() {
		if err := e.process(ctx, j, t); err != nil {
			if storehealth.Down(err) {
				e.health.Failed(err)
			} else {
				e.Logger.Error("task engine", "task", t.ID, "err", err)
			}
		}
	})
	return true, nil
}

// take claims waiting tasks and processes those that are not data jobs in the same
// write transaction, up to limit of them: the claims, the handlers' writes and the
// tasks' ends commit together, one commit for the lot. A crash or a store failure before
// the commit leaves nothing of them, not even the claims: the tasks wait again, with no
// lease to expire first. A handler's failure is undone alone (a savepoint) and the
// task's failure commits in its place. A data job ends the batch: its claim commits with
// the rest, under a lease, and take returns the job, which must not hold the write
// transaction while it works. n is the number of tasks taken, 0 when none was waiting.
func (e *Engine) take(ctx context.Context, limit int) (n int, jt *clouddb.Task, j job, err error) {
	// failures are the handlers' failures, logged once their recording committed.
	type failure struct {
		t   *clouddb.Task
		err error
	}
	var failures []failure
	handled := 0
	start := time.Now()
	tasks, err := e.Store.ProcessTasks(ctx, e.owner, e.Now(), e.Lease, func(tx clouddb.Tx, t *clouddb.Task) (bool, error) {
		if jb, ok := jobs[t.CommandType]; ok {
			jt, j = t, jb
			return false, nil
		}
		// The batch ends at limit tasks, or sooner when handlers are slow: the
		// transaction holds the store's one writer, which submissions wait for.
		handled++
		more := handled < limit && time.Since(start) < e.BatchTime
		herr := e.handle(ctx, tx, t)
		switch {
		case herr == nil:
			return more, nil
		case storehealth.Down(herr), errors.Is(herr, errLeaseLost):
			// The store cannot write, or (which one transaction rules out) the task
			// is not this worker's: nothing of the batch is kept, and it runs again.
			return false, herr
		}
		failures = append(failures, failure{t, herr})
		var p *clouddb.PanicError
		if errors.As(herr, &p) {
			// A bug met by this task fails it alone; the client learns only that an
			// internal error happened, the operator's log has the stack.
			return more, failTx(ctx, tx, t, errPanicked)
		}
		return more, failTx(ctx, tx, t, herr)
	})
	if err != nil {
		if storehealth.Down(err) {
			// The caller logs the store's state, once.
			return 0, nil, nil, fmt.Errorf("tasks left for later: %w", err)
		}
		return 0, nil, nil, err
	}
	for _, f := range failures {
		var p *clouddb.PanicError
		switch {
		case errors.As(f.err, &p):
			e.Logger.Error("task panicked", "task", f.t.ID, "command", f.t.CommandType, "panic", p.Value, "stack", string(p.Stack))
		case clouddb.AsError(f.err) == nil:
			e.Logger.Error("task failed with an internal error", "task", f.t.ID, "command", f.t.CommandType, "err", f.err)
		}
	}
	if e.Processed != nil {
		for _, t := range tasks {
			if t != jt {
				e.Processed(t)
			}
		}
	}
	return len(tasks), jt, j, nil
}

// handle runs t's handler and ends t as completed, under a savepoint of tx: a failure
// (a panic included, as a *clouddb.PanicError) undoes what the handler wrote and leaves
// tx to record it.
func (e *Engine) handle(ctx context.Context, tx clouddb.Tx, t *clouddb.Task) error {
	h, ok := handlers[t.CommandType]
	if !ok {
		return fmt.Errorf("no handler for command type %q", t.CommandType)
	}
	return tx.Savepoint(ctx, func(tx clouddb.Tx) (err error) {
		// complete is covered too: a panic anywhere here must not leave the savepoint
		// in place with half of the handler's writes.
		defer func() {
			if p := clouddb.Recovered(recover()); p != nil {
				err = p
			}
		}()
		v := &env{Engine: e, tx: tx, task: t}
		id, err := h(ctx, v, tx, t)
		if err != nil {
			return err
		}
		return e.complete(ctx, tx, t, id, v.resource)
	})
}

// failTx ends t as processing-error with err, in tx.
func failTx(ctx context.Context, tx clouddb.Tx, t *clouddb.Task, err error) error {
	t.Status = clouddb.TaskFailed
	t.ResourceID = 0
	t.Resource = nil
	t.Error = clouddb.NewTaskError(err)
	return finish(ctx, tx, t)
}

// sleep waits for d or the end of ctx.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (e *Engine) purge(ctx context.Context) {
	t := time.NewTicker(DefaultPurgeEvery)
	defer t.Stop()
	for {
		e.purgeOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// purgeOnce deletes old tasks once; a panic there is logged and the next round runs.
func (e *Engine) purgeOnce(ctx context.Context) {
	defer e.recoverLoop("purge tasks")
	if n, err := e.Store.PurgeTasks(ctx, e.Now().Add(-clouddb.TaskHistory)); err != nil && ctx.Err() == nil {
		e.Logger.Error("purge tasks", "err", err)
	} else if n > 0 {
		e.Logger.Info("purged old tasks", "count", n)
	}
}

// recoverLoop, deferred in one round of a background loop (a purge, a lease renewal, a
// look at the backup schedule), logs a panic of that round with its stack instead of
// letting it end the process; the loop goes on with its next round.
func (e *Engine) recoverLoop(what string) {
	if p := clouddb.Recovered(recover()); p != nil {
		e.Logger.Error("background work panicked", "work", what, "panic", p.Value, "stack", string(p.Stack))
	}
}

// ProcessNext claims one task and processes it, a data job included, before it returns.
// It reports whether there was one.
func (e *Engine) ProcessNext(ctx context.Context) (bool, error) {
	e.init()
	n, t, j, err := e.take(ctx, 1)
	if err != nil || j == nil {
		return n > 0, err
	}
	return true, e.process(ctx, j, t)
}

// process runs the data job j of t, claimed already, to its end. The end of ctx stops
// only the job's work; what is written is written whole.
func (e *Engine) process(jobCtx context.Context, j job, t *clouddb.Task) (err error) {
	ctx := context.WithoutCancel(jobCtx)
	// A panic outside the job itself (recording its outcome, ending the task) fails the
	// task too: left in progress, it would run again after every lease, and a data job's
	// goroutine has no loop above it to recover.
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			e.Logger.Error("task panicked", "task", t.ID, "command", t.CommandType, "panic", p.Value, "stack", string(p.Stack))
			err = e.fail(ctx, t, errPanicked)
		}
	}()
	herr := e.runJob(ctx, jobCtx, j, t)
	var p *clouddb.PanicError
	switch {
	case herr == nil:
	case storehealth.Down(herr):
		// The store cannot write (out of reach, disk full, I/O error): the job's
		// outcome was not written, and the failure could not be either. The task stays
		// in progress until its lease expires, then it is claimed again, when the store
		// may be back. The caller logs the store's state, once.
		return fmt.Errorf("task %s left for later: %w", t.ID, herr)
	case errors.As(herr, &p):
		// A bug met by this task fails it alone; the client learns only that an internal
		// error happened, the operator's log has the stack.
		e.Logger.Error("task panicked", "task", t.ID, "command", t.CommandType, "panic", p.Value, "stack", string(p.Stack))
		if err := e.fail(ctx, t, errPanicked); err != nil {
			return err
		}
	case errors.Is(herr, errStopped):
		// Shut down mid-way: nothing recorded, the next holder of the task does it again.
		e.Logger.Info("data job stopped by the shutdown; it runs again after its lease expires", "task", t.ID, "command", t.CommandType)
		return nil
	case errors.Is(herr, errLeaseLost):
		// Another worker took the task over and processes it itself.
		e.Logger.Warn("task lease lost", "task", t.ID)
		return nil
	default:
		if clouddb.AsError(herr) == nil {
			e.Logger.Error("task failed with an internal error", "task", t.ID, "command", t.CommandType, "err", herr)
		}
		if err := e.fail(ctx, t, herr); err != nil {
			return err
		}
	}
	if e.Processed != nil {
		e.Processed(t)
	}
	return nil
}

// errPanicked is the failure of a task whose processing panicked.
var errPanicked = clouddb.Errorf(500, clouddb.ErrTypeGeneral, "internal error while processing the task (a fault in clouddb, logged for the operator)")

// fail ends t as processing-error with err; a lost lease leaves it to its new worker.
func (e *Engine) fail(ctx context.Context, t *clouddb.Task, err error) error {
	t.Status = clouddb.TaskFailed
	t.ResourceID = 0
	t.Resource = nil
	t.Error = clouddb.NewTaskError(err)
	if uerr := e.Store.Update(ctx, func(tx clouddb.Tx) error { return tx.FinishTask(ctx, t) }); uerr != nil {
		if errors.Is(uerr, clouddb.ErrConflict) {
			return nil
		}
		return fmt.Errorf("record failure of task %s: %w", t.ID, uerr)
	}
	return nil
}

// safeJob runs j, turning a panic into a *clouddb.PanicError.
func safeJob(ctx context.Context, j job, e *Engine, t *clouddb.Task) (out *outcome, err error) {
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			out, err = nil, p
		}
	}()
	return j(ctx, e, t)
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

// errStopped means a data job was stopped by a shutdown before it finished.
var errStopped = errors.New("data job stopped by shutdown")

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

// DataTimeoutError is the cause of a data job's context when DataTimeout passed.
type DataTimeoutError struct{ Limit time.Duration }

func (e *DataTimeoutError) Error() string {
	return fmt.Sprintf("did not finish within %s (--data-timeout)", e.Limit)
}

// dataTimeout returns the *DataTimeoutError that ended ctx, if that is what ended it.
func dataTimeout(ctx context.Context) *DataTimeoutError {
	var dt *DataTimeoutError
	if errors.As(context.Cause(ctx), &dt) {
		return dt
	}
	return nil
}

// runJob runs j while renewing t's lease; if the lease is lost, the work is cancelled
// and the task left to the worker that took it over. Past DataTimeout the work is
// cancelled and the job reports the failure (see dataTimeout).
func (e *Engine) runJob(ctx, jobCtx context.Context, j job, t *clouddb.Task) error {
	timeCtx, cancelTime := context.WithTimeoutCause(jobCtx, e.DataTimeout, &DataTimeoutError{Limit: e.DataTimeout})
	defer cancelTime()
	workCtx, cancel := context.WithCancel(timeCtx)
	defer cancel()
	lost := make(chan struct{})
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		tick := time.NewTicker(e.Lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if e.renew(ctx, t) {
					close(lost)
					cancel()
					return
				}
			}
		}
	}()
	out, err := safeJob(workCtx, j, e, t)
	close(stop)
	<-renewed
	select {
	case <-lost:
		return errLeaseLost
	default:
	}
	if jobCtx.Err() != nil && (err != nil || out.err != nil) {
		// A failure caused by the shutdown is no failure of the task; a job that
		// finished anyway is recorded.
		return errStopped
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

// renew extends t's lease once; it reports whether the lease was lost. A panic is logged
// and counts as a failed renewal, tried again at the next tick.
func (e *Engine) renew(ctx context.Context, t *clouddb.Task) (lost bool) {
	defer e.recoverLoop("renew task lease")
	err := e.Store.ExtendLease(ctx, t.ID, t.LeaseOwner, e.Now().Add(e.Lease))
	switch {
	case errors.Is(err, clouddb.ErrConflict):
		return true
	case storehealth.Down(err):
		e.health.Failed(err) // logged once, with the workers' state
	case err != nil:
		e.Logger.Warn("renew task lease", "task", t.ID, "err", err)
	}
	return false
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

	// ACL rules, roles and users (updates of rules and roles are jobs, below).
	clouddb.CommandACLRuleCreate: createACLRule,
	clouddb.CommandACLRuleDelete: deleteACLRule,
	clouddb.CommandACLRoleDelete: deleteACLRole,
	clouddb.CommandACLUserCreate: createACLUser,
	clouddb.CommandACLUserUpdate: updateACLUser,
	clouddb.CommandACLUserDelete: deleteACLUser,

	// Subscription settings (subscription_settings.go).
	clouddb.CommandMaintenanceWindowsUpdate: updateMaintenanceWindows,
	clouddb.CommandCIDRUpdate:               updateCIDRAllowlist,
	clouddb.CommandCIDRGet:                  getCIDRAllowlist,

	// Redis version upgrades.
	clouddb.CommandDatabaseUpgrade: upgradeDatabase,
}

// jobs are the command types whose work takes long.
var jobs = map[string]job{
	clouddb.CommandDatabaseBackup: backupDatabase,
	clouddb.CommandDatabaseImport: importDatabase,

	// ACL commands that verify rules on a real server, outside any transaction.
	clouddb.CommandACLRuleUpdate: updateACLRule,
	clouddb.CommandACLRoleCreate: createACLRole,
	clouddb.CommandACLRoleUpdate: updateACLRole,
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
