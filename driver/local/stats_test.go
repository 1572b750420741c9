package local_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStats_SingleServer: the figures of a database are those of its server, as its
// tenant writes keys and holds connections; the driver's own connection is not counted.
func TestStats_SingleServer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.instance(t, 1, "none")
	ctx := ctxT(t)
	require.NoError(t, b.driver.Ensure(ctx, in))

	s, err := b.driver.Stats(ctx, in)
	require.NoError(t, err)
	require.Zero(t, s.Keys)
	require.Zero(t, s.ConnectedClients)
	require.Equal(t, in.MaxMemoryBytes, s.MaxMemoryBytes)
	require.Positive(t, s.UsedMemoryBytes)

	c := client(t, in.Port, in.Password)
	for i := range 25 {
		require.NoError(t, c.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err())
	}
	require.NoError(t, c.Do(ctx, "SELECT", 3).Err()) // keys of every logical database count
	require.NoError(t, c.Set(ctx, "other", 1, 0).Err())

	time.Sleep(300 * time.Millisecond) // the server samples its ops every 100ms
	s, err = b.driver.Stats(ctx, in)
	require.NoError(t, err)
	require.EqualValues(t, 26, s.Keys)
	require.EqualValues(t, 1, s.ConnectedClients, "the tenant's connection, not the driver's")
	require.Positive(t, s.OpsPerSecond, "the writes just made")

	// Idle past the server's sampling window (1.6s): the reading does not count itself.
	time.Sleep(2500 * time.Millisecond)
	s, err = b.driver.Stats(ctx, in)
	require.NoError(t, err)
	require.Zero(t, s.OpsPerSecond)

	require.NoError(t, b.driver.Stop(ctx, in.DatabaseID))
	_, err = b.driver.Stats(ctx, in)
	require.Error(t, err, "a stopped database has no figures")
}

// TestStats_ClusterSumsPrimaries: a cluster's keys and memory limit are the sums over its
// shards' primaries; the replicas' copies are not counted again.
func TestStats_ClusterSumsPrimaries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.clustered(t, 2, 2, true, "none")
	c := clusterClient(t, in)
	clusterWrite(t, c, "key", 40)
	requireReplicasAcked(t, c)

	s, err := b.driver.Stats(ctxT(t), in)
	require.NoError(t, err)
	require.EqualValues(t, 40, s.Keys)
	require.Equal(t, in.MaxMemoryBytes, s.MaxMemoryBytes, "each shard's share, summed")
	require.Positive(t, s.UsedMemoryBytes)
}
