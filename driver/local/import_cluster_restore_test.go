package local_test

import (
	"github.com/stretchr/testify/require"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadCluster_FailedReloadRestoresPersistence: when a shard's reload fails after the
// import stopped its snapshots (here its dump.rdb cannot be replaced), the node gets its
// persistence back before the import returns, not at the reconciler's next Ensure.
func TestLoadCluster_FailedReloadRestoresPersistence(t *testing.T) {
	for _, persistence := range []string{"snapshot-every-1-hour", "aof-every-1-second"} {
		t.Run(persistence, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			src := b.clustered(t, 1, 2, false, "none")
			clusterWrite(t, clusterClient(t, src), "new:", 50)
			parts := backupParts(t, b, src)

			dst := b.clustered(t, 2, 2, false, persistence)
			// The rename over shard 1's dump.rdb fails: a directory that is not empty.
			dump := filepath.Join(b.dir, "2", "node2", "dump.rdb")
			os.Remove(dump)
			require.NoError(t, os.MkdirAll(filepath.Join(dump, "x"), 0o700))
			err := b.driver.Load(ctx, dst, parts)
			require.ErrorContains(t, err, "some shards only")
			ic := internalClient(t, filepath.Join(b.dir, "2", "node2"))
			got, err := ic.ConfigGet(ctx, "*").Result()
			require.NoError(t, err)
			want := map[string][2]string{
				"snapshot-every-1-hour": {"3600 1", "no"},
				"aof-every-1-second":    {"", "yes"},
			}[persistence]
			require.Equal(t, want[0], got["save"], "shard 1's snapshots")
			require.Equal(t, want[1], got["appendonly"], "shard 1's AOF")
		})
	}
}
