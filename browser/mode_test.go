package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// startSentinel starts a sentinel with password (none when empty) that monitors the
// named masters (name → port, with quorum 1) and returns its port.
func startSentinel(t *testing.T, password string, masters map[string]int) int {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n", port, dir)
	if password != "" {
		conf += "requirepass " + password + "\n"
	}
	for name, p := range masters {
		conf += fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1\nsentinel down-after-milliseconds %s 1000\n", name, p, name)
	}
	startProcess(t, port, dir, writeFile(t, dir, "sentinel.conf", conf), "--sentinel")
	return port
}

func TestSentinelAsStandaloneRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const password = "sentinel-Secret-3"
	primary := startRedis(t, freePort(t))
	port := startSentinel(t, password, map[string]int{"mymaster": primary.port})

	res := b.post(t, "/api/db/", map[string]any{"name": "s", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": port, "password": password})
	requireError(t, res, http.StatusBadRequest, "SENTINEL_AS_STANDALONE", "connectionType")
	require.Equal(t, "connectionType: the server at 127.0.0.1:"+itoa(port)+` is a sentinel (it monitors "mymaster"), not a database: `+
		"register it with connectionType SENTINEL, sentinelHost, sentinelPort and sentinelMaster.serviceName "+
		"(POST /api/redis-sentinel/get-databases lists its master groups)", res.body["message"])
	requireNoSecrets(t, res.raw, password)
	require.Equal(t, 0, b.connectionCount(t), "nothing is stored")

	// Registered as what it is, it is saved.
	res = b.post(t, "/api/db/", map[string]any{"name": "s", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": port,
		"sentinelPassword": password, "sentinelMaster": map[string]any{"serviceName": "mymaster"}})
	requireStatus(t, res, http.StatusCreated)
}

func TestClusterNodeAsStandaloneSavedAsCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const password = "cluster-Secret-4"
	nodes := startCluster(t, 3, password)

	res := b.post(t, "/api/db/", map[string]any{"name": "node", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": nodes[1].port, "password": password})
	requireStatus(t, res, http.StatusCreated)
	requireNoSecrets(t, res.raw, password)
	dbID := id(t, res.body["id"])
	require.Equal(t, "CLUSTER", res.body["connectionType"])
	require.Equal(t, []any{map[string]any{"host": "127.0.0.1", "port": float64(nodes[1].port)}}, res.body["seedNodes"], "the node given is the seed")
	require.NotContains(t, res.body, "host")
	require.NotContains(t, res.body, "port")
	require.Equal(t, true, res.body["password"])
	var want []any
	for _, s := range nodes {
		want = append(want, map[string]any{"host": "127.0.0.1", "port": float64(s.port), "role": "primary"})
	}
	slices.SortFunc(want, func(a, b any) int {
		return int(a.(map[string]any)["port"].(float64) - b.(map[string]any)["port"].(float64))
	})
	require.Equal(t, want, res.body["nodes"], "the discovered nodes")

	got := b.get(t, "/api/db/"+itoa(dbID))
	requireStatus(t, got, http.StatusOK)
	require.Equal(t, res.body, got.body, "it reads back as a cluster")

	// Its keys, spread over every primary, are listed and read.
	ctx := context.Background()
	addrs := []string{nodes[0].addr(), nodes[1].addr(), nodes[2].addr()}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: password, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { cc.Close() })
	var keys []string
	for i := range 30 {
		k := fmt.Sprintf("k:%02d", i)
		keys = append(keys, k)
		require.NoError(t, cc.Set(ctx, k, i, 0).Err())
	}
	for _, s := range nodes {
		n, err := client(t, s.addr(), password).DBSize(ctx).Result()
		require.NoError(t, err)
		require.Positive(t, n, "node %s holds keys", s.addr())
	}
	require.Equal(t, keys, sortedKeys(scanAll(t, b, dbID, "count=5")))
	for i, k := range keys {
		res := b.get(t, fmt.Sprintf("/api/db/%d/keys/%s", dbID, k))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, strconv.Itoa(i), res.body["value"])
	}
}
