package local_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc64"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// redisCRC64 is the checksum at the end of a DUMP payload: CRC-64/Jones (reflected,
// initial value 0, no final xor), as redis' crc64.c computes it.
func redisCRC64(data []byte) uint64 {
	tab := crc64.MakeTable(0x95ac9329ac4bc9b5) // the Jones polynomial, reversed
	// crc64.Update inverts the value before and after; undo both for redis' variant.
	return ^crc64.Update(^uint64(0), tab, data)
}

func TestRedisCRC64(t *testing.T) {
	t.Parallel()
	require.Equal(t, uint64(0xe9c6d914c4b8d9ca), redisCRC64([]byte("123456789")))
}

// TestRestore_MalformedPayloadRefused: a DUMP payload whose listpack lies about an
// entry's length, with a valid checksum, is refused to the tenant (redis checks every
// payload a client RESTOREs in depth) and to clouddb's own user, which replays what
// replication sources send; a valid payload still restores.
func TestRestore_MalformedPayloadRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 62, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	ac := admin(t, filepath.Join(b.dir, "62"), in.Port)
	c := client(t, in.Port, in.Password)
	// Small enough to be a listpack, and to be dumped uncompressed.
	require.NoError(t, c.HSet(ctx, "h", "fieldA", "vX").Err())
	require.Equal(t, "listpack", c.ObjectEncoding(ctx, "h").Val())
	payload, err := c.Dump(ctx, "h").Result()
	require.NoError(t, err)

	bad := []byte(payload)
	i := bytes.Index(bad, []byte("fieldA"))
	require.Positive(t, i)
	require.Equal(t, byte(0x80|6), bad[i-1], "a 6-byte string entry")
	bad[i-1] = 0x80 | 63 // now it claims 63 bytes, past the end of the listpack
	body := bad[:len(bad)-8]
	binary.LittleEndian.PutUint64(bad[len(bad)-8:], redisCRC64(body))

	err = c.Restore(ctx, "bad", 0, string(bad)).Err()
	require.ErrorContains(t, err, "Bad data format")
	err = ac.Restore(ctx, "bad", 0, string(bad)).Err()
	require.ErrorContains(t, err, "Bad data format")
	require.Zero(t, c.Exists(ctx, "bad").Val())

	require.NoError(t, c.Restore(ctx, "good", 0, payload).Err())
	require.Equal(t, "vX", c.HGet(ctx, "good", "fieldA").Val())
	require.NoError(t, c.Ping(ctx).Err())
	cfg, err := ac.ConfigGet(ctx, "sanitize-dump-payload").Result()
	require.NoError(t, err)
	require.Equal(t, "clients", cfg["sanitize-dump-payload"])
}
