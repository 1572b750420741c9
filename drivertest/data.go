package drivertest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// fill writes n string keys k<i> of size bytes each and one key of every other type
// (hash, list, set, sorted set, and a string with a time to live): fillExtra keys.
func fill(t *testing.T, e *env, c *redis.Client, n, size int) {
	t.Helper()
	p := c.Pipeline()
	val := strings.Repeat("v", size)
	for i := range n {
		p.Set(e.ctx, fmt.Sprintf("k%d", i), val, 0)
	}
	p.HSet(e.ctx, "h", "f", "hv")
	p.RPush(e.ctx, "l", "a", "b", "c")
	p.SAdd(e.ctx, "s", "x", "y")
	p.ZAdd(e.ctx, "z", redis.Z{Score: 1.5, Member: "m"})
	p.Set(e.ctx, "ttl", "x", time.Hour)
	_, err := p.Exec(e.ctx)
	require.NoError(t, err)
}

const fillExtra = 5

// requireFilled checks that c holds exactly what fill wrote.
func requireFilled(t *testing.T, e *env, c *redis.Client, n, size int) {
	t.Helper()
	got, err := c.DBSize(e.ctx).Result()
	require.NoError(t, err)
	require.EqualValues(t, n+fillExtra, got, "key for key")
	val := strings.Repeat("v", size)
	for i := range n {
		v, err := c.Get(e.ctx, fmt.Sprintf("k%d", i)).Result()
		require.NoError(t, err, "k%d", i)
		require.Equal(t, val, v, "k%d", i)
	}
	require.Equal(t, "hv", c.HGet(e.ctx, "h", "f").Val())
	require.Equal(t, []string{"a", "b", "c"}, c.LRange(e.ctx, "l", 0, -1).Val())
	require.ElementsMatch(t, []string{"x", "y"}, c.SMembers(e.ctx, "s").Val())
	require.Equal(t, 1.5, c.ZScore(e.ctx, "z", "m").Val())
	require.Greater(t, c.TTL(e.ctx, "ttl").Val(), 50*time.Minute, "the time to live is kept")
}

// snapshotFile writes a Snapshot of shard of in to a new file and returns its path; the
// file is a valid RDB, whose length Snapshot returned.
func snapshotFile(t *testing.T, e *env, in clouddb.Instance, shard int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("db%d-shard%d.rdb", in.DatabaseID, shard))
	f, err := os.Create(path)
	require.NoError(t, err)
	n, err := e.d.Snapshot(e.ctx, in, shard, f)
	require.NoError(t, err, "Snapshot of shard %d", shard)
	require.NoError(t, f.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.EqualValues(t, len(data), n, "Snapshot returns the bytes it wrote")
	require.True(t, bytes.HasPrefix(data, []byte("REDIS")), "an RDB file starts with REDIS")
	return path
}

// corruptCopy writes a copy of the RDB file at path with a byte flipped in its middle,
// so that its checksum no longer matches, and returns the copy's path.
func corruptCopy(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	out := filepath.Join(t.TempDir(), "corrupt-"+filepath.Base(path))
	require.NoError(t, os.WriteFile(out, data, 0o600))
	return out
}

// writeFile writes data to a new file and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// filledSource is a database filled with n keys of size bytes (see fill).
func filledSource(t *testing.T, e *env, id, n, size int) clouddb.Instance {
	t.Helper()
	in := e.instance(t, id)
	e.ensure(t, in)
	fill(t, e, e.client(t, in), n, size)
	return in
}

// withKeep is a database that holds one key, keep = me: what a refused load must leave.
func withKeep(t *testing.T, e *env, in clouddb.Instance) *redis.Client {
	t.Helper()
	e.ensure(t, in)
	c := e.client(t, in)
	require.NoError(t, c.Set(e.ctx, "keep", "me", 0).Err())
	return c
}

// requireKept checks that the database still holds only what withKeep wrote, and runs.
func requireKept(t *testing.T, e *env, in clouddb.Instance, what string) {
	t.Helper()
	c := e.client(t, in)
	require.Equal(t, "me", c.Get(e.ctx, "keep").Val(), "%s: the data is left as it was", what)
	n, err := c.DBSize(e.ctx).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "%s: the data is left as it was", what)
	e.requireRunning(t, in, true, what)
}

// testSnapshotThenLoad: a snapshot of one database loaded into another holds every key,
// of every type, with its time to live; a load replaces what was there; the parts of a
// backup load together.
func testSnapshotThenLoad(t *testing.T, h Harness) {
	e := setup(t, h)
	src := filledSource(t, e, 901, 200, 100)
	dst := e.instance(t, 902)
	withKeep(t, e, dst)

	file := snapshotFile(t, e, src, 0)
	_, err := e.d.Snapshot(e.ctx, src, 1, io.Discard)
	require.Error(t, err, "a database of one shard has no shard 1")

	require.NoError(t, e.d.Load(e.ctx, dst, []string{file}))
	e.requireRunning(t, dst, true)
	dc := e.client(t, dst)
	require.Zero(t, dc.Exists(e.ctx, "keep").Val(), "a load replaces the data")
	requireFilled(t, e, dc, 200, 100)

	// Two parts, with keys of their own: together.
	other := e.instance(t, 903)
	e.ensure(t, other)
	setKeys(t, e.ctx, e.client(t, other), "part", 50)
	part := snapshotFile(t, e, other, 0)
	require.NoError(t, e.d.Load(e.ctx, dst, []string{file, part}))
	dc = e.client(t, dst)
	requireKeys(t, e.ctx, dc, "part", 50)
	require.Equal(t, "hv", dc.HGet(e.ctx, "h", "f").Val())
	n, err := dc.DBSize(e.ctx).Result()
	require.NoError(t, err)
	require.EqualValues(t, 200+fillExtra+50, n)
}

// testLoadCorrupt: a file that is not an RDB, one whose checksum fails, and a backup one
// of whose parts is corrupt are refused with ErrDataCorrupt, the data left as it was.
func testLoadCorrupt(t *testing.T, h Harness) {
	e := setup(t, h)
	src := filledSource(t, e, 1001, 100, 100)
	good := snapshotFile(t, e, src, 0)
	dst := e.instance(t, 1002)
	withKeep(t, e, dst)

	for _, tc := range []struct {
		what  string
		files []string
	}{
		{"not an RDB file", []string{writeFile(t, "garbage.rdb", []byte("REDIS0009 this is not a real dump"))}},
		{"an empty file", []string{writeFile(t, "empty.rdb", nil)}},
		{"a checksum that fails", []string{corruptCopy(t, good)}},
		{"a corrupt second part", []string{good, corruptCopy(t, good)}},
	} {
		err := e.d.Load(e.ctx, dst, tc.files)
		require.ErrorIs(t, err, clouddb.ErrDataCorrupt, tc.what)
		requireKept(t, e, dst, tc.what)
	}

	require.NoError(t, e.d.Load(e.ctx, dst, []string{good}), "the good file, unharmed, loads")
	requireFilled(t, e, e.client(t, dst), 100, 100)
}

// testLoadTooLarge: data beyond the database's memory limit is refused with
// ErrDataTooLarge, the data left as it was.
func testLoadTooLarge(t *testing.T, h Harness) {
	e := setup(t, h)
	src := filledSource(t, e, 1101, 2000, 4096) // about 8 MB
	big := snapshotFile(t, e, src, 0)
	dst := e.instance(t, 1102)
	dst.MaxMemoryBytes = 2 << 20
	withKeep(t, e, dst)

	err := e.d.Load(e.ctx, dst, []string{big})
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)
	requireKept(t, e, dst, "a file beyond the limit")
}

// testLoadStream: a StreamLoader loads an RDB file as it reads it, refuses a corrupt one
// and returns the reader's error, wrapped, leaving the data as it was on either.
func testLoadStream(t *testing.T, h Harness) {
	e := setup(t, h)
	sl, ok := e.d.(clouddb.StreamLoader)
	if !ok {
		t.Skip("the driver is not a clouddb.StreamLoader")
	}
	src := filledSource(t, e, 1201, 100, 100)
	good, err := os.ReadFile(snapshotFile(t, e, src, 0))
	require.NoError(t, err)
	dst := e.instance(t, 1202)
	withKeep(t, e, dst)

	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff
	require.ErrorIs(t, sl.LoadStream(e.ctx, dst, bytes.NewReader(bad)), clouddb.ErrDataCorrupt)
	requireKept(t, e, dst, "a corrupt stream")

	readErr := errors.New("the download broke")
	half := io.MultiReader(bytes.NewReader(good[:len(good)/2]), errReader{readErr})
	require.ErrorIs(t, sl.LoadStream(e.ctx, dst, half), readErr)
	requireKept(t, e, dst, "a stream that failed")

	require.NoError(t, sl.LoadStream(e.ctx, dst, bytes.NewReader(good)))
	e.requireRunning(t, dst, true)
	requireFilled(t, e, e.client(t, dst), 100, 100)
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// testCopyFrom: CopyFrom replaces the data with every key of a live server, reached as a
// client would; a source that refuses the password, or does not run, is an error that
// leaves the data as it was.
func testCopyFrom(t *testing.T, h Harness) {
	e := setup(t, h)
	src := filledSource(t, e, 1301, 50, 10)
	dst := e.instance(t, 1302)
	withKeep(t, e, dst)

	ep := clouddb.RedisEndpoint{Addr: e.addr(t, src), Password: src.Password}
	wrong := ep
	wrong.Password = "not-" + src.Password
	require.Error(t, e.d.CopyFrom(e.ctx, dst, wrong), "a wrong password")
	requireKept(t, e, dst, "a copy refused by its source")

	require.NoError(t, e.d.CopyFrom(e.ctx, dst, ep))
	e.requireRunning(t, dst, true)
	dc := e.client(t, dst)
	require.Zero(t, dc.Exists(e.ctx, "keep").Val(), "a copy replaces the data")
	requireFilled(t, e, dc, 50, 10)
	requireFilled(t, e, e.client(t, src), 50, 10)

	// A source that does not run.
	require.NoError(t, e.d.Stop(e.ctx, src.DatabaseID))
	require.Error(t, e.d.CopyFrom(e.ctx, dst, ep), "a source that does not answer")
	requireFilled(t, e, e.client(t, dst), 50, 10)
}

// testReplicaOf: a database with sources refuses client writes and takes the sources'
// data and changes; a source dropped is no longer followed; with none it is writable.
func testReplicaOf(t *testing.T, h Harness) {
	need(t, "ReplicaOf", h.ReplicaOf)
	e := setup(t, h)
	src1, src2, dst := e.instance(t, 1401), e.instance(t, 1402), e.instance(t, 1403)
	for _, in := range []clouddb.Instance{src1, src2, dst} {
		e.ensure(t, in)
	}
	s1, s2, c := e.client(t, src1), e.client(t, src2), e.client(t, dst)
	require.NoError(t, s1.Set(e.ctx, "from1", "a", 0).Err())
	require.NoError(t, s2.Set(e.ctx, "from2", "b", 0).Err())

	dst.ReplicaOf = []clouddb.RedisEndpoint{
		{Addr: e.addr(t, src1), Password: src1.Password},
		{Addr: e.addr(t, src2), Password: src2.Password},
	}
	e.ensure(t, dst)
	e.requireRunning(t, dst, true)
	requireNoPerm(t, c.Set(e.ctx, "k", "v", 0).Err(), "clients cannot write a database that follows sources")
	e.eventually(t, "the sources' data arrives", func() bool {
		return c.Get(e.ctx, "from1").Val() == "a" && c.Get(e.ctx, "from2").Val() == "b"
	})
	require.NoError(t, s1.Set(e.ctx, "later", "1", 0).Err())
	e.eventually(t, "a later write of a source arrives", func() bool { return c.Get(e.ctx, "later").Val() == "1" })

	// Source 1 dropped: its writes, made before source 2's, no longer arrive.
	dst.ReplicaOf = dst.ReplicaOf[1:]
	e.ensure(t, dst)
	require.NoError(t, s1.Set(e.ctx, "after-drop", "1", 0).Err())
	require.NoError(t, s2.Set(e.ctx, "still", "2", 0).Err())
	e.eventually(t, "the remaining source's write arrives", func() bool { return c.Get(e.ctx, "still").Val() == "2" })
	require.Zero(t, c.Exists(e.ctx, "after-drop").Val(), "a dropped source is not followed")

	dst.ReplicaOf = nil
	e.ensure(t, dst)
	require.NoError(t, c.Set(e.ctx, "k", "v", 0).Err(), "writable again")
	require.Equal(t, "1", c.Get(e.ctx, "later").Val(), "what it took is kept")
	e.requireRunning(t, dst, true)
}
