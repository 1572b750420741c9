// Package reconcile is the provisioning phase. The reconciler is level-triggered: it
// compares the desired state in the store with the real world (the driver's servers) and
// acts until they agree. Each resource is worked by at most one goroutine at a time;
// different resources are provisioned in parallel. Every step is idempotent, so a crash,
// a restart or a duplicate wake-up is harmless.
package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"clouddb"
	"clouddb/internal/storehealth"
)

// Defaults of the reconciler.
const (
	DefaultInterval = time.Second
	// DefaultConcurrency is the bound of driver operations per core (GOMAXPROCS), up to
	// MaxConcurrency. A start mostly waits (for the new server to
	// answer, for its replies), so a restart of N servers comes back faster with more
	// of them under way than cores; beyond a few dozen they only queue for the CPU, each
	// holding a starting server's memory.
	DefaultConcurrency = 16
	MaxConcurrency     = 64
)

// stopBound is how many servers Shutdown stops at once, unless Concurrency is larger: a
// stop forks nothing and mostly waits for the server to act on SIGTERM (redis does at its
// next cron tick, up to 100 ms later); the bound holds back a crowd of servers writing
// their data at once.
const stopBound = 64

// defaultConcurrency is DefaultConcurrency per core, up to MaxConcurrency.
func defaultConcurrency() int {
	return min(DefaultConcurrency*runtime.GOMAXPROCS(0), MaxConcurrency)
}

// Reconciler runs the provisioning phase and supervises the database servers.
type Reconciler struct {
	Store  clouddb.Store
	Driver clouddb.Driver
	Logger *slog.Logger
	Now    func() time.Time
	// Delay is the extra time each provisioning step waits before it completes, so the
	// pending states can be watched.
	Delay time.Duration
	// Interval is how often the whole state is compared with the world (and dead servers
	// are found) when nothing wakes the reconciler earlier.
	Interval time.Duration
	// Concurrency bounds the driver operations running at once (Ensure, Remove); zero
	// means defaultConcurrency.
	Concurrency int
	// Provisioned, when set, is told of each database that becomes active for the first
	// time, with the time since it was created.
	Provisioned func(d *clouddb.Database, took time.Duration)

	once     sync.Once
	wake     chan struct{}
	sem      chan struct{}
	mu       sync.Mutex
	inflight map[string]bool
	// panicked holds the keys whose step panicked: they stay in inflight until the next
	// pass starts, so that a pass that read the resource before it was marked failed
	// cannot run the same panicking step again.
	panicked []string
	// finished holds the keys whose work ended during the current pass, maybe after the
	// pass read the store: the pass does not start them again from rows older than what
	// that work wrote (a database it just put in error, read still active); the next
	// pass does if need be.
	finished map[string]bool
	// ensured is, per database, the instance this process last made the driver run; a
	// database it has not ensured yet (after a restart) or whose instance changed (a
	// source's password) is ensured again instead of only checked.
	ensured map[int]string
	// users is, per database, what this process knows of the named users its server has
	// (see usersRecord): what settleACL waits for, and what setUsers need not give again.
	users map[int]usersRecord
	// userErrs is, per database, setUsers' last failure, so that it is logged once.
	userErrs map[int]string
	// waits holds the databases whose server waits (for disk space, or to finish
	// loading), so that a wait is logged once and its end once.
	waits map[int]wait
	// sourceStates is the last reported state of each replica source.
	sourceStates map[string]string
	// removed holds the databases whose removal this process started, until the driver
	// no longer lists them, so the orphan sweep leaves them alone.
	removed map[int]bool
	// aclPending is whether the last pass found an ACL rule, role or user waiting for
	// databases to settle (see settleACL): only then does a database adopted or started
	// again ask for a pass at once. A pass per database brought back made a restart of N
	// databases run N passes, each reading and checking all N.
	aclPending atomic.Bool
	wg         sync.WaitGroup
	// health is whether the store can write: while it cannot (a full disk), passes are
	// spaced out and the failures logged once, not every second per resource.
	health storehealth.Monitor
}

func (r *Reconciler) init() {
	r.once.Do(func() {
		if r.Logger == nil {
			r.Logger = slog.Default()
		}
		if r.Now == nil {
			r.Now = func() time.Time { return time.Now().UTC() }
		}
		if r.Interval <= 0 {
			r.Interval = DefaultInterval
		}
		if r.Concurrency <= 0 {
			r.Concurrency = defaultConcurrency()
		}
		r.wake = make(chan struct{}, 1)
		r.sem = make(chan struct{}, r.Concurrency)
		r.inflight = map[string]bool{}
		r.finished = map[string]bool{}
		r.ensured = map[int]string{}
		r.users = map[int]usersRecord{}
		r.userErrs = map[int]string{}
		r.waits = map[int]wait{}
		r.removed = map[int]bool{}
		r.health = storehealth.Monitor{Logger: r.Logger, Component: "reconciler"}
	})
}

// Notify asks for a pass soon; the task engine calls it after each processed task.
func (r *Reconciler) Notify() {
	r.init()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run reconciles until ctx is cancelled, then waits for the work in hand to stop. Run may
// be called again after it returned (a replica that regains the workers' lock does): it
// forgets what it ensured before (and the users it gave), since another replica may have
// changed the servers in between.
func (r *Reconciler) Run(ctx context.Context) error {
	r.init()
	r.mu.Lock()
	clear(r.ensured)
	clear(r.users)
	r.mu.Unlock()
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		if err := r.safePass(ctx); err != nil && ctx.Err() == nil {
			if storehealth.Down(err) {
				r.health.Failed(err)
			} else {
				r.Logger.Error("reconcile pass", "err", err)
			}
		}
		if r.health.Down() {
			// Wake-ups do not shorten the pause: each pass would fail the same writes.
			pause := time.NewTimer(r.health.Backoff())
			select {
			case <-ctx.Done():
				pause.Stop()
				r.wg.Wait()
				return nil
			case <-pause.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
			r.wg.Wait()
			return nil
		case <-r.wake:
		case <-t.C:
		}
	}
}

// safePass is Pass that survives a panic: the next pass starts afresh.
func (r *Reconciler) safePass(ctx context.Context) (err error) {
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			r.Logger.Error("reconcile pass panicked", "panic", p.Value, "stack", string(p.Stack))
			err = p
		}
	}()
	return r.Pass(ctx)
}

// Pass compares every resource once and starts the work that is needed; it does not wait
// for that work.
func (r *Reconciler) Pass(ctx context.Context) error {
	r.init()
	r.mu.Lock()
	for _, key := range r.panicked {
		delete(r.inflight, key)
	}
	r.panicked = r.panicked[:0]
	clear(r.finished)
	r.mu.Unlock()
	var (
		dbs   []*clouddb.Database
		subs  []*clouddb.Subscription
		cas   []*clouddb.CloudAccount
		rules []*clouddb.ACLRule
		roles []*clouddb.ACLRole
		users []*clouddb.ACLUser
	)
	// What the driver holds is listed before the rows are read: a server made for a row
	// committed after this point cannot be mistaken for an orphan.
	held, err := r.Driver.Instances(ctx)
	if err != nil {
		return err
	}
	err = r.Store.View(ctx, func(tx clouddb.Tx) error {
		var txErr error
		if dbs, _, txErr = tx.Databases(ctx, clouddb.DatabaseFilter{}); txErr != nil {
			return txErr
		}
		if subs, txErr = tx.Subscriptions(ctx, clouddb.SubscriptionFilter{}); txErr != nil {
			return txErr
		}
		if cas, txErr = tx.CloudAccounts(ctx, clouddb.CloudAccountFilter{Statuses: []clouddb.CloudAccountStatus{
			clouddb.CloudAccountDraft, clouddb.CloudAccountChangeDraft, clouddb.CloudAccountDeleting,
		}}); txErr != nil {
			return txErr
		}
		// In the same transaction as the databases: the users a database gets and the
		// statuses settled from them are of one moment.
		if rules, txErr = tx.ACLRules(ctx, 0); txErr != nil {
			return txErr
		}
		if roles, txErr = tx.ACLRoles(ctx, 0); txErr != nil {
			return txErr
		}
		users, txErr = tx.ACLUsers(ctx, 0)
		return txErr
	})
	if err != nil {
		return err
	}
	r.removeOrphans(ctx, held, dbs)
	idx := newIndex(dbs)
	acl := newACLState(rules, roles, users)
	// Before the databases' work starts: work that ends after this point and finds it
	// false has a later pass, which reads what that work recorded, to settle anything
	// that arrived since.
	r.aclPending.Store(len(acl.unsettled()) > 0)
	dbsBySub := map[int][]*clouddb.Database{}
	for _, d := range dbs {
		dbsBySub[d.SubscriptionID] = append(dbsBySub[d.SubscriptionID], d)
		r.database(ctx, d, idx, acl)
	}
	r.settleACL(ctx, dbs, idx, acl)
	for _, s := range subs {
		r.subscription(ctx, s, dbsBySub[s.ID])
	}
	for _, c := range cas {
		r.cloudAccount(ctx, c)
	}
	return nil
}

// spawn runs fn for the resource key unless work on it is already under way. A panic in
// fn ends only that unit of work: it is logged with its stack and failed (when not nil)
// marks the resource as failed, while every other resource goes on.
func (r *Reconciler) spawn(ctx context.Context, key string, fn func(ctx context.Context) error, failed func(ctx context.Context)) {
	r.mu.Lock()
	if r.inflight[key] || r.finished[key] {
		r.mu.Unlock()
		return
	}
	r.inflight[key] = true
	r.mu.Unlock()
	r.wg.Go(func() {
		defer func() {
			// The resource is marked before it leaves inflight, and it leaves at the start
			// of the next pass, which reads it failed instead of running the same
			// panicking step again.
			p := clouddb.Recovered(recover())
			if p != nil {
				r.Logger.Error("reconcile step panicked", "resource", key, "panic", p.Value, "stack", string(p.Stack))
				if failed != nil && ctx.Err() == nil {
					r.markFailed(ctx, key, failed)
				}
			}
			r.mu.Lock()
			if p != nil {
				r.panicked = append(r.panicked, key)
			} else {
				delete(r.inflight, key)
				r.finished[key] = true
			}
			r.mu.Unlock()
		}()
		if err := fn(ctx); err != nil && ctx.Err() == nil && !storehealth.Down(err) {
			// A store that cannot write was logged once by update.
			r.Logger.Error("reconcile", "resource", key, "err", err)
		}
	})
}

// markFailed runs failed, itself protected: a second panic there must not end the
// process either.
func (r *Reconciler) markFailed(ctx context.Context, key string, failed func(ctx context.Context)) {
	defer func() {
		if p := clouddb.Recovered(recover()); p != nil {
			r.Logger.Error("marking a failed resource panicked", "resource", key, "panic", p.Value, "stack", string(p.Stack))
		}
	}()
	failed(ctx)
}

// update writes to the store and keeps track of whether it can: a failure because it
// cannot write is logged once per change of state, by the health monitor.
func (r *Reconciler) update(ctx context.Context, fn func(clouddb.Tx) error) error {
	err := r.Store.Update(ctx, fn)
	switch {
	case err == nil:
		r.health.OK()
	case storehealth.Down(err):
		r.health.Failed(err)
	}
	return err
}

// delay waits the configured provisioning delay; it reports false when ctx ended first.
func (r *Reconciler) delay(ctx context.Context) bool {
	if r.Delay <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(r.Delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// withDriver runs fn while holding one of the driver slots.
func (r *Reconciler) withDriver(ctx context.Context, fn func() error) error {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.sem }()
	return fn()
}

// event writes a provisioning event into the account's system log.
func (r *Reconciler) event(ctx context.Context, accountID int, typ, resource string, resourceID int, format string, args ...any) {
	err := r.update(ctx, func(tx clouddb.Tx) error {
		return tx.CreateLogEntry(ctx, &clouddb.LogEntry{
			AccountID:   accountID,
			Time:        r.Now(),
			Originator:  "clouddb",
			Resource:    resource,
			ResourceID:  resourceID,
			Type:        typ,
			Description: fmt.Sprintf(format, args...),
		})
	})
	if err != nil && ctx.Err() == nil && !storehealth.Down(err) {
		r.Logger.Error("write log entry", "err", err)
	}
}

// Shutdown stops every database server cleanly, persisting as each is configured, so the
// next start brings them back with their data.
func (r *Reconciler) Shutdown(ctx context.Context) error {
	r.init()
	var dbs []*clouddb.Database
	if err := r.Store.View(ctx, func(tx clouddb.Tx) error {
		var err error
		dbs, _, err = tx.Databases(ctx, clouddb.DatabaseFilter{})
		return err
	}); err != nil {
		return err
	}
	// Stops have their own bound (see stopBound): through the driver slots, stopping N
	// servers took N/Concurrency of redis' waits for its cron tick.
	sem := make(chan struct{}, max(stopBound, r.Concurrency))
	var wg sync.WaitGroup
	errs := make(chan error, len(dbs))
	for _, d := range dbs {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs <- fmt.Errorf("stop database %d: %w", d.ID, ctx.Err())
				return
			}
			defer func() { <-sem }()
			if err := r.Driver.Stop(ctx, d.ID); err != nil {
				errs <- fmt.Errorf("stop database %d: %w", d.ID, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	var first error
	for err := range errs {
		r.Logger.Error("shutdown", "err", err)
		if first == nil {
			first = err
		}
	}
	return first
}
