package local_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoadCluster_BusyShardTouchesNone: a shard whose background save does not end in
// time fails the import before any shard's data is replaced: every shard keeps the data
// of before (not some the new and some the old) and its persistence.
func TestLoadCluster_BusyShardTouchesNone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.clustered(t, 1, 2, false, "none")
	clusterWrite(t, clusterClient(t, src), "new:", 100)
	parts := backupParts(t, b, src)

	dst := b.clustered(t, 2, 2, false, "snapshot-every-1-hour")
	dc := clusterClient(t, dst)
	clusterWrite(t, dc, "old:", 100)
	b.driver.SetStopTimeout(500 * time.Millisecond)
	// Shard 1's primary saves in the background for some 5 s (50 keys, 100 ms each).
	ic := internalClient(t, filepath.Join(b.dir, "2", "node2"))
	require.NoError(t, ic.ConfigSet(ctx, "rdb-key-save-delay", "100000").Err())
	require.NoError(t, ic.BgSave(ctx).Err())
	require.NoError(t, ic.ConfigSet(ctx, "rdb-key-save-delay", "0").Err())

	err := b.driver.Load(ctx, dst, parts)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "some shards only")
	clusterRead(t, dc, "old:", 100)
	require.EqualValues(t, 100, clusterKeys(t, dc, false), "no shard has the new data")
	for _, dir := range []string{filepath.Join(b.dir, "2"), filepath.Join(b.dir, "2", "node2")} {
		save, err := internalClient(t, dir).ConfigGet(ctx, "save").Result()
		require.NoError(t, err)
		require.Equal(t, "3600 1", save["save"], fmt.Sprintf("node %s's snapshots", dir))
	}
}
