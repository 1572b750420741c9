package drivertest

import (
	"context"
	"io"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// writeAcked writes n keys prefix<i> = i, each acknowledged by the replica (WAIT 1).
func writeAcked(t *testing.T, e *env, c *redis.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, c.Set(e.ctx, prefix+strconv.Itoa(i), i, 0).Err())
		if i%50 == 49 || i == n-1 {
			acked, err := c.Wait(e.ctx, 1, 5*time.Second).Result()
			require.NoError(t, err)
			require.EqualValues(t, 1, acked, "WAIT 1 after key %s%d", prefix, i)
		}
	}
}

// testReplication: a replicated database's replica follows its primary; when the primary
// dies, Ensure has the replica take over on the same endpoint with every acknowledged
// write, and the dead node comes back as the new replica (so that a second failover
// keeps the data too).
func testReplication(t *testing.T, h Harness) {
	need(t, "Replication", h.Replication)
	e := setup(t, h)
	in := e.instance(t, 1801)
	in.Replication = true
	in.Users = []clouddb.DatabaseUser{{Name: "fa", Password: "Full.Acc3ss", Rule: fullAccess}}
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c := e.client(t, in)
	writeAcked(t, e, c, "k", 200)
	require.Equal(t, "1", info(t, e.ctx, c, "replication", "connected_slaves"))
	run := runID(t, e.ctx, c)
	e.ensure(t, in)
	require.Equal(t, run, runID(t, e.ctx, c), "Ensure of a running replicated database restarts nothing")

	addr := e.addr(t, in)
	for round, prefix := range []string{"after", "again"} {
		h.Kill(t, e.d, in, addr)
		e.requireRunning(t, in, false, "round %d: the primary is gone", round)
		e.ensure(t, in)
		e.requireRunning(t, in, true, "round %d", round)
		// New connections: the pool's died with the server.
		c = e.client(t, in)
		next := runID(t, e.ctx, c)
		require.NotEqual(t, run, next, "round %d: another server serves the endpoint", round)
		run = next
		requireKeys(t, e.ctx, c, "k", 200)
		if round > 0 {
			requireKeys(t, e.ctx, c, "after", 20)
		}
		writeAcked(t, e, c, prefix, 20) // a new replica acknowledges
		require.Equal(t, "master", info(t, e.ctx, c, "replication", "role"))
		require.Equal(t, "1", e.clientAs(t, in, "fa", "Full.Acc3ss").Get(e.ctx, "k1").Val(),
			"round %d: the new primary has the named users", round)
		if round == 0 {
			// A password changed between failovers is the next primary's too.
			old := in.Password
			in.Password = "changed-" + old
			e.ensure(t, in)
			requireRefused(t, e.clientAs(t, in, "", old).Ping(e.ctx).Err(), "the old password")
		}
	}

	// Stopped, both nodes stop; started again, both run.
	require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID))
	e.requireRunning(t, in, false, "after Stop")
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c = e.client(t, in)
	writeAcked(t, e, c, "restarted", 5)
}

// testReplicationToggle: replication turned on for a live database keeps its data and
// gives it a replica that has it; turned off, the data stays and no replica follows.
func testReplicationToggle(t *testing.T, h Harness) {
	need(t, "Replication", h.Replication)
	e := setup(t, h)
	in := e.instance(t, 1851)
	e.ensure(t, in)
	c := e.client(t, in)
	setKeys(t, e.ctx, c, "k", 100)

	in.Replication = true
	e.requireRunning(t, in, false, "no replica yet")
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c = e.client(t, in)
	requireKeys(t, e.ctx, c, "k", 100)
	writeAcked(t, e, c, "acked", 10)

	// The replica had every key: it serves them once the primary is gone.
	h.Kill(t, e.d, in, e.addr(t, in))
	e.ensure(t, in)
	c = e.client(t, in)
	requireKeys(t, e.ctx, c, "k", 100)
	requireKeys(t, e.ctx, c, "acked", 10)

	in.Replication = false
	e.requireRunning(t, in, false, "a replica too many")
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c = e.client(t, in)
	requireKeys(t, e.ctx, c, "k", 100)
	n, err := c.DBSize(e.ctx).Result()
	require.NoError(t, err)
	require.EqualValues(t, 110, n)
	require.Equal(t, "0", info(t, e.ctx, c, "replication", "connected_slaves"))
}

// testReplicationTLS: a replicated database with TLS serves TLS only; when its primary
// dies the replica, which followed it over TLS, takes over with every acknowledged
// write; TLS turned off, then on again, keeps the data and a replica that follows.
func testReplicationTLS(t *testing.T, h Harness) {
	need(t, "Replication", h.Replication)
	need(t, "TLS", h.TLS)
	e := setup(t, h)
	in := e.instance(t, 2151)
	in.Replication = true
	in.TLS = &clouddb.InstanceTLS{}
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	require.Error(t, e.client(t, in).Ping(e.ctx).Err(), "plain TCP is refused")
	c := e.tlsClient(t, in, h.CA)
	writeAcked(t, e, c, "k", 100)

	h.Kill(t, e.d, in, e.addr(t, in))
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c = e.tlsClient(t, in, h.CA)
	requireKeys(t, e.ctx, c, "k", 100)
	writeAcked(t, e, c, "after", 10) // the node back replicates over TLS

	in.TLS = nil
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c = e.client(t, in)
	requireKeys(t, e.ctx, c, "after", 10)
	writeAcked(t, e, c, "plain", 10)

	in.TLS = &clouddb.InstanceTLS{}
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c = e.tlsClient(t, in, h.CA)
	requireKeys(t, e.ctx, c, "k", 100)
	requireKeys(t, e.ctx, c, "plain", 10)
	writeAcked(t, e, c, "again", 10)
}

// testReplicationPersistenceChange: a replicated database's persistence changed between
// none and a persistent one keeps its data, its replica follows again, and the data
// persists from then on (it is kept over Stop).
func testReplicationPersistenceChange(t *testing.T, h Harness) {
	need(t, "Replication", h.Replication)
	need(t, "PersistenceChange", h.PersistenceChange)
	e := setup(t, h)
	in := e.instance(t, 2161)
	in.Replication = true
	e.ensure(t, in)
	writeAcked(t, e, e.client(t, in), "k", 100)
	for _, persistence := range []string{"aof-every-1-second", "none"} {
		in.DataPersistence = persistence
		e.ensure(t, in)
		e.requireRunning(t, in, true)
		c := e.client(t, in)
		requireKeys(t, e.ctx, c, "k", 100)
		writeAcked(t, e, c, persistence, 10)
		if persistence != "none" {
			time.Sleep(1100 * time.Millisecond) // appendfsync everysec
			require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID))
			e.ensure(t, in)
			e.requireRunning(t, in, true)
			requireKeys(t, e.ctx, e.client(t, in), "k", 100)
		}
	}
	requireKeys(t, e.ctx, e.client(t, in), "aof-every-1-second", 10)
}

// testLoadReplicated: data loaded into a replicated database reaches its replica, which
// serves it after a failover.
func testLoadReplicated(t *testing.T, h Harness) {
	need(t, "Replication", h.Replication)
	e := setup(t, h)
	src := filledSource(t, e, 1871, 100, 100)
	file := snapshotFile(t, e, src, 0)
	dst := e.instance(t, 1872)
	dst.Replication = true
	withKeep(t, e, dst)

	require.NoError(t, e.d.Load(e.ctx, dst, []string{file}))
	e.requireRunning(t, dst, true)
	c := e.client(t, dst)
	requireFilled(t, e, c, 100, 100)
	acked, err := c.Wait(e.ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked, "a replica follows the loaded data")

	h.Kill(t, e.d, dst, e.addr(t, dst))
	e.ensure(t, dst)
	requireFilled(t, e, e.client(t, dst), 100, 100)
}

// clusterClient is a cluster-aware client that starts from the database's endpoint only,
// as a tenant's does.
func (e *env) clusterClient(t *testing.T, in clouddb.Instance) *redis.ClusterClient {
	t.Helper()
	return e.clusterClientAs(t, in, "", in.Password)
}

// clusterClientAs is a cluster client logged in as user.
func (e *env) clusterClientAs(t *testing.T, in clouddb.Instance, user, password string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:           []string{e.addr(t, in)},
		Username:        user,
		Password:        password,
		Protocol:        2,
		DisableIdentity: true,
		DialTimeout:     5 * time.Second,
		MaxRedirects:    8,
		// Off as clouddb's own clients have them: go-redis' cluster client otherwise
		// logs a failed handler registration for every node it connects to.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// masters returns the address of each shard's master, as CLUSTER SLOTS announces them
// to a tenant at the endpoint, after checking that the shards serve every slot.
func masters(t *testing.T, e *env, in clouddb.Instance) []string {
	t.Helper()
	slots, err := e.client(t, in).ClusterSlots(e.ctx).Result() //nolint:staticcheck // CLUSTER SLOTS is what most clients read
	require.NoError(t, err)
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	next := 0
	var out []string
	for _, s := range slots {
		require.Equal(t, next, s.Start, "slots from %d are served", next)
		require.NotEmpty(t, s.Nodes)
		next = s.End + 1
		if !slices.Contains(out, s.Nodes[0].Addr) {
			out = append(out, s.Nodes[0].Addr)
		}
	}
	require.Equal(t, 16384, next, "every slot is served")
	return out
}

func clusterWrite(t *testing.T, e *env, c *redis.ClusterClient, prefix string, n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, c.Set(e.ctx, prefix+strconv.Itoa(i), i, 0).Err(), "key %s%d", prefix, i)
	}
}

// forEachMaster runs fn on every master of the cluster, one at a time.
func forEachMaster(t *testing.T, e *env, c *redis.ClusterClient, fn func(m *redis.Client)) {
	t.Helper()
	var mu sync.Mutex
	require.NoError(t, c.ForEachMaster(e.ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		fn(m)
		return nil
	}))
}

// clusterKeys is the number of keys of every master.
func clusterKeys(t *testing.T, e *env, c *redis.ClusterClient) []int64 {
	t.Helper()
	var out []int64
	forEachMaster(t, e, c, func(m *redis.Client) {
		n, err := m.DBSize(e.ctx).Result()
		require.NoError(t, err)
		out = append(out, n)
	})
	return out
}

// requireReplicasAcked checks that every shard's replica has the shard's writes.
func requireReplicasAcked(t *testing.T, e *env, c *redis.ClusterClient) {
	t.Helper()
	forEachMaster(t, e, c, func(m *redis.Client) {
		n, err := m.Wait(e.ctx, 1, 5*time.Second).Result()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "WAIT 1 on %s", m.Options().Addr)
	})
}

func sum(ns []int64) int64 {
	var s int64
	for _, n := range ns {
		s += n
	}
	return s
}

// testCluster: an OSS Cluster database of three shards announces three masters, its
// endpoint one of them, each with its share of the memory limit; a cluster client that
// starts from the endpoint reads and writes every slot; a backup has one part per
// shard, and its parts load into a cluster of another shape key for key.
func testCluster(t *testing.T, h Harness) {
	need(t, "Cluster", h.Cluster)
	e := setup(t, h)
	in := e.instance(t, 1901)
	share := in.MaxMemoryBytes
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 3, 3*share
	e.ensure(t, in)
	e.requireRunning(t, in, true)

	ms := masters(t, e, in)
	require.Len(t, ms, 3)
	require.Contains(t, ms, e.addr(t, in), "the endpoint is a shard's master")
	c := e.clusterClient(t, in)
	clusterWrite(t, e, c, "key:", 600)
	requireKeys(t, e.ctx, c, "key:", 600)
	counts := clusterKeys(t, e, c)
	require.Len(t, counts, 3)
	for _, n := range counts {
		require.Positive(t, n, "every shard holds keys")
	}
	forEachMaster(t, e, c, func(m *redis.Client) {
		require.Equal(t, strconv.FormatInt(share, 10), info(t, e.ctx, m, "memory", "maxmemory"), "a shard's share of the limit")
		// Every node keeps the tenant out of its administration, not the endpoint's alone.
		requireNoPerm(t, m.Do(e.ctx, "debug", "sleep", "0").Err(), "DEBUG on "+m.Options().Addr)
		requireNoPerm(t, m.Do(e.ctx, "config", "set", "maxmemory", "0").Err(), "CONFIG SET on "+m.Options().Addr)
		requireNoPerm(t, m.Do(e.ctx, "cluster", "forget", "x").Err(), "CLUSTER FORGET on "+m.Options().Addr)
	})

	// The named users and a changed memory limit are every shard's.
	in.Users = []clouddb.DatabaseUser{{Name: "fa", Password: "Full.Acc3ss", Rule: fullAccess}}
	in.MaxMemoryBytes = 2 * in.MaxMemoryBytes
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	requireKeys(t, e.ctx, c, "key:", 600)
	forEachMaster(t, e, c, func(m *redis.Client) {
		require.Equal(t, strconv.FormatInt(2*share, 10), info(t, e.ctx, m, "memory", "maxmemory"), "a shard's share of the new limit")
	})
	fa := e.clusterClientAs(t, in, "fa", "Full.Acc3ss")
	requireKeys(t, e.ctx, fa, "key:", 600)
	clusterWrite(t, e, fa, "fa:", 100)

	var parts []string
	for s := range 3 {
		parts = append(parts, snapshotFile(t, e, in, s))
	}
	_, err := e.d.Snapshot(e.ctx, in, 3, io.Discard)
	require.Error(t, err, "there is no fourth shard")

	dst := e.instance(t, 1902)
	dst.OSSCluster, dst.Shards, dst.MaxMemoryBytes = true, 2, 2*share
	e.ensure(t, dst)
	require.NoError(t, e.d.Load(e.ctx, dst, parts))
	e.requireRunning(t, dst, true)
	dc := e.clusterClient(t, dst)
	requireKeys(t, e.ctx, dc, "key:", 600)
	requireKeys(t, e.ctx, dc, "fa:", 100)
	require.EqualValues(t, 700, sum(clusterKeys(t, e, dc)), "key for key, into two shards")
}

// testClusterUsers: the named users of a cluster whose default user is off reach every
// shard with a cluster client, each as its rule allows: a Read-Only user reads through
// one too.
func testClusterUsers(t *testing.T, h Harness) {
	need(t, "Cluster", h.Cluster)
	e := setup(t, h)
	in := e.instance(t, 1961)
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	in.DefaultUserOff = true
	in.Users = []clouddb.DatabaseUser{
		{Name: "rw", Password: "Read.Wr1te", Rule: readWrite},
		{Name: "ro", Password: "Read.0nly", Rule: readOnly},
	}
	e.ensure(t, in)
	e.requireRunning(t, in, true, "the driver does not need the default user")
	requireRefused(t, e.client(t, in).Ping(e.ctx).Err(), "the default user is off")
	rw := e.clusterClientAs(t, in, "rw", "Read.Wr1te")
	clusterWrite(t, e, rw, "k", 200)
	requireKeys(t, e.ctx, rw, "k", 200)

	// A cluster client learns the shards with CLUSTER SLOTS (or SHARDS), which are in no
	// category a Read-Only rule names.
	roc := e.clusterClientAs(t, in, "ro", "Read.0nly")
	requireKeys(t, e.ctx, roc, "k", 200)
	requireNoPerm(t, roc.Set(e.ctx, "k0", "w", 0).Err(), "a Read-Only user writes")
}

// testClusterStopKeepsData: a cluster with persistence stopped and started again serves
// every slot with its data.
func testClusterStopKeepsData(t *testing.T, h Harness) {
	need(t, "Cluster", h.Cluster)
	need(t, "Persistence", h.Persistence)
	e := setup(t, h)
	in := e.instance(t, 1951)
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	in.DataPersistence = "aof-every-write"
	e.ensure(t, in)
	clusterWrite(t, e, e.clusterClient(t, in), "k", 200)

	require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID))
	e.requireRunning(t, in, false, "after Stop")
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	require.Len(t, masters(t, e, in), 2)
	c := e.clusterClient(t, in)
	requireKeys(t, e.ctx, c, "k", 200)
	require.EqualValues(t, 200, sum(clusterKeys(t, e, c)))
}

// testClusterFailover: in a replicated cluster, a shard whose master dies is served by
// its replica after Ensure, the endpoint's shard included, with every acknowledged write
// and the named users.
func testClusterFailover(t *testing.T, h Harness) {
	need(t, "Cluster", h.Cluster)
	need(t, "Replication", h.Replication)
	e := setup(t, h)
	in := e.instance(t, 2001)
	in.OSSCluster, in.Shards, in.Replication, in.MaxMemoryBytes = true, 2, true, 2*in.MaxMemoryBytes
	in.Users = []clouddb.DatabaseUser{{Name: "rw", Password: "Read.Wr1te", Rule: readWrite}}
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c := e.clusterClient(t, in)
	clusterWrite(t, e, c, "k", 300)
	requireReplicasAcked(t, e, c)

	endpoint := e.addr(t, in)
	ms := masters(t, e, in)
	require.Len(t, ms, 2)
	other := ms[0]
	if other == endpoint {
		other = ms[1]
	}
	for _, victim := range []string{other, endpoint} {
		h.Kill(t, e.d, in, victim)
		e.requireRunning(t, in, false, "the master at %s is gone", victim)
		e.ensure(t, in)
		e.requireRunning(t, in, true)
		c = e.clusterClient(t, in)
		require.Len(t, masters(t, e, in), 2)
		requireKeys(t, e.ctx, c, "k", 300)
		requireKeys(t, e.ctx, e.clusterClientAs(t, in, "rw", "Read.Wr1te"), "k", 300)
	}
	clusterWrite(t, e, c, "after", 50)
	requireReplicasAcked(t, e, c)
	requireKeys(t, e.ctx, c, "after", 50)
	require.EqualValues(t, 350, sum(clusterKeys(t, e, c)))
}
