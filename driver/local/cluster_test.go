package local_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
)

// clustered returns an OSS Cluster instance of shards shards whose nodes run.
func (b *testBundle) clustered(t *testing.T, id, shards int, replication bool, persistence string) clouddb.Instance {
	t.Helper()
	in := b.instance(t, id, persistence)
	in.OSSCluster = true
	in.Shards = shards
	in.Replication = replication
	in.MaxMemoryBytes = int64(shards) * 64 * mb
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	return in
}

// clusterClient is a cluster-aware client that starts from the database's endpoint only,
// as a tenant's does.
func clusterClient(t *testing.T, in clouddb.Instance) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:           []string{fmt.Sprintf("127.0.0.1:%d", in.Port)},
		Password:        in.Password,
		Protocol:        2,
		DisableIdentity: true,
		DialTimeout:     2 * time.Second,
		MaxRedirects:    8,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// clusterWrite writes n keys spread over every slot and returns them.
func clusterWrite(t *testing.T, c *redis.ClusterClient, prefix string, n int) {
	t.Helper()
	ctx := ctxT(t)
	for i := range n {
		require.NoError(t, c.Set(ctx, prefix+strconv.Itoa(i), i, 0).Err())
	}
}

// requireReplicasAcked checks that every shard's replica has the shard's writes (WAIT 1
// on each primary).
func requireReplicasAcked(t *testing.T, c *redis.ClusterClient) {
	t.Helper()
	require.NoError(t, c.ForEachMaster(ctxT(t), func(ctx context.Context, m *redis.Client) error {
		n, err := m.Wait(ctx, 1, 5*time.Second).Result()
		if err == nil && n != 1 {
			err = fmt.Errorf("WAIT 1 acknowledged by %d", n)
		}
		return err
	}))
}

func clusterRead(t *testing.T, c *redis.ClusterClient, prefix string, n int) {
	t.Helper()
	ctx := ctxT(t)
	for i := range n {
		v, err := c.Get(ctx, prefix+strconv.Itoa(i)).Result()
		require.NoError(t, err, "key %s%d", prefix, i)
		require.Equal(t, strconv.Itoa(i), v)
	}
}

// masters returns the addresses CLUSTER SLOTS gives for the masters, by slot range start.
func masters(t *testing.T, in clouddb.Instance) map[int]string {
	t.Helper()
	c := client(t, in.Port, in.Password)
	slots, err := c.ClusterSlots(ctxT(t)).Result() //nolint:staticcheck // CLUSTER SLOTS is what most clients read
	require.NoError(t, err)
	out := map[int]string{}
	for _, s := range slots {
		out[s.Start] = s.Nodes[0].Addr
	}
	return out
}

func TestCluster_ThreeShardsThroughClusterClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.clustered(t, 1, 3, false, "none")
	requireRunning(t, b.driver, in, true)

	// CLUSTER SLOTS announces three masters, each at an address a client reaches; the
	// endpoint is one of them.
	ms := masters(t, in)
	require.Len(t, ms, 3)
	require.Equal(t, fmt.Sprintf("127.0.0.1:%d", in.Port), ms[0])
	for start, addr := range ms {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		require.NoError(t, err, "the master of slots from %d at %s", start, addr)
		conn.Close()
	}
	c := clusterClient(t, in)
	clusterWrite(t, c, "key:", 600)
	clusterRead(t, c, "key:", 600)
	// Every shard holds keys.
	var counts atomic.Int64
	require.NoError(t, c.ForEachMaster(ctxT(t), func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if err == nil && n > 0 {
			counts.Add(1)
		}
		return err
	}))
	require.EqualValues(t, 3, counts.Load())
	// Each shard's maxmemory is its share.
	admin := admin(t, b.dir+"/1", in.Port)
	got, err := admin.ConfigGet(ctxT(t), "maxmemory").Result()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(64*mb), got["maxmemory"])

	// Idempotent, and a new driver adopts every node.
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	before := serversIn(t, b.dir+"/1") + serversIn(t, b.dir+"/1/node2") + serversIn(t, b.dir+"/1/node4")
	require.Equal(t, 3, before)
	d2 := mustDriver(t, b.dir)
	require.NoError(t, d2.Ensure(ctxT(t), in))
	requireRunning(t, d2, in, true)
	require.Equal(t, 1, serversIn(t, b.dir+"/1"))
	require.Equal(t, 1, serversIn(t, b.dir+"/1/node2"))
	clusterRead(t, c, "key:", 600)
}

func TestCluster_ShardFailover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.clustered(t, 1, 2, true, "none")
	requireRunning(t, b.driver, in, true)
	c := clusterClient(t, in)
	clusterWrite(t, c, "k", 300)
	requireReplicasAcked(t, c)

	// Kill the primary of shard 1 (node 2): its replica takes its slots with the data.
	p2 := nodePid(t, b.dir+"/1/node2")
	killAndWait(t, p2)
	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	requireRunning(t, b.driver, in, true)
	require.NotEqual(t, p2, nodePid(t, b.dir+"/1/node2"), "the dead node runs again")
	c2 := clusterClient(t, in)
	clusterRead(t, c2, "k", 300)

	// The endpoint's own node (shard 0's primary) dies: the endpoint comes back as a
	// node of the cluster, whose replica serves shard 0 meanwhile.
	p0 := nodePid(t, b.dir+"/1")
	killAndWait(t, p0)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	c3 := clusterClient(t, in)
	clusterRead(t, c3, "k", 300)
	clusterWrite(t, c3, "after", 50)
}

// nodePid reads a node's pid file.
func nodePid(t *testing.T, dir string) int {
	t.Helper()
	data, err := readFile(dir + "/redis.pid")
	require.NoError(t, err)
	p, err := strconv.Atoi(data)
	require.NoError(t, err)
	return p
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func TestCluster_BackupPartsImportIntoAnotherCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.clustered(t, 1, 3, false, "none")
	c := clusterClient(t, src)
	clusterWrite(t, c, "key:", 500)
	ctx := ctxT(t)
	require.NoError(t, c.HSet(ctx, "{user:1}:profile", "name", "ada").Err())
	require.NoError(t, c.RPush(ctx, "{user:1}:events", "a", "b", "c").Err())

	// One RDB per shard: the parts of one backup.
	var parts []string
	for s := range 3 {
		f, err := os.Create(fmt.Sprintf("%s/part%d.rdb", t.TempDir(), s))
		require.NoError(t, err)
		n, err := b.driver.Snapshot(ctx, src, s, f)
		require.NoError(t, err)
		require.Positive(t, n)
		require.NoError(t, f.Close())
		parts = append(parts, f.Name())
	}
	_, err := b.driver.Snapshot(ctx, src, 3, io.Discard)
	require.Error(t, err, "there is no fourth shard")

	// Into a cluster of another shape: every key lands in the shard of its slot.
	for _, shards := range []int{3, 2} {
		dst := b.clustered(t, 10+shards, shards, false, "none")
		require.NoError(t, b.driver.Load(ctx, dst, parts))
		dc := clusterClient(t, dst)
		clusterRead(t, dc, "key:", 500)
		require.Equal(t, "ada", dc.HGet(ctx, "{user:1}:profile", "name").Val())
		require.Equal(t, []string{"a", "b", "c"}, dc.LRange(ctx, "{user:1}:events", 0, -1).Val())
		var total atomic.Int64
		require.NoError(t, dc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := m.DBSize(ctx).Result()
			total.Add(n)
			return err
		}))
		require.EqualValues(t, 502, total.Load(), "key for key, into %d shards", shards)
	}
}

// A database stored with the OSS Cluster API before clouddb ran clusters ran as one server:
// it becomes a one-shard cluster with its data. One that cannot (keys outside database 0,
// which redis 7.0 cannot load in cluster mode; a replica) is refused, left as it runs.
func TestCluster_StandaloneBecomesOneShardCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	c := client(t, in.Port, in.Password)
	for i := range 100 {
		require.NoError(t, c.Set(ctxT(t), "k"+strconv.Itoa(i), i, 0).Err())
	}

	in.OSSCluster = true
	in.Shards = 1
	in.Replication = true // a replica joins as a new cluster node
	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	requireRunning(t, b.driver, in, true)
	cc := clusterClient(t, in)
	clusterRead(t, cc, "k", 100)
	require.Equal(t, map[int]string{0: fmt.Sprintf("127.0.0.1:%d", in.Port)}, masters(t, in))
	clusterWrite(t, cc, "new", 100) // every slot is served
	requireReplicasAcked(t, cc)

	// Keys in database 3: refused, the server left running as it is.
	other := b.instance(t, 2, "none")
	require.NoError(t, b.driver.Ensure(ctxT(t), other))
	oc := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", other.Port), Password: other.Password, DB: 3, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { oc.Close() })
	require.NoError(t, oc.Set(ctxT(t), "elsewhere", 1, 0).Err())
	before := pid(t, b.driver, 2)
	other.OSSCluster, other.Shards = true, 1
	require.ErrorContains(t, b.driver.Ensure(ctxT(t), other), "keys in logical database 3")
	require.Equal(t, before, pid(t, b.driver, 2))
	require.Equal(t, "1", oc.Get(ctxT(t), "elsewhere").Val())
}

// A TLS cluster: its bus speaks TLS, CLUSTER SLOTS announces the TLS ports, and a
// cluster client that trusts the CA (and presents an allowed certificate) reaches every
// shard; a replicated TLS database fails over with its certificate.
func TestCluster_TLS(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ca := newCA(t)
	dir := t.TempDir()
	b := &testBundle{dir: dir, driver: tlsDriver(t, dir, ca)}
	certPEM, pair := clientCert(t, "tenant")
	in := b.instance(t, 1, "none")
	in.OSSCluster, in.Shards, in.Replication = true, 2, true
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certPEM}}
	require.NoError(t, b.driver.Ensure(ctx, in))
	requireRunning(t, b.driver, in, true)

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertificatePEM()))
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{fmt.Sprintf("127.0.0.1:%d", in.Port)}, Password: in.Password, Protocol: 2, DisableIdentity: true,
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	})
	t.Cleanup(func() { cc.Close() })
	clusterWrite(t, cc, "k", 200)
	clusterRead(t, cc, "k", 200)
	requireReplicasAcked(t, cc)
	// Without the client certificate no node lets a client in.
	plain := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{fmt.Sprintf("127.0.0.1:%d", in.Port)}, Password: in.Password, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	})
	t.Cleanup(func() { plain.Close() })
	require.Error(t, plain.Ping(ctx).Err())

	// Shard 0's primary, the endpoint's node, dies: its replica takes the slots.
	killAndWait(t, nodePid(t, dir+"/1"))
	require.NoError(t, b.driver.Ensure(ctx, in))
	cc2 := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{fmt.Sprintf("127.0.0.1:%d", in.Port)}, Password: in.Password, Protocol: 2, DisableIdentity: true,
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	})
	t.Cleanup(func() { cc2.Close() })
	clusterRead(t, cc2, "k", 200)
}

// The ports of a cluster's nodes (but the endpoint's) are the driver's to pick: never one
// it is told to avoid (the databases' range), never one of another node.
func TestCluster_NodePortsAvoidTheDatabasesRange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := local.New(local.Config{Dir: dir, Host: "127.0.0.1", StartTimeout: 10 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(newTestWriter(t), nil)),
		AvoidPorts: func(p int) bool { return p%2 == 0 }})
	require.NoError(t, err)
	b := &testBundle{dir: dir, driver: d}
	in := b.clustered(t, 1, 2, true, "none")
	data, err := os.ReadFile(dir + "/1/topology.json")
	require.NoError(t, err)
	var topo struct {
		Ports map[string]struct{ Port, Bus int } `json:"ports"`
	}
	require.NoError(t, json.Unmarshal(data, &topo))
	require.Len(t, topo.Ports, 4)
	seen := map[int]bool{}
	for node, p := range topo.Ports {
		if node != "0" {
			require.Equal(t, 1, p.Port%2, "node %s port %d", node, p.Port)
		} else {
			require.Equal(t, in.Port, p.Port)
		}
		require.Equal(t, 1, p.Bus%2, "node %s bus %d", node, p.Bus)
		require.False(t, seen[p.Port] || seen[p.Bus], "a port given twice")
		seen[p.Port], seen[p.Bus] = true, true
	}
}

// A cluster node's port taken while the node was down: the node starts on new ports and
// the cluster follows; its data stays.
func TestCluster_NodeMovesOffATakenPort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.clustered(t, 1, 2, false, "aof-every-write")
	c := clusterClient(t, in)
	clusterWrite(t, c, "k", 200)
	require.NoError(t, b.driver.Stop(ctxT(t), 1))

	data, err := os.ReadFile(b.dir + "/1/topology.json")
	require.NoError(t, err)
	var topo struct {
		Ports map[string]struct{ Port, Bus int } `json:"ports"`
	}
	require.NoError(t, json.Unmarshal(data, &topo))
	taken := topo.Ports["2"].Port
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", taken))
	require.NoError(t, err)
	defer l.Close()

	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	requireRunning(t, b.driver, in, true)
	ms := masters(t, in)
	require.Len(t, ms, 2)
	for _, addr := range ms {
		require.NotEqual(t, fmt.Sprintf("127.0.0.1:%d", taken), addr, "the cluster announces the node's new port")
	}
	clusterRead(t, clusterClient(t, in), "k", 200)
}

// An import one shard cannot hold (hash tags put every key in one shard, whose limit is
// its share of the database's) is refused before anything is written, as is one with keys
// outside database 0 in any part: the cluster keeps its data.
func TestCluster_ImportRefusedBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	sc := client(t, src.Port, src.Password)
	big := strings.Repeat("x", 100<<10)
	for i := range 120 { // about 12 MB, all in the slot of {tag}: more than a shard, less than both
		require.NoError(t, sc.Set(ctx, fmt.Sprintf("{tag}:%d", i), big, 0).Err())
	}
	crowded := filepath.Join(t.TempDir(), "crowded.rdb")
	snapshot(t, b, src, crowded)
	require.NoError(t, sc.FlushAll(ctx).Err())
	sc3 := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", src.Port), Password: src.Password, DB: 3, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { sc3.Close() })
	require.NoError(t, sc3.Set(ctx, "elsewhere", 1, 0).Err())
	otherDB := filepath.Join(t.TempDir(), "db3.rdb")
	snapshot(t, b, src, otherDB)

	dst := b.instance(t, 2, "none")
	dst.OSSCluster, dst.Shards, dst.MaxMemoryBytes = true, 2, 16*mb // 8 MB a shard
	require.NoError(t, b.driver.Ensure(ctx, dst))
	dc := clusterClient(t, dst)
	clusterWrite(t, dc, "kept", 50)

	err := b.driver.Load(ctx, dst, []string{crowded})
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)
	require.ErrorContains(t, err, "shard")
	clusterRead(t, dc, "kept", 50)

	// A first part that fits, then one with keys in database 3: nothing is written.
	require.NoError(t, sc.FlushAll(ctx).Err())
	require.NoError(t, sc.Set(ctx, "fits", 1, 0).Err())
	fits := filepath.Join(t.TempDir(), "fits.rdb")
	snapshot(t, b, src, fits)
	require.ErrorContains(t, b.driver.Load(ctx, dst, []string{fits, otherDB}), "logical database 3")
	clusterRead(t, dc, "kept", 50)
	require.Equal(t, redis.Nil, dc.Get(ctx, "fits").Err())
}

// snapshot writes in's data to path.
func snapshot(t *testing.T, b *testBundle, in clouddb.Instance, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = b.driver.Snapshot(ctxT(t), in, 0, f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
