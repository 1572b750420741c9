package redisdata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// snapshotIdle is how long Snapshot waits for the next byte from the master. Masters send
// a `\n` every second while they prepare the RDB, so only a dead link is this quiet.
const snapshotIdle = 60 * time.Second

// Snapshot streams a consistent RDB snapshot of the live server src to w and returns the
// number of bytes written.
//
// It asks for the snapshot the way a replica does (and `redis-cli --rdb`): AUTH, REPLCONF
// capa eof/psync2, REPLCONF rdb-only, PSYNC ? -1 (SYNC on servers without PSYNC). That way
// the server forks and serialises a point-in-time view without blocking its clients and
// without writing anything to its own disk or touching its `dir`, which BGSAVE would
// (and which may not be ours to read); and it works over the network, TLS and ACLs alike.
// The user needs the right to run PSYNC/SYNC and REPLCONF.
//
// The bytes written are exactly the RDB file. If the payload does not start like one, or
// the link breaks before the end, Snapshot fails; w may then hold a partial file, which
// the caller discards. Cancelling ctx aborts the transfer.
func Snapshot(ctx context.Context, src Endpoint, w io.Writer) (int64, error) {
	l, err := openLink(ctx, src, snapshotIdle)
	if err != nil {
		return 0, err
	}
	defer l.close()
	if _, err = l.handshake(true, "", 0); err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("snapshot of %s: %w", src.Addr, err))
	}
	cw := &rdbCheckWriter{w: w}
	n, err := l.readRDB(cw)
	if err == nil && n < int64(len(rdbMagic)) {
		err = fmt.Errorf("%w: payload of %d bytes", errProtocol, n)
	}
	if err != nil {
		return n, ctxErr(ctx, fmt.Errorf("snapshot of %s: %w", src.Addr, err))
	}
	return n, nil
}

// ctxErr prefers ctx's error to the closed-connection error that cancelling it causes.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

var rdbMagic = []byte("REDIS")

// rdbCheckWriter fails the copy when the first bytes are not the RDB signature, so that
// a master speaking another format is not saved as a backup.
type rdbCheckWriter struct {
	w    io.Writer
	seen int
}

func (c *rdbCheckWriter) Write(p []byte) (int, error) {
	if c.seen < len(rdbMagic) && len(p) > 0 {
		k := min(len(rdbMagic)-c.seen, len(p))
		if !bytes.Equal(p[:k], rdbMagic[c.seen:c.seen+k]) {
			return 0, errors.New("the payload is not an RDB file (no REDIS signature)")
		}
		c.seen += k
	}
	return c.w.Write(p)
}
