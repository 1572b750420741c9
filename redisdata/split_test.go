package redisdata_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/redisdata"
)

// splitFiles splits parts for n shards of equal slot ranges into n files.
func splitFiles(t *testing.T, n int, parts ...[]byte) ([]string, error) {
	t.Helper()
	dir := t.TempDir()
	paths := make([]string, n)
	files := make([]*os.File, n)
	outs := make([]io.Writer, n)
	for i := range n {
		paths[i] = filepath.Join(dir, fmt.Sprintf("shard%d.rdb", i))
		f, err := os.Create(paths[i])
		require.NoError(t, err)
		files[i], outs[i] = f, f
	}
	readers := make([]io.Reader, len(parts))
	for i, p := range parts {
		readers[i] = bytes.NewReader(p)
	}
	err := redisdata.SplitRDB(outs, func(slot int) int { return slot * n / 16384 }, readers)
	for _, f := range files {
		require.NoError(t, f.Close())
	}
	return paths, err
}

// fillForCluster writes, into database 0 of s, fill's data set and the keys whose
// encodings fill does not make: integer keys (stored as numbers), long repetitive keys
// (stored LZF-packed), keys with hash tags, and a library of functions.
func fillForCluster(t *testing.T, s *server) {
	t.Helper()
	fill(t, s, "k:", 1)
	for _, db := range []int{1, 3} {
		s.do(db, "flushdb")
	}
	for i := range 300 {
		s.do(0, "set", fmt.Sprint(i*7-100), "n")                                  // -100..: INT8, INT16
		s.do(0, "set", fmt.Sprint(100000+i*977), "n")                             // INT32
		s.do(0, "set", strings.Repeat("long-key-", 10)+fmt.Sprint(i), "packed")   // LZF
		s.do(0, "set", fmt.Sprintf("{user%d}.a", i%17), strings.Repeat("v", 100)) // hash tags
		s.do(0, "set", fmt.Sprintf("{user%d}.b", i%17), "w")
	}
	s.do(0, "function", "load", "#!lua name=splitlib\nredis.register_function('hello', function() return 'hi' end)")
}

// TestSplitRDB: every key of a data set of every type and encoding lands, byte for byte
// with its TTL, in the file of the shard that serves its slot (as a cluster node computes
// it), nowhere else; each file loads in redis (its checksum right) and has the functions.
func TestSplitRDB(t *testing.T) {
	ctx := ctxT(t, 90*time.Second)
	src := startServer(t, "pw")
	fillForCluster(t, src)
	_, data := rdbFile(t, src)

	const shards = 3
	paths, err := splitFiles(t, shards, data)
	require.NoError(t, err)

	// A cluster node, to ask CLUSTER KEYSLOT.
	node := startServer(t, "", "--cluster-enabled", "yes")
	nc := node.client(0)
	defer nc.Close()

	all := startServer(t, "allpw")
	total := 0
	for i, p := range paths {
		ts, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: t.TempDir()}, p)
		require.NoError(t, err, "shard %d's file loads", i)
		keys, err := ts.Keys(ctx)
		require.NoError(t, err)
		require.Positive(t, keys, "shard %d has keys", i)
		total += int(keys)
		got := startServer(t, "")
		_, err = redisdata.CopyKeys(ctx, ts.Endpoint(), got.endpoint(), redisdata.CopyOptions{})
		require.NoError(t, err)
		gc := got.client(0)
		for _, k := range keysOf(t, gc) {
			slot, serr := nc.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, serr)
			require.Equal(t, int(slot), redisdata.Slot([]byte(k)), "slot of %q", k)
			require.Equal(t, i, int(slot)*shards/16384, "key %q (slot %d) is in shard %d's file", k, slot, i)
		}
		tc := redis.NewClient(&redis.Options{Addr: ts.Addr(), Password: ts.Endpoint().Password})
		libs, err := tc.FunctionList(ctx, redis.FunctionListQuery{}).Result()
		tc.Close()
		require.NoError(t, err)
		require.Len(t, libs, 1, "shard %d has the functions", i)
		require.Equal(t, "splitlib", libs[0].Name)
		gc.Close()
		_, err = redisdata.CopyKeys(ctx, ts.Endpoint(), all.endpoint(), redisdata.CopyOptions{})
		require.NoError(t, err)
		ts.Close()
	}
	srcKeys := src.do(0, "dbsize").(int64)
	require.EqualValues(t, srcKeys, total, "every key in exactly one shard")
	requireSameData(t, src, all, []int{0})
}

// TestSplitRDBParts: the parts of one data set (a backup of several shards) split
// together: each shard's file has its keys of every part, and the functions that every
// part has, once.
func TestSplitRDBParts(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	a, b := startServer(t, ""), startServer(t, "")
	for _, s := range []*server{a, b} { // as every node of a cluster has them
		s.do(0, "function", "load", "#!lua name=splitlib\nredis.register_function('hello', function() return 'hi' end)")
	}
	for i := range 500 {
		a.do(0, "set", fmt.Sprintf("a:%d", i), i)
		b.do(0, "rpush", fmt.Sprintf("b:%d", i), "x", i)
	}
	_, da := rdbFile(t, a)
	_, db := rdbFile(t, b)
	paths, err := splitFiles(t, 2, da, db)
	require.NoError(t, err)
	total := int64(0)
	for i, p := range paths {
		ts, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: t.TempDir()}, p)
		require.NoError(t, err, "shard %d", i)
		n, err := ts.Keys(ctx)
		require.NoError(t, err)
		require.Positive(t, n)
		total += n
		ts.Close()
	}
	require.EqualValues(t, 1000, total)
}

// rdbOf is an RDB file of version v with body, ending in EOF and a right checksum.
func rdbOf(v int, body ...byte) []byte {
	data := append([]byte(fmt.Sprintf("REDIS%04d", v)), body...)
	data = append(data, 0xFF)
	return binary.LittleEndian.AppendUint64(data, redisCRC(data))
}

// TestSplitRDBRefuses: a file cut short or whose checksum is wrong is corrupt; keys of a
// logical database other than 0 are refused; what it cannot split (a module's data, a
// type it does not know, parts of different versions) says so, for the key-by-key path.
func TestSplitRDBRefuses(t *testing.T) {
	src := startServer(t, "")
	for i := range 2000 {
		src.do(0, "set", fmt.Sprintf("k%d", i), strings.Repeat("x", i%50))
	}
	_, data := rdbFile(t, src)

	_, err := splitFiles(t, 2, data[:len(data)/2])
	require.ErrorIs(t, err, redisdata.ErrCorrupt, "cut short")
	require.ErrorContains(t, err, "ends too early")

	bad := bytes.Clone(data)
	bad[len(bad)-3] ^= 0x10
	_, err = splitFiles(t, 2, bad)
	require.ErrorIs(t, err, redisdata.ErrCorrupt, "wrong checksum")
	require.ErrorContains(t, err, "checksum")

	noSum := bytes.Clone(data)
	copy(noSum[len(noSum)-8:], make([]byte, 8))
	_, err = splitFiles(t, 2, noSum)
	require.NoError(t, err, "a file saved without a checksum (rdbchecksum no) is split unchecked")

	_, err = splitFiles(t, 2, []byte("REDIS0010\x00\x01k\x01v"))
	require.ErrorIs(t, err, redisdata.ErrCorrupt, "no EOF")

	_, err = splitFiles(t, 2, []byte("NOTRDB0010\xff"))
	require.ErrorIs(t, err, redisdata.ErrCorrupt)

	src.do(1, "set", "other", "db")
	_, inDB1 := rdbFile(t, src)
	_, err = splitFiles(t, 2, inDB1)
	require.ErrorContains(t, err, "logical database 1")
	require.NotErrorIs(t, err, redisdata.ErrNotSplittable)

	// A module's auxiliary data: opcode 0xF7.
	_, err = splitFiles(t, 2, rdbOf(10, 0xF7, 0x01))
	require.ErrorIs(t, err, redisdata.ErrNotSplittable)
	// A value of type 24 (a hash with field expiries, Redis 7.4).
	_, err = splitFiles(t, 2, rdbOf(12, 24, 0x01, 'k', 0x00))
	require.ErrorIs(t, err, redisdata.ErrNotSplittable)
	// A key too long to hold.
	long := append([]byte{0x00, 0x80}, binary.BigEndian.AppendUint32(nil, 2<<20)...)
	_, err = splitFiles(t, 2, rdbOf(10, long...))
	require.ErrorIs(t, err, redisdata.ErrNotSplittable)
	// Parts of two versions.
	_, err = splitFiles(t, 2, data, rdbOf(9))
	require.ErrorIs(t, err, redisdata.ErrNotSplittable)
	require.ErrorContains(t, err, "part 1")
}

// TestSlot: Redis Cluster's slots, hash tags included, as a cluster node computes them.
func TestSlot(t *testing.T) {
	require.Equal(t, 12739, redisdata.Slot([]byte("123456789")), "the cluster specification's example")
	node := startServer(t, "", "--cluster-enabled", "yes")
	c := node.client(0)
	defer c.Close()
	for _, key := range []string{"", "a", "123456789", "{user1000}.following", "{user1000}.followers", "foo{}{bar}",
		"foo{{bar}}zap", "foo{bar}{zap}", "no-closing{brace", "}{", "{}", "{a}", "\x00{\xff}"} {
		want, err := c.ClusterKeySlot(context.Background(), key).Result()
		require.NoError(t, err)
		require.EqualValues(t, want, redisdata.Slot([]byte(key)), "slot of %q", key)
	}
}

// redisCRC is redis' CRC-64 of data.
func redisCRC(data []byte) uint64 {
	return ^crc64.Update(^uint64(0), crc64.MakeTable(bits.Reverse64(0xad93d23594c935a9)), data)
}

// TestRDBCRC: the sliced CRC-64 is redis' (its check value) and the byte-wise one, for
// every length and split of the input.
func TestRDBCRC(t *testing.T) {
	require.Equal(t, uint64(0xe9c6d914c4b8d9ca), redisdata.RDBCRC(0, []byte("123456789")))
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte(i*131 + 7)
	}
	for n := range len(data) {
		want := redisCRC(data[:n])
		require.Equal(t, want, redisdata.RDBCRC(0, data[:n]), "length %d", n)
		cut := n / 3
		require.Equal(t, want, redisdata.RDBCRC(redisdata.RDBCRC(0, data[:cut]), data[cut:n]), "length %d in two", n)
	}
}

// TestLoadChecked: the verdicts of an import's files, shared by both drivers: the
// servers of files that load within the limit; a refused file is clouddb.ErrDataCorrupt,
// data past the limit clouddb.ErrDataTooLarge; no server is left on error.
func TestLoadChecked(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	src := startServer(t, "")
	for i := range 200 {
		src.do(0, "set", fmt.Sprintf("k%d", i), strings.Repeat("v", 1000))
	}
	path, data := rdbFile(t, src)
	cfg := redisdata.LoadConfig{TempDir: t.TempDir()}

	temps, err := redisdata.LoadChecked(ctx, cfg, []string{path, path}, 64<<20)
	require.NoError(t, err)
	require.Len(t, temps, 2)
	for _, ts := range temps {
		n, kerr := ts.Keys(ctx)
		require.NoError(t, kerr)
		require.EqualValues(t, 200, n)
		require.NoError(t, ts.Close())
	}

	_, err = redisdata.LoadChecked(ctx, cfg, []string{path}, 100<<10)
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)
	require.ErrorContains(t, err, "the limit is 102400")

	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 0xFF
	badPath := filepath.Join(t.TempDir(), "bad.rdb")
	require.NoError(t, os.WriteFile(badPath, bad, 0o600))
	_, err = redisdata.LoadChecked(ctx, cfg, []string{path, badPath}, 64<<20)
	require.ErrorIs(t, err, clouddb.ErrDataCorrupt)

	entries, err := os.ReadDir(cfg.TempDir)
	require.NoError(t, err)
	require.Empty(t, entries, "no throwaway server's directory is left")
}
