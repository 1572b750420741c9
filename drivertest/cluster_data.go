package drivertest

import (
	"bytes"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// testClusterData: the data paths and users of a cluster beyond Ensure: a stream loaded
// (StreamLoader) and a live server copied (CopyFrom) put each key on the shard that
// serves its slot; SetUsers reaches every node, and its users hold after the next Ensure
// and after the nodes start again (with replication, the replicas still sync: the
// config SetUsers rewrote keeps what the cluster needs).
func testClusterData(t *testing.T, h Harness) {
	need(t, "Cluster", h.Cluster)
	e := setup(t, h)
	src := e.instance(t, 2101)
	e.ensure(t, src)
	sc := e.client(t, src)
	setKeys(t, e.ctx, sc, "s", 300)
	rdb, err := os.ReadFile(snapshotFile(t, e, src, 0))
	require.NoError(t, err)

	in := e.instance(t, 2102)
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	in.Replication = h.Replication
	e.ensure(t, in)
	c := e.clusterClient(t, in)
	clusterWrite(t, e, c, "old", 20)
	requireShardsHold := func(total int64, what string) {
		t.Helper()
		counts := clusterKeys(t, e, c)
		require.Len(t, counts, 2)
		require.EqualValues(t, total, sum(counts), what)
		for _, n := range counts {
			require.Positive(t, n, "%s: every shard holds keys", what)
		}
	}

	if sl, ok := e.d.(clouddb.StreamLoader); ok {
		require.NoError(t, sl.LoadStream(e.ctx, in, bytes.NewReader(rdb)))
		e.requireRunning(t, in, true, "after LoadStream")
		requireKeys(t, e.ctx, c, "s", 300)
		requireShardsHold(300, "a stream replaces the data")
	}

	setKeys(t, e.ctx, sc, "c", 100)
	require.NoError(t, e.d.CopyFrom(e.ctx, in, clouddb.RedisEndpoint{Addr: e.addr(t, src), Password: src.Password}))
	e.requireRunning(t, in, true, "after CopyFrom")
	requireKeys(t, e.ctx, c, "s", 300)
	requireKeys(t, e.ctx, c, "c", 100)
	requireShardsHold(400, "a copy replaces the data")
	if h.Replication {
		requireReplicasAcked(t, e, c)
	}

	us, ok := e.d.(clouddb.UserSetter)
	if !ok {
		return
	}
	in.Users = []clouddb.DatabaseUser{{Name: "dana", Password: "Dana.pw1", Rule: readWrite}}
	require.NoError(t, us.SetUsers(e.ctx, in))
	dana := e.clusterClientAs(t, in, "dana", "Dana.pw1")
	forEachMaster(t, e, dana, func(m *redis.Client) {
		require.NoError(t, m.Ping(e.ctx).Err(), "dana on %s", m.Options().Addr)
	})
	requireKeys(t, e.ctx, dana, "c", 100)
	e.ensure(t, in)
	e.requireRunning(t, in, true, "after SetUsers, then Ensure")
	clusterWrite(t, e, dana, "dana", 50)

	require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID))
	e.ensure(t, in)
	e.requireRunning(t, in, true, "started again after SetUsers")
	again := e.clusterClientAs(t, in, "dana", "Dana.pw1")
	clusterWrite(t, e, again, "after", 50)
	requireKeys(t, e.ctx, again, "after", 50)
	if h.Replication {
		requireReplicasAcked(t, e, again)
	}
}

// testClusterReplicationOn: replication turned on for a running cluster gives every
// shard a replica with its data, which then takes over when its primary dies; the shard
// count and OSS Cluster itself do not change live (an error), nor does the cluster.
func testClusterReplicationOn(t *testing.T, h Harness) {
	need(t, "Cluster", h.Cluster)
	need(t, "Replication", h.Replication)
	e := setup(t, h)
	in := e.instance(t, 2201)
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	e.ensure(t, in)
	c := e.clusterClient(t, in)
	clusterWrite(t, e, c, "k", 200)

	reshard := in
	reshard.Shards, reshard.MaxMemoryBytes = 3, 3*in.MaxMemoryBytes/2
	require.Error(t, e.d.Ensure(e.ctx, reshard), "a change of the shard count")
	e.requireRunning(t, in, true, "after a refused change of the shard count")

	in.Replication = true
	e.ensure(t, in)
	e.requireRunning(t, in, true, "with replication turned on")
	require.Len(t, masters(t, e, in), 2)
	requireKeys(t, e.ctx, c, "k", 200)
	requireReplicasAcked(t, e, c)

	h.Kill(t, e.d, in, e.addr(t, in))
	e.ensure(t, in)
	e.requireRunning(t, in, true, "after the endpoint's primary died")
	c = e.clusterClient(t, in)
	requireKeys(t, e.ctx, c, "k", 200)
	require.EqualValues(t, 200, sum(clusterKeys(t, e, c)))

	off := in
	off.Replication = false
	require.Error(t, e.d.Ensure(e.ctx, off), "replication turned off on a cluster")
	e.requireRunning(t, in, true, "after a refused change of replication")
}
