package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver the store uses, for the raw baseline

	"clouddb"
	"clouddb/internal/pgtest"
	"clouddb/postgres"
	"clouddb/sqlite"
	"clouddb/task"
)

// engineResult compares the task engine's processing rate on each store with the raw
// commit rate of the same store's engine on the same settings, measured alternately.
type engineResult struct {
	Workers int
	// SQLite and Postgres are the rows; a row is nil when it was not measured.
	SQLite, Postgres *engineRow
	// PGServer describes the PostgreSQL server of the Postgres row: version, settings
	// and whether the harness started it.
	PGServer string
}

// engineRow is one store's figures.
type engineRow struct {
	Accounts, TasksPerAccount int
	Tasks                     int
	// Medians over the repetitions.
	TasksPerSec   float64
	CommitsPerSec float64
	// Ratio is the median of the per-pair ratios tasks/s ÷ commits/s.
	Ratio float64
}

// engine runs the engine benchmark on SQLite, then on PostgreSQL. A failure of the
// PostgreSQL row keeps the SQLite row.
func (h *harness) engine(ctx context.Context) (*engineResult, error) {
	res := &engineResult{Workers: task.DefaultWorkers}
	sqliteRow, err := h.enginePairs(ctx, "SQLite", h.cfg.Accounts, h.cfg.TasksPerAccount,
		func(rep int) (func() (float64, error), func() (float64, error), func(), error) {
			dir := filepath.Join(h.dir, "engine-"+strconv.Itoa(rep))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, nil, nil, err
			}
			runEngine := func() (float64, error) {
				db, err := sqlite.Open(filepath.Join(dir, "store.db"))
				if err != nil {
					return 0, err
				}
				defer db.Close()
				return engineRate(ctx, db, h.cfg.Accounts, h.cfg.TasksPerAccount)
			}
			runRaw := func() (float64, error) {
				return rawCommitRate(ctx, filepath.Join(dir, "raw.db"), h.cfg.Accounts*h.cfg.TasksPerAccount)
			}
			return runEngine, runRaw, func() { os.RemoveAll(dir) }, nil
		})
	res.SQLite = sqliteRow
	if err != nil {
		return res, fmt.Errorf("sqlite: %w", err)
	}
	if err := h.enginePostgres(ctx, res); err != nil {
		return res, fmt.Errorf("postgres: %w", err)
	}
	return res, nil
}

// enginePostgres measures the Postgres row on the server of -pg, else of
// TEST_DATABASE_URL, else on a throwaway cluster it starts and stops. Every repetition
// uses two new databases, dropped afterwards.
func (h *harness) enginePostgres(ctx context.Context, res *engineResult) error {
	admin, started := h.cfg.PG, false
	if admin == "" {
		admin = os.Getenv(pgtest.EnvURL)
	}
	if admin == "" {
		h.cfg.logf("task engine: starting a throwaway PostgreSQL cluster")
		u, stop, err := pgtest.Start()
		if err != nil {
			return err
		}
		defer stop()
		admin, started = u, true
	}
	srv, err := newPGServer(ctx, admin)
	if err != nil {
		return err
	}
	res.PGServer = srv.describe
	if started {
		res.PGServer += ", a throwaway cluster the harness started (internal/pgtest)"
	}
	accounts, perAccount := h.cfg.PGAccounts, h.cfg.PGTasksPerAccount
	row, pairsErr := h.enginePairs(ctx, "PostgreSQL", accounts, perAccount,
		func(rep int) (func() (float64, error), func() (float64, error), func(), error) {
			prefix := fmt.Sprintf("clouddb_bench_%d_%d_", os.Getpid(), rep)
			storeURL, err := srv.createDB(ctx, prefix+"store")
			if err != nil {
				return nil, nil, nil, err
			}
			rawURL, err := srv.createDB(ctx, prefix+"raw")
			if err != nil {
				if dropErr := srv.dropDB(prefix + "store"); dropErr != nil {
					h.cfg.logf("task engine: %v", dropErr)
				}
				return nil, nil, nil, err
			}
			runEngine := func() (float64, error) {
				db, err := postgres.Open(ctx, storeURL)
				if err != nil {
					return 0, err
				}
				defer db.Close()
				return engineRate(ctx, db, accounts, perAccount)
			}
			runRaw := func() (float64, error) {
				return rawPGCommitRate(ctx, rawURL, accounts*perAccount)
			}
			cleanup := func() {
				for _, name := range []string{prefix + "store", prefix + "raw"} {
					if err := srv.dropDB(name); err != nil {
						h.cfg.logf("task engine: %v", err)
					}
				}
			}
			return runEngine, runRaw, cleanup, nil
		})
	res.Postgres = row
	return pairsErr
}

// enginePairs runs one store's row Reps times: setup gives the repetition's engine run,
// raw-commit run and cleanup; which of the two runs goes first alternates.
func (h *harness) enginePairs(ctx context.Context, store string, accounts, perAccount int,
	setup func(rep int) (runEngine, runRaw func() (float64, error), cleanup func(), err error)) (*engineRow, error) {
	row := &engineRow{Accounts: accounts, TasksPerAccount: perAccount, Tasks: accounts * perAccount}
	var tps, cps, ratios []float64
	for rep := range h.cfg.Reps {
		runEngine, runRaw, cleanup, err := setup(rep)
		if err != nil {
			return nil, err
		}
		var t, c float64
		err = func() error {
			defer cleanup()
			first, second := func() (err error) { t, err = runEngine(); return err }, func() (err error) { c, err = runRaw(); return err }
			if rep%2 == 1 {
				first, second = second, first
			}
			if firstErr := first(); firstErr != nil {
				return firstErr
			}
			return second()
		}()
		if err != nil {
			return nil, err
		}
		h.cfg.logf("task engine on %s rep %d: %.0f tasks/s, raw %s %.0f commits/s", store, rep+1, t, store, c)
		tps, cps, ratios = append(tps, t), append(cps, c), append(ratios, t/c)
	}
	row.TasksPerSec, row.CommitsPerSec, row.Ratio = median(tps), median(cps), median(ratios)
	return row, nil
}

// engineRate fills db, a new store, with accounts × perAccount cloud-account creates
// (cheap tasks: one insert and a log entry each), runs the task engine with its default
// workers until every task is final, and returns tasks per second from the engine's start
// to the last task's end. Every task must complete.
func engineRate(ctx context.Context, db clouddb.Store, accounts, perAccount int) (float64, error) {
	payload, err := json.Marshal(clouddb.CloudAccountSpec{
		Name: ptr("bench"), Provider: ptr("AWS"), AccessKeyID: ptr("AKIABENCH"), AccessSecretKey: ptr("bench-secret"),
		ConsoleUsername: ptr("bench"), ConsolePassword: ptr("bench-password"), SignInLoginURL: ptr("https://signin.example/console"),
	})
	if err != nil {
		return 0, err
	}
	if err := db.Update(ctx, func(tx clouddb.Tx) error {
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
	}); err != nil {
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
	var runErr error // read only once stopped is closed
	go func() {
		runErr = eng.Run(rctx)
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
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return 0, fmt.Errorf("task engine: %w", runErr)
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
			_ = tx.Rollback() // the insert's error is the one to report
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func ptr[T any](v T) *T { return &v }

// pgServer is the PostgreSQL server of the Postgres row, reached through its maintenance
// database.
type pgServer struct {
	admin    *url.URL
	describe string
}

func newPGServer(ctx context.Context, admin string) (*pgServer, error) {
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// The URL may hold a password: it is not repeated.
		return nil, errors.New("the PostgreSQL server must be named by a postgres:// URL")
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var version, fsync, syncCommit, fpw string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes')`).Scan(&version, &fsync, &syncCommit, &fpw); err != nil {
		return nil, err
	}
	if v, _, ok := strings.Cut(version, " "); ok {
		version = v
	}
	return &pgServer{admin: u, describe: fmt.Sprintf("PostgreSQL %s on %s (fsync=%s, synchronous_commit=%s, full_page_writes=%s)",
		version, u.Host, fsync, syncCommit, fpw)}, nil
}

// createDB creates an empty database and returns its URL.
func (s *pgServer) createDB(ctx context.Context, name string) (string, error) {
	if err := s.exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	u := *s.admin
	u.Path = "/" + name
	return u.String(), nil
}

// dropDB drops a database, ending the connections still open to it.
func (s *pgServer) dropDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

func (s *pgServer) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.admin.String())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// rawPGCommitRate commits n transactions of one insert each, a row about the size of a
// task, on one connection (pgx, as the store uses) to a new database, and returns commits
// per second.
func rawPGCommitRate(ctx context.Context, dbURL string, n int) (float64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE TABLE rows (seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE,
		status text NOT NULL, payload bytea, created_at bigint NOT NULL)`); err != nil {
		return 0, err
	}
	payload := []byte(strings.Repeat("x", 256))
	start := time.Now()
	for i := range n {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO rows (id, status, payload, created_at) VALUES ($1, $2, $3, $4)`,
			"row-"+strconv.Itoa(i), "received", payload, time.Now().UnixMicro()); err != nil {
			_ = tx.Rollback(ctx) // the insert's error is the one to report
			return 0, err
		}
		if err := tx.Commit(ctx); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// goalEngine is the least task rate the engine must reach, as a share of the raw commit
// rate of the same store.
const goalEngine = 0.4
