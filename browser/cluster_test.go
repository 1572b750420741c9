package browser_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestCluster runs its subtests in order: the last one adds a node and kills it.
func TestCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const password = "cluster-Secret-1"
	nodes := startCluster(t, 3, password)
	seed := func(s *server) map[string]any { return map[string]any{"host": "127.0.0.1", "port": s.port} }
	body := map[string]any{"name": "cluster", "connectionType": "CLUSTER", "seedNodes": []any{seed(nodes[1])}, "password": password}
	closedPort := freePort(t)

	var dbID int
	t.Run("OK", func(t *testing.T) {
		res := b.post(t, "/api/db/", body)
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw, password)
		require.NotContains(t, storeBytes(t, b), password, "the cluster's password is sealed at rest")
		dbID = id(t, res.body["id"])
		require.Equal(t, "CLUSTER", res.body["connectionType"])
		require.Equal(t, []any{map[string]any{"host": "127.0.0.1", "port": float64(nodes[1].port)}}, res.body["seedNodes"])
		require.Equal(t, true, res.body["password"])
		require.True(t, strings.HasPrefix(res.body["version"].(string), "7."))
		var want []any
		for _, s := range nodes {
			want = append(want, map[string]any{"host": "127.0.0.1", "port": float64(s.port), "role": "primary"})
		}
		slices.SortFunc(want, func(a, b any) int {
			return int(a.(map[string]any)["port"].(float64) - b.(map[string]any)["port"].(float64))
		})
		require.Equal(t, want, res.body["nodes"], "the discovered nodes")
		require.NotContains(t, res.body, "host")

		got := b.get(t, "/api/db/"+itoa(dbID))
		requireStatus(t, got, http.StatusOK)
		require.Equal(t, res.body, got.body)
	})

	t.Run("OKAfterAnUnreachableSeed", func(t *testing.T) {
		res := b.post(t, "/api/db/", with(body, map[string]any{"seedNodes": []any{
			map[string]any{"host": "127.0.0.1", "port": closedPort}, seed(nodes[2])}}))
		requireStatus(t, res, http.StatusCreated)
		require.Len(t, res.body["nodes"], 3)
	})

	for _, tc := range []struct {
		name, code, words string
		body              map[string]any
	}{
		{"WrongPassword", "CONNECTION_AUTH_FAILED", "seed node 127.0.0.1:" + itoa(nodes[1].port), with(body, map[string]any{"password": "wrong"})},
		{"NoPassword", "CONNECTION_AUTH_FAILED", "NOAUTH", with(body, map[string]any{"password": nil})},
		{"SeedsUnreachable", "CONNECTION_UNREACHABLE", "no seed node answered", with(body, map[string]any{"seedNodes": []any{
			map[string]any{"host": "127.0.0.1", "port": closedPort}}})},
		{"TLSToPlainCluster", "CONNECTION_TLS_FAILED", "TLS with seed node", with(body, map[string]any{"tls": map[string]any{"useTls": true}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.connectionCount(t)
			res := b.post(t, "/api/db/", tc.body)
			requireError(t, res, http.StatusFailedDependency, tc.code, "", tc.words)
			requireNoSecrets(t, res.raw, password)
			require.Equal(t, before, b.connectionCount(t), "nothing is stored")
		})
	}

	t.Run("Browse", func(t *testing.T) {
		ctx := context.Background()
		addrs := make([]string, len(nodes))
		for i, s := range nodes {
			addrs[i] = s.addr()
		}
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: password, Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { cc.Close() })
		var want []string
		for i := range 60 {
			k := fmt.Sprintf("key:%02d", i)
			want = append(want, k)
			require.NoError(t, cc.Set(ctx, k, i, 0).Err())
		}
		require.NoError(t, cc.HSet(ctx, "h", "f", "v").Err())
		require.NoError(t, cc.RPush(ctx, "{h}list", "a", "b").Err())
		want = append(want, "h", "{h}list")
		slices.Sort(want)

		// Keys live on every primary.
		for _, s := range nodes {
			n, err := client(t, s.addr(), password).DBSize(ctx).Result()
			require.NoError(t, err)
			require.Positive(t, n, "node %s holds keys", s.addr())
		}

		keys := scanAll(t, b, dbID, "count=7")
		require.Equal(t, want, sortedKeys(keys))
		require.Equal(t, "list", keys["{h}list"]["type"])
		require.Len(t, scanAll(t, b, dbID, "match=key:1*&count=3"), 10)
		require.Equal(t, []string{"h"}, sortedKeys(scanAll(t, b, dbID, "type=hash")))

		// One opaque cursor, not a number.
		res := b.get(t, fmt.Sprintf("/api/db/%d/keys?count=5", dbID))
		requireStatus(t, res, http.StatusOK)
		cursor := res.body["cursor"].(string)
		require.NotEqual(t, "0", cursor)
		_, err := strconv.ParseUint(cursor, 10, 64)
		require.Error(t, err)

		// Values are read from whichever node holds them.
		for i := range 60 {
			res = b.get(t, fmt.Sprintf("/api/db/%d/keys/key:%02d", dbID, i))
			requireStatus(t, res, http.StatusOK)
			require.Equal(t, strconv.Itoa(i), res.body["value"])
		}
		res = b.get(t, fmt.Sprintf("/api/db/%d/keys/%%7Bh%%7Dlist", dbID))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, []any{"a", "b"}, res.body["value"])
		requireError(t, b.get(t, fmt.Sprintf("/api/db/%d/keys/missing", dbID)), http.StatusNotFound, "KEY_NOT_FOUND", "")

		// Cursors that this API did not make.
		requireError(t, b.get(t, fmt.Sprintf("/api/db/%d/keys?cursor=12", dbID)), 400, "INVALID_CURSOR", "cursor")
		gone := base64.RawURLEncoding.EncodeToString([]byte("127.0.0.1:1 5"))
		requireError(t, b.get(t, fmt.Sprintf("/api/db/%d/keys?cursor=%s", dbID, gone)), 400, "INVALID_CURSOR", "cursor", "no longer a primary")
	})

	t.Run("NodeUnreachable", func(t *testing.T) {
		// A node joins (without slots, so the cluster stays ok) and dies.
		ctx := context.Background()
		extra := startClusterNode(t, password)
		first := client(t, nodes[0].addr(), password)
		require.NoError(t, first.ClusterMeet(ctx, "127.0.0.1", itoa(extra.port)).Err())
		for _, s := range nodes {
			c := client(t, s.addr(), password)
			eventually(t, 10*time.Second, s.addr()+" knows the new node", func() bool {
				text, err := c.ClusterNodes(ctx).Result()
				return err == nil && strings.Contains(text, ":"+itoa(extra.port)+"@") && !strings.Contains(text, "handshake")
			})
		}
		extra.kill()

		before := b.connectionCount(t)
		res := b.post(t, "/api/db/", body)
		requireError(t, res, http.StatusFailedDependency, "CLUSTER_NODES_UNREACHABLE", "",
			"1 of the cluster's 4 nodes", "127.0.0.1:"+itoa(extra.port), "connection refused")
		require.Equal(t, before, b.connectionCount(t), "nothing is stored")
	})
}
