package redisdata

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"clouddb"
)

// CopyOptions tunes CopyKeys.
type CopyOptions struct {
	// Replace empties dst (FLUSHALL, every logical database) before the copy, so that dst
	// ends up holding exactly src's keys. Callers decide whether that is allowed; without
	// it, src's keys overwrite same-named keys of dst and dst's other keys stay.
	Replace bool
	// BatchSize is the number of keys per round trip (SCAN COUNT, then one pipeline of
	// DUMP+PTTL on src and one of RESTORE on dst). Zero means 500. Memory use is about
	// BatchSize times the serialized size of the largest keys.
	BatchSize int
}

// CopyKeys copies every key of every logical database of src into the same database of
// dst and returns the number of keys written.
//
// Each key goes as DUMP on src and RESTORE … REPLACE on dst, which carries any type
// (including streams with their consumer groups, and module types both sides know)
// byte for byte in Redis's own serialization, with its remaining time to live from PTTL.
// A key that disappears or expires between SCAN and DUMP is skipped. SCAN walks a live
// src without blocking it, so a src that is written during the copy gives a fuzzy copy (a
// key present for the whole copy is copied at least once; for a point-in-time copy, copy
// from a LoadRDB server of a Snapshot instead). dst must run the same or a later Redis
// version than src (RESTORE refuses newer payload versions), and have as many databases.
func CopyKeys(ctx context.Context, src, dst Endpoint, opts CopyOptions) (int, error) {
	batch := opts.BatchSize
	if batch <= 0 {
		batch = 500
	}
	sc := client(src, 0, 1)
	defer sc.Close()
	info, err := sc.Info(ctx, "keyspace").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO keyspace on %s: %w", src.Addr, classify(err))
	}
	if opts.Replace {
		dc := client(dst, 0, 1)
		err := dc.FlushAll(ctx).Err()
		dc.Close()
		if err != nil {
			return 0, fmt.Errorf("FLUSHALL on %s: %w", dst.Addr, classify(err))
		}
	}
	counts := keyspace(info)
	dbs := make([]int, 0, len(counts))
	for db := range counts {
		dbs = append(dbs, db)
	}
	slices.Sort(dbs)
	total := 0
	for _, db := range dbs {
		n, err := copyDB(ctx, src, dst, db, batch)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// copyDB copies one logical database: one goroutine SCANs src and reads each batch
// (DUMP, PTTL), another writes the batches before it (RESTORE), so that src and dst work
// at once.
func copyDB(ctx context.Context, src, dst Endpoint, db, batch int) (int, error) {
	sc := client(src, db, 1)
	defer sc.Close()
	dc := client(dst, db, 1)
	defer dc.Close()
	g, gctx := errgroup.WithContext(ctx)
	batches := make(chan []entry, 2)
	g.Go(guarded(func() error {
		defer close(batches)
		return scanBatches(gctx, sc, src, batch, func(es []entry) error {
			select {
			case batches <- es:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	}))
	copied := 0
	g.Go(guarded(func() error {
		for es := range batches {
			n, err := writeBatch(gctx, dc, es)
			copied += n
			if err != nil {
				return err
			}
		}
		return nil
	}))
	err := g.Wait()
	if err != nil {
		err = fmt.Errorf("db %d: %w", db, err)
	}
	return copied, err
}

// guarded makes a panic in f (a bug met on one tenant's data) f's error, as it would be
// in the caller's goroutine, where the task's recovery catches it, rather than the end of
// the process.
var guarded = clouddb.Guard

// entry is one key as src serializes it.
type entry struct {
	key, payload string
	ttl          int64 // for RESTORE: 0 is none
}

// scanBatches SCANs src (its client sc) in batches of about batch keys and hands each
// batch's entries, read with readBatch, to send, until the scan ends or one fails.
func scanBatches(ctx context.Context, sc *redis.Client, src Endpoint, batch int, send func([]entry) error) error {
	var cursor uint64
	for {
		keys, next, err := sc.Scan(ctx, cursor, "", int64(batch)).Result()
		if err != nil {
			return fmt.Errorf("SCAN on %s: %w", src.Addr, classify(err))
		}
		es, err := readBatch(ctx, sc, keys)
		if err != nil {
			return err
		}
		if len(es) > 0 {
			if err := send(es); err != nil {
				return err
			}
		}
		cursor = next
		if cursor == 0 {
			return nil
		}
	}
}

// readBatch reads keys in one round trip, DUMP and PTTL of each in a pipeline. A key gone
// or expiring since SCAN is left out.
func readBatch(ctx context.Context, sc *redis.Client, keys []string) ([]entry, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	type read struct{ dump, ttl *redis.Cmd }
	reads := make([]read, len(keys))
	pipe := sc.Pipeline()
	for i, k := range keys {
		reads[i] = read{pipe.Do(ctx, "dump", k), pipe.Do(ctx, "pttl", k)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("DUMP: %w", classify(err))
	}
	es := make([]entry, 0, len(keys))
	for i, r := range reads {
		payload, err := r.dump.Text()
		if errors.Is(err, redis.Nil) {
			continue // gone since SCAN
		}
		if err != nil {
			return nil, fmt.Errorf("DUMP: %w", err)
		}
		ttl, err := r.ttl.Int64()
		if err != nil {
			return nil, fmt.Errorf("PTTL: %w", err)
		}
		switch {
		case ttl == -2, ttl == 0:
			continue // expired since DUMP, or expiring this millisecond
		case ttl < 0:
			ttl = 0 // no expiry (RESTORE's 0 means none, so a 0 PTTL must not get here)
		}
		es = append(es, entry{key: keys[i], payload: payload, ttl: ttl})
	}
	return es, nil
}

// writeBatch writes entries to dst in one round trip, RESTORE … REPLACE of each in a
// pipeline, and returns how many were written.
func writeBatch(ctx context.Context, dc *redis.Client, es []entry) (int, error) {
	if len(es) == 0 {
		return 0, nil
	}
	wpipe := dc.Pipeline()
	restores := make([]*redis.Cmd, len(es))
	for i, e := range es {
		restores[i] = wpipe.Do(ctx, "restore", e.key, e.ttl, e.payload, "replace")
	}
	_, err := wpipe.Exec(ctx)
	if err == nil {
		return len(es), nil
	}
	for i, c := range restores {
		if c.Err() != nil {
			return i, fmt.Errorf("RESTORE %.100q: %w", es[i].key, classify(c.Err()))
		}
	}
	return 0, fmt.Errorf("RESTORE: %w", classify(err))
}
