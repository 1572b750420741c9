package redisdata_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/require"

	"clouddb/redisdata"
)

// server is a redis-server process a test started on a free loopback port.
type server struct {
	t        testing.TB
	port     int
	addr     string
	dir      string
	password string // of the default user, "" for none
	args     []string
	cmd      *exec.Cmd
	done     chan struct{}
}

// redisBin returns the redis-server to test with, failing the test with what to install
// when there is none.
func redisBin(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "redis-server is needed for these tests: install it (Debian/Ubuntu: apt-get install redis-server)")
	return bin
}

// startServer starts a redis-server with no persistence and an immediate diskless sync,
// killed when the test ends. password, when not empty, is the default user's password.
func startServer(t testing.TB, password string, extra ...string) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &server{t: t, port: port, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: t.TempDir(), password: password}
	s.args = []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--repl-diskless-sync-delay", "0", "--logfile", filepath.Join(s.dir, "redis.log")}
	if password != "" {
		s.args = append(s.args, "--requirepass", password)
	}
	s.args = append(s.args, extra...)
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(redisBin(s.t), s.args...)
	s.cmd.SysProcAttr = serverProcAttr()
	require.NoError(s.t, s.cmd.Start())
	s.done = make(chan struct{})
	done, cmd := s.done, s.cmd
	go func() {
		_ = cmd.Wait() // the exit status of a test server that was killed is of no interest
		close(done)
	}()
	require.Eventually(s.t, func() bool {
		conn, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "redis-server on %s did not start; log: %s", s.addr, s.log())
	c := s.client(0)
	defer c.Close()
	require.Eventually(s.t, func() bool {
		return c.Ping(context.Background()).Err() == nil
	}, 10*time.Second, 5*time.Millisecond, "redis-server on %s did not answer; log: %s", s.addr, s.log())
}

func (s *server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

// kill stops the server at once (SIGKILL) and waits until it is gone.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill() // fails only if it is gone already; s.done tells either way
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("redis-server pid %d did not exit", s.cmd.Process.Pid)
	}
	s.cmd = nil
}

func (s *server) endpoint() redisdata.Endpoint {
	return redisdata.Endpoint{Addr: s.addr, Password: s.password}
}

func (s *server) client(db int) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: s.addr, Password: s.password, DB: db, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1, DialerRetries: 1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second,
	})
	return c
}

// do runs one command on db and fails the test on error.
func (s *server) do(db int, args ...any) any {
	s.t.Helper()
	c := s.client(db)
	defer c.Close()
	v, err := c.Do(context.Background(), args...).Result()
	require.NoError(s.t, err, "%v", args)
	return v
}

// within is how soon a write on a source must show on its replica.
const within = time.Second

// eventuallyGet waits up to d for db of s to answer GET key = want.
func eventuallyGet(t *testing.T, s *server, db int, key, want string, d time.Duration) {
	t.Helper()
	eventuallyOn(t, s, db, d, func(ctx context.Context, c *redis.Client) bool {
		v, err := c.Get(ctx, key).Result()
		return err == nil && v == want
	}, "GET %s in db %d of %s is not %q", key, db, s.addr, want)
}

// eventuallyOn waits up to d for cond on db of s.
func eventuallyOn(t *testing.T, s *server, db int, d time.Duration, cond func(context.Context, *redis.Client) bool, msg ...any) {
	t.Helper()
	c := s.client(db)
	defer c.Close()
	require.Eventually(t, func() bool { return cond(context.Background(), c) }, d, 5*time.Millisecond, msg...)
}

func randBytes(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

// fill writes a dataset of every type into s: binary and integer strings, small and
// large hashes, lists, sets and sorted sets (so both compact and hashtable/skiplist
// encodings), streams with consumer groups and pending entries, keys with TTLs, several
// logical databases and a few large values. scale multiplies the number of keys. It
// returns the number of keys written.
func fill(t *testing.T, s *server, prefix string, scale int) int {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, uint64(len(prefix))))
	total := 0
	for _, db := range []int{0, 1, 3} {
		c := s.client(db)
		p := c.Pipeline()
		k := func(f string, a ...any) string { return prefix + fmt.Sprintf(f, a...) }
		n := 200 * scale
		if db != 0 {
			n = 30 * scale
		}
		for i := range n {
			p.Set(ctx, k("s:%d", i), randBytes(r, 1+r.IntN(64)), 0)
			p.Set(ctx, k("bin:%d", i), "\x00\r\n\xff"+randBytes(r, 8), 0)
			p.Set(ctx, k("int:%d", i), r.Int64(), 0)
			if i%5 == 0 {
				p.Set(ctx, k("ttl:%d", i), "v", time.Duration(30+r.IntN(300))*time.Second)
			}
		}
		total += 3*n + (n+4)/5
		for i := range 10 * scale {
			p.HSet(ctx, k("h:%d", i), "a", "1", "b", randBytes(r, 10), "c", "3")
			p.RPush(ctx, k("l:%d", i), "x", "y", randBytes(r, 5), "z")
			p.SAdd(ctx, k("si:%d", i), 1, 2, 3, 100+i)
			p.SAdd(ctx, k("ss:%d", i), "a", "b", randBytes(r, 6))
			p.ZAdd(ctx, k("z:%d", i), redis.Z{Score: 1.5, Member: "a"}, redis.Z{Score: -2, Member: randBytes(r, 4)})
			p.PExpire(ctx, k("h:%d", i), time.Duration(60+i)*time.Second)
		}
		total += 5 * 10 * scale
		for i := range 1000 {
			p.HSet(ctx, k("hbig"), fmt.Sprintf("f%d", i), randBytes(r, 20))
			p.RPush(ctx, k("lbig"), randBytes(r, 30))
			p.SAdd(ctx, k("sbig"), fmt.Sprintf("m%d-%s", i, randBytes(r, 4)))
			p.ZAdd(ctx, k("zbig"), redis.Z{Score: r.Float64() * 1000, Member: fmt.Sprintf("m%d", i)})
		}
		total += 4
		for i := range 50 {
			p.XAdd(ctx, &redis.XAddArgs{Stream: k("x"), Values: []any{"i", i, "v", randBytes(r, 8)}})
		}
		p.XGroupCreate(ctx, k("x"), "g1", "0")
		p.XGroupCreate(ctx, k("x"), "g2", "$")
		p.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g1", Consumer: "c1", Streams: []string{k("x"), ">"}, Count: 10})
		total++
		if db == 0 {
			p.Set(ctx, k("large:1"), randBytes(r, 1<<20), 0)
			p.Set(ctx, k("large:2"), randBytes(r, 300<<10), time.Hour)
			for range 200 {
				p.RPush(ctx, k("large:list"), randBytes(r, 1000))
			}
			total += 3
		}
		_, err := p.Exec(ctx)
		require.NoError(t, err)
		c.Close()
	}
	return total
}

// keysOf returns every key of db.
func keysOf(t *testing.T, c *redis.Client) []string {
	t.Helper()
	var out []string
	iter := c.Scan(context.Background(), 0, "", 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	require.NoError(t, iter.Err())
	slices.Sort(out)
	return slices.Compact(out)
}

// requireSameData checks that every key of every logical database of want is in got
// with the same DUMP payload and a TTL within tolerance. DUMP serializes hashtable sets
// and hashes in the table's iteration order, which a reload may change; for those keys
// (and only for those) it compares the contents instead.
func requireSameData(t *testing.T, want, got *server, dbs []int) {
	t.Helper()
	ctx := context.Background()
	for _, db := range dbs {
		wc, gc := want.client(db), got.client(db)
		keys := keysOf(t, wc)
		require.Equal(t, keys, keysOf(t, gc), "keys of db %d", db)
		for _, k := range keys {
			wd, err := wc.Dump(ctx, k).Result()
			require.NoError(t, err)
			gd, err := gc.Dump(ctx, k).Result()
			require.NoError(t, err)
			if wd != gd {
				enc, encErr := wc.ObjectEncoding(ctx, k).Result()
				require.NoError(t, encErr)
				require.Equal(t, "hashtable", enc, "DUMP of %q in db %d differs", k, db)
				require.Equal(t, canonical(t, wc, k), canonical(t, gc, k), "contents of %q in db %d", k, db)
			}
			wt, err := wc.PTTL(ctx, k).Result()
			require.NoError(t, err)
			gt, err := gc.PTTL(ctx, k).Result()
			require.NoError(t, err)
			if wt < 0 {
				require.Equal(t, wt, gt, "TTL of %q in db %d", k, db)
			} else {
				require.InDelta(t, wt.Milliseconds(), gt.Milliseconds(), 3000, "TTL of %q in db %d", k, db)
			}
		}
		wc.Close()
		gc.Close()
	}
}

// canonical returns the contents of a hash or set in a fixed order.
func canonical(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	ctx := context.Background()
	typ, err := c.Type(ctx, key).Result()
	require.NoError(t, err)
	var items []string
	switch typ {
	case "hash":
		m, hErr := c.HGetAll(ctx, key).Result()
		require.NoError(t, hErr)
		for f, v := range m {
			items = append(items, f+"\x00"+v)
		}
	case "set":
		items, err = c.SMembers(ctx, key).Result()
		require.NoError(t, err)
	default:
		t.Fatalf("no canonical form for type %s", typ)
	}
	slices.Sort(items)
	return typ + ":" + strings.Join(items, "\x01")
}

func rdbFile(t *testing.T, src *server) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	_, err := redisdata.Snapshot(context.Background(), src.endpoint(), &buf)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dump.rdb")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	return path, buf.Bytes()
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
