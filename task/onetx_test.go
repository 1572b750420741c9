package task

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// counting is a store that counts the write transactions the engine asks for.
type counting struct {
	clouddb.Store
	mu      sync.Mutex
	claims  int   // ClaimTask
	updates int   // Update
	batches []int // ProcessTasks: the tasks each one returned
}

func (c *counting) ClaimTask(ctx context.Context, owner string, now time.Time, lease time.Duration) (*clouddb.Task, error) {
	c.mu.Lock()
	c.claims++
	c.mu.Unlock()
	return c.Store.ClaimTask(ctx, owner, now, lease)
}

func (c *counting) Update(ctx context.Context, fn func(clouddb.Tx) error) error {
	c.mu.Lock()
	c.updates++
	c.mu.Unlock()
	return c.Store.Update(ctx, fn)
}

func (c *counting) ProcessTasks(ctx context.Context, owner string, now time.Time, lease time.Duration, fn func(clouddb.Tx, *clouddb.Task) (bool, error)) ([]*clouddb.Task, error) {
	tasks, err := c.Store.ProcessTasks(ctx, owner, now, lease, fn)
	c.mu.Lock()
	c.batches = append(c.batches, len(tasks))
	c.mu.Unlock()
	return tasks, err
}

func (c *counting) counts() (claims, updates int, batches []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claims, c.updates, append([]int(nil), c.batches...)
}

func logCount(t *testing.T, store clouddb.Store) int {
	t.Helper()
	var entries []*clouddb.LogEntry
	require.NoError(t, store.View(t.Context(), func(tx clouddb.Tx) (err error) {
		entries, err = tx.LogEntries(t.Context(), clouddb.LogFilter{})
		return err
	}))
	return len(entries)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openSQLite(t *testing.T, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestHandlerFailureCommitsWithTheClaim: a handler that wrote and then failed leaves none
// of its writes, and the task's failure commits in the very transaction of its claim: one
// write transaction for the task, no second one to record the failure.
func TestHandlerFailureCommitsWithTheClaim(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "clouddb.db"))
	register(t, handlers, "testWritesThenFails", func(ctx context.Context, v *env, _ clouddb.Tx, _ *clouddb.Task) (int, error) {
		require.NoError(t, v.log(ctx, clouddb.LogTypeCloudAccount, "x", 1, "written before the failure"))
		return 0, clouddb.Invalid("TEST_FAILED", "the handler refused")
	})
	tk := accountsWithTasks(t, db, "testWritesThenFails")[0]
	store := &counting{Store: db}
	var processed []*clouddb.Task
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Processed: func(t *clouddb.Task) { processed = append(processed, t) }}

	did, err := e.ProcessNext(t.Context())
	require.NoError(t, err)
	require.True(t, did)
	got := taskOf(t, db, tk.ID)
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, "the handler refused", got.Error.Description)
	require.Equal(t, "TEST_FAILED", string(got.Error.Type))
	require.Zero(t, logCount(t, db), "the handler's write is undone")
	claims, updates, batches := store.counts()
	require.Zero(t, claims, "no separate claim")
	require.Zero(t, updates, "no separate transaction for the failure")
	require.Equal(t, []int{1}, batches)
	require.Len(t, processed, 1)
	require.Equal(t, clouddb.TaskFailed, processed[0].Status)
}

// TestHandlerPanicFailsTaskInOneTransaction: a panicking handler's writes are undone and
// its task fails, in the transaction of its claim.
func TestHandlerPanicFailsTaskInOneTransaction(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "clouddb.db"))
	register(t, handlers, "testWritesThenPanics", func(ctx context.Context, v *env, _ clouddb.Tx, _ *clouddb.Task) (int, error) {
		require.NoError(t, v.log(ctx, clouddb.LogTypeCloudAccount, "x", 1, "written before the panic"))
		panic("boom")
	})
	tk := accountsWithTasks(t, db, "testWritesThenPanics")[0]
	store := &counting{Store: db}
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Logger: discardLogger()}
	did, err := e.ProcessNext(t.Context())
	require.NoError(t, err)
	require.True(t, did)
	got := taskOf(t, db, tk.ID)
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, clouddb.NewTaskError(errPanicked), got.Error)
	require.Zero(t, logCount(t, db))
	claims, updates, batches := store.counts()
	require.Equal(t, []int{0, 0, 1}, []int{claims, updates, len(batches)})
}

// TestBatchKeepsOrderAndEndsAtDataJob: a worker processes waiting tasks of several
// accounts in one transaction, each account's in submission order; a data job ends the
// batch, its claim committed with it under a lease, and runs outside the transaction.
func TestBatchKeepsOrderAndEndsAtDataJob(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "clouddb.db"))
	var mu sync.Mutex
	var order []string
	register(t, handlers, "testRecords", func(_ context.Context, _ *env, _ clouddb.Tx, t *clouddb.Task) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, t.ID)
		return 0, nil
	})
	jobStarted, jobRelease := make(chan *clouddb.Task, 1), make(chan struct{})
	register(t, jobs, "testJob", func(_ context.Context, _ *Engine, t *clouddb.Task) (*outcome, error) {
		jobStarted <- t
		<-jobRelease
		return &outcome{}, nil
	})
	ctx := t.Context()
	// Accounts A and B, submitted A1 B1 A2 B2 A3 J(B) B3: the job is B's third.
	var tasks []*clouddb.Task
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		a, b := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}, &clouddb.Account{Name: "b", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		require.NoError(t, tx.CreateAccount(ctx, b))
		for _, s := range []struct {
			account int
			command string
		}{{a.ID, "testRecords"}, {b.ID, "testRecords"}, {a.ID, "testRecords"}, {b.ID, "testRecords"}, {a.ID, "testRecords"}, {b.ID, "testJob"}, {b.ID, "testRecords"}} {
			tk := &clouddb.Task{AccountID: s.account, CommandType: s.command}
			require.NoError(t, tx.CreateTask(ctx, tk))
			tasks = append(tasks, tk)
		}
		return nil
	}))
	store := &counting{Store: db}
	// A batch time that a slow machine cannot reach: the batch ends at the job alone.
	e := &Engine{Store: store, Ports: &Ports{Low: 1, High: 1}, Workers: 1, PollInterval: 10 * time.Millisecond, BatchTime: time.Hour}
	runEngine(t, e)
	// Run after runEngine's cleanup is registered, so before it: a failed assertion
	// must not leave the engine's shutdown waiting for the job.
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(jobRelease) }) })

	job := <-jobStarted
	require.Equal(t, tasks[5].ID, job.ID)
	require.Equal(t, clouddb.TaskInProgress, taskOf(t, db, job.ID).Status, "the job's claim committed")
	require.Equal(t, e.owner, taskOf(t, db, job.ID).LeaseOwner)
	mu.Lock()
	require.Equal(t, []string{tasks[0].ID, tasks[1].ID, tasks[2].ID, tasks[3].ID, tasks[4].ID}, order)
	mu.Unlock()
	for _, tk := range tasks[:5] {
		require.Equal(t, clouddb.TaskCompleted, taskOf(t, db, tk.ID).Status)
	}
	require.Equal(t, clouddb.TaskReceived, taskOf(t, db, tasks[6].ID).Status, "B's next task waits for the job")
	_, _, batches := store.counts()
	require.Equal(t, 6, batches[0], "five handlers and the job's claim in the first transaction")

	release.Do(func() { close(jobRelease) })
	require.Eventually(t, func() bool { return taskOf(t, db, tasks[6].ID).Status == clouddb.TaskCompleted }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, clouddb.TaskCompleted, taskOf(t, db, job.ID).Status)
	mu.Lock()
	require.Equal(t, tasks[6].ID, order[len(order)-1])
	require.Len(t, order, 6)
	mu.Unlock()
}

// crashEnv names the store file of the crash helper below.
const crashEnv = "CLOUDDB_TASK_CRASH_STORE"

// TestCrashHelper is run by TestCrashInsideTheTransaction in a process of its own: it
// processes the one waiting task with a handler that writes and then ends the process
// before the transaction can commit, as a kill -9 or a power cut would.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("run by TestCrashInsideTheTransaction")
	}
	db, err := sqlite.Open(path)
	require.NoError(t, err)
	register(t, handlers, clouddb.CommandCloudAccountCreate, func(ctx context.Context, v *env, tx clouddb.Tx, t *clouddb.Task) (int, error) {
		if _, herr := createCloudAccount(ctx, v, tx, t); herr != nil {
			return 0, herr
		}
		os.Exit(3) // no rollback, no commit, no deferred function
		return 0, nil
	})
	e := &Engine{Store: db, Ports: &Ports{Low: 1, High: 1}}
	_, err = e.ProcessNext(t.Context())
	t.Fatalf("ProcessNext returned (%v): the handler did not run", err)
}

// TestCrashInsideTheTransaction: a process that dies while a task is processed leaves
// nothing of it, not even its claim: the task waits again at once (no lease to expire),
// and the next engine applies it exactly once.
func TestCrashInsideTheTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clouddb.db")
	db := openSQLite(t, path)
	tk := accountsWithTasks(t, db, clouddb.CommandCloudAccountCreate)[0]

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the helper must crash: %v\n%s", err, out)
	require.Equal(t, 3, exit.ExitCode(), string(out))

	got := taskOf(t, db, tk.ID)
	require.Equal(t, clouddb.TaskReceived, got.Status, "the claim died with the transaction")
	require.Empty(t, got.LeaseOwner)
	require.True(t, got.LeaseExpiresAt.IsZero())
	var cas []*clouddb.CloudAccount
	require.NoError(t, db.View(t.Context(), func(tx clouddb.Tx) (err error) {
		cas, err = tx.CloudAccounts(t.Context(), clouddb.CloudAccountFilter{AccountID: tk.AccountID})
		return err
	}))
	require.Empty(t, cas, "no partial effect")
	require.Zero(t, logCount(t, db))

	// Lease of an hour: a task left in progress by the crash would not be taken now.
	e := &Engine{Store: db, Ports: &Ports{Low: 1, High: 1}, Lease: time.Hour}
	did, err := e.ProcessNext(t.Context())
	require.NoError(t, err)
	require.True(t, did)
	require.Equal(t, clouddb.TaskCompleted, taskOf(t, db, tk.ID).Status)
	require.NoError(t, db.View(t.Context(), func(tx clouddb.Tx) (err error) {
		cas, err = tx.CloudAccounts(t.Context(), clouddb.CloudAccountFilter{AccountID: tk.AccountID})
		return err
	}))
	require.Len(t, cas, 1, "applied once")
	require.Equal(t, 1, logCount(t, db))
}
