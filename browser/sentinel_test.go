package browser_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSentinel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		primaryPassword  = "primary-Secret-1"
		sentinelPassword = "sentinel-Secret-2"
	)
	primary := startRedis(t, freePort(t), "--requirepass", primaryPassword)
	dir := t.TempDir()
	sentinelPort := freePort(t)
	conf := writeFile(t, dir, "sentinel.conf", fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
requirepass %s
sentinel monitor mymaster 127.0.0.1 %d 1
sentinel auth-pass mymaster %s
sentinel down-after-milliseconds mymaster 30000
`, sentinelPort, dir, sentinelPassword, primary.port, primaryPassword))
	startProcess(t, sentinelPort, dir, conf, "--sentinel")

	body := map[string]any{"name": "sentinel", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": sentinelPort,
		"sentinelPassword": sentinelPassword, "sentinelMaster": map[string]any{"serviceName": "mymaster", "authPass": primaryPassword}}
	master := func(m map[string]any) map[string]any { return with(body, map[string]any{"sentinelMaster": m}) }
	secrets := []string{primaryPassword, sentinelPassword}

	var dbID int
	t.Run("OK", func(t *testing.T) {
		res := b.post(t, "/api/db/", body)
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw, secrets...)
		dbID = id(t, res.body["id"])
		require.Equal(t, "SENTINEL", res.body["connectionType"])
		require.Equal(t, "127.0.0.1", res.body["sentinelHost"])
		require.Equal(t, float64(sentinelPort), res.body["sentinelPort"])
		require.Equal(t, true, res.body["sentinelPassword"])
		require.Equal(t, map[string]any{"serviceName": "mymaster", "authPass": true}, res.body["sentinelMaster"])
		require.Equal(t, map[string]any{"host": "127.0.0.1", "port": float64(primary.port)}, res.body["master"], "the master the sentinel names")
		require.True(t, strings.HasPrefix(res.body["version"].(string), "7."))
		require.NotContains(t, res.body, "password")

		got := b.get(t, "/api/db/"+itoa(dbID)+"/")
		requireStatus(t, got, http.StatusOK)
		require.Equal(t, res.body, got.body)

		raw := storeBytes(t, b)
		for _, s := range secrets {
			require.NotContains(t, raw, s, "the sentinel's and the master's passwords are sealed at rest")
		}
	})

	t.Run("OKWithoutSecretsShowsNone", func(t *testing.T) {
		// A sentinel and master without passwords: nothing shows as set.
		open := startRedis(t, freePort(t))
		sdir := t.TempDir()
		sport := freePort(t)
		startProcess(t, sport, sdir, writeFile(t, sdir, "sentinel.conf", fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor open 127.0.0.1 %d 1\n",
			sport, sdir, open.port)), "--sentinel")
		res := b.post(t, "/api/db/", map[string]any{"name": "open", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": sport,
			"sentinelMaster": map[string]any{"serviceName": "open"}})
		requireStatus(t, res, http.StatusCreated)
		require.NotContains(t, res.body, "sentinelPassword")
		require.Equal(t, map[string]any{"serviceName": "open"}, res.body["sentinelMaster"])
	})

	for _, tc := range []struct {
		name, code string
		words      []string
		body       map[string]any
	}{
		{"WrongSentinelPassword", "CONNECTION_AUTH_FAILED", []string{"the sentinel at 127.0.0.1:" + itoa(sentinelPort), "WRONGPASS"},
			with(body, map[string]any{"sentinelPassword": "wrong"})},
		{"NoSentinelPassword", "CONNECTION_AUTH_FAILED", []string{"the sentinel at", "NOAUTH"},
			with(body, map[string]any{"sentinelPassword": nil})},
		{"MasterPasswordAsSentinelPassword", "CONNECTION_AUTH_FAILED", []string{"the sentinel at"},
			with(body, map[string]any{"sentinelPassword": primaryPassword})},
		{"WrongAuthPass", "CONNECTION_AUTH_FAILED", []string{`master "mymaster" at 127.0.0.1:` + itoa(primary.port), "WRONGPASS"},
			master(map[string]any{"serviceName": "mymaster", "authPass": "wrong"})},
		{"NoAuthPass", "CONNECTION_AUTH_FAILED", []string{`master "mymaster"`, "NOAUTH"},
			master(map[string]any{"serviceName": "mymaster"})},
		{"SentinelPasswordAsAuthPass", "CONNECTION_AUTH_FAILED", []string{`master "mymaster"`},
			master(map[string]any{"serviceName": "mymaster", "authPass": sentinelPassword})},
		{"SentinelUnreachable", "CONNECTION_UNREACHABLE", []string{"cannot reach the sentinel"},
			with(body, map[string]any{"sentinelPort": freePort(t)})},
		{"PrimaryIsNotASentinel", "NOT_A_SENTINEL", []string{"is not a sentinel"},
			with(body, map[string]any{"sentinelPort": primary.port, "sentinelPassword": primaryPassword})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.connectionCount(t)
			res := b.post(t, "/api/db/", tc.body)
			requireError(t, res, http.StatusFailedDependency, tc.code, "", tc.words...)
			requireNoSecrets(t, res.raw, secrets...)
			require.Equal(t, before, b.connectionCount(t), "nothing is stored")
		})
	}

	t.Run("Browse", func(t *testing.T) {
		testBrowse(t, b, dbID, client(t, primary.addr(), primaryPassword))
	})
}
