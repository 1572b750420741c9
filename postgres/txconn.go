package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// txConn runs a transaction's statements. Some wait in pending and go to the server
// together with the statement after them, in one round trip: a savepoint (see
// Tx.Savepoint) and the end of a task ProcessTasks claimed (see Tx.FinishTask). Round
// trips are most of what a task costs.
type txConn struct {
	tx      pgx.Tx
	pending []pendingStmt
}

// pendingStmt is a statement sent later; check, when set, turns its result into an
// error, which the statement that sends it returns.
type pendingStmt struct {
	sql   string
	args  []any
	check func(pgconn.CommandTag) error
}

// defer queues a statement to go with the next one.
func (c *txConn) defer_(sql string, args []any, check func(pgconn.CommandTag) error) {
	c.pending = append(c.pending, pendingStmt{sql: sql, args: args, check: check})
}

func (c *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if len(c.pending) == 0 {
		return c.tx.Exec(ctx, sql, args...)
	}
	br, pending := c.send(ctx, sql, args)
	pendErr := readPending(br, pending)
	tag, err := br.Exec()
	closeErr := br.Close()
	// The first error is the cause; those after it are its consequences.
	return tag, firstErr(pendErr, err, closeErr)
}

func (c *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if len(c.pending) == 0 {
		return c.tx.QueryRow(ctx, sql, args...)
	}
	br, pending := c.send(ctx, sql, args)
	if err := readPending(br, pending); err != nil {
		return errRow{firstErr(err, br.Close())}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

func (c *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := c.flush(ctx); err != nil {
		return nil, err
	}
	return c.tx.Query(ctx, sql, args...)
}

// flush sends the pending statements, if any, and returns the first error they met.
func (c *txConn) flush(ctx context.Context) error {
	if len(c.pending) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, p := range c.pending {
		b.Queue(p.sql, p.args...)
	}
	pending := c.pending
	c.pending = nil
	br := c.tx.SendBatch(ctx, b)
	return firstErr(readPending(br, pending), br.Close())
}

// send sends the pending statements and sql in one batch; the pending ones' results
// come first.
func (c *txConn) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, []pendingStmt) {
	b := &pgx.Batch{}
	for _, p := range c.pending {
		b.Queue(p.sql, p.args...)
	}
	b.Queue(sql, args...)
	pending := c.pending
	c.pending = nil
	return c.tx.SendBatch(ctx, b), pending
}

// readPending reads the results of the pending statements of br; the first error is
// the cause.
func readPending(br pgx.BatchResults, pending []pendingStmt) error {
	var first error
	for _, p := range pending {
		tag, err := br.Exec()
		if err == nil && p.check != nil {
			err = p.check(tag)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// batchRow is a row of a batch, which it closes once scanned.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	return firstErr(err, r.br.Close())
}

// errRow is a row that could not be read.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
