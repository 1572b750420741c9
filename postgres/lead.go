package postgres

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// How often and how patiently a held lock's connection is checked.
var (
	leadCheckInterval = time.Second
	leadCheckTimeout  = 2 * time.Second
)

// LossWindow is the longest a holder whose connection broke may go on believing it holds
// its lock: the server frees the lock at once, but the holder learns of it at its next
// check. A new holder that waits this long after Lead returns never overlaps with it.
func (db *DB) LossWindow() time.Duration { return leadCheckInterval + leadCheckTimeout }

// leadKeySpace is the first key of Lead's advisory locks ("cldb"); the second is a hash
// of the lock's name. The two-int key space never collides with the store's own locks.
const leadKeySpace int32 = 0x636c6462

// leadKey hashes a lock's name in Go rather than on the server, so that the key does not
// depend on the server's version.
func leadKey(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32())
}

// Lead blocks until this process holds the cluster-wide lock named name, or ctx ends (it
// then returns ctx.Err()), or the store closes. The lock is a session advisory lock on a
// connection taken from the pool for as long as it is held: one holder among all the
// processes sharing the store.
//
// lost is closed if the lock ends without release being called: the connection that
// holds it broke (the server then frees the lock for another process; the connection is
// checked every second) or the store was closed. release unlocks and gives the connection
// back; it is safe to call more than once, and after lost is closed.
func (db *DB) Lead(ctx context.Context, name string) (lost <-chan struct{}, release func(), err error) {
	// The wait ends with ctx or with the store, so that Close never waits for a Lead.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(db.stopCtx, cancel)()
	fail := func(err error) (<-chan struct{}, func(), error) {
		switch {
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case db.stopCtx.Err() != nil:
			return nil, nil, errClosed
		}
		return nil, nil, err
	}

	conn, err := db.pool.Acquire(wctx)
	if err != nil {
		return fail(err)
	}
	key := leadKey(name)
	// When wctx ends, pgx abandons the query: it sends the server a cancel request, which
	// takes the session out of the lock's queue, and closes the connection.
	if _, err := conn.Exec(wctx, `SELECT pg_advisory_lock($1, $2)`, leadKeySpace, key); err != nil {
		destroy(conn)
		return fail(err)
	}
	if wctx.Err() != nil {
		// Got the lock, too late: ending the session frees it.
		destroy(conn)
		return fail(wctx.Err())
	}

	h := &hold{db: db, conn: conn, key: key, lost: make(chan struct{}), done: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		destroy(conn)
		return nil, nil, errClosed
	}
	db.holds[h] = struct{}{}
	db.mu.Unlock()
	go h.watch()
	return h.lost, func() { h.end(false) }, nil
}

// hold is a lock Lead holds.
type hold struct {
	db   *DB
	conn *pgxpool.Conn
	key  int32
	lost chan struct{}

	ctx    context.Context // ends when the hold ends
	cancel context.CancelFunc
	done   chan struct{} // closed when watch returns
	gone   bool          // watch destroyed the connection; read after done
	once   sync.Once
	lose   sync.Once // closes lost
}

func (h *hold) closeLost() { h.lose.Do(func() { close(h.lost) }) }

// watch pings the connection until the hold ends or the connection fails; a failed
// connection is destroyed, so that the session and its lock end for sure, and lost
// closes.
func (h *hold) watch() {
	defer close(h.done)
	t := time.NewTicker(leadCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(h.ctx, leadCheckTimeout)
		err := h.conn.Ping(ctx)
		cancel()
		if err != nil {
			destroy(h.conn)
			h.gone = true
			if h.ctx.Err() == nil { // not a ping cut short by the end of the hold
				h.closeLost()
			}
			return
		}
	}
}

// end ends the hold: it unlocks and gives the connection back (or ends the session when
// it cannot). lost reports that the holder did not ask for it (the store is closing), so
// the lost channel closes.
func (h *hold) end(lost bool) {
	h.once.Do(func() {
		h.cancel()
		<-h.done
		h.db.mu.Lock()
		delete(h.db.holds, h)
		h.db.mu.Unlock()
		if lost {
			h.closeLost()
		}
		if h.gone {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		var unlocked bool
		if err := h.conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1, $2)`, leadKeySpace, h.key).
			Scan(&unlocked); err != nil || !unlocked {
			destroy(h.conn)
			return
		}
		h.conn.Release()
	})
}

// destroy takes a connection out of the pool and closes it, which ends its session and
// every lock the session held.
func destroy(conn *pgxpool.Conn) { closeConn(conn.Hijack()) }
