package browser

import (
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// What a key listing tells besides the names, as the tool's key list does: the number of
// keys of the database (total, DBSIZE), how many keys the SCANs examined (scanned), and
// per key its size (MEMORY USAGE) and length (STRLEN, HLEN, LLEN, SCARD, ZCARD, XLEN, or
// for a RedisJSON document the length of its root). Sizes and lengths travel in the same
// pipeline as the types and TTLs: one round trip per page per node.

// jsonType is the TYPE of a RedisJSON document.
const jsonType = "ReJSON-RL"

// lengthCommands are the length commands of the built-in types.
var lengthCommands = map[string]string{
	"string": "STRLEN",
	"hash":   "HLEN",
	"list":   "LLEN",
	"set":    "SCARD",
	"zset":   "ZCARD",
	"stream": "XLEN",
}

// keyStats are the queued commands that size one key.
type keyStats struct {
	size *redis.IntCmd
	// lengths by type: the key's type is not known when they are queued (unless the
	// listing is filtered by type), so every built-in type's command is queued and the
	// ones of other types answer WRONGTYPE.
	lengths map[string]*redis.IntCmd
}

// queueStats queues MEMORY USAGE and the length commands of name; typ is the type of
// every key of the listing when it is filtered by type, else "".
func queueStats(ctx context.Context, pipe redis.Pipeliner, name, typ string) keyStats {
	ks := keyStats{size: pipe.MemoryUsage(ctx, name), lengths: map[string]*redis.IntCmd{}}
	for t, command := range lengthCommands {
		if typ == "" || typ == t {
			ks.lengths[t] = redis.NewIntCmd(ctx, command, name)
			_ = pipe.Process(ctx, ks.lengths[t]) // a pipeline only queues
		}
	}
	return ks
}

// read returns the size and the length of a key of type typ, nil where the server did
// not tell them (MEMORY refused by an ACL, a module type).
func (ks keyStats) read(typ string) (size, length *int64) {
	if n, err := ks.size.Result(); err == nil {
		size = &n
	}
	if cmd := ks.lengths[typ]; cmd != nil {
		if n, err := cmd.Result(); err == nil {
			length = &n
		}
	}
	return size, length
}

// jsonKey is a RedisJSON document of a page: its full name and its index in the page.
type jsonKey struct {
	name string
	at   int
}

// jsonLengths sets the length of the RedisJSON documents of a page: that of the root
// object's keys, of the root array or string, in one more round trip, only for a page
// that holds such documents (their root's JSON type is not known beforehand). A
// document whose length cannot be read keeps none.
func jsonLengths(ctx context.Context, cl redis.Cmdable, keys []jsonKey, page []keyView) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := cl.Pipeline()
	cmds := make([][]*redis.IntCmd, len(keys))
	for i, k := range keys {
		for _, command := range []string{"JSON.OBJLEN", "JSON.ARRLEN", "JSON.STRLEN"} {
			cmd := redis.NewIntCmd(ctx, command, k.name, ".")
			_ = pipe.Process(ctx, cmd)
			cmds[i] = append(cmds[i], cmd)
		}
	}
	_, _ = pipe.Exec(ctx) // two of the three answer a type error
	for i, k := range keys {
		for _, cmd := range cmds[i] {
			if n, err := cmd.Result(); err == nil {
				page[k.at].Length = &n
				break
			}
		}
	}
	return nil
}

// primaries returns the addresses of the cluster's primaries that serve slots, in
// address order.
func (d *dialer) primaries(ctx context.Context, c *connection) ([]endpoint, error) {
	seed, at, err := d.connectSeed(ctx, c)
	if err != nil {
		return nil, err
	}
	nodes, err := clusterNodes(ctx, seed, at, c.UseTLS)
	seed.Close()
	if err != nil {
		return nil, err
	}
	var out []endpoint
	for _, n := range nodes {
		if n.slots {
			out = append(out, endpoint{n.Host, n.Port})
		}
	}
	return out, nil
}

// clusterDBSize sums DBSIZE over the primaries, asked at the same time.
func (d *dialer) clusterDBSize(ctx context.Context, c *connection, primaries []endpoint) (int64, error) {
	var (
		wg    sync.WaitGroup
		sizes = make([]int64, len(primaries))
		errs  = make([]error, len(primaries))
	)
	for i, e := range primaries {
		wg.Go(func() {
			cl := redis.NewClient(d.options(e, c.Password))
			defer cl.Close()
			n, err := cl.DBSize(ctx).Result()
			if err != nil {
				errs[i] = classify(err, "primary "+e.addr(), c.UseTLS)
				return
			}
			sizes[i] = n
		})
	}
	wg.Wait()
	if i := slices.IndexFunc(errs, func(err error) bool { return err != nil }); i >= 0 {
		return 0, errs[i]
	}
	var total int64
	for _, n := range sizes {
		total += n
	}
	return total, nil
}
