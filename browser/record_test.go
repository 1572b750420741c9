package browser_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// infoInt reads an integer field of INFO.
func infoInt(t *testing.T, rc *redis.Client, field string) int64 {
	t.Helper()
	text, err := rc.Info(context.Background()).Result()
	require.NoError(t, err)
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, "%s: %q", field, v)
			return n
		}
	}
	t.Fatalf("INFO has no %s", field)
	return 0
}

// requireNear checks that got is within 5% of want (used_memory moves a little between
// two INFO calls).
func requireNear(t *testing.T, want int64, got any, what string) {
	t.Helper()
	g, ok := got.(float64)
	require.True(t, ok, "%s: %v is not a number", what, got)
	require.InDelta(t, float64(want), g, float64(want)/20, what)
}

// fill writes keys of every type through rc and returns the length each should show.
func fill(t *testing.T, rc redis.Cmdable, prefix string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	want := map[string]int64{}
	require.NoError(t, rc.Set(ctx, prefix+"str", "hello!", 0).Err())
	want[prefix+"str"] = 6
	require.NoError(t, rc.HSet(ctx, prefix+"hash", "a", 1, "b", 2, "c", 3).Err())
	want[prefix+"hash"] = 3
	require.NoError(t, rc.RPush(ctx, prefix+"list", 1, 2, 3, 4).Err())
	want[prefix+"list"] = 4
	require.NoError(t, rc.SAdd(ctx, prefix+"set", "x", "y").Err())
	want[prefix+"set"] = 2
	require.NoError(t, rc.ZAdd(ctx, prefix+"zset", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 3, Member: "c"}, redis.Z{Score: 4, Member: "d"}, redis.Z{Score: 5, Member: "e"}).Err())
	want[prefix+"zset"] = 5
	for i := range 2 {
		require.NoError(t, rc.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "stream", Values: []any{"n", i}}).Err())
	}
	want[prefix+"stream"] = 2
	for i := range 50 {
		k := fmt.Sprintf("%sk:%02d", prefix, i)
		require.NoError(t, rc.Set(ctx, k, strings.Repeat("v", i), 0).Err())
		want[k] = int64(i)
	}
	return want
}

// requireFigures checks the size and length of every listed key against MEMORY USAGE
// read separately through rc and the lengths written.
func requireFigures(t *testing.T, rc redis.Cmdable, keys map[string]map[string]any, want map[string]int64) {
	t.Helper()
	require.Len(t, keys, len(want))
	for name, k := range keys {
		size, err := rc.MemoryUsage(context.Background(), name).Result()
		require.NoError(t, err)
		require.Equal(t, float64(size), k["size"], "size of %s", name)
		require.Equal(t, float64(want[name]), k["length"], "length of %s", name)
	}
}

func TestStandaloneRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const password = "record-Secret-1"
	srv := startRedis(t, freePort(t), "--requirepass", password)
	other := startRedis(t, freePort(t), "--requirepass", password)
	rc := client(t, srv.addr(), password)
	res := b.post(t, "/api/db/", map[string]any{"name": "one", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": srv.port, "password": password})
	requireStatus(t, res, http.StatusCreated)
	dbID := id(t, res.body["id"])
	path := "/api/db/" + itoa(dbID)
	want := fill(t, rc, "")

	t.Run("KeyListing", func(t *testing.T) {
		res := b.get(t, path+"/keys?count=1000")
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "0", res.body["cursor"])
		require.Equal(t, float64(len(want)), res.body["total"], "total is DBSIZE")
		require.Equal(t, float64(1000), res.body["scanned"], "one SCAN of COUNT 1000 examined the whole keyspace")
		keys := map[string]map[string]any{}
		for _, k := range res.body["keys"].([]any) {
			keys[k.(map[string]any)["name"].(string)] = k.(map[string]any)
		}
		requireFigures(t, rc, keys, want)

		// Page by page: every page says the total and what its SCANs examined.
		all := scanAll(t, b, dbID, "count=10")
		requireFigures(t, rc, all, want)
		res = b.get(t, path+"/keys?count=10")
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, float64(len(want)), res.body["total"])
		scanned := res.body["scanned"].(float64)
		require.True(t, scanned >= 10 && int(scanned)%10 == 0, "scanned %v is a sum of COUNT 10", scanned)

		// Filtered by type, only that type's length is asked.
		res = b.get(t, path+"/keys?type=zset")
		requireStatus(t, res, http.StatusOK)
		size, err := rc.MemoryUsage(ctx, "zset").Result()
		require.NoError(t, err)
		require.Equal(t, []any{map[string]any{"name": "zset", "type": "zset", "ttl": float64(-1), "size": float64(size), "length": float64(5)}}, res.body["keys"])
	})

	t.Run("Overview", func(t *testing.T) {
		res := b.get(t, path+"/overview")
		requireStatus(t, res, http.StatusOK)
		version, err := rc.Info(ctx, "server").Result()
		require.NoError(t, err)
		require.Contains(t, version, "redis_version:"+res.body["version"].(string)+"\r\n")
		require.Equal(t, "standalone", res.body["mode"])
		require.Equal(t, float64(len(want)), res.body["totalKeys"])
		require.NotContains(t, res.body, "totalKeysPerDb", "only db0 holds keys")
		requireNear(t, infoInt(t, rc, "used_memory"), res.body["usedMemory"], "usedMemory")
		// The test's client and the API's own.
		require.Equal(t, float64(infoInt(t, rc, "connected_clients")+1), res.body["connectedClients"])
		require.Contains(t, res.body, "opsPerSecond")
		require.Contains(t, res.body, "networkInKbps")

		// Keys in another logical database show per database.
		db3 := redis.NewClient(&redis.Options{Addr: srv.addr(), Password: password, DB: 3, Protocol: 2, DisableIdentity: true})
		defer db3.Close()
		require.NoError(t, db3.Set(ctx, "elsewhere", 1, 0).Err())
		defer db3.Del(ctx, "elsewhere")
		res = b.get(t, path+"/overview")
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, float64(len(want)+1), res.body["totalKeys"])
		require.Equal(t, map[string]any{"db0": float64(len(want)), "db3": float64(1)}, res.body["totalKeysPerDb"])
		requireError(t, b.get(t, "/api/db/999999/overview"), http.StatusNotFound, "CONNECTION_NOT_FOUND", "")
	})

	t.Run("TestSaved", func(t *testing.T) {
		res := b.post(t, "/api/db/test/"+itoa(dbID), nil)
		requireStatus(t, res, http.StatusOK)
		require.True(t, strings.HasPrefix(res.body["version"].(string), "7."))
		// With a change that is tested, not saved.
		res = b.post(t, "/api/db/test/"+itoa(dbID), map[string]any{"password": "wrong"})
		requireError(t, res, http.StatusFailedDependency, "CONNECTION_AUTH_FAILED", "")
		res = b.post(t, "/api/db/test/"+itoa(dbID), map[string]any{"port": "6379"})
		requireError(t, res, http.StatusBadRequest, "INVALID_FIELD", "port", "must be an integer")
		requireError(t, b.post(t, "/api/db/test/999999", nil), http.StatusNotFound, "CONNECTION_NOT_FOUND", "")
		requireStatus(t, b.post(t, "/api/db/test/"+itoa(dbID), nil), http.StatusOK)
	})

	t.Run("Patch", func(t *testing.T) {
		before := b.get(t, path)
		requireStatus(t, before, http.StatusOK)
		unchanged := func() {
			t.Helper()
			got := b.get(t, path)
			requireStatus(t, got, http.StatusOK)
			require.Equal(t, before.body, got.body, "the record is unchanged")
		}

		// A dead port is tested and refused; nothing changes.
		dead := freePort(t)
		// The saved password goes only to the saved address: a new one must give it again.
		res := b.do(t, http.MethodPatch, path, map[string]any{"port": dead})
		requireError(t, res, http.StatusBadRequest, "INVALID_FIELD", "password", "must be given again")
		res = b.post(t, "/api/db/test/"+itoa(dbID), map[string]any{"port": dead})
		requireError(t, res, http.StatusBadRequest, "INVALID_FIELD", "password", "must be given again")
		res = b.do(t, http.MethodPatch, path, map[string]any{"port": dead, "password": password})
		requireError(t, res, http.StatusFailedDependency, "CONNECTION_UNREACHABLE", "", "127.0.0.1:"+itoa(dead))
		unchanged()
		res = b.do(t, http.MethodPatch, path, map[string]any{"password": "wrong"})
		requireError(t, res, http.StatusFailedDependency, "CONNECTION_AUTH_FAILED", "")
		unchanged()

		// Bad input names the field.
		for _, tc := range []struct {
			body  any
			field string
			words string
		}{
			{map[string]any{"port": 0}, "port", "from 1 to 65535"},
			{map[string]any{"port": "6379"}, "port", "must be an integer"},
			{map[string]any{"host": ""}, "host", "must not be empty"},
			{map[string]any{"host": nil}, "host", "is required"},
			{map[string]any{"name": 5}, "name", "must be a string"},
			{map[string]any{"seedNodes": []any{}}, "seedNodes", "is not allowed for connectionType STANDALONE"},
			{map[string]any{"connectionType": "CLUSTER"}, "seedNodes", "is required"},
			{map[string]any{"connectionType": "MAGIC"}, "connectionType", "must be one of"},
			{map[string]any{"tls": map[string]any{"clientAuth": true}}, "tls.clientAuth", "requires tls.useTls"},
			{map[string]any{"id": 7}, "id", "is not allowed"},
		} {
			requireError(t, b.do(t, http.MethodPatch, path, tc.body), http.StatusBadRequest, "INVALID_FIELD", tc.field, tc.words)
		}
		requireError(t, b.do(t, http.MethodPatch, path, "[1]"), http.StatusBadRequest, "MALFORMED_BODY", "")
		requireError(t, b.do(t, http.MethodPatch, "/api/db/999999", map[string]any{"name": "x"}), http.StatusNotFound, "CONNECTION_NOT_FOUND", "")
		unchanged()

		// A new name is not a connection change: not tested (the server is down meanwhile).
		srv.kill()
		res = b.do(t, http.MethodPatch, path, map[string]any{"name": "renamed"})
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "renamed", res.body["name"])
		require.Equal(t, before.body["lastConnection"], res.body["lastConnection"])
		require.Equal(t, before.body["version"], res.body["version"])

		// Moving to a live server is tested, saved, and used from then on.
		time.Sleep(time.Second) // lastConnection has a resolution of a second
		res = b.do(t, http.MethodPatch, path, map[string]any{"port": other.port, "password": password})
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, float64(other.port), res.body["port"])
		require.Equal(t, "renamed", res.body["name"])
		require.Equal(t, true, res.body["password"])
		require.NotEqual(t, before.body["lastConnection"], res.body["lastConnection"])
		requireNoSecrets(t, res.raw, password)
		got := b.get(t, path)
		require.Equal(t, res.body, got.body)
		oc := client(t, other.addr(), password)
		require.NoError(t, oc.Set(ctx, "on-the-other", 1, 0).Err())
		keys := b.get(t, path+"/keys")
		requireStatus(t, keys, http.StatusOK)
		require.Equal(t, float64(1), keys.body["total"])
		require.Equal(t, "on-the-other", keys.body["keys"].([]any)[0].(map[string]any)["name"])

		// Clearing the password is a change: the server wants one.
		res = b.do(t, http.MethodPatch, path, map[string]any{"password": nil})
		requireError(t, res, http.StatusFailedDependency, "CONNECTION_AUTH_FAILED", "", "NOAUTH")
		// ?test=false saves without testing.
		res = b.do(t, http.MethodPatch, path+"?test=false", map[string]any{"port": dead, "password": password})
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, float64(dead), res.body["port"])
		require.NotContains(t, res.body, "version", "what was found about the old server is dropped")
	})
}

func TestClusterRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const password = "cluster-Record-1"
	nodes := startCluster(t, 3, password)
	res := b.post(t, "/api/db/", map[string]any{"name": "c", "connectionType": "CLUSTER", "password": password,
		"seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": nodes[0].port}}})
	requireStatus(t, res, http.StatusCreated)
	dbID := id(t, res.body["id"])
	addrs := make([]string, len(nodes))
	for i, s := range nodes {
		addrs[i] = s.addr()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: password, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { cc.Close() })
	// Hash tags spread the keys of every type over the primaries.
	want := map[string]int64{}
	for _, tag := range []string{"{a}", "{b}", "{c}"} {
		for k, v := range fill(t, cc, tag) {
			want[k] = v
		}
	}
	var total int64
	for _, s := range nodes {
		n, err := client(t, s.addr(), password).DBSize(ctx).Result()
		require.NoError(t, err)
		require.Positive(t, n, "node %s holds keys", s.addr())
		total += n
	}
	require.Equal(t, int64(len(want)), total)

	t.Run("KeyListing", func(t *testing.T) {
		cursor, pages := "0", 0
		keys := map[string]map[string]any{}
		for {
			res := b.get(t, fmt.Sprintf("/api/db/%d/keys?count=25&cursor=%s", dbID, cursor))
			requireStatus(t, res, http.StatusOK)
			require.Equal(t, float64(total), res.body["total"], "total is DBSIZE summed over the primaries")
			require.GreaterOrEqual(t, res.body["scanned"].(float64), float64(25))
			for _, k := range res.body["keys"].([]any) {
				keys[k.(map[string]any)["name"].(string)] = k.(map[string]any)
			}
			pages++
			if cursor = res.body["cursor"].(string); cursor == "0" {
				break
			}
		}
		require.Greater(t, pages, 1)
		requireFigures(t, cc, keys, want)
	})

	t.Run("Overview", func(t *testing.T) {
		res := b.get(t, fmt.Sprintf("/api/db/%d/overview", dbID))
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "cluster", res.body["mode"])
		require.True(t, strings.HasPrefix(res.body["version"].(string), "7."))
		require.Equal(t, float64(total), res.body["totalKeys"])
		var used int64
		for _, s := range nodes {
			used += infoInt(t, client(t, s.addr(), password), "used_memory")
		}
		requireNear(t, used, res.body["usedMemory"], "usedMemory summed over the primaries")
		clients := res.body["connectedClients"].(float64)
		require.True(t, clients >= 1 && clients <= 6, "median of connected_clients: %v", clients)
		require.Contains(t, res.body, "opsPerSecond")
	})

	t.Run("Patch", func(t *testing.T) {
		before := b.get(t, fmt.Sprintf("/api/db/%d", dbID))
		res := b.do(t, http.MethodPatch, fmt.Sprintf("/api/db/%d", dbID), map[string]any{"password": password, "seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": freePort(t)}}})
		requireError(t, res, http.StatusFailedDependency, "CONNECTION_UNREACHABLE", "", "no seed node answered")
		require.Equal(t, before.body, b.get(t, fmt.Sprintf("/api/db/%d", dbID)).body)
		res = b.do(t, http.MethodPatch, fmt.Sprintf("/api/db/%d", dbID), map[string]any{"password": password, "seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": nodes[2].port}}})
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, []any{map[string]any{"host": "127.0.0.1", "port": float64(nodes[2].port)}}, res.body["seedNodes"])
		require.Len(t, res.body["nodes"], 3)
		requireError(t, b.do(t, http.MethodPatch, fmt.Sprintf("/api/db/%d", dbID), map[string]any{"host": "127.0.0.1"}),
			http.StatusBadRequest, "INVALID_FIELD", "host", "is not allowed for connectionType CLUSTER")
		requireStatus(t, b.post(t, fmt.Sprintf("/api/db/test/%d", dbID), nil), http.StatusOK)
	})
}
