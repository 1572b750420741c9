package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// clusterOf is a cluster-aware client that starts from the database's public endpoint
// only, as a tenant's does.
func clusterOf(t *testing.T, db *client.Database) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:           []string{db.PublicEndpoint},
		Password:        db.Security.Password,
		Protocol:        2,
		DisableIdentity: true,
		DialTimeout:     2 * time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func clusterKeys(t *testing.T, c *redis.ClusterClient) int64 {
	t.Helper()
	var n atomic.Int64
	require.NoError(t, c.ForEachMaster(testContext(t), func(ctx context.Context, m *redis.Client) error {
		k, err := m.DBSize(ctx).Result()
		n.Add(k)
		return err
	}))
	return n.Load()
}

// TestOSSClusterEndToEnd: supportOSSClusterApi with 75,000 operations per second is a
// real 3-shard Redis Cluster that go-redis's ClusterClient and redis-cli -c use from the
// public endpoint alone; its backup is one RDB per shard, and importing those parts into a
// cluster of another shape places every key in its slot.
func TestOSSClusterEndToEnd(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	backups := t.TempDir()
	subID, _ := s.activeSubscription(ctx, "oss", 1)
	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("sharded"), DatasetSizeInGB: client.Ptr(0.3),
		SupportOSSClusterAPI: client.Ptr(true), Password: client.Ptr("cluster-pw-1"), PeriodicBackupPath: client.Ptr(backups),
		ThroughputMeasurement: &client.Throughput{By: "operations-per-second", Value: 75000}})
	require.Equal(t, 3, db.Clustering.NumberOfShards)

	c := clusterOf(t, db)
	for i := range 1000 {
		require.NoError(t, c.Set(ctx, "key:"+strconv.Itoa(i), i, 0).Err())
	}
	require.NoError(t, c.HSet(ctx, "{user:7}:profile", "name", "ada").Err())
	require.NoError(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "{user:7}:events", Values: []any{"kind", "login"}}).Err())
	slots, err := c.ClusterSlots(ctx).Result() //nolint:staticcheck // CLUSTER SLOTS is what most clients read

	require.NoError(t, err)
	require.Len(t, slots, 3, "three shards, each a master of its slots")
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, derr := m.DBSize(ctx).Result()
		if derr == nil && n == 0 {
			t.Errorf("the master at %s holds no key", m.Options().Addr)
		}
		return derr
	}))
	require.EqualValues(t, 1002, clusterKeys(t, c))

	// redis-cli follows the redirections from the endpoint too.
	host, port, ok := strings.Cut(db.PublicEndpoint, ":")
	require.True(t, ok)
	cli := func(args ...string) string {
		out, cerr := exec.CommandContext(ctx, "redis-cli", append([]string{"-c", "-h", host, "-p", port, "--no-auth-warning", "-a", "cluster-pw-1"}, args...)...).CombinedOutput()
		require.NoError(t, cerr, "%s", out)
		return strings.TrimSpace(string(out))
	}
	for i := range 20 {
		require.Equal(t, "OK", cli("set", "cli:"+strconv.Itoa(i), "v"+strconv.Itoa(i)))
	}
	for i := range 20 {
		require.Equal(t, "v"+strconv.Itoa(i), cli("get", "cli:"+strconv.Itoa(i)))
	}

	// A backup is one RDB per shard.
	task, err := s.c.BackupDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	parts, err := filepath.Glob(filepath.Join(backups, "sharded-*-part*of3.rdb"))
	require.NoError(t, err)
	require.Len(t, parts, 3, "one part per shard")

	// Into a 2-shard cluster: key for key.
	dst := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("target"), DatasetSizeInGB: client.Ptr(0.2),
		SupportOSSClusterAPI: client.Ptr(true), Password: client.Ptr("cluster-pw-2"),
		ThroughputMeasurement: &client.Throughput{By: "operations-per-second", Value: 50000}})
	require.Equal(t, 2, dst.Clustering.NumberOfShards)
	task, err = s.c.ImportDatabase(ctx, subID, dst.ID, client.Import{SourceType: client.Ptr("http"), ImportFromURI: fileURIs(t, parts)})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	dc := clusterOf(t, dst)
	require.EqualValues(t, 1022, clusterKeys(t, dc))
	for i := range 1000 {
		v, gerr := dc.Get(ctx, "key:"+strconv.Itoa(i)).Result()
		require.NoError(t, gerr)
		require.Equal(t, strconv.Itoa(i), v)
	}
	require.Equal(t, "ada", dc.HGet(ctx, "{user:7}:profile", "name").Val())
	require.EqualValues(t, 1, dc.XLen(ctx, "{user:7}:events").Val())

	// A change the cluster cannot take live is refused, and the database stays active.
	task, err = s.c.UpdateDatabase(ctx, subID, dst.ID, client.UpdateDatabase{
		ThroughputMeasurement: &client.Throughput{By: "operations-per-second", Value: 100000}})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.ErrorContains(t, err, "DATABASE_TOPOLOGY_CHANGE_NOT_SUPPORTED")
	got, err := s.c.GetDatabase(ctx, subID, dst.ID)
	require.NoError(t, err)
	require.Equal(t, "active", got.Status)
	require.Equal(t, 2, got.Clustering.NumberOfShards)
}
