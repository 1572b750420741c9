package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds the writer's prepared statements. The store's statements are a
// fixed set but for a few whose text varies (a LIMIT, an IN list): past the bound, new
// texts simply run unprepared.
const maxCachedStmts = 256

// stmtCache keeps the writer's statements prepared, keyed by their text. The driver
// prepares a statement at every run otherwise, and parsing and planning were a third of
// the task engine's CPU time. A statement is prepared on the writer after the first
// transaction that ran it committed: inside a transaction the writer's one connection
// is taken, so preparing there on the pool would wait for itself.
type stmtCache struct {
	writer *sql.DB
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
}

func newStmtCache(writer *sql.DB) *stmtCache {
	return &stmtCache{writer: writer, stmts: map[string]*sql.Stmt{}}
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// prepare prepares the queries not cached yet. It must not run inside a transaction of
// the writer. A query that fails to prepare stays uncached and runs as before.
func (c *stmtCache) prepare(ctx context.Context, queries []string) {
	for _, q := range queries {
		c.mu.Lock()
		_, ok := c.stmts[q]
		full := len(c.stmts) >= maxCachedStmts
		c.mu.Unlock()
		if ok || full {
			continue
		}
		s, err := c.writer.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if _, ok := c.stmts[q]; ok {
			_ = s.Close() // prepared twice by two transactions in turn: keep the first
		} else {
			c.stmts[q] = s
		}
		c.mu.Unlock()
	}
}

// close closes the prepared statements.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, s := range c.stmts {
		_ = s.Close() // the pool closes next, which ends them anyway
		delete(c.stmts, q)
	}
}

// txConn runs a transaction's statements: those the cache holds through their prepared
// form, the others as they are, noting them for the cache. A reader's transaction has no
// cache.
type txConn struct {
	tx     *sql.Tx
	cache  *stmtCache
	missed []string
}

func (c *txConn) stmt(ctx context.Context, query string) *sql.Stmt {
	if c.cache == nil {
		return nil
	}
	if s := c.cache.get(query); s != nil {
		return c.tx.StmtContext(ctx, s)
	}
	c.missed = append(c.missed, query)
	return nil
}

func (c *txConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := c.stmt(ctx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return c.tx.ExecContext(ctx, query, args...)
}

func (c *txConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := c.stmt(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return c.tx.QueryContext(ctx, query, args...)
}

func (c *txConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := c.stmt(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return c.tx.QueryRowContext(ctx, query, args...)
}

// committed prepares, once the writer is free again, what the transaction ran
// unprepared.
func (c *txConn) committed(ctx context.Context) {
	if c.cache != nil && len(c.missed) > 0 {
		c.cache.prepare(context.WithoutCancel(ctx), c.missed)
	}
}
