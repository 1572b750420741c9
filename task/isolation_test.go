package task

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/syncbuf"
	"clouddb/sqlite"
)

// cloudAccountPayload is a valid cloud account create body.
const cloudAccountPayload = `{"name":"c","provider":"AWS","accessKeyId":"k","accessSecretKey":"s","consoleUsername":"u","consolePassword":"p","signInLoginUrl":"https://example.com"}`

// register adds a command type for the test's length.
func register[F any](t *testing.T, m map[string]F, name string, f F) {
	t.Helper()
	m[name] = f
	t.Cleanup(func() { delete(m, name) })
}

// accountsWithTasks stores one account per command type, each with one task of it, and
// returns the tasks in that order.
func accountsWithTasks(t *testing.T, store clouddb.Store, commands ...string) []*clouddb.Task {
	t.Helper()
	ctx := t.Context()
	var tasks []*clouddb.Task
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		for _, c := range commands {
			a := &clouddb.Account{Name: "a-" + c, Plan: clouddb.PlanFlexible}
			require.NoError(t, tx.CreateAccount(ctx, a))
			tk := &clouddb.Task{AccountID: a.ID, CommandType: c, Status: clouddb.TaskReceived}
			if c == clouddb.CommandCloudAccountCreate {
				tk.Payload = []byte(cloudAccountPayload)
			}
			require.NoError(t, tx.CreateTask(ctx, tk))
			tasks = append(tasks, tk)
		}
		return nil
	}))
	return tasks
}

func taskOf(t *testing.T, store clouddb.Store, id string) *clouddb.Task {
	t.Helper()
	var got *clouddb.Task
	require.NoError(t, store.View(t.Context(), func(tx clouddb.Tx) (err error) { got, err = tx.Task(t.Context(), 0, id); return err }))
	return got
}

func runEngine(t *testing.T, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("engine: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestPanicFailsOnlyThatTask: a handler and a job that panic fail their own tasks with a
// GENERAL_ERROR that does not carry the panic's text, the stack is logged, and the engine
// goes on: another account's task completes, and so does one submitted afterwards.
func TestPanicFailsOnlyThatTask(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	register(t, handlers, "testPanicHandler", func(context.Context, *env, clouddb.Tx, *clouddb.Task) (int, error) {
		panic("handler internals: nil pointer")
	})
	register(t, jobs, "testPanicJob", func(context.Context, *Engine, *clouddb.Task) (*outcome, error) {
		panic("secret internals")
	})
	tasks := accountsWithTasks(t, store, "testPanicHandler", "testPanicJob", clouddb.CommandCloudAccountCreate)
	logs := &syncbuf.Buffer{}
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runEngine(t, e)

	require.Eventually(t, func() bool {
		for _, tk := range tasks {
			if !taskOf(t, store, tk.ID).Status.Final() {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	for _, tk := range tasks[:2] {
		got := taskOf(t, store, tk.ID)
		require.Equal(t, clouddb.TaskFailed, got.Status, tk.CommandType)
		require.Equal(t, clouddb.ErrTypeGeneral, got.Error.Type)
		require.Equal(t, "500 INTERNAL_SERVER_ERROR", got.Error.Status)
		require.Contains(t, got.Error.Description, "internal error")
		require.NotContains(t, got.Error.Description, "secret internals")
		require.NotContains(t, got.Error.Description, "nil pointer")
	}
	require.Equal(t, clouddb.TaskCompleted, taskOf(t, store, tasks[2].ID).Status)
	require.Contains(t, logs.String(), "task panicked")
	require.Contains(t, logs.String(), "isolation_test.go", "the stack is logged")

	later := accountsWithTasks(t, store, clouddb.CommandCloudAccountCreate)[0]
	e.Notify()
	require.Eventually(t, func() bool { return taskOf(t, store, later.ID).Status == clouddb.TaskCompleted }, 5*time.Second, 10*time.Millisecond)
}

// TestPanicRecordingAJobFailsItsTask: a panic after the job itself, while its outcome is
// recorded (in the data job's own goroutine, which no loop above recovers), fails that
// task with a GENERAL_ERROR and leaves the engine running.
func TestPanicRecordingAJobFailsItsTask(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	register(t, jobs, "testPanicRecord", func(context.Context, *Engine, *clouddb.Task) (*outcome, error) {
		return &outcome{record: func(context.Context, clouddb.Tx) error { panic("recording internals") }}, nil
	})
	tasks := accountsWithTasks(t, store, "testPanicRecord", clouddb.CommandCloudAccountCreate)
	logs := &syncbuf.Buffer{}
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runEngine(t, e)

	require.Eventually(t, func() bool {
		return taskOf(t, store, tasks[0].ID).Status.Final() && taskOf(t, store, tasks[1].ID).Status.Final()
	}, 10*time.Second, 10*time.Millisecond)
	got := taskOf(t, store, tasks[0].ID)
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, clouddb.ErrTypeGeneral, got.Error.Type)
	require.NotContains(t, got.Error.Description, "recording internals")
	require.Equal(t, clouddb.TaskCompleted, taskOf(t, store, tasks[1].ID).Status)
	require.Contains(t, logs.String(), "task panicked")
}

// TestSlowJobsDoNotHoldOtherAccounts: data jobs of two accounts that take long (more
// than the engine's workers) leave a third account's task to complete at once, and a job
// past DataTimeout is cancelled and its task fails saying so.
func TestSlowJobsDoNotHoldOtherAccounts(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	register(t, jobs, "testSlowJob", func(ctx context.Context, _ *Engine, _ *clouddb.Task) (*outcome, error) {
		<-ctx.Done() // a source that never finishes
		if dt := dataTimeout(ctx); dt != nil {
			return &outcome{err: clouddb.Invalid("TEST_FAILED", "the test job %v", dt)}, nil
		}
		return &outcome{}, nil
	})
	const limit = 3 * time.Second
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Workers: 2, Lease: time.Second, DataTimeout: limit}
	runEngine(t, e)
	slow := accountsWithTasks(t, store, "testSlowJob", "testSlowJob")
	e.Notify()
	require.Eventually(t, func() bool {
		return taskOf(t, store, slow[0].ID).Status == clouddb.TaskInProgress && taskOf(t, store, slow[1].ID).Status == clouddb.TaskInProgress
	}, 5*time.Second, 10*time.Millisecond)

	start := time.Now()
	other := accountsWithTasks(t, store, clouddb.CommandCloudAccountCreate)[0]
	e.Notify()
	require.Eventually(t, func() bool { return taskOf(t, store, other.ID).Status == clouddb.TaskCompleted }, 5*time.Second, 5*time.Millisecond)
	require.Less(t, time.Since(start), 2*time.Second, "another account's task waited for the slow jobs")
	require.Equal(t, clouddb.TaskInProgress, taskOf(t, store, slow[0].ID).Status, "the slow jobs still run")

	require.Eventually(t, func() bool { return taskOf(t, store, slow[0].ID).Status == clouddb.TaskFailed }, 2*limit, 20*time.Millisecond)
	got := taskOf(t, store, slow[0].ID)
	require.Equal(t, "the test job did not finish within 3s (--data-timeout)", got.Error.Description)
}

// claimPanics is a store whose first claims panic: a bug outside any task's processing,
// in the worker loop itself.
type claimPanics struct {
	clouddb.Store
	mu    sync.Mutex
	left  int
	calls int
}

func (c *claimPanics) ProcessTasks(ctx context.Context, owner string, now time.Time, lease time.Duration, fn func(clouddb.Tx, *clouddb.Task) (bool, error)) ([]*clouddb.Task, error) {
	c.mu.Lock()
	c.calls++
	boom := c.left > 0
	c.left--
	c.mu.Unlock()
	if boom {
		panic("claim failed")
	}
	return c.Store.ProcessTasks(ctx, owner, now, lease, fn)
}

// TestPanicInWorkerLoopRestartsIt: a panic in a worker's loop (here in the claim) is
// logged and the worker starts again: the engine keeps claiming and a task completes.
func TestPanicInWorkerLoopRestartsIt(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	store := &claimPanics{Store: db, left: 2} // both workers' first claim
	tk := accountsWithTasks(t, db, clouddb.CommandCloudAccountCreate)[0]
	logs := &syncbuf.Buffer{}
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Workers: 2, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runEngine(t, e)
	require.Eventually(t, func() bool { return taskOf(t, db, tk.ID).Status == clouddb.TaskCompleted }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, strings.Count(logs.String(), "background loop panicked"))
	require.Contains(t, logs.String(), "claimPanics).ProcessTasks", "the stack is logged")
}

// fullClaims is a store whose claims (writes) fail as on a full disk while full is set.
type fullClaims struct {
	clouddb.Store
	full   atomic.Bool
	claims atomic.Int32 // attempted while full
}

func (f *fullClaims) ProcessTasks(ctx context.Context, owner string, now time.Time, lease time.Duration, fn func(clouddb.Tx, *clouddb.Task) (bool, error)) ([]*clouddb.Task, error) {
	if f.full.Load() {
		f.claims.Add(1)
		return nil, clouddb.ErrStorageFull
	}
	return f.Store.ProcessTasks(ctx, owner, now, lease, fn)
}

// TestStoreFullEngineBacksOff: while the store cannot write, the engine's workers back
// off and log it once (not two ERROR lines a second), log once that it is writable again,
// and every task submitted before or during the outage then completes exactly once.
func TestStoreFullEngineBacksOff(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	store := &fullClaims{Store: db}
	store.full.Store(true)
	before := accountsWithTasks(t, db, clouddb.CommandCloudAccountCreate)
	logs := &syncbuf.Buffer{}
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runEngine(t, e)
	during := accountsWithTasks(t, db, clouddb.CommandCloudAccountCreate)
	for range 20 {
		e.Notify() // submissions wake the workers; they must not shorten the pause
		time.Sleep(100 * time.Millisecond)
	}
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "store cannot write"), out)
	require.Equal(t, 1, strings.Count(out, "level=ERROR"), out)
	require.Less(t, store.claims.Load(), int32(30), "claims attempted while full")

	store.full.Store(false)
	for _, tk := range append(before, during...) {
		require.Eventually(t, func() bool { return taskOf(t, db, tk.ID).Status == clouddb.TaskCompleted }, 10*time.Second, 10*time.Millisecond)
	}
	// The recovery is logged once the transaction that completed the tasks has returned,
	// a moment after its commit made them visible.
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "store writable again") }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, strings.Count(logs.String(), "store writable again"), logs.String())
	var cas []*clouddb.CloudAccount
	require.NoError(t, db.View(t.Context(), func(tx clouddb.Tx) (err error) {
		cas, err = tx.CloudAccounts(t.Context(), clouddb.CloudAccountFilter{})
		return err
	}))
	require.Len(t, cas, 2, "each task took effect once")
}

// TestShutdownStopsDataJobs: a shutdown does not wait for a data job that would take long
// (up to DataTimeout): the job is stopped, its task is not failed, and the next engine
// takes it over once its lease expires.
func TestShutdownStopsDataJobs(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	var runs atomic.Int32
	register(t, jobs, "testStoppableJob", func(ctx context.Context, _ *Engine, _ *clouddb.Task) (*outcome, error) {
		if runs.Add(1) == 1 {
			<-ctx.Done() // a source that never finishes
			return &outcome{err: clouddb.Invalid("TEST_FAILED", "stopped")}, nil
		}
		return &outcome{}, nil
	})
	tk := accountsWithTasks(t, store, "testStoppableJob")[0]
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Lease: time.Second, PollInterval: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("engine: %v", err)
		}
	}()
	require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run waited for the data job")
	}
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, clouddb.TaskInProgress, taskOf(t, store, tk.ID).Status, "not failed by the shutdown")

	next := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Lease: time.Second, PollInterval: 20 * time.Millisecond}
	runEngine(t, next)
	require.Eventually(t, func() bool { return taskOf(t, store, tk.ID).Status == clouddb.TaskCompleted }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, int32(2), runs.Load())
}
