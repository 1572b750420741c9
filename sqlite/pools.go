package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// Pools are the two connection pools clouddb keeps on one SQLite file in WAL mode: a
// single writer whose transactions begin IMMEDIATE, so writers queue in Go instead of
// failing with SQLITE_BUSY on a lock upgrade, and a pool of query-only readers that run in
// parallel with each other and with the writer. The store here and the browser API's
// store both use them.
type Pools struct {
	Writer *sql.DB
	Reader *sql.DB
}

// OpenPools opens the file at path, creating it with mode 0600 (it holds sealed secrets;
// SQLite gives its -wal and -shm files the same mode), and applies the migrations of
// migrations (files migration/*.sql, in name order) not applied yet. readers sizes the
// read pool. path must name a file: an in-memory database would not be shared by the two
// pools.
func OpenPools(path string, migrations fs.FS, readers int) (*Pools, error) {
	if path == "" || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return nil, fmt.Errorf("sqlite: %q is not a plain file path", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	f.Close()
	timeout := fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds())

	p := &Pools{}
	// journal_mode is persistent in the file, so only the writer sets it. NORMAL
	// synchronous is durable in WAL mode except for the last commits on power loss.
	p.Writer, err = sql.Open("sqlite", path+"?_txlock=immediate&"+timeout+
		"&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	p.Writer.SetMaxOpenConns(1)
	p.Writer.SetMaxIdleConns(1)
	p.Writer.SetConnMaxLifetime(0)
	p.Writer.SetConnMaxIdleTime(0)
	if err = migrate(context.Background(), p.Writer, migrations); err != nil {
		p.Writer.Close()
		return nil, fmt.Errorf("sqlite: migrate %s: %w", path, err)
	}

	// The reader is opened after the writer has switched the file to WAL mode.
	p.Reader, err = sql.Open("sqlite", path+"?"+timeout+"&_pragma=foreign_keys(1)&_pragma=query_only(1)")
	if err != nil {
		p.Writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	p.Reader.SetMaxOpenConns(readers)
	p.Reader.SetMaxIdleConns(readers) // keep them open: a new connection re-reads the schema
	p.Reader.SetConnMaxLifetime(0)
	p.Reader.SetConnMaxIdleTime(0)
	if err := p.Reader.Ping(); err != nil {
		p.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return p, nil
}

// Close closes both pools.
func (p *Pools) Close() error {
	var errs []error
	if p.Reader != nil {
		errs = append(errs, p.Reader.Close())
	}
	if p.Writer != nil {
		errs = append(errs, p.Writer.Close())
	}
	return errors.Join(errs...)
}

// migrate applies the migrations in name order, each in its own transaction together
// with the row that records it, so a crash never leaves one half applied.
func migrate(ctx context.Context, w *sql.DB, migrations fs.FS) error {
	if _, err := w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (
		name       TEXT PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return err
	}
	names, err := fs.Glob(migrations, "migration/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		if err := migrateFile(ctx, w, migrations, name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func migrateFile(ctx context.Context, w *sql.DB, migrations fs.FS, name string) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit it returns sql.ErrTxDone
	// Checked inside the write transaction: another process may have migrated meanwhile.
	var n int
	if err = tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM migrations WHERE name = ?`, name).Scan(&n); err != nil {
		return err
	} else if n > 0 {
		return nil
	}
	buf, err := fs.ReadFile(migrations, name)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, string(buf)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (name, applied_at) VALUES (?, ?)`,
		name, time.Now().UTC().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}
