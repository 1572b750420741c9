// Package postgres implements clouddb.Store on PostgreSQL with pgx, so that several
// clouddb replicas can share one store.
//
// Reads (View) run in parallel, each in a REPEATABLE READ READ ONLY transaction: one
// consistent snapshot. Writes are serialised as with the SQLite store's single writer,
// across replicas too: every write transaction first takes one transaction-level advisory
// lock, so that the rules callers check before they write (at most three subscriptions
// that are not active, a port chosen among those UsedPorts does not list) still hold when
// they commit. Within a process, writers also queue in Go, so that waiting writers do not
// hold pool connections that readers need.
//
// Every write announces itself with a notification at commit; each DB listens on a
// connection of its own and counts the other replicas' writes into Version, so that a
// cache built on Version notices them (as soon as the notification arrives).
//
// Lead, the migrations and the listener need session state (session advisory locks,
// LISTEN): connect to the server directly or through a pooler in session mode, not in
// transaction mode.
package postgres

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"clouddb"
	"clouddb/internal/rowform"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// Advisory lock keys, in the single-bigint key space ("cldb" and a number). Lead's locks
// use the two-int key space, which never collides with this one.
const (
	writeLockKey   int64 = 0x636c6462_00000001
	migrateLockKey int64 = 0x636c6462_00000002
)

// changesChannel is the notification channel on which every write is announced.
const changesChannel = "clouddb_changes"

// cleanupTimeout bounds the statements that end something (a rollback, an unlock) and so
// must not depend on a caller's context that may already be done.
const cleanupTimeout = 5 * time.Second

// errClosed is what Lead returns once the store is closed.
var errClosed = errors.New("postgres: store closed")

// DB is the PostgreSQL store.
type DB struct {
	// Now is the clock for the timestamps the store assigns. It defaults to UTC wall time;
	// tests replace it to control time.
	Now func() time.Time

	pool     *pgxpool.Pool
	connCfg  *pgx.ConnConfig // for the connections kept outside the pool
	seal     sealer
	hook     func()
	instance string // payload of this DB's notifications
	version  atomic.Uint64
	writer   chan struct{} // one local writer at a time

	stop       context.CancelFunc // ends the listener and any Lead still waiting
	stopCtx    context.Context
	listenDone chan struct{}

	mu     sync.Mutex
	closed bool
	holds  map[*hold]struct{} // locks Lead holds, released by Close
}

// Option configures Open.
type Option func(*DB)

// WithCipher seals the secrets the store holds (database passwords, cloud-account
// credentials, task payloads) with c before they reach the server. Without it they are
// stored in plain text, as tests of the store itself may want.
func WithCipher(c *clouddb.Cipher) Option {
	return func(db *DB) { db.seal = sealer{rowform.Sealer{C: c}} }
}

// WithChangeHook calls fn when another process (another replica sharing the store)
// commits a write, or when writes may have been missed because the listening connection
// broke. fn runs on the listener's goroutine: it must return quickly, and Close waits for
// it.
func WithChangeHook(fn func()) Option { return func(db *DB) { db.hook = fn } }

var _ clouddb.Store = (*DB)(nil)

// Open connects to the database at url (a postgres:// URL or a key=value connection
// string; pool settings such as pool_max_conns are accepted), applies the migrations
// that have not been applied yet and starts listening for the other replicas' writes.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx leaves the password out of its parse errors.
		return nil, fmt.Errorf("postgres: %w", err)
	}
	id := make([]byte, 16)
	rand.Read(id)
	db := &DB{
		Now:        func() time.Time { return time.Now().UTC() },
		connCfg:    cfg.ConnConfig,
		instance:   hex.EncodeToString(id),
		writer:     make(chan struct{}, 1),
		listenDone: make(chan struct{}),
		holds:      map[*hold]struct{}{},
	}
	for _, o := range opts {
		o(db)
	}
	if err = migrate(ctx, db.connCfg); err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	// Listening starts before Open returns, so that no write committed after it is missed.
	conn, err := db.listenConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: listen: %w", err)
	}
	db.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db.stopCtx, db.stop = context.WithCancel(context.Background())
	go db.listen(conn)
	return db, nil
}

// Close stops the listener, releases the locks Lead holds and closes the pool. It is
// safe to call more than once.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	holds := make([]*hold, 0, len(db.holds))
	for h := range db.holds {
		holds = append(holds, h)
	}
	db.mu.Unlock()

	db.stop()
	<-db.listenDone
	for _, h := range holds {
		h.end(true)
	}
	// This waits for every connection still in use, a Lead still waiting included; it
	// gives its connection up now that stopCtx is done.
	db.pool.Close()
	return nil
}

// now is the store's clock at the precision it stores.
func (db *DB) now() time.Time { return norm(db.Now()) }

// View runs fn in a read-only transaction that sees one consistent snapshot.
func (db *DB) View(ctx context.Context, fn func(clouddb.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := db.view(ctx, fn)
		// A read on a connection the server ended (a restart, a failover, an idle
		// connection cut) changed nothing: it is run again on a fresh one.
		if !broken(err) || ctx.Err() != nil {
			return err
		}
		if attempt == connAttempts {
			return unavailable(err)
		}
	}
}

func (db *DB) view(ctx context.Context, fn func(clouddb.Tx) error) error {
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return db.startErr(nil, err)
	}
	// Nothing to commit: rolling back just ends the snapshot.
	defer rollback(ctx, tx)
	if err := fn(&Tx{tx: &txConn{tx: tx}, now: db.now(), seal: db.seal}); err != nil {
		// pgx also closes a connection whose query a cancelled context cut short: that
		// one says nothing about the others.
		if tx.Conn().IsClosed() && ctx.Err() == nil {
			db.pool.Reset()
			return errBroken{err}
		}
		return err
	}
	return nil
}

// connAttempts bounds how often a transaction is tried when its connection turns out to
// be broken.
const connAttempts = 3

// errBroken marks an error of a connection that is gone, met before the transaction could
// have changed anything.
type errBroken struct{ err error }

func (e errBroken) Error() string { return e.err.Error() }
func (e errBroken) Unwrap() error { return e.err }

func broken(err error) bool {
	var b errBroken
	return errors.As(err, &b)
}

// unavailable reports a database that fresh connections cannot reach either: callers
// see clouddb.ErrUnavailable (503 to clients; the task engine tries again later).
func unavailable(err error) error {
	return fmt.Errorf("%w (%w)", clouddb.ErrUnavailable, err)
}

// startErr classifies an error met while starting a transaction, before any of the
// caller's statements ran: on a closed connection (the pool hands out connections the
// server may have ended since) it is worth another try, once the pool has dropped its
// other connections, which the same restart or failover most likely ended too.
func (db *DB) startErr(tx pgx.Tx, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if tx == nil || tx.Conn().IsClosed() {
		db.pool.Reset()
		return errBroken{mapErr(err)}
	}
	return mapErr(err)
}

// Update runs fn in a read-write transaction and commits when fn returns nil. Do not call
// Update, ClaimTask, ExtendLease or PurgeTasks from inside fn: they wait for the write
// lock that fn's transaction holds.
func (db *DB) Update(ctx context.Context, fn func(clouddb.Tx) error) error {
	return db.write(ctx, func(tx pgx.Tx, now time.Time) (bool, error) {
		return true, fn(&Tx{tx: &txConn{tx: tx}, now: now, seal: db.seal})
	})
}

// write runs fn in a transaction that holds the store's write lock, and commits it when
// fn returns nil and reports a change; a transaction that changed nothing is rolled back
// and announced nowhere. now is taken once the lock is held, so that the times writes
// carry follow the order in which they commit.
func (db *DB) write(ctx context.Context, fn func(tx pgx.Tx, now time.Time) (changed bool, err error)) error {
	select {
	case db.writer <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-db.writer }()

	for attempt := 1; ; attempt++ {
		err := db.writeOnce(ctx, fn)
		// Only a failure before fn ran is tried again: after it, the caller's state
		// may reflect a transaction that did not commit, and a failed commit may have
		// committed.
		if !broken(err) || ctx.Err() != nil {
			return err
		}
		if attempt == connAttempts {
			return unavailable(err)
		}
	}
}

func (db *DB) writeOnce(ctx context.Context, fn func(tx pgx.Tx, now time.Time) (changed bool, err error)) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return db.startErr(nil, err)
	}
	// A transaction that failed half-way is rolled back whole: nothing of it is written.
	defer rollback(ctx, tx)
	if _, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, writeLockKey); err != nil {
		return db.startErr(tx, err)
	}
	changed, err := fn(tx, db.now())
	if err != nil || !changed {
		return err
	}
	// Delivered at commit to every replica's listener; this DB's own ignores its payload.
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, changesChannel, db.instance); err != nil {
		return mapErr(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return mapErr(err)
	}
	db.version.Add(1)
	return nil
}

// rollback ends tx if it is still open. It does not use the caller's context, which may
// be done: the connection then goes back to the pool clean instead of being dropped.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	// After Commit this returns pgx.ErrTxClosed; a rollback that fails closes the
	// connection, which the pool then drops.
	_ = tx.Rollback(ctx)
}

// Version counts the writes committed to the store as this process knows them: its own,
// and those of the other processes sharing the store, as their notifications arrive.
// Caches of what the store holds are valid while it stays the same.
func (db *DB) Version() uint64 { return db.version.Load() }

// Tx is a transaction of the store. Every write in it carries the same timestamp, taken
// when it began.
type Tx struct {
	tx   *txConn
	now  time.Time
	seal sealer
	// savepoints numbers the savepoints taken so far, so that nested ones have names of
	// their own.
	savepoints int
	// claimed is the task ProcessTasks gave fn last; finishedOther records that fn
	// finished another one (see ProcessTasks).
	claimed       string
	owner         string
	finishedOther bool
}

// Savepoint runs fn under a savepoint of the transaction; when fn fails, what it wrote is
// rolled back and the transaction goes on (a statement that failed inside fn included,
// which would otherwise abort the whole transaction).
func (tx *Tx) Savepoint(ctx context.Context, fn func(clouddb.Tx) error) error {
	tx.savepoints++
	name := "sp" + strconv.Itoa(tx.savepoints)
	// Sent with fn's first statement, in its round trip (see txConn). A savepoint still
	// pending when fn fails (fn ran no statement) is simply dropped: nothing to undo.
	stmt := "SAVEPOINT " + name
	tx.tx.defer_(stmt, nil, nil)
	ferr := fn(tx)
	if p := tx.tx.pending; len(p) > 0 && p[len(p)-1].sql == stmt {
		tx.tx.pending = p[:len(p)-1]
		return ferr
	}
	if ferr == nil {
		// Not released: the commit releases it, and a RELEASE would cost a round trip
		// on the path every task takes.
		return nil
	}
	// The undo must not depend on a context fn may have seen end: a savepoint left in
	// place would keep fn's writes.
	if _, err := tx.tx.Exec(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT "+name); err != nil {
		return errors.Join(ferr, fmt.Errorf("roll back to savepoint: %w", mapErr(err)))
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
	if errors.Is(err, pgx.ErrNoRows) {
		return clouddb.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		// Class 23, integrity constraint violations (unique, foreign key, check, not null),
		// like SQLite's SQLITE_CONSTRAINT.
		case strings.HasPrefix(pe.Code, "23"):
			return fmt.Errorf("%w: %s", clouddb.ErrConflict, pe.Error())
		case pe.Code == "53100": // disk_full
			return clouddb.ErrStorageFull
		case pe.Code == "58030", // io_error
			pe.Code == "25006": // read_only_sql_transaction: a standby, or a server set read-only
			return fmt.Errorf("%w (%s)", clouddb.ErrStorageUnwritable, pe.Error())
		case strings.HasPrefix(pe.Code, "53"): // insufficient_resources: memory, connections
			return fmt.Errorf("%w (%s)", clouddb.ErrUnavailable, pe.Error())
		}
	}
	return err
}

// norm and jsonArg are the stored forms both stores share (see rowform); the server
// parses jsonArg's text into jsonb.
var (
	norm    = rowform.Norm
	jsonArg = rowform.JSON
)

// timeArg stores a time, the zero time as NULL.
func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return norm(t)
}

// timeCol scans what timeArg stored, in UTC.
type timeCol struct{ dst *time.Time }

func (c timeCol) ScanTimestamptz(v pgtype.Timestamptz) error {
	switch {
	case !v.Valid:
		*c.dst = time.Time{}
	case v.InfinityModifier != pgtype.Finite:
		return errors.New("postgres: infinite time in a time column")
	default:
		*c.dst = v.Time.UTC()
	}
	return nil
}

// bytesOrNull stores a JSON document held as bytes, none (nil or empty) as NULL.
func bytesOrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// sealer seals secret columns on the way in (rowform.Sealer) and scans them back.
type sealer struct{ rowform.Sealer }

// bytesArg seals a byte column; nil stays NULL.
func (s sealer) bytesArg(v []byte) any {
	if v == nil {
		return nil
	}
	return s.SealBytes(v)
}

// col scans a sealed text column into a string.
func (s sealer) col(dst *string) sealedText { return sealedText{s, dst} }

// bytesCol scans a sealed bytea column into a byte slice (NULL stays nil).
func (s sealer) bytesCol(dst *[]byte) sealedBytes { return sealedBytes{s, dst} }

type sealedText struct {
	s   sealer
	dst *string
}

func (c sealedText) ScanText(v pgtype.Text) error {
	if !v.Valid {
		return nil
	}
	plain, err := c.s.Open(v.String)
	if err != nil {
		return err
	}
	*c.dst = plain
	return nil
}

type sealedBytes struct {
	s   sealer
	dst *[]byte
}

func (c sealedBytes) ScanBytes(v []byte) error {
	if v == nil {
		*c.dst = nil
		return nil
	}
	plain, err := c.s.Open(string(v)) // the conversion copies v, which pgx reuses
	if err != nil {
		return err
	}
	*c.dst = []byte(plain)
	return nil
}

// idArg lets the sequence assign an id that the caller left at 0.
func idArg(id int) any {
	if id == 0 {
		return nil
	}
	return id
}

// newID is the id expression of an insert into table whose $1 is idArg: the preset id,
// or the next of the table's identity sequence.
func newID(table string) string {
	return "COALESCE($1, nextval('" + table + "_id_seq'))"
}

// insert runs an INSERT … RETURNING id whose $1 is idArg(id) (see newID) and returns the
// id of the new row.
func (tx *Tx) insert(ctx context.Context, table string, id int, query string, args ...any) (int, error) {
	var got int
	if err := tx.tx.QueryRow(ctx, query, append([]any{idArg(id)}, args...)...).Scan(&got); err != nil {
		return 0, mapErr(err)
	}
	if id != 0 {
		// A preset id does not advance the sequence: move it past the id, so that no id
		// it hands out later collides (SQLite's AUTOINCREMENT does the same). It never moves
		// back, so a deleted row's id is not handed out again. setval is not undone by a
		// rollback; that only leaves a gap.
		if _, err := tx.tx.Exec(ctx, `SELECT setval($1::regclass, $2)
			WHERE $2 > COALESCE(pg_sequence_last_value($1::regclass), 0)`, table+"_id_seq", id); err != nil {
			return 0, mapErr(err)
		}
	}
	return got, nil
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

// scanner is a pgx.Row or pgx.Rows.
type scanner interface{ Scan(dest ...any) error }

// where builds a WHERE clause from optional conditions and numbers their parameters.
type where struct {
	conds []string
	args  []any
}

// arg adds a parameter and returns its placeholder.
func (w *where) arg(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

func (w *where) add(cond string) { w.conds = append(w.conds, cond) }

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// whereIn adds "col = ANY(…)" for a non-empty list of values.
func whereIn[S ~string](w *where, col string, vals []S) {
	if len(vals) == 0 {
		return
	}
	strs := make([]string, len(vals))
	for i, v := range vals {
		strs[i] = string(v)
	}
	w.add(col + " = ANY(" + w.arg(strs) + ")")
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
	rows, err := tx.Query(ctx, query, args...)
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
func affected(tag pgconn.CommandTag, err error) (bool, error) {
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() > 0, nil
}

// mustAffect returns ErrNotFound when a statement changed no row.
func mustAffect(tag pgconn.CommandTag, err error) error {
	ok, err := affected(tag, err)
	if err != nil {
		return err
	}
	if !ok {
		return clouddb.ErrNotFound
	}
	return nil
}
