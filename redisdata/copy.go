package redisdata

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
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

// copyDB copies one logical database, one SCAN batch at a time.
func copyDB(ctx context.Context, src, dst Endpoint, db, batch int) (int, error) {
	sc := client(src, db, 1)
	defer sc.Close()
	dc := client(dst, db, 1)
	defer dc.Close()
	copied := 0
	var cursor uint64
	for {
		keys, next, err := sc.Scan(ctx, cursor, "", int64(batch)).Result()
		if err != nil {
			return copied, fmt.Errorf("SCAN db %d on %s: %w", db, src.Addr, classify(err))
		}
		n, err := copyBatch(ctx, sc, dc, keys)
		copied += n
		if err != nil {
			return copied, fmt.Errorf("db %d: %w", db, err)
		}
		cursor = next
		if cursor == 0 {
			return copied, nil
		}
	}
}

// copyBatch copies keys with two round trips: DUMP and PTTL of each key on src in one
// pipeline, then RESTORE of each on dst in another.
func copyBatch(ctx context.Context, sc, dc *redis.Client, keys []string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	type read struct{ dump, ttl *redis.Cmd }
	reads := make([]read, len(keys))
	pipe := sc.Pipeline()
	for i, k := range keys {
		reads[i] = read{pipe.Do(ctx, "dump", k), pipe.Do(ctx, "pttl", k)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("DUMP: %w", classify(err))
	}
	wpipe := dc.Pipeline()
	var restores []*redis.Cmd
	var names []string
	for i, r := range reads {
		payload, err := r.dump.Text()
		if errors.Is(err, redis.Nil) {
			continue // gone since SCAN
		}
		if err != nil {
			return 0, fmt.Errorf("DUMP: %w", err)
		}
		ttl, err := r.ttl.Int64()
		if err != nil {
			return 0, fmt.Errorf("PTTL: %w", err)
		}
		switch {
		case ttl == -2, ttl == 0:
			continue // expired since DUMP, or expiring this millisecond
		case ttl < 0:
			ttl = 0 // no expiry (RESTORE's 0 means none, so a 0 PTTL must not get here)
		}
		restores = append(restores, wpipe.Do(ctx, "restore", keys[i], ttl, payload, "replace"))
		names = append(names, keys[i])
	}
	if len(restores) == 0 {
		return 0, nil
	}
	_, err := wpipe.Exec(ctx)
	if err == nil {
		return len(restores), nil
	}
	for i, c := range restores {
		if c.Err() != nil {
			return i, fmt.Errorf("RESTORE %.100q: %w", names[i], classify(c.Err()))
		}
	}
	return 0, fmt.Errorf("RESTORE: %w", classify(err))
}
