package local_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
)

// snapshotOf writes a snapshot of the database's data to a new file and returns its path.
func (b *testBundle) snapshotOf(t *testing.T, in clouddb.Instance) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("db-%d.rdb", in.DatabaseID))
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = b.driver.Snapshot(ctxT(t), in, 0, f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return path
}

// sourceFile makes a database, writes n keys "<prefix><i>" = i and extra into it, and
// returns a snapshot of it.
func (b *testBundle) sourceFile(t *testing.T, id int, prefix string, n int, extra map[string]string) string {
	t.Helper()
	in := b.instance(t, id, "none")
	ctx := ctxT(t)
	require.NoError(t, b.driver.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	p := c.Pipeline()
	for i := range n {
		p.Set(ctx, prefix+strconv.Itoa(i), i, 0)
	}
	for k, v := range extra {
		p.Set(ctx, k, v, 0)
	}
	_, err := p.Exec(ctx)
	require.NoError(t, err)
	return b.snapshotOf(t, in)
}

// dbServers counts the live processes working in the database directory dir or in one
// of its node directories.
func dbServers(t *testing.T, dir string) int {
	t.Helper()
	n := serversIn(t, dir)
	nodes, err := filepath.Glob(filepath.Join(dir, "node*"))
	require.NoError(t, err)
	for _, d := range nodes {
		n += serversIn(t, d)
	}
	return n
}

// TestLoad_PartsTogether: the parts of a multi-part import load as one file into a new
// server that takes over (the primary's pid changes); a key in two parts, which one file
// cannot hold, is loaded part by part, the later part's value winning; a corrupt part
// fails the import and leaves the database, and its server, as they were.
func TestLoad_PartsTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	a := b.sourceFile(t, 1, "a", 300, map[string]string{"both": "from a"})
	bb := b.sourceFile(t, 2, "b", 200, map[string]string{"both": "from b"})
	plain := b.sourceFile(t, 3, "c", 100, nil)
	dst := b.instance(t, 4, "none")
	require.NoError(t, b.driver.Ensure(ctx, dst))
	c := client(t, dst.Port, dst.Password)
	require.NoError(t, c.Set(ctx, "old", "x", 0).Err())

	before := pid(t, b.driver, 4)
	require.NoError(t, b.driver.Load(ctx, dst, []string{a, plain}))
	require.NotEqual(t, before, pid(t, b.driver, 4), "the merged parts are loaded by a new server")
	require.Equal(t, int64(401), c.DBSize(ctx).Val())
	requireKeys(t, c, "a", 300)
	requireKeys(t, c, "c", 100)
	require.Equal(t, "from a", c.Get(ctx, "both").Val())
	requireRunning(t, b.driver, dst, true)

	require.NoError(t, b.driver.Load(ctx, dst, []string{a, bb}))
	require.Equal(t, int64(501), c.DBSize(ctx).Val())
	requireKeys(t, c, "b", 200)
	require.Equal(t, "from b", c.Get(ctx, "both").Val(), "a later part overwrites an earlier one's key")

	data, err := os.ReadFile(plain)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff // the checksum no longer matches
	bad := filepath.Join(t.TempDir(), "bad.rdb")
	require.NoError(t, os.WriteFile(bad, data, 0o600))
	before = pid(t, b.driver, 4)
	err = b.driver.Load(ctx, dst, []string{a, bad})
	require.ErrorIs(t, err, clouddb.ErrDataCorrupt)
	require.Equal(t, before, pid(t, b.driver, 4), "a refused import leaves the server alone")
	require.Equal(t, int64(501), c.DBSize(ctx).Val())
	require.Equal(t, "from b", c.Get(ctx, "both").Val())
	require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, "4")), "the server that loaded the file is gone")
	requireRunning(t, b.driver, dst, true)
}

// TestLoad_MalformedValueRefused: a file whose checksum is right but one of whose values
// is malformed inside (a listpack entry that claims more bytes than it has) is refused:
// the server that loads an import checks every value in depth, as it does the payloads
// of RESTORE. The database keeps its data and its server.
func TestLoad_MalformedValueRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	sc := client(t, src.Port, src.Password)
	require.NoError(t, sc.HSet(ctx, "h", "fieldA", "vX").Err())
	require.Equal(t, "listpack", sc.ObjectEncoding(ctx, "h").Val())
	file := b.snapshotOf(t, src)

	data, err := os.ReadFile(file)
	require.NoError(t, err)
	i := bytes.Index(data, []byte("fieldA"))
	require.Positive(t, i, "the listpack is stored uncompressed")
	require.Equal(t, byte(0x80|6), data[i-1], "a 6-byte string entry")
	data[i-1] = 0x80 | 63
	binary.LittleEndian.PutUint64(data[len(data)-8:], redisCRC64(data[:len(data)-8]))
	bad := filepath.Join(t.TempDir(), "malformed.rdb")
	require.NoError(t, os.WriteFile(bad, data, 0o600))

	dst := b.instance(t, 2, "none")
	require.NoError(t, b.driver.Ensure(ctx, dst))
	c := client(t, dst.Port, dst.Password)
	require.NoError(t, c.Set(ctx, "keep", "me", 0).Err())
	before := pid(t, b.driver, 2)
	err = b.driver.Load(ctx, dst, []string{bad})
	require.ErrorIs(t, err, clouddb.ErrDataCorrupt)
	require.Equal(t, before, pid(t, b.driver, 2))
	require.Equal(t, "me", c.Get(ctx, "keep").Val())
	require.Equal(t, int64(1), c.DBSize(ctx).Val())

	require.NoError(t, b.driver.Load(ctx, dst, []string{file}), "the same file unharmed loads")
	require.Equal(t, "vX", c.HGet(ctx, "h", "fieldA").Val())
	require.Equal(t, "clients", admin(t, filepath.Join(b.dir, "2", "node1"), dst.Port).ConfigGet(ctx, "sanitize-dump-payload").Val()["sanitize-dump-payload"],
		"after the import, the server checks the clients' payloads only, as every database's does")
}

// TestLoad_Persistence: what an import loaded survives a stop and a start with AOF and
// snapshot persistence; without persistence a restart starts empty, as it does after
// any write.
func TestLoad_Persistence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	file := b.sourceFile(t, 1, "k", 500, nil)
	for i, tc := range []struct {
		persistence string
		kept        bool
	}{
		{"aof-every-1-second", true},
		{"snapshot-every-1-hour", true},
		{"none", false},
	} {
		t.Run(tc.persistence, func(t *testing.T) {
			ctx := ctxT(t)
			id := 10 + i
			in := b.instance(t, id, tc.persistence)
			require.NoError(t, b.driver.Ensure(ctx, in))
			require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "old", "x", 0).Err())
			require.NoError(t, b.driver.Load(ctx, in, []string{file}))
			c := client(t, in.Port, in.Password)
			require.Equal(t, int64(500), c.DBSize(ctx).Val())
			requireRunning(t, b.driver, in, true)

			require.NoError(t, b.driver.Stop(ctx, id))
			require.NoError(t, b.driver.Ensure(ctx, in))
			c = client(t, in.Port, in.Password)
			if tc.kept {
				require.Equal(t, int64(500), c.DBSize(ctx).Val())
				requireKeys(t, c, "k", 500)
			} else {
				require.Zero(t, c.DBSize(ctx).Val())
			}
			require.Zero(t, c.Exists(ctx, "old").Val())
			// The node that served before the import holds no stale data files.
			entries, err := os.ReadDir(filepath.Join(b.dir, strconv.Itoa(id)))
			require.NoError(t, err)
			for _, e := range entries {
				require.NotEqual(t, "appendonlydir", e.Name(), "node 0's AOF after the swap to node 1")
				require.NotEqual(t, "dump.rdb", e.Name(), "node 0's snapshot after the swap to node 1")
			}
		})
	}
}

// TestLoad_Replication: an import into a replicated database reaches the replica too,
// which then takes over with it when the primary is killed.
func TestLoad_Replication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	file := b.sourceFile(t, 1, "k", 400, nil)
	in := b.replicated(t, 2, "none")
	c := client(t, in.Port, in.Password)
	writeAcked(t, c, "old", 10)

	require.NoError(t, b.driver.Load(ctx, in, []string{file}))
	requireKeys(t, c, "k", 400)
	require.Zero(t, c.Exists(ctx, "old0").Val())
	requireRunning(t, b.driver, in, true)
	// Once the replica acknowledges a write it has synced what came before.
	writeAcked(t, c, "new", 1)

	p, _ := nodes(t, b.driver, 2)
	killAndWait(t, p)
	require.NoError(t, b.driver.Ensure(ctx, in))
	c = client(t, in.Port, in.Password)
	requireKeys(t, c, "k", 400)
	requireKeys(t, c, "new", 1)
	_, r := nodes(t, b.driver, 2)
	require.NotZero(t, r)
}

// TestLoad_TooLargeWhileLoading: a file whose data passes the memory limit is refused
// while it loads, long before all of it is in memory, and the database keeps its data.
func TestLoad_TooLargeWhileLoading(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 1, "none")
	src.MaxMemoryBytes = 512 * mb
	require.NoError(t, b.driver.Ensure(ctx, src))
	fill(t, src.Port, src.Password, 40000, 2048) // ~80 MB once loaded
	file := b.snapshotOf(t, src)

	dst := b.instance(t, 2, "none")
	dst.MaxMemoryBytes = 16 * mb
	require.NoError(t, b.driver.Ensure(ctx, dst))
	c := client(t, dst.Port, dst.Password)
	require.NoError(t, c.Set(ctx, "keep", "me", 0).Err())
	before := pid(t, b.driver, 2)
	start := time.Now()
	err := b.driver.Load(ctx, dst, []string{file})
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)
	t.Logf("refused after %s: %v", time.Since(start), err)
	var seen int64
	_, serr := fmt.Sscanf(err.Error()[bytes.Index([]byte(err.Error()), []byte("needs more than "))+len("needs more than "):], "%d", &seen)
	require.NoError(t, serr)
	require.Less(t, seen, int64(48*mb), "the server was stopped well before it held the whole ~80 MB")
	require.Equal(t, before, pid(t, b.driver, 2))
	require.Equal(t, "me", c.Get(ctx, "keep").Val())
	require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, "2")), "the server that loaded the file is gone")
	_, err = c.Get(ctx, "k1").Result()
	require.ErrorIs(t, err, redis.Nil)
}

// chunked reads a file's bytes a few kilobytes at a time, a pause now and then (a
// download), failing with failAt's error once failAt bytes were read when set.
type chunked struct {
	data   []byte
	off    int
	failAt int
	err    error
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.failAt > 0 && c.off >= c.failAt {
		return 0, c.err
	}
	if c.off == len(c.data) {
		return 0, io.EOF
	}
	if c.off%(64<<10) == 0 {
		time.Sleep(time.Millisecond)
	}
	n := copy(p[:min(len(p), 8<<10)], c.data[c.off:])
	c.off += n
	return n, nil
}

// TestLoadStream: an import read as it downloads loads as a file does; a download that
// fails part way fails the import with the download's error (not a corrupt file), and
// a corrupt stream or one beyond the memory limit is refused; each failure leaves the
// database, and its server, as they were. A cluster gets the stream too.
func TestLoadStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	var noise strings.Builder
	for noise.Len() < 400<<10 {
		noise.WriteString(rand.Text()) // random: LZF leaves it as long as it is
	}
	file := b.sourceFile(t, 1, "k", 3000, map[string]string{"big": noise.String()})
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Greater(t, len(data), 256<<10, "the stream spans several reads of the server")

	dst := b.instance(t, 2, "snapshot-every-1-hour")
	require.NoError(t, b.driver.Ensure(ctx, dst))
	require.NoError(t, b.driver.LoadStream(ctx, dst, &chunked{data: data}))
	c := client(t, dst.Port, dst.Password)
	require.Equal(t, int64(3001), c.DBSize(ctx).Val())
	requireKeys(t, c, "k", 3000)
	requireRunning(t, b.driver, dst, true)
	// Snapshot persistence keeps what came by the pipe.
	require.NoError(t, b.driver.Stop(ctx, 2))
	require.NoError(t, b.driver.Ensure(ctx, dst))
	c = client(t, dst.Port, dst.Password)
	require.Equal(t, int64(3001), c.DBSize(ctx).Val())
	require.NoError(t, c.Set(ctx, "mark", "1", 0).Err())

	cut := errors.New("connection reset by the source")
	before := pid(t, b.driver, 2)
	err = b.driver.LoadStream(ctx, dst, &chunked{data: data, failAt: len(data) / 2, err: cut})
	require.ErrorIs(t, err, cut)
	require.NotErrorIs(t, err, clouddb.ErrDataCorrupt)
	require.Equal(t, before, pid(t, b.driver, 2))
	require.Equal(t, "1", c.Get(ctx, "mark").Val())
	require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, "2")))

	junk := append([]byte("REDIS0010"), bytes.Repeat([]byte{0xfe, 0x01, 0xff}, 1000)...)
	err = b.driver.LoadStream(ctx, dst, &chunked{data: junk})
	require.ErrorIs(t, err, clouddb.ErrDataCorrupt)
	require.Equal(t, before, pid(t, b.driver, 2))

	small := b.instance(t, 3, "none")
	small.MaxMemoryBytes = 1 * mb // the data takes about 1.5 MB
	require.NoError(t, b.driver.Ensure(ctx, small))
	err = b.driver.LoadStream(ctx, small, &chunked{data: data})
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)
	require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, "3")))

	cl := b.instance(t, 4, "none")
	cl.OSSCluster, cl.Shards = true, 2
	require.NoError(t, b.driver.Ensure(ctx, cl))
	require.NoError(t, b.driver.LoadStream(ctx, cl, &chunked{data: data}))
	total := int64(0)
	for shard := range 2 {
		var buf bytes.Buffer
		_, err := b.driver.Snapshot(ctx, cl, shard, &buf)
		require.NoError(t, err)
		sf := filepath.Join(t.TempDir(), "shard.rdb")
		require.NoError(t, os.WriteFile(sf, buf.Bytes(), 0o600))
		one := b.instance(t, 10+shard, "none")
		one.MaxMemoryBytes = 256 * mb
		require.NoError(t, b.driver.Ensure(ctx, one))
		require.NoError(t, b.driver.Load(ctx, one, []string{sf}))
		n := client(t, one.Port, one.Password).DBSize(ctx).Val()
		require.Positive(t, n, "shard %d holds keys", shard)
		total += n
	}
	require.Equal(t, int64(3001), total, "the cluster's shards hold every key once")
}

// stalled gives the first half of data, then blocks until release is closed (a source
// that stops sending), and then fails.
type stalled struct {
	data    []byte
	off     int
	release chan struct{}
}

func (s *stalled) Read(p []byte) (int, error) {
	if s.off >= len(s.data)/2 {
		<-s.release
		return 0, errors.New("the source went away")
	}
	n := copy(p[:min(len(p), len(s.data)/2-s.off)], s.data[s.off:])
	s.off += n
	return n, nil
}

// TestLoadStream_Preempted: an import whose source stops sending does not hold the
// database up: deleting the database ends it at once, and so does the death of the
// database's server, which the next Ensure brings back.
func TestLoadStream_Preempted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	file := b.sourceFile(t, 1, "k", 5000, nil)
	data, err := os.ReadFile(file)
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		id      int
		preempt func(in clouddb.Instance)
		want    string
	}{
		{"removed", 2, func(in clouddb.Instance) { require.NoError(t, b.driver.Remove(ctx, in.DatabaseID)) }, "deleted during the import"},
		{"server killed", 3, func(in clouddb.Instance) { killAndWait(t, pid(t, b.driver, in.DatabaseID)) }, "exited during the import"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := b.instance(t, tc.id, "none")
			require.NoError(t, b.driver.Ensure(ctx, in))
			src := &stalled{data: data, release: make(chan struct{})}
			defer close(src.release)
			done := make(chan error, 1)
			go func() { done <- b.driver.LoadStream(ctx, in, src) }()
			// The loading server has read the first half and waits for more.
			require.Eventually(t, func() bool { return dbServers(t, filepath.Join(b.dir, strconv.Itoa(tc.id))) == 2 }, 10*time.Second, 5*time.Millisecond)
			tc.preempt(in)
			select {
			case err := <-done:
				require.ErrorContains(t, err, tc.want)
			case <-time.After(10 * time.Second):
				t.Fatal("the import still holds the database 10s after it was preempted")
			}
			if tc.name == "server killed" {
				require.NoError(t, b.driver.Ensure(ctx, in))
				requireRunning(t, b.driver, in, true)
				require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, strconv.Itoa(tc.id))))
			} else {
				_, err := os.Stat(filepath.Join(b.dir, strconv.Itoa(tc.id)))
				require.ErrorIs(t, err, os.ErrNotExist)
			}
		})
	}
}

// cancelAt makes the bundle's driver call the function stored in the pointer it returns,
// if any, at the hook point.
func cancelAt(b *testBundle, at string) *atomic.Pointer[context.CancelFunc] {
	var cancel atomic.Pointer[context.CancelFunc]
	b.driver.SetTestHook(func(point string, id, pid int) {
		if point == at {
			if f := cancel.Load(); f != nil {
				(*f)()
			}
		}
	})
	return &cancel
}

// TestLoad_CancelledAtTakeover: an import whose caller gives up (or that Stop ends) once
// its file has loaded either takes over whole or leaves the old data: the database keeps
// one of them, which survives a stop and a start under its persistence.
func TestLoad_CancelledAtTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cancel := cancelAt(b, local.HookImportLoaded)
	ctx := ctxT(t)
	file := b.sourceFile(t, 1, "k", 300, nil)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	for i, persistence := range []string{"snapshot-every-1-hour", "aof-every-1-second"} {
		for j, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream %t", persistence, stream), func(t *testing.T) {
				id := 10 + 2*i + j
				in := b.instance(t, id, persistence)
				require.NoError(t, b.driver.Ensure(ctx, in))
				require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "old", "x", 0).Err())
				lctx, stop := context.WithCancel(ctx)
				defer stop()
				cancel.Store(&stop)
				defer cancel.Store(nil)
				if stream {
					err = b.driver.LoadStream(lctx, in, bytes.NewReader(data))
				} else {
					err = b.driver.Load(lctx, in, []string{file})
				}
				t.Logf("the import: %v", err)

				require.NoError(t, b.driver.Stop(ctx, id))
				require.NoError(t, b.driver.Ensure(ctx, in))
				c := client(t, in.Port, in.Password)
				n := c.DBSize(ctx).Val()
				if err != nil {
					require.Equal(t, int64(1), n, "a failed import leaves the old data")
					require.Equal(t, "x", c.Get(ctx, "old").Val())
				} else {
					require.Equal(t, int64(300), n, "a successful import's data")
					requireKeys(t, c, "k", 300)
				}
				requireRunning(t, b.driver, in, true)
				require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, strconv.Itoa(id))))
			})
		}
	}
}

// lzfZeros returns an RDB file with one string key "k" of n zero bytes, LZF-compressed:
// about 88 times smaller than the value (n-1 must be a multiple of 264).
func lzfZeros(n int) []byte {
	var comp []byte
	comp = append(comp, 0x00, 0x00) // one literal byte, 0
	for range (n - 1) / 264 {
		comp = append(comp, 0xe0, 0xff, 0x00) // 264 bytes copied from 1 back
	}
	length := func(b []byte, v int) []byte { return binary.BigEndian.AppendUint32(append(b, 0x80), uint32(v)) }
	data := []byte("REDIS0009")
	data = append(data, 0xfe, 0x00, 0x00, 1, 'k', 0xc3) // SELECTDB 0, a string "k", LZF
	data = length(data, len(comp))
	data = length(data, n)
	data = append(data, comp...)
	data = append(data, 0xff)
	return binary.LittleEndian.AppendUint64(data, redisCRC64(data))
}

// TestLoad_CompressedValueBounded: one value that LZF packs 88 times smaller than it is
// does not make the server that loads it take far more memory than the database may
// (here 1 GB from a 12 MB file, for a limit of 16 MB): the file is refused, and the
// database keeps its data.
func TestLoad_CompressedValueBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	file := filepath.Join(t.TempDir(), "zeros.rdb")
	require.NoError(t, os.WriteFile(file, lzfZeros(1+264*4_000_000), 0o600)) // 1 GB in 12 MB
	dst := b.instance(t, 1, "none")
	dst.MaxMemoryBytes = 16 * mb
	require.NoError(t, b.driver.Ensure(ctx, dst))
	c := client(t, dst.Port, dst.Password)
	require.NoError(t, c.Set(ctx, "keep", "me", 0).Err())

	err := b.driver.Load(ctx, dst, []string{file})
	t.Logf("the import: %v", err)
	// Refused; redis 7.0 logs a failed allocation while loading as "Short read or OOM",
	// which cannot be told from a file cut short: corrupt then.
	require.True(t, errors.Is(err, clouddb.ErrDataTooLarge) || errors.Is(err, clouddb.ErrDataCorrupt), "%v", err)
	require.Equal(t, "me", c.Get(ctx, "keep").Val())
	require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, "1")), "the server that loaded the file is gone")
	if i := strings.Index(err.Error(), "needs more than "); i >= 0 {
		var seen int64
		_, serr := fmt.Sscanf(err.Error()[i+len("needs more than "):], "%d", &seen)
		require.NoError(t, serr)
		require.Less(t, seen, int64(64*mb), "the server never held the whole value")
	}
}

// addressSpaceLimit is the soft "Max address space" of process pid, "unlimited" or bytes.
func addressSpaceLimit(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max address space"); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatal("no address space line")
	return ""
}

// TestEnsure_LiftsLoaderCap: a server left with the address space cap of an import's
// loading server (clouddb died during the import; the server was then adopted as the
// replica, or promoted by a failover) gets its address space back when Ensure adopts it:
// capped, it would abort once the database's memory limit grew.
func TestEnsure_LiftsLoaderCap(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/limits"); err != nil {
		t.Skip("no /proc")
	}
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	in.MaxMemoryBytes = 16 * mb
	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 1)
	before := addressSpaceLimit(t, p)
	require.NoError(t, local.LimitLoader(p, in.MaxMemoryBytes))
	require.NotEqual(t, before, addressSpaceLimit(t, p))
	in.Password += "-new" // a change, so that Ensure adopts and reconfigures it
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, p, pid(t, b.driver, 1))
	require.Equal(t, before, addressSpaceLimit(t, p))
}

// TestLoad_EmptyOrCutRefused: an empty file or stream, or one cut after its header, is
// refused as corrupt, and the database keeps its data.
func TestLoad_EmptyOrCutRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "snapshot-every-1-hour")
	require.NoError(t, b.driver.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "keep", "me", 0).Err())
	before := pid(t, b.driver, 1)
	for _, content := range []string{"", "REDIS0009", "REDIS0009\xfe\x00"} {
		file := filepath.Join(t.TempDir(), "cut.rdb")
		require.NoError(t, os.WriteFile(file, []byte(content), 0o600))
		err := b.driver.Load(ctx, in, []string{file})
		require.ErrorIs(t, err, clouddb.ErrDataCorrupt, "file %q", content)
		err = b.driver.LoadStream(ctx, in, strings.NewReader(content))
		require.ErrorIs(t, err, clouddb.ErrDataCorrupt, "stream %q", content)
		require.Equal(t, before, pid(t, b.driver, 1))
		require.Equal(t, "me", c.Get(ctx, "keep").Val())
		require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, "1")))
	}
}

// TestLoad_CompressedValueBoundedCluster: the key-by-key path too (a cluster's, and that
// of parts that do not merge) loads each file into a throwaway server whose memory is
// bounded while it loads: one LZF-packed value does not take a gigabyte there.
func TestLoad_CompressedValueBoundedCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	file := filepath.Join(t.TempDir(), "zeros.rdb")
	require.NoError(t, os.WriteFile(file, lzfZeros(1+264*4_000_000), 0o600)) // 1 GB in 12 MB
	cl := b.instance(t, 1, "none")
	cl.OSSCluster, cl.Shards = true, 2
	cl.MaxMemoryBytes = 32 * mb
	require.NoError(t, b.driver.Ensure(ctx, cl))
	err := b.driver.Load(ctx, cl, []string{file})
	t.Logf("the import: %v", err)
	require.True(t, errors.Is(err, clouddb.ErrDataTooLarge) || errors.Is(err, clouddb.ErrDataCorrupt), "%v", err)
	if i := strings.Index(err.Error(), "needs about "); i >= 0 {
		var seen int64
		_, serr := fmt.Sscanf(err.Error()[i+len("needs about "):], "%d", &seen)
		require.NoError(t, serr)
		require.Less(t, seen, int64(128*mb), "the throwaway server never held the whole value")
	}
}

// TestLoad_SourceOfAnotherDatabase: a database that another of the installation's
// databases replicates from (replicaOf) still feeds it after an import, which moves its
// server to its other node: the imported data and later writes arrive.
func TestLoad_SourceOfAnotherDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	file := b.sourceFile(t, 1, "imp", 50, nil)
	src := b.instance(t, 2, "none")
	dst := b.instance(t, 3, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	dst.ReplicaOf = []clouddb.RedisEndpoint{srcEndpoint(src.Port, src.Password)}
	require.NoError(t, b.driver.Ensure(ctx, dst))
	s, c := client(t, src.Port, src.Password), client(t, dst.Port, dst.Password)
	require.NoError(t, s.Set(ctx, "before", "1", 0).Err())
	eventuallyT(t, 5*time.Second, func() bool { return c.Get(ctx, "before").Val() == "1" })

	require.NoError(t, b.driver.Load(ctx, src, []string{file}))
	require.NoError(t, s.Set(ctx, "after", "1", 0).Err())
	eventuallyT(t, 10*time.Second, func() bool { return c.Get(ctx, "after").Val() == "1" })
	requireKeys(t, c, "imp", 50)
}

// TestLoad_EndedAfterTakeover: an import ended (by its caller, or Stop) once its server
// has taken over has replaced the data: it reports success, and the next Ensure brings
// the replica it had no time to start.
func TestLoad_EndedAfterTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cancel := cancelAt(b, local.HookImportTookOver)
	ctx := ctxT(t)
	file := b.sourceFile(t, 1, "k", 300, nil)
	in := b.replicated(t, 2, "none")
	c := client(t, in.Port, in.Password)
	writeAcked(t, c, "old", 10)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	cancel.Store(&stop)
	require.NoError(t, b.driver.Load(lctx, in, []string{file}), "the data was replaced")
	cancel.Store(nil)
	requireKeys(t, c, "k", 300)
	require.Zero(t, c.Exists(ctx, "old0").Val())
	require.NoError(t, b.driver.Ensure(ctx, in))
	requireRunning(t, b.driver, in, true)
	writeAcked(t, c, "new", 1)
}

// TestLoadStream_ReconcilerDoesNotWait: while an import from a stalled source holds the
// database, the reconciler's calls return at once: Running says the servers run (the
// import answers for them) and Ensure and SetUsers say to try again later; once the
// import ends they work as before.
func TestLoadStream_ReconcilerDoesNotWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	file := b.sourceFile(t, 1, "k", 5000, nil)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	in := b.instance(t, 2, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	src := &stalled{data: data, release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- b.driver.LoadStream(ctx, in, src) }()
	require.Eventually(t, func() bool { return dbServers(t, filepath.Join(b.dir, "2")) == 2 }, 10*time.Second, 5*time.Millisecond)

	answered := make(chan struct{})
	go func() {
		defer close(answered)
		up, err := b.driver.Running(ctx, in)
		assert.NoError(t, err)
		assert.True(t, up)
		assert.ErrorIs(t, b.driver.Ensure(ctx, in), clouddb.ErrServerStarting)
		assert.ErrorIs(t, b.driver.SetUsers(ctx, in), clouddb.ErrServerStarting)
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the reconciler's calls wait for the import")
	}
	close(src.release)
	require.ErrorContains(t, <-done, "the source went away")
	require.NoError(t, b.driver.Ensure(ctx, in))
	requireRunning(t, b.driver, in, true)
}

// TestLoad_UnfinishedImportNeverTakesOver: a clouddb that stops in the middle of an
// import, after the file has loaded and before the takeover, leaves a loading server
// that serves as a primary on the other node. If the database's primary then dies too,
// the next clouddb does not take that server for a replica cut short in its promotion:
// the import never took effect, so the primary comes back with its own data.
func TestLoad_UnfinishedImportNeverTakesOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	file := b.sourceFile(t, 1, "k", 200, nil)
	in := b.instance(t, 2, "snapshot-every-1-hour")
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "old", "kept", 0).Err())
	require.NoError(t, b.driver.Stop(ctx, 2)) // saves the old data
	require.NoError(t, b.driver.Ensure(ctx, in))

	// This clouddb stalls for good once the file has loaded.
	frozen := make(chan struct{})
	t.Cleanup(func() { close(frozen) })
	loaded := make(chan struct{})
	b.driver.SetTestHook(func(point string, id, pid int) {
		if point == local.HookImportLoaded {
			close(loaded)
			<-frozen
		}
	})
	go func() { _ = b.driver.Load(context.WithoutCancel(ctx), in, []string{file}) }()
	select {
	case <-loaded:
	case <-time.After(30 * time.Second):
		t.Fatal("the import did not load its file")
	}
	killAndWait(t, pid(t, b.driver, 2))

	// The next clouddb.
	next := mustDriver(t, b.dir)
	require.NoError(t, next.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	require.Equal(t, "kept", c.Get(ctx, "old").Val())
	require.Equal(t, int64(1), c.DBSize(ctx).Val())
	require.Equal(t, 1, dbServers(t, filepath.Join(b.dir, "2")), "the loading server is gone")
}

// TestLoad_ClusterBackupIntoOneServer: a cluster's backup (a part per shard, each with the
// same functions) imported into a database of one server loads as one file, taken over
// by a new server, with every key and the functions once: joined as they are, the parts
// made a file redis refuses (a library twice) and the import copied the keys one by one,
// without the functions.
func TestLoad_ClusterBackupIntoOneServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.clustered(t, 1, 2, false, "none")
	sc := clusterClient(t, src)
	clusterWrite(t, sc, "k", 200)
	require.NoError(t, sc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.FunctionLoad(ctx, splitLib).Err()
	}))
	parts := backupParts(t, b, src)
	require.Len(t, parts, 2)

	dst := b.instance(t, 2, "none")
	require.NoError(t, b.driver.Ensure(ctx, dst))
	before := pid(t, b.driver, 2)
	require.NoError(t, b.driver.Load(ctx, dst, parts))
	require.NotEqual(t, before, pid(t, b.driver, 2), "the joined parts are loaded by a new server")
	c := client(t, dst.Port, dst.Password)
	require.EqualValues(t, 200, c.DBSize(ctx).Val())
	requireKeys(t, c, "k", 200)
	v, err := c.FCall(ctx, "hello", nil).Text()
	require.NoError(t, err, "the functions came with the data")
	require.Equal(t, "hi", v)
	requireRunning(t, b.driver, dst, true)
}
