package redisdata

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// Shard is one primary of a Redis Cluster and the hash slots it serves.
type Shard struct {
	Endpoint Endpoint
	// Lo and Hi bound the shard's slots, both included.
	Lo, Hi int
}

// CopyKeysToCluster copies every key of src into the cluster whose primaries are shards,
// each key into the shard that serves its hash slot (the cluster itself computes the
// slots, CLUSTER KEYSLOT on the first shard, so that hash tags follow its rules). A
// cluster has one logical database: a src with keys in another one is refused before
// anything is written. Keys travel as in CopyKeys; Replace empties every shard first.
func CopyKeysToCluster(ctx context.Context, src Endpoint, shards []Shard, opts CopyOptions) (int, error) {
	if len(shards) == 0 {
		return 0, fmt.Errorf("no shards to copy into")
	}
	batch := opts.BatchSize
	if batch <= 0 {
		batch = 500
	}
	sc := client(src, 0, 1)
	defer sc.Close()
	if err := onlyDB0(ctx, sc, src); err != nil {
		return 0, err
	}
	dcs := make([]*redis.Client, len(shards))
	for i, s := range shards {
		dcs[i] = client(s.Endpoint, 0, 1)
		defer dcs[i].Close()
	}
	if opts.Replace {
		for i, dc := range dcs {
			if err := dc.FlushAll(ctx).Err(); err != nil {
				return 0, fmt.Errorf("FLUSHALL on %s: %w", shards[i].Endpoint.Addr, classify(err))
			}
		}
	}
	// One goroutine reads batches from src and sorts their keys by shard; one writer per
	// shard writes them, so that src and the shards work at once.
	g, gctx := errgroup.WithContext(ctx)
	queues := make([]chan []entry, len(shards))
	for i := range queues {
		queues[i] = make(chan []entry, 2)
	}
	g.Go(guarded(func() error {
		defer func() {
			for _, q := range queues {
				close(q)
			}
		}()
		return scanBatches(gctx, sc, src, batch, func(es []entry) error {
			keys := make([]string, len(es))
			for i, e := range es {
				keys[i] = e.key
			}
			groups, err := bySlot(gctx, dcs[0], shards, keys)
			if err != nil {
				return err
			}
			byKey := make(map[string]entry, len(es))
			for _, e := range es {
				byKey[e.key] = e
			}
			for i, group := range groups {
				if len(group) == 0 {
					continue
				}
				out := make([]entry, len(group))
				for j, k := range group {
					out[j] = byKey[k]
				}
				select {
				case queues[i] <- out:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}))
	counts := make([]int, len(shards))
	for i := range shards {
		g.Go(guarded(func() error {
			for es := range queues[i] {
				n, err := writeBatch(gctx, dcs[i], es)
				counts[i] += n
				if err != nil {
					return fmt.Errorf("shard %s: %w", shards[i].Endpoint.Addr, err)
				}
			}
			return nil
		}))
	}
	err := g.Wait()
	copied := 0
	for _, n := range counts {
		copied += n
	}
	return copied, err
}

// ShardUsage is how many bytes of memory src's keys would take in each of the shards
// (MEMORY USAGE of each key, grouped by the shard of its slot), so that a caller can refuse
// data one shard cannot hold before anything is written: hash tags can put most keys in
// one shard, whose memory limit is its share of the database's.
func ShardUsage(ctx context.Context, src Endpoint, shards []Shard) ([]int64, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("no shards")
	}
	sc := client(src, 0, 1)
	defer sc.Close()
	if err := onlyDB0(ctx, sc, src); err != nil {
		return nil, err
	}
	node := client(shards[0].Endpoint, 0, 1)
	defer node.Close()
	used := make([]int64, len(shards))
	var cursor uint64
	for {
		keys, next, err := sc.Scan(ctx, cursor, "", 500).Result()
		if err != nil {
			return nil, fmt.Errorf("SCAN on %s: %w", src.Addr, classify(err))
		}
		groups, err := bySlot(ctx, node, shards, keys)
		if err != nil {
			return nil, err
		}
		pipe := sc.Pipeline()
		sizes := make([][]*redis.IntCmd, len(groups))
		for i, g := range groups {
			for _, k := range g {
				sizes[i] = append(sizes[i], pipe.MemoryUsage(ctx, k))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("MEMORY USAGE on %s: %w", src.Addr, classify(err))
		}
		for i, cmds := range sizes {
			for _, c := range cmds {
				used[i] += c.Val() // 0 for a key gone since SCAN
			}
		}
		cursor = next
		if cursor == 0 {
			return used, nil
		}
	}
}

// onlyDB0 refuses a src with keys outside logical database 0, which a cluster lacks.
func onlyDB0(ctx context.Context, sc *redis.Client, src Endpoint) error {
	info, err := sc.Info(ctx, "keyspace").Result()
	if err != nil {
		return fmt.Errorf("INFO keyspace on %s: %w", src.Addr, classify(err))
	}
	for db, n := range keyspace(info) {
		if db != 0 && n > 0 {
			return fmt.Errorf("the data has %d keys in logical database %d: a cluster has database 0 only", n, db)
		}
	}
	return nil
}

// bySlot groups keys by the index of the shard that serves their slot.
func bySlot(ctx context.Context, node *redis.Client, shards []Shard, keys []string) ([][]string, error) {
	groups := make([][]string, len(shards))
	if len(keys) == 0 {
		return groups, nil
	}
	pipe := node.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.ClusterKeySlot(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("CLUSTER KEYSLOT: %w", classify(err))
	}
	for i, c := range cmds {
		slot := int(c.Val())
		j := slices.IndexFunc(shards, func(s Shard) bool { return s.Lo <= slot && slot <= s.Hi })
		if j < 0 {
			return nil, fmt.Errorf("no shard serves slot %d (key %.100q)", slot, keys[i])
		}
		groups[j] = append(groups[j], keys[i])
	}
	return groups, nil
}
