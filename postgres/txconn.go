package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// txConn runs a transaction's statements. A savepoint (see Tx.Savepoint) waits in pending
// and goes to the server together with the statement after it, in one round trip: the
// task engine takes one per task, and round trips are most of what a task costs.
type txConn struct {
	tx      pgx.Tx
	pending []string
}

func (c *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if len(c.pending) == 0 {
		return c.tx.Exec(ctx, sql, args...)
	}
	br, n := c.send(ctx, sql, args)
	pendErr := execN(br, n)
	tag, err := br.Exec()
	closeErr := br.Close()
	// The first error is the cause; those after it are its consequences.
	return tag, firstErr(pendErr, err, closeErr)
}

func (c *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if len(c.pending) == 0 {
		return c.tx.QueryRow(ctx, sql, args...)
	}
	br, n := c.send(ctx, sql, args)
	if err := execN(br, n); err != nil {
		return errRow{firstErr(err, br.Close())}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

func (c *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	// Rare on the task path: the pending statements go first, on their own.
	for len(c.pending) > 0 {
		p := c.pending[0]
		c.pending = c.pending[1:]
		if _, err := c.tx.Exec(ctx, p); err != nil {
			return nil, err
		}
	}
	return c.tx.Query(ctx, sql, args...)
}

// send sends the pending statements and sql in one batch; n is the number of pending
// ones, whose results come first.
func (c *txConn) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, int) {
	b := &pgx.Batch{}
	for _, p := range c.pending {
		b.Queue(p)
	}
	b.Queue(sql, args...)
	n := len(c.pending)
	c.pending = nil
	return c.tx.SendBatch(ctx, b), n
}

// execN reads the results of n statements of br; the first error is the cause.
func execN(br pgx.BatchResults, n int) error {
	var first error
	for range n {
		if _, err := br.Exec(); err != nil && first == nil {
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
