package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// TestEveryTopologyAdoptedAfterKill: a kill -9 of clouddb leaves the servers of every
// topology running (one server, a primary and its replica, a TLS primary and replica, a
// replicated 2-shard OSS Cluster); the next start adopts every one of them, starting none
// again, and the data stays. A clean restart (SIGTERM) then brings every node back, once.
func TestEveryTopologyAdoptedAfterKill(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	h := newHarness(t, bin, portRange())
	h.start()
	ctx := testContext(t)
	c := client.New(h.url, harnessKey, harnessSecret)
	pm, err := c.ListPaymentMethods(ctx)
	require.NoError(t, err)
	tk, err := c.CreateSubscription(ctx, subscriptionBody(pm[0].ID, "topologies", planDB("plain", 0.1)))
	require.NoError(t, err)
	done, err := c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	subID := *done.Response.ResourceID
	_, err = c.WaitForSubscriptionStatus(ctx, subID, "active")
	require.NoError(t, err)
	create := func(body client.CreateDatabase) *client.Database {
		if body.Password == nil {
			body.Password = client.Ptr("pw-" + *body.Name)
		}
		ct, cerr := c.CreateDatabase(ctx, subID, body)
		require.NoError(t, cerr)
		created, cerr := c.WaitForTask(ctx, ct.ID)
		require.NoError(t, cerr)
		db, cerr := c.WaitForDatabaseStatus(ctx, subID, *created.Response.ResourceID, "active")
		require.NoError(t, cerr)
		return db
	}
	create(client.CreateDatabase{Name: client.Ptr("ha"), DatasetSizeInGB: client.Ptr(0.1), Replication: client.Ptr(true)})
	secure := create(client.CreateDatabase{Name: client.Ptr("secure"), DatasetSizeInGB: client.Ptr(0.1), Replication: client.Ptr(true)})
	tk, err = c.UpdateDatabase(ctx, subID, secure.ID, client.UpdateDatabase{EnableTLS: client.Ptr(true)})
	require.NoError(t, err)
	_, err = c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	_, err = c.WaitForDatabaseStatus(ctx, subID, secure.ID, "active")
	require.NoError(t, err)
	cluster := create(client.CreateDatabase{Name: client.Ptr("sharded"), DatasetSizeInGB: client.Ptr(0.2), Replication: client.Ptr(true),
		SupportOSSClusterAPI: client.Ptr(true), ThroughputMeasurement: &client.Throughput{By: "operations-per-second", Value: 50000},
		Password: client.Ptr("sharded-pw-1")})

	cc := clusterOf(t, cluster)
	for i := range 200 {
		require.NoError(t, cc.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err())
	}
	ca, err := c.GetDatabaseCertificate(ctx, subID, secure.ID)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM([]byte(ca.PublicCertificatePEMString)))
	sc := redis.NewClient(&redis.Options{Addr: secure.PublicEndpoint, Password: secure.Security.Password, Protocol: 2,
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	t.Cleanup(func() { sc.Close() })
	require.NoError(t, sc.Set(ctx, "secret", "kept", 0).Err())

	// 1 + 2 + 2 + 4 servers, one per node.
	before := nodeServers(t, h)
	require.Len(t, before, 9, "%v", before)

	h.kill()
	h.start()
	c = client.New(h.url, harnessKey, harnessSecret)
	dbs, err := c.AllDatabases(ctx, subID)
	require.NoError(t, err)
	for _, db := range dbs {
		_, err := c.WaitForDatabaseStatus(ctx, subID, db.ID, "active")
		require.NoError(t, err)
	}
	// A few reconciler passes: nothing is started again, nothing goes.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		require.Equal(t, before, nodeServers(t, h), "every node's server adopted, none started again")
		time.Sleep(200 * time.Millisecond)
	}
	for i := range 200 {
		require.Equal(t, strconv.Itoa(i), cc.Get(ctx, "k"+strconv.Itoa(i)).Val())
	}
	sc2 := redis.NewClient(&redis.Options{Addr: secure.PublicEndpoint, Password: secure.Security.Password, Protocol: 2,
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
	t.Cleanup(func() { sc2.Close() })
	require.Equal(t, "kept", sc2.Get(ctx, "secret").Val())

	// A clean restart stops every server and starts every node again, once.
	h.term()
	require.Empty(t, nodeServers(t, h), "SIGTERM stops every server")
	h.start()
	c = client.New(h.url, harnessKey, harnessSecret)
	for _, db := range dbs {
		_, err := c.WaitForDatabaseStatus(ctx, subID, db.ID, "active")
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		after := nodeServers(t, h)
		return slices.Equal(slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
	}, 30*time.Second, 100*time.Millisecond, "every node runs again")
	cc2 := clusterOf(t, cluster)
	require.NoError(t, cc2.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() }))
	h.stopAndCheckNoServers()
}

// nodeServers maps each node's directory (relative to the databases directory) to the
// pid of its one server, failing on a node with two.
func nodeServers(t *testing.T, h *harness) map[string]int {
	t.Helper()
	procs, err := redisProcesses(h.databasesDir())
	require.NoError(t, err)
	out := map[string]int{}
	for _, p := range procs {
		rel := p.cwd[len(h.databasesDir())+1:]
		require.NotContains(t, out, rel, "two servers in %s", rel)
		out[rel] = p.pid
	}
	return out
}
