package local_test

import (
	"encoding/binary"
	"hash/crc64"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestLoadCluster_TooLargeIsTooLarge: a part far larger than a shard's memory (past the
// address space of its checking server, which then aborts on an allocation) fails the
// import as data-too-large, as the swap of a database that is not a cluster does, not as
// an unknown error; the data stays.
func TestLoadCluster_TooLargeIsTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 8*mb
	require.NoError(t, b.driver.Ensure(ctx, in))
	dc := clusterClient(t, in)
	clusterWrite(t, dc, "old:", 50)
	// 4.5 million keys of shard 0 (hash tag {b}, slot 3300), some 350 MB loaded: past the
	// 264 MB its checking server may map.
	data := []byte("REDIS0010")
	for i := range 4_500_000 {
		key := "{b}" + strconv.Itoa(i)
		data = append(data, 0x00, byte(len(key)))
		data = append(data, key...)
		data = append(data, 0xC0, byte(i))
	}
	data = append(data, 0xFF)
	tab := crc64.MakeTable(bits.Reverse64(0xad93d23594c935a9))
	data = binary.LittleEndian.AppendUint64(data, ^crc64.Update(^uint64(0), tab, data))
	file := filepath.Join(t.TempDir(), "big.rdb")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	err := b.driver.Load(ctx, in, []string{file})
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)
	clusterRead(t, dc, "old:", 50)
}
