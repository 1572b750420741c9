package redisdata_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/redisdata"
)

// events records a Replicator's events.
type events struct {
	mu  sync.Mutex
	all []redisdata.Event
}

func (e *events) add(ev redisdata.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

// count returns how many events match.
func (e *events) count(match func(redisdata.Event) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if match(ev) {
			n++
		}
	}
	return n
}

// target starts a server that only the "replicator" ACL user may write, as callers are
// to set it up.
func target(t *testing.T) (*server, redisdata.Endpoint) {
	s := startServer(t, "targetpw", "--user", "replicator", "on", ">replpw", "~*", "&*", "+@all")
	return s, redisdata.Endpoint{Addr: s.addr, Username: "replicator", Password: "replpw"}
}

func startReplicator(t *testing.T, tgt redisdata.Endpoint, srcs []redisdata.Endpoint, ev *events) *redisdata.Replicator {
	t.Helper()
	r := redisdata.Start(context.Background(), tgt, srcs, redisdata.ReplicatorOptions{
		Load:       redisdata.LoadConfig{TempDir: t.TempDir()},
		OnEvent:    ev.add,
		MinBackoff: 50 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
	})
	t.Cleanup(r.Stop)
	return r
}

func requireStreaming(t *testing.T, r *redisdata.Replicator) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range r.Status() {
			if s.State != redisdata.StateStreaming {
				return false
			}
		}
		return true
	}, 15*time.Second, 10*time.Millisecond, "sources not streaming: %+v", r.Status())
}

func stopPromptly(t *testing.T, r *redisdata.Replicator) {
	t.Helper()
	start := time.Now()
	r.Stop()
	require.Less(t, time.Since(start), 2*time.Second, "Stop took too long")
}

// One source: a full copy, then every kind of write shows on the target within a
// second; a broken link continues the stream.
func TestReplicatorOneSource(t *testing.T) {
	src := startServer(t, "srcpw")
	fill(t, src, "", 1)
	tgt, tgtEP := target(t)
	ev := &events{}
	r := startReplicator(t, tgtEP, []redisdata.Endpoint{src.endpoint()}, ev)
	requireStreaming(t, r)
	src.do(0, "set", "w:set", "1") // right away: the stream starts as soon as the copy is done
	eventuallyGet(t, tgt, 0, "w:set", "1", within)
	requireSameData(t, src, tgt, allDBs)

	st := r.Status()
	require.Len(t, st, 1)
	require.Equal(t, src.addr, st[0].Endpoint)
	require.Empty(t, st[0].LastError)
	require.False(t, st[0].LastSync.IsZero())

	src.do(0, "hset", "w:hash", "f", "v")
	eventuallyOn(t, tgt, 0, within, func(ctx context.Context, c *redis.Client) bool { return c.HGet(ctx, "w:hash", "f").Val() == "v" })

	src.do(0, "del", "s:1")
	eventuallyOn(t, tgt, 0, within, func(ctx context.Context, c *redis.Client) bool { return c.Exists(ctx, "s:1").Val() == 0 })

	src.do(0, "expire", "w:set", "100")
	eventuallyOn(t, tgt, 0, within, func(ctx context.Context, c *redis.Client) bool {
		ttl := c.TTL(ctx, "w:set").Val()
		return ttl > 90*time.Second && ttl <= 100*time.Second
	})

	c := src.client(0)
	_, err := c.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		p.Set(context.Background(), "w:tx1", "a", 0)
		p.Incr(context.Background(), "w:tx2")
		return nil
	})
	require.NoError(t, err)
	c.Close()
	eventuallyGet(t, tgt, 0, "w:tx2", "1", within)
	require.Equal(t, "a", tgt.do(0, "get", "w:tx1"))

	src.do(3, "set", "w:db3", "three")
	eventuallyGet(t, tgt, 3, "w:db3", "three", within)
	src.do(0, "eval", "redis.call('set', KEYS[1], ARGV[1]) return 1", 1, "w:lua", "x")
	eventuallyGet(t, tgt, 0, "w:lua", "x", within)
	src.do(1, "xadd", "x", "*", "k", "v")
	src.do(1, "set", "w:db1", "one")
	eventuallyGet(t, tgt, 1, "w:db1", "one", within)

	// The applied offset catches up with the source's.
	require.Eventually(t, func() bool {
		info := src.do(0, "info", "replication").(string)
		return strings.Contains(info, "master_repl_offset:"+strconv.FormatInt(r.Status()[0].Offset, 10)+"\r")
	}, 3*time.Second, 10*time.Millisecond)
	requireSameData(t, src, tgt, allDBs)

	// A broken link is reported, and the stream continues where it broke (PSYNC
	// continuation: no second full sync).
	fulls := ev.count(func(e redisdata.Event) bool { return strings.Contains(e.Message, "full sync of") })
	src.do(0, "client", "kill", "type", "replica")
	require.Eventually(t, func() bool {
		return ev.count(func(e redisdata.Event) bool { return strings.Contains(e.Message, "continued the stream") }) > 0
	}, 5*time.Second, 10*time.Millisecond)
	require.Positive(t, ev.count(func(e redisdata.Event) bool { return e.State == redisdata.StateError && e.Err != nil }))
	src.do(3, "set", "w:after-kill", "yes")
	eventuallyGet(t, tgt, 3, "w:after-kill", "yes", within)
	require.Equal(t, fulls, ev.count(func(e redisdata.Event) bool { return strings.Contains(e.Message, "full sync of") }))

	for _, e := range ev.all {
		require.NotContains(t, e.Message, "srcpw")
		if e.Err != nil {
			require.NotContains(t, e.Err.Error(), "srcpw")
		}
	}
	stopPromptly(t, r)
	src.do(0, "set", "w:after-stop", "1")
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, int64(0), tgt.do(0, "exists", "w:after-stop"))
}

// Two sources merge into one target; removing one (Stop, Start with the other) stops its
// changes and keeps what it had written.
func TestReplicatorTwoSources(t *testing.T) {
	a := startServer(t, "apw")
	b := startServer(t, "bpw")
	fill(t, a, "a:", 1)
	fill(t, b, "b:", 1)
	tgt, tgtEP := target(t)
	tgt.do(0, "set", "own", "kept")
	ev := &events{}
	r := startReplicator(t, tgtEP, []redisdata.Endpoint{a.endpoint(), b.endpoint()}, ev)
	requireStreaming(t, r)
	require.Equal(t, "kept", tgt.do(0, "get", "own"), "a full sync does not flush the target")

	a.do(0, "set", "a:new", "1")
	b.do(0, "set", "b:new", "2")
	b.do(3, "hset", "b:h", "f", "v")
	eventuallyGet(t, tgt, 0, "a:new", "1", within)
	eventuallyGet(t, tgt, 0, "b:new", "2", within)
	eventuallyOn(t, tgt, 3, within, func(ctx context.Context, c *redis.Client) bool { return c.HGet(ctx, "b:h", "f").Val() == "v" })
	for _, db := range allDBs {
		tc := tgt.client(db)
		got := keysOf(t, tc)
		tc.Close()
		for _, src := range []*server{a, b} {
			sc := src.client(db)
			require.Subset(t, got, keysOf(t, sc), "db %d holds every key of %s", db, src.addr)
			sc.Close()
		}
	}

	stopPromptly(t, r)
	r = startReplicator(t, tgtEP, []redisdata.Endpoint{a.endpoint()}, ev)
	requireStreaming(t, r)
	require.Len(t, r.Status(), 1)
	b.do(0, "set", "b:removed", "x")
	a.do(0, "set", "a:still", "y")
	eventuallyGet(t, tgt, 0, "a:still", "y", within)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, int64(0), tgt.do(0, "exists", "b:removed"), "a removed source's writes no longer arrive")
	require.Equal(t, "2", tgt.do(0, "get", "b:new"), "what it wrote stays")
}

// A source that goes away is reported and retried, and replication resumes when it is
// back.
func TestReplicatorSourceGoesAway(t *testing.T) {
	src := startServer(t, "srcpw")
	src.do(0, "set", "before", "1")
	tgt, tgtEP := target(t)
	ev := &events{}
	r := startReplicator(t, tgtEP, []redisdata.Endpoint{src.endpoint()}, ev)
	requireStreaming(t, r)
	eventuallyGet(t, tgt, 0, "before", "1", within)

	src.kill()
	require.Eventually(t, func() bool {
		st := r.Status()[0]
		return st.State == redisdata.StateError && st.LastError != ""
	}, 2*time.Second, 5*time.Millisecond)
	failures := func() int {
		return ev.count(func(e redisdata.Event) bool { return e.State == redisdata.StateError && e.Err != nil })
	}
	require.Eventually(t, func() bool { return failures() >= 3 }, 3*time.Second, 10*time.Millisecond, "retried")
	require.Contains(t, r.Status()[0].LastError, "connect")

	src.start() // same port, empty dataset
	requireStreaming(t, r)
	require.Empty(t, r.Status()[0].LastError)
	src.do(0, "set", "after", "2")
	eventuallyGet(t, tgt, 0, "after", "2", within)
	stopPromptly(t, r)
}

// A target that refuses the credentials is an error in Status, not a silent stop.
func TestReplicatorBadTarget(t *testing.T) {
	src := startServer(t, "srcpw")
	tgt, _ := target(t)
	ev := &events{}
	r := startReplicator(t, redisdata.Endpoint{Addr: tgt.addr, Username: "replicator", Password: "wrong"},
		[]redisdata.Endpoint{src.endpoint()}, ev)
	require.Eventually(t, func() bool {
		st := r.Status()[0]
		return st.State == redisdata.StateError && strings.Contains(st.LastError, "credentials refused")
	}, 3*time.Second, 10*time.Millisecond)
	stopPromptly(t, r)
}

// A target that restarts empty gets a full copy again, without waiting for a write.
func TestReplicatorTargetRestarts(t *testing.T) {
	src := startServer(t, "srcpw")
	src.do(2, "set", "before", "1")
	tgt, tgtEP := target(t)
	ev := &events{}
	r := startReplicator(t, tgtEP, []redisdata.Endpoint{src.endpoint()}, ev)
	requireStreaming(t, r)
	eventuallyGet(t, tgt, 2, "before", "1", within)

	tgt.kill()
	tgt.start()
	eventuallyGet(t, tgt, 2, "before", "1", 5*time.Second)
	requireStreaming(t, r)
	src.do(2, "set", "after", "2")
	eventuallyGet(t, tgt, 2, "after", "2", within)
	stopPromptly(t, r)
}
