package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// The listener's timings. A connection that breaks is replaced after a backoff that
// doubles up to its maximum while attempts keep failing; one that stays quiet is pinged
// now and then, so that a connection the network dropped without a word is found out.
var (
	listenMinBackoff    = 100 * time.Millisecond
	listenMaxBackoff    = 5 * time.Second
	listenCheckInterval = 15 * time.Second
	listenCheckTimeout  = 5 * time.Second
)

// listenerName is the application_name of the listening connections, so that an
// operator can tell them in pg_stat_activity.
const listenerName = "clouddb-listener"

// listenConn opens a connection outside the pool that listens on changesChannel.
func (db *DB) listenConn(ctx context.Context) (*pgx.Conn, error) {
	cfg := db.connCfg.Copy()
	cfg.RuntimeParams["application_name"] = listenerName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+changesChannel); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
}

// listen counts the other processes' writes into the version until Close. It owns conn
// and replaces it when it breaks.
func (db *DB) listen(conn *pgx.Conn) {
	defer close(db.listenDone)
	backoff := listenMinBackoff
	for {
		if conn == nil {
			if !sleep(db.stopCtx, backoff) {
				return
			}
			backoff = min(2*backoff, listenMaxBackoff)
			var err error
			if conn, err = db.listenConn(db.stopCtx); err != nil {
				continue
			}
			// Writes committed while no connection listened went unannounced.
			db.changed()
		}
		err := db.wait(conn)
		if err == nil {
			backoff = listenMinBackoff
			continue
		}
		closeConn(conn)
		conn = nil
		if db.stopCtx.Err() != nil {
			return
		}
	}
}

// wait waits for one notification, or checks the connection when none came for a while;
// it returns an error when the connection must be replaced (or the store is closing).
func (db *DB) wait(conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(db.stopCtx, listenCheckInterval)
	n, err := conn.WaitForNotification(ctx)
	cancel()
	switch {
	case err == nil:
		if n != nil && n.Payload != db.instance {
			db.changed()
		}
		return nil
	case db.stopCtx.Err() != nil:
		return db.stopCtx.Err()
	case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
		// A quiet connection: the wait timing out leaves it usable, so ask it whether the
		// server is still there.
		ctx, cancel := context.WithTimeout(db.stopCtx, listenCheckTimeout)
		defer cancel()
		return conn.Ping(ctx)
	}
	return err
}

// changed records a write of another process.
func (db *DB) changed() {
	db.version.Add(1)
	if db.hook != nil {
		db.hook()
	}
}

// sleep waits for d or the end of ctx; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// closeConn closes a connection kept outside the pool, waiting a bounded time for the
// server to be told.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	conn.Close(ctx)
}
