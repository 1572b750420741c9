// Package sqlite implements clouddb.Store on SQLite with modernc.org/sqlite, a pure-Go
// driver, so that the binary builds without cgo.
//
// A DB holds two connection pools on one file in WAL mode: a single writer connection
// whose transactions begin IMMEDIATE, so writers queue in Go instead of failing with
// SQLITE_BUSY on a lock upgrade, and a small pool of query-only connections for View, so
// reads run in parallel with each other and with the writer.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"clouddb"
	"clouddb/internal/rowform"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// busyTimeout is how long a connection waits for another process's lock (for example a
// second clouddb or an admin command on the same file) before it fails.
const busyTimeout = 5 * time.Second

// DB is the SQLite store.
type DB struct {
	// Now is the clock for the timestamps the store assigns. It defaults to UTC wall time;
	// tests replace it to control time.
	Now func() time.Time

	path    string
	version atomic.Uint64
	pools   *Pools
	stmts   *stmtCache
	writer  *sql.DB
	reader  *sql.DB
	seal    sealer
}

// Option configures Open.
type Option func(*DB)

// WithCipher seals the secrets the store holds (database passwords, cloud-account
// credentials, task payloads) with c before they reach the file. Without it they are
// stored in plain text, as tests of the store itself may want.
func WithCipher(c *clouddb.Cipher) Option {
	return func(db *DB) { db.seal = sealer{rowform.Sealer{C: c}} }
}

var _ clouddb.Store = (*DB)(nil)

// Open opens the database file at path, creating it if needed, and applies the
// migrations that have not been applied yet.
func Open(path string, opts ...Option) (*DB, error) {
	db := &DB{Now: func() time.Time { return time.Now().UTC() }, path: path}
	for _, o := range opts {
		o(db)
	}
	p, err := OpenPools(path, migrationFS, max(4, runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, err
	}
	db.pools, db.writer, db.reader = p, p.Writer, p.Reader
	db.stmts = newStmtCache(p.Writer)
	return db, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	db.stmts.close()
	return db.pools.Close()
}

// now is the store's clock at the precision it stores.
func (db *DB) now() time.Time { return norm(db.Now()) }

// View runs fn in a transaction on the read pool; it sees one consistent snapshot and
// cannot write.
func (db *DB) View(ctx context.Context, fn func(clouddb.Tx) error) error {
	sqlTx, err := db.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return mapErr(err)
	}
	// Nothing to commit: rolling back just ends the read snapshot.
	defer func() { _ = sqlTx.Rollback() }()
	return fn(&Tx{tx: &txConn{tx: sqlTx}, now: db.now(), seal: db.seal})
}

// Update runs fn in a transaction on the writer and commits when fn returns nil. Do not
// call ClaimTask, PurgeTasks or Update from inside fn: they wait for the one writer
// connection that fn holds.
func (db *DB) Update(ctx context.Context, fn func(clouddb.Tx) error) error {
	sqlTx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(err)
	}
	// A transaction that failed half-way is rolled back whole: nothing of it is written.
	// After Commit the rollback returns sql.ErrTxDone.
	defer func() { _ = sqlTx.Rollback() }()
	conn := &txConn{tx: sqlTx, cache: db.stmts}
	if err := fn(&Tx{tx: conn, now: db.now(), seal: db.seal}); err != nil {
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return mapErr(err)
	}
	db.version.Add(1)
	conn.committed(ctx)
	return nil
}

// Version counts the writes this process committed; caches of what the store holds are
// valid while it stays the same. Other processes writing the file (clouddb admin) only
// add accounts and keys, which no cache holds.
func (db *DB) Version() uint64 { return db.version.Load() }

// Tx is a transaction of the store. Every write in it carries the same timestamp, taken
// when it began.
type Tx struct {
	tx   *txConn
	now  time.Time
	seal sealer
}

// Savepoint runs fn under a savepoint of the transaction; when fn fails, what it wrote is
// rolled back and the transaction goes on.
func (tx *Tx) Savepoint(ctx context.Context, fn func(clouddb.Tx) error) error {
	// One name serves every savepoint, nested ones included: each is released before
	// Savepoint returns, and a name refers to the innermost savepoint that has it. A
	// fixed text also keeps the prepared statements few.
	const name = "sp"
	if _, err := tx.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return mapErr(err)
	}
	ferr := fn(tx)
	// The undo must not depend on a context fn may have seen end: a savepoint left in
	// place would keep fn's writes.
	ctx = context.WithoutCancel(ctx)
	if ferr != nil {
		if _, err := tx.tx.ExecContext(ctx, "ROLLBACK TO "+name); err != nil {
			return errors.Join(ferr, fmt.Errorf("roll back to savepoint: %w", mapErr(err)))
		}
	}
	// RELEASE after ROLLBACK TO drops the savepoint itself, which ROLLBACK TO keeps;
	// after success it merges fn's writes into the transaction.
	if _, err := tx.tx.ExecContext(ctx, "RELEASE "+name); err != nil {
		return errors.Join(ferr, fmt.Errorf("release savepoint: %w", mapErr(err)))
	}
	return ferr
}

var _ clouddb.Tx = (*Tx)(nil)

// mapErr turns driver errors into the store's sentinel errors, so that callers never
// depend on the driver.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return clouddb.ErrNotFound
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return fmt.Errorf("%w: %s", clouddb.ErrConflict, se.Error())
	}
	return StorageError(err)
}

// StorageError turns a failure of the file or its disk into the store's sentinels: a full
// disk into clouddb.ErrStorageFull (507), an I/O error, a read-only or moved file, or one
// it cannot open into clouddb.ErrStorageUnwritable (503, the driver's text kept for the
// log). Other errors come back unchanged. The browser's store uses it too.
func StorageError(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL:
		return clouddb.ErrStorageFull
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM:
		return fmt.Errorf("%w (%s)", clouddb.ErrStorageUnwritable, se.Error())
	}
	return err
}

// norm and jsonArg are the stored forms both stores share (see rowform).
var (
	norm    = rowform.Norm
	jsonArg = rowform.JSON
)

// timeArg stores a time as microseconds since the epoch, the zero time as NULL.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// timeCol scans what timeArg stored.
type timeCol struct{ dst *time.Time }

func (c timeCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = time.Time{}
	case int64:
		*c.dst = time.UnixMicro(v).UTC()
	default:
		return fmt.Errorf("sqlite: time column holds %T", src)
	}
	return nil
}

// sealer seals secret columns on the way in (rowform.Sealer) and scans them back.
type sealer struct{ rowform.Sealer }

// bytesArg seals a column held as bytes; nil stays NULL.
func (s sealer) bytesArg(v []byte) any {
	if v == nil {
		return nil
	}
	return string(s.SealBytes(v))
}

// col scans a sealed TEXT column into a string.
func (s sealer) col(dst *string) sql.Scanner { return sealedCol{s, dst, nil} }

// bytesCol scans a sealed column into a byte slice (nil stays nil).
func (s sealer) bytesCol(dst *[]byte) sql.Scanner { return sealedCol{s, nil, dst} }

type sealedCol struct {
	s     sealer
	str   *string
	bytes *[]byte
}

func (c sealedCol) Scan(src any) error {
	var v string
	switch x := src.(type) {
	case nil:
		return nil
	case string:
		v = x
	case []byte:
		v = string(x)
	default:
		return fmt.Errorf("sqlite: sealed column holds %T", src)
	}
	v, err := c.s.Open(v)
	if err != nil {
		return err
	}
	if c.str != nil {
		*c.str = v
	} else {
		*c.bytes = []byte(v)
	}
	return nil
}

// rawCol scans a nullable JSON column into raw bytes (NULL stays nil).
type rawCol struct{ dst *[]byte }

func (c rawCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = nil
	case string:
		*c.dst = []byte(v)
	case []byte:
		*c.dst = append([]byte(nil), v...)
	default:
		return fmt.Errorf("sqlite: JSON column holds %T", src)
	}
	return nil
}

// bytesOrNull stores a nil slice as NULL and anything else as text.
func bytesOrNull(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// jsonCol scans what jsonArg stored; NULL leaves the destination as it is.
type jsonCol struct{ dst any }

func (c jsonCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		return json.Unmarshal([]byte(v), c.dst)
	case []byte:
		return json.Unmarshal(v, c.dst)
	}
	return fmt.Errorf("sqlite: JSON column holds %T", src)
}

// idArg lets SQLite assign an id that the caller left at 0.
func idArg(id int) any {
	if id == 0 {
		return nil
	}
	return id
}

// stamp sets the times a create assigns, keeping those the caller preset.
func (tx *Tx) stamp(ts ...*time.Time) {
	for _, t := range ts {
		if t.IsZero() {
			*t = tx.now
		} else {
			*t = norm(*t)
		}
	}
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// where builds a WHERE clause from optional conditions.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// whereIn adds "col IN (...)" for a non-empty list of values.
func whereIn[S ~string](w *where, col string, vals []S) {
	if len(vals) == 0 {
		return
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = string(v)
	}
	w.add(col+" IN ("+marks+")", args...)
}

// one maps the result of scanning a single row.
func one[T any](v *T, err error) (*T, error) {
	if err != nil {
		return nil, mapErr(err)
	}
	return v, nil
}

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, tx *txConn, query string, args []any, scan func(scanner) (*T, error)) ([]*T, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, mapErr(err)
		}
		out = append(out, v)
	}
	return out, mapErr(rows.Err())
}

// affected reports whether a statement changed a row.
func affected(res sql.Result) (bool, error) {
	n, err := res.RowsAffected()
	return n > 0, err
}

// mustAffect returns ErrNotFound when a statement changed no row.
func mustAffect(res sql.Result, err error) error {
	if err != nil {
		return mapErr(err)
	}
	ok, err := affected(res)
	if err != nil {
		return err
	}
	if !ok {
		return clouddb.ErrNotFound
	}
	return nil
}
