package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// backupParts writes one RDB file per shard of in: the parts of one backup.
func backupParts(t *testing.T, b *testBundle, in clouddb.Instance) []string {
	t.Helper()
	var parts []string
	for s := range in.Shards {
		f, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprintf("part%d.rdb", s)))
		require.NoError(t, err)
		_, err = b.driver.Snapshot(ctxT(t), in, s, f)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		parts = append(parts, f.Name())
	}
	return parts
}

// clusterKeys counts the keys of every primary (replicas: of every replica).
func clusterKeys(t *testing.T, c *redis.ClusterClient, replicas bool) int64 {
	t.Helper()
	var total atomic.Int64
	each := c.ForEachMaster
	if replicas {
		each = c.ForEachSlave
	}
	require.NoError(t, each(ctxT(t), func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		total.Add(n)
		return err
	}))
	return total.Load()
}

// internalClient connects to the node in dir as clouddb's internal user, as its config
// file says.
func internalClient(t *testing.T, dir string) *redis.Client {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(dir, "redis.conf"))
	require.NoError(t, err)
	port := regexp.MustCompile(`(?m)^port "(\d+)"`).FindSubmatch(conf)
	secret := regexp.MustCompile(`(?m)^user "clouddb-internal" .*">([^"]+)"`).FindSubmatch(conf)
	require.NotNil(t, port)
	require.NotNil(t, secret)
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + string(port[1]), Username: "clouddb-internal", Password: string(secret[1]),
		Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

const splitLib = "#!lua name=splitlib\nredis.register_function('hello', function() return 'hi' end)"

// TestLoadCluster_ReloadsEachShard: a backup of a three-shard cluster imported into a
// replicated two-shard cluster that has data of its own: each shard's primary loads its
// part in place (the same process; the functions come with the data, which a key-by-key
// copy cannot carry), the old keys are gone, the replicas resync to the new data, and the
// data outlives a stop and a start under AOF and snapshot persistence (the AOF rewritten,
// the snapshot schedule back).
func TestLoadCluster_ReloadsEachShard(t *testing.T) {
	for _, persistence := range []string{"aof-every-1-second", "snapshot-every-1-hour"} {
		t.Run(persistence, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			src := b.clustered(t, 1, 3, false, "none")
			sc := clusterClient(t, src)
			clusterWrite(t, sc, "new:", 300)
			big := strings.Repeat("b", 256<<10)
			for i := range 40 { // 10 MB: an AOF takes a while to write
				require.NoError(t, sc.Set(ctx, fmt.Sprintf("big:%d", i), big, 0).Err())
			}
			require.NoError(t, sc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				return m.FunctionLoad(ctx, splitLib).Err()
			}))
			parts := backupParts(t, b, src)

			dst := b.clustered(t, 2, 2, true, persistence)
			dc := clusterClient(t, dst)
			clusterWrite(t, dc, "old:", 100)
			requireReplicasAcked(t, dc)
			primaries := []string{b.dir + "/2", b.dir + "/2/node2"}
			pids := []int{nodePid(t, primaries[0]), nodePid(t, primaries[1])}
			for _, dir := range primaries {
				// Each key takes 5 ms to write out (about a second a shard), so that
				// an import that returned before its AOF was written is caught below.
				require.NoError(t, internalClient(t, dir).ConfigSet(ctx, "rdb-key-save-delay", "5000").Err())
			}

			require.NoError(t, b.driver.Load(ctx, dst, parts))
			for i, dir := range primaries {
				require.Equal(t, pids[i], nodePid(t, dir), "shard %d's primary loaded the data in place", i)
			}
			// Done means persisted: every node killed at once the moment the import
			// returns comes back with the new data (an AOF still being rewritten would
			// bring back the old).
			for _, dir := range []string{b.dir + "/2", b.dir + "/2/node1", b.dir + "/2/node2", b.dir + "/2/node3"} {
				killAndWait(t, nodePid(t, dir))
			}
			require.NoError(t, b.driver.Ensure(ctx, dst))
			dc = clusterClient(t, dst)
			clusterRead(t, dc, "new:", 300)
			require.EqualValues(t, 340, clusterKeys(t, dc, false), "the old keys are gone")
			require.NoError(t, dc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				v, err := m.FCall(ctx, "hello", nil).Text()
				if err == nil && v != "hi" {
					err = fmt.Errorf("hello answered %q", v)
				}
				return err
			}), "every shard has the functions")
			require.Eventually(t, func() bool { return clusterKeys(t, dc, true) == 340 }, 20*time.Second, 20*time.Millisecond,
				"the replicas resync to the new data")
			requireReplicasAcked(t, dc)

			// The nodes allow DEBUG (the reload), not to the tenant.
			require.NoError(t, dc.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error {
				err := m.Do(ctx, "debug", "sleep", "0").Err()
				if err == nil || !strings.Contains(err.Error(), "NOPERM") {
					return fmt.Errorf("a tenant's DEBUG: %v", err)
				}
				return nil
			}))
			// Live, the node's settings are back: the reload stopped snapshots for a while.
			ic := internalClient(t, primaries[1])
			save, err := ic.ConfigGet(ctx, "save").Result()
			require.NoError(t, err)
			want := map[string]string{"aof-every-1-second": "", "snapshot-every-1-hour": "3600 1"}[persistence]
			require.Equal(t, want, save["save"])

			require.NoError(t, b.driver.Stop(ctx, dst.DatabaseID))
			require.NoError(t, b.driver.Ensure(ctx, dst))
			dc2 := clusterClient(t, dst)
			clusterRead(t, dc2, "new:", 300)
			require.EqualValues(t, 340, clusterKeys(t, dc2, false), "after a restart too")
		})
	}
}

// TestLoadCluster_RefusedFileTouchesNoShard: a corrupt part, or one too large for a
// shard, leaves every shard's data and process as they were.
func TestLoadCluster_RefusedFileTouchesNoShard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.clustered(t, 1, 2, false, "none")
	sc := clusterClient(t, src)
	clusterWrite(t, sc, "new:", 200)
	parts := backupParts(t, b, src)

	dst := b.clustered(t, 2, 2, false, "none")
	dc := clusterClient(t, dst)
	clusterWrite(t, dc, "old:", 100)
	pid := nodePid(t, b.dir+"/2/node2")

	data, err := os.ReadFile(parts[1])
	require.NoError(t, err)
	data[len(data)/2] ^= 0xFF
	bad := filepath.Join(t.TempDir(), "bad.rdb")
	require.NoError(t, os.WriteFile(bad, data, 0o600))
	err = b.driver.Load(ctx, dst, []string{parts[0], bad})
	require.ErrorIs(t, err, clouddb.ErrDataCorrupt)
	clusterRead(t, dc, "old:", 100)
	require.EqualValues(t, 100, clusterKeys(t, dc, false))
	require.Equal(t, pid, nodePid(t, b.dir+"/2/node2"))

	// The same data into a cluster whose shards hold less than their part of it.
	small := b.instance(t, 3, "none")
	small.OSSCluster, small.Shards, small.MaxMemoryBytes = true, 2, 4*mb
	require.NoError(t, b.driver.Ensure(ctx, small))
	big := strings.Repeat("x", 20<<10)
	for i := range 300 {
		require.NoError(t, sc.Set(ctx, fmt.Sprintf("big:%d", i), big, 0).Err())
	}
	err = b.driver.Load(ctx, small, backupParts(t, b, src))
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)
	require.ErrorContains(t, err, "its share of the limit")
	require.Zero(t, clusterKeys(t, clusterClient(t, small), false))
}

// TestLoadCluster_Stream: an import streamed into a cluster is split as it arrives; one
// the splitter cannot take (a key too long for it to hold) is copied key by key, the
// stream read once either way.
func TestLoadCluster_Stream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.clustered(t, 1, 2, false, "none")
	sc := clusterClient(t, src)
	clusterWrite(t, sc, "s:", 200)
	parts := backupParts(t, b, src)

	dst := b.clustered(t, 2, 2, false, "none")
	f, err := os.Open(parts[0])
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, b.driver.LoadStream(ctx, dst, f))
	dc := clusterClient(t, dst)
	n0 := clusterKeys(t, dc, false)
	require.Positive(t, n0)
	require.Less(t, n0, int64(200), "shard 0's part only")

	longKey := strings.Repeat("k", 2<<20)
	require.NoError(t, sc.Set(ctx, longKey, "long", 0).Err())
	one := b.instance(t, 3, "none")
	require.NoError(t, b.driver.Ensure(ctx, one))
	oc := client(t, one.Port, one.Password)
	for i := range 50 {
		require.NoError(t, oc.Set(ctx, fmt.Sprintf("o%d", i), i, 0).Err())
	}
	require.NoError(t, oc.Set(ctx, longKey, "long", 0).Err())
	file := filepath.Join(t.TempDir(), "long.rdb")
	snapshot(t, b, one, file)
	lf, err := os.Open(file)
	require.NoError(t, err)
	defer lf.Close()
	require.NoError(t, b.driver.LoadStream(ctx, dst, lf))
	require.EqualValues(t, 51, clusterKeys(t, dc, false))
	require.Equal(t, "long", dc.Get(ctx, longKey).Val())
}
