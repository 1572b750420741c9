package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the driver the store uses, for the raw baseline

	"clouddb"
	"clouddb/sqlite"
	"clouddb/task"
)

// engineResult compares the task engine's processing rate with the raw commit rate of
// SQLite on the same settings, measured alternately.
type engineResult struct {
	Accounts, TasksPerAccount int
	Tasks                     int
	// Medians over the repetitions.
	TasksPerSec   float64
	CommitsPerSec float64
	// Ratio is the median of the per-pair ratios tasks/s ÷ commits/s.
	Ratio   float64
	Workers int
}

// engine runs the engine benchmark Reps times, each on fresh files, alternating which of
// the engine and the raw baseline goes first.
func (h *harness) engine(ctx context.Context) (*engineResult, error) {
	res := &engineResult{Accounts: h.cfg.Accounts, TasksPerAccount: h.cfg.TasksPerAccount,
		Tasks: h.cfg.Accounts * h.cfg.TasksPerAccount, Workers: task.DefaultWorkers}
	var tps, cps, ratios []float64
	for rep := range h.cfg.Reps {
		dir := filepath.Join(h.dir, "engine-"+strconv.Itoa(rep))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		var t, c float64
		runEngine := func() (err error) {
			t, err = engineRate(ctx, filepath.Join(dir, "store.db"), h.cfg.Accounts, h.cfg.TasksPerAccount)
			return err
		}
		runRaw := func() (err error) {
			c, err = rawCommitRate(ctx, filepath.Join(dir, "raw.db"), res.Tasks)
			return err
		}
		first, second := runEngine, runRaw
		if rep%2 == 1 {
			first, second = runRaw, runEngine
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
		os.RemoveAll(dir)
		h.cfg.logf("task engine rep %d: %.0f tasks/s, raw SQLite %.0f commits/s", rep+1, t, c)
		tps, cps, ratios = append(tps, t), append(cps, c), append(ratios, t/c)
	}
	res.TasksPerSec, res.CommitsPerSec, res.Ratio = median(tps), median(cps), median(ratios)
	return res, nil
}

// engineRate fills a new store with accounts × perAccount cloud-account creates (cheap
// tasks: one insert and a log entry each), runs the task engine with its default workers
// until every task is final, and returns tasks per second from the engine's start to the
// last task's end. Every task must complete.
func engineRate(ctx context.Context, path string, accounts, perAccount int) (float64, error) {
	db, err := sqlite.Open(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	payload, err := json.Marshal(clouddb.CloudAccountSpec{
		Name: ptr("bench"), Provider: ptr("AWS"), AccessKeyID: ptr("AKIABENCH"), AccessSecretKey: ptr("bench-secret"),
		ConsoleUsername: ptr("bench"), ConsolePassword: ptr("bench-password"), SignInLoginURL: ptr("https://signin.example/console"),
	})
	if err != nil {
		return 0, err
	}
	err = db.Update(ctx, func(tx clouddb.Tx) error {
		ids := make([]int, accounts)
		for i := range ids {
			a := &clouddb.Account{Name: "bench-" + strconv.Itoa(i), Plan: clouddb.PlanFlexible}
			if err := tx.CreateAccount(ctx, a); err != nil {
				return err
			}
			ids[i] = a.ID
		}
		// Round-robin over the accounts, as independent tenants would submit.
		for range perAccount {
			for _, id := range ids {
				if err := tx.CreateTask(ctx, &clouddb.Task{AccountID: id, APIKeyName: "bench",
					CommandType: clouddb.CommandCloudAccountCreate, Payload: payload}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fill store: %w", err)
	}
	total := int64(accounts * perAccount)
	var done, failed atomic.Int64
	var last atomic.Int64
	finished := make(chan struct{})
	eng := &task.Engine{
		Store:  db,
		Ports:  &task.Ports{Low: 1, High: 1, Host: "127.0.0.1"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Processed: func(t *clouddb.Task) {
			if t.Status != clouddb.TaskCompleted {
				failed.Add(1)
			}
			last.Store(time.Now().UnixNano())
			if done.Add(1) == total {
				close(finished)
			}
		},
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		eng.Run(rctx)
		close(stopped)
	}()
	timeout := time.NewTimer(10 * time.Minute)
	defer timeout.Stop()
	select {
	case <-finished:
	case <-timeout.C:
	case <-ctx.Done():
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		return 0, errors.New("task engine did not stop within a minute")
	}
	if n := done.Load(); n != total {
		return 0, fmt.Errorf("task engine processed %d of %d tasks", n, total)
	}
	if n := failed.Load(); n > 0 {
		return 0, fmt.Errorf("%d of %d tasks failed", n, total)
	}
	elapsed := time.Duration(last.Load() - start.UnixNano())
	return float64(total) / elapsed.Seconds(), nil
}

// rawCommitRate opens a new file with the store writer's settings (modernc.org/sqlite,
// WAL, synchronous=NORMAL, immediate transactions, one connection) and commits n
// transactions of one insert each, a row about the size of a task; it returns commits per
// second.
func rawCommitRate(ctx context.Context, path string, n int) (float64, error) {
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=busy_timeout(5000)"+
		"&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE rows (seq INTEGER PRIMARY KEY AUTOINCREMENT,
		id TEXT NOT NULL UNIQUE, status TEXT NOT NULL, payload BLOB, created_at INTEGER NOT NULL)`); err != nil {
		return 0, err
	}
	payload := []byte(strings.Repeat("x", 256))
	start := time.Now()
	for i := range n {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rows (id, status, payload, created_at) VALUES (?, ?, ?, ?)`,
			"row-"+strconv.Itoa(i), "received", payload, time.Now().UnixMicro()); err != nil {
			tx.Rollback()
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func ptr[T any](v T) *T { return &v }
