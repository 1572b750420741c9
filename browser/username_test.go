package browser_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

const alicePassword = "alice-Secret-1"

// aclUser is an ACL user as clouddb's driver makes a database's named users (ACL SETUSER
// name reset on #<sha256 of the password> ~* &* +@all): the browser must authenticate as
// such a user with its name and password.
var aclUser = []string{"alice", "reset", "on", "#" + sha256Hex(alicePassword), "~*", "&*", "+@all"}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestUsername(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const defaultPassword = "default-Secret-1"
	port := freePort(t)
	startRedis(t, port, append([]string{"--requirepass", defaultPassword, "--user"}, aclUser...)...)

	// alice's data, written as alice: the browser must read it as her.
	alice := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + itoa(port), Username: "alice", Password: alicePassword, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { alice.Close() })
	require.NoError(t, alice.Set(context.Background(), "owner", "alice", 0).Err())

	standalone := map[string]any{"name": "acl", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": port,
		"username": "alice", "password": alicePassword}
	secrets := []string{alicePassword, defaultPassword}

	t.Run("OK", func(t *testing.T) {
		res := b.post(t, "/api/db/", standalone)
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw, secrets...)
		require.Equal(t, "alice", res.body["username"])
		require.Equal(t, true, res.body["password"])
		require.NotEmpty(t, res.body["version"])
		dbID := itoa(id(t, res.body["id"]))

		got := b.get(t, "/api/db/"+dbID)
		requireStatus(t, got, http.StatusOK)
		require.Equal(t, "alice", got.body["username"])

		// Browsing authenticates as alice too.
		val := b.get(t, "/api/db/"+dbID+"/keys/owner")
		requireStatus(t, val, http.StatusOK)
		require.Equal(t, "alice", val.body["value"])
	})

	t.Run("OKWithoutUsernameAsDefault", func(t *testing.T) {
		res := b.post(t, "/api/db/", with(standalone, map[string]any{"username": nil, "password": defaultPassword}))
		requireStatus(t, res, http.StatusCreated)
		require.NotContains(t, res.body, "username")
	})

	for _, tc := range []struct {
		name    string
		changes map[string]any
	}{
		{"WrongUsername", map[string]any{"username": "bob"}},
		{"WrongPassword", map[string]any{"password": "wrong"}},
		{"DefaultPasswordForAlice", map[string]any{"password": defaultPassword}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count := b.connectionCount(t)
			res := b.post(t, "/api/db/", with(standalone, tc.changes))
			requireError(t, res, http.StatusFailedDependency, "CONNECTION_AUTH_FAILED", "", "refused the credentials", "WRONGPASS")
			requireNoSecrets(t, res.raw, secrets...)
			require.Equal(t, count, b.connectionCount(t), "no connection is stored")
		})
	}

	for _, tc := range []struct {
		name, field, words string
		body               map[string]any
	}{
		{"Empty", "username", "must not be empty", with(standalone, map[string]any{"username": ""})},
		{"Space", "username", "without spaces", with(standalone, map[string]any{"username": "al ice"})},
		{"NotString", "username", "must be a string", with(standalone, map[string]any{"username": 7})},
		{"SentinelTopLevel", "username", "is not allowed", map[string]any{"name": "s", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": 1,
			"sentinelMaster": map[string]any{"serviceName": "m"}, "username": "alice"}},
		{"SentinelMaster", "sentinelMaster.username", "without spaces", map[string]any{"name": "s", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": 1,
			"sentinelMaster": map[string]any{"serviceName": "m", "username": "a\tb"}}},
	} {
		t.Run("Invalid"+tc.name, func(t *testing.T) {
			res := b.post(t, "/api/db/", tc.body)
			requireError(t, res, http.StatusBadRequest, "INVALID_FIELD", tc.field, tc.words)
		})
	}

	t.Run("SentinelUsernamesShown", func(t *testing.T) {
		res := b.post(t, "/api/db?test=false", map[string]any{"name": "s", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": 1,
			"sentinelUsername": "watcher", "sentinelPassword": "w", "sentinelMaster": map[string]any{"serviceName": "m", "username": "alice", "authPass": "a"}})
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, "watcher", res.body["sentinelUsername"])
		require.Equal(t, map[string]any{"serviceName": "m", "username": "alice", "authPass": true}, res.body["sentinelMaster"])
		require.NotContains(t, res.body, "username")
	})
}

func TestUsernameCluster(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const password = "cluster-Secret-1"
	nodes := startCluster(t, 3, password)
	ctx := context.Background()
	for _, n := range nodes {
		args := []any{"ACL", "SETUSER"}
		for _, a := range aclUser {
			args = append(args, a)
		}
		require.NoError(t, client(t, n.addr(), password).Do(ctx, args...).Err())
	}
	cluster := map[string]any{"name": "acl-cluster", "connectionType": "CLUSTER",
		"seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": nodes[0].port}}, "username": "alice", "password": alicePassword}

	res := b.post(t, "/api/db/", cluster)
	requireStatus(t, res, http.StatusCreated)
	requireNoSecrets(t, res.raw, alicePassword, password)
	require.Equal(t, "alice", res.body["username"])
	require.Len(t, res.body["nodes"], 3)
	keys := b.get(t, "/api/db/"+itoa(id(t, res.body["id"]))+"/keys")
	requireStatus(t, keys, http.StatusOK)

	res = b.post(t, "/api/db/", with(cluster, map[string]any{"username": "bob"}))
	requireError(t, res, http.StatusFailedDependency, "CONNECTION_AUTH_FAILED", "", "WRONGPASS")
}

// A username without its password is refused: no client would send it, and the record
// would test as the default user.
func TestUsernameNeedsPassword(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"name": "u1", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": 6379, "username": "alice"}, "password"},
		{map[string]any{"name": "u2", "connectionType": "CLUSTER", "seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": 6379}}, "username": "alice"}, "password"},
		{map[string]any{"name": "u3", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": 26379, "sentinelUsername": "bob",
			"sentinelMaster": map[string]any{"serviceName": "m"}}, "sentinelPassword"},
		{map[string]any{"name": "u4", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": 26379,
			"sentinelMaster": map[string]any{"serviceName": "m", "username": "carol"}}, "sentinelMaster.authPass"},
	} {
		res := b.post(t, "/api/db/?test=false", tc.body)
		require.Equal(t, http.StatusBadRequest, res.status, "%s", res.raw)
		require.Equal(t, tc.field, res.body["field"], "%s", res.raw)
	}
}
