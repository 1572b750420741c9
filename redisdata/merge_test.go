package redisdata_test

import (
	"context"
	"encoding/binary"
	"hash/crc64"
	"math/bits"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/redisdata"
)

// mergeFiles merges parts into a new file and returns its path and MergeRDB's error.
func mergeFiles(t *testing.T, parts ...string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "merged.rdb")
	f, err := os.Create(path)
	require.NoError(t, err)
	err = redisdata.MergeRDB(f, parts)
	require.NoError(t, f.Close())
	return path, err
}

// TestMergeRDB: the merged file of two servers' snapshots, with keys of every type in
// several logical databases, loads in redis with every key of both, byte for byte; its
// checksum is right (redis verifies it while loading); a part saved without checksums
// is merged too.
func TestMergeRDB(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	a := startServer(t, "apw")
	b := startServer(t, "bpw")
	na := fill(t, a, "a:", 1)
	nb := fill(t, b, "b:", 1)
	pa, _ := rdbFile(t, a)
	pb, bData := rdbFile(t, b)

	merged, err := mergeFiles(t, pa, pb)
	require.NoError(t, err)
	ts, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: t.TempDir()}, merged)
	require.NoError(t, err, "redis loads the merged file and accepts its checksum")
	defer ts.Close()
	keys, err := ts.Keys(ctx)
	require.NoError(t, err)
	require.EqualValues(t, na+nb, keys)

	// Both servers' data, each in its own logical databases, in one server.
	both := startServer(t, "bothpw")
	_, err = redisdata.CopyKeys(ctx, a.endpoint(), both.endpoint(), redisdata.CopyOptions{})
	require.NoError(t, err)
	_, err = redisdata.CopyKeys(ctx, b.endpoint(), both.endpoint(), redisdata.CopyOptions{})
	require.NoError(t, err)
	got := startServer(t, "gotpw")
	_, err = redisdata.CopyKeys(ctx, ts.Endpoint(), got.endpoint(), redisdata.CopyOptions{})
	require.NoError(t, err)
	requireSameData(t, both, got, allDBs)

	// rdbchecksum no writes a zero checksum, which redis does not check; nor does MergeRDB.
	unchecked := filepath.Join(t.TempDir(), "unchecked.rdb")
	binary.LittleEndian.PutUint64(bData[len(bData)-8:], 0)
	require.NoError(t, os.WriteFile(unchecked, bData, 0o600))
	merged, err = mergeFiles(t, pa, unchecked)
	require.NoError(t, err)
	ts2, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: t.TempDir()}, merged)
	require.NoError(t, err)
	defer ts2.Close()
	keys, err = ts2.Keys(ctx)
	require.NoError(t, err)
	require.EqualValues(t, na+nb, keys)
}

// TestMergeRDBRefuses: a part whose checksum is wrong, or that is not an RDB file, is
// corrupt; one of a version without the checksum trailer cannot be merged; a key in two
// parts makes a file that redis refuses, naming the key as a duplicate.
func TestMergeRDBRefuses(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	a := startServer(t, "apw")
	a.do(0, "set", "k", "a")
	pa, aData := rdbFile(t, a)

	flipped := append([]byte(nil), aData...)
	flipped[len(flipped)/2] ^= 0x01
	bad := filepath.Join(t.TempDir(), "bad.rdb")
	require.NoError(t, os.WriteFile(bad, flipped, 0o600))
	_, err := mergeFiles(t, pa, bad)
	require.ErrorIs(t, err, redisdata.ErrCorrupt)
	require.ErrorContains(t, err, "part 1")

	junk := filepath.Join(t.TempDir(), "junk.rdb")
	require.NoError(t, os.WriteFile(junk, []byte("this is not an RDB file at all"), 0o600))
	_, err = mergeFiles(t, junk, pa)
	require.ErrorIs(t, err, redisdata.ErrCorrupt)

	old := filepath.Join(t.TempDir(), "old.rdb")
	require.NoError(t, os.WriteFile(old, append([]byte("REDIS0004"), aData[9:]...), 0o600))
	_, err = mergeFiles(t, pa, old)
	require.ErrorIs(t, err, redisdata.ErrNotMergeable)

	b := startServer(t, "bpw")
	b.do(0, "set", "k", "b")
	pb, _ := rdbFile(t, b)
	merged, err := mergeFiles(t, pa, pb)
	require.NoError(t, err)
	_, err = redisdata.LoadRDB(context.WithoutCancel(ctx), redisdata.LoadConfig{TempDir: t.TempDir()}, merged)
	require.ErrorIs(t, err, redisdata.ErrCorrupt)
	require.ErrorContains(t, err, "Duplicated key")
}

// TestMergeRDBEachPartFromDB0: a part's keys before its first SELECTDB are in logical
// database 0, as when the part loads alone; merged after a part that ended in another
// database, they stay in 0.
func TestMergeRDBEachPartFromDB0(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	a := startServer(t, "apw")
	a.do(3, "set", "in3", "a")
	pa, _ := rdbFile(t, a)

	// A file as some tools write it: its keys with no SELECTDB before them.
	body := []byte("REDIS0009")
	body = append(body, 0x00, 4, 's', 'o', 'l', 'o', 1, 'v') // a string key "solo" = "v"
	body = append(body, 0xff)
	sum := ^crc64.Update(^uint64(0), crc64.MakeTable(bits.Reverse64(0xad93d23594c935a9)), body)
	body = binary.LittleEndian.AppendUint64(body, sum)
	pb := filepath.Join(t.TempDir(), "noselect.rdb")
	require.NoError(t, os.WriteFile(pb, body, 0o600))
	alone, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: t.TempDir()}, pb)
	require.NoError(t, err, "redis loads the part alone")
	alone.Close()

	merged, err := mergeFiles(t, pa, pb)
	require.NoError(t, err)
	ts, err := redisdata.LoadRDB(ctx, redisdata.LoadConfig{TempDir: t.TempDir()}, merged)
	require.NoError(t, err)
	defer ts.Close()
	got := startServer(t, "gotpw")
	_, err = redisdata.CopyKeys(ctx, ts.Endpoint(), got.endpoint(), redisdata.CopyOptions{})
	require.NoError(t, err)
	c0 := got.client(0)
	defer c0.Close()
	require.Equal(t, "v", c0.Get(ctx, "solo").Val(), "the second part's key is in database 0")
	c3 := got.client(3)
	defer c3.Close()
	require.Equal(t, "a", c3.Get(ctx, "in3").Val())
	require.Zero(t, c3.Exists(ctx, "solo").Val())
}
