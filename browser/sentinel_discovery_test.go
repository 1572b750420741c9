package browser_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSentinelDiscovery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const password = "sentinel-Secret-5"
	alpha := startRedis(t, freePort(t))
	beta := startRedis(t, freePort(t))
	gonePort := freePort(t) // nothing listens there: the sentinel sees that master down
	port := startSentinel(t, password, map[string]int{"alpha": alpha.port, "beta": beta.port, "gone": gonePort})
	sentinel := []any{map[string]any{"host": "127.0.0.1", "port": float64(port)}}
	group := func(name string, p int, status string) map[string]any {
		return map[string]any{"name": name, "host": "127.0.0.1", "port": float64(p), "status": status, "numberOfSlaves": float64(0), "nodes": sentinel}
	}
	want := []any{group("alpha", alpha.port, "active"), group("beta", beta.port, "active"), group("gone", gonePort, "down")}

	t.Run("ListsTheMasters", func(t *testing.T) {
		var res response
		eventually(t, 15*time.Second, "the sentinel sees gone down", func() bool {
			res = b.post(t, "/api/redis-sentinel/get-databases", map[string]any{"host": "127.0.0.1", "port": port, "password": password})
			requireStatus(t, res, http.StatusOK)
			return res.raw[0] == '[' && len(decodeArray(t, res.raw)) == 3 && decodeArray(t, res.raw)[2].(map[string]any)["status"] == "down"
		})
		require.Equal(t, want, decodeArray(t, res.raw))
		requireNoSecrets(t, res.raw, password)
	})

	t.Run("RecordFieldNames", func(t *testing.T) {
		res := b.post(t, "/api/redis-sentinel/get-databases/", map[string]any{"sentinelHost": "127.0.0.1", "sentinelPort": port, "sentinelPassword": password})
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, want, decodeArray(t, res.raw))
		require.Equal(t, 0, b.connectionCount(t), "nothing is stored")
	})

	for _, tc := range []struct {
		name        string
		body        map[string]any
		status      int
		code, field string
		words       []string
	}{
		{"WrongPassword", map[string]any{"host": "127.0.0.1", "port": port, "password": "wrong"}, 424, "CONNECTION_AUTH_FAILED", "", []string{"the sentinel at"}},
		{"NoPassword", map[string]any{"host": "127.0.0.1", "port": port}, 424, "CONNECTION_AUTH_FAILED", "", []string{"NOAUTH"}},
		{"NotASentinel", map[string]any{"host": "127.0.0.1", "port": alpha.port}, 424, "NOT_A_SENTINEL", "", []string{"is not a sentinel"}},
		{"Unreachable", map[string]any{"host": "127.0.0.1", "port": gonePort}, 424, "CONNECTION_UNREACHABLE", "", []string{"cannot reach the sentinel"}},
		{"PortMissing", map[string]any{"host": "127.0.0.1"}, 400, "INVALID_FIELD", "port", []string{"is required"}},
		{"HostMissing", map[string]any{"sentinelPort": port}, 400, "INVALID_FIELD", "sentinelHost", []string{"is required"}},
		{"MixedNames", map[string]any{"host": "127.0.0.1", "port": port, "sentinelPassword": password}, 400, "INVALID_FIELD", "sentinelPassword", []string{"is not allowed"}},
		{"MasterNotTaken", map[string]any{"host": "127.0.0.1", "port": port, "sentinelMaster": map[string]any{"serviceName": "alpha"}}, 400, "INVALID_FIELD", "sentinelMaster", []string{"is not allowed"}},
		{"MetadataAddress", map[string]any{"host": "169.254.169.254", "port": port}, 400, "ADDRESS_FORBIDDEN", "host", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.post(t, "/api/redis-sentinel/get-databases", tc.body)
			requireError(t, res, tc.status, tc.code, tc.field, tc.words...)
			requireNoSecrets(t, res.raw, password)
		})
	}

	t.Run("UnknownMasterGroup", func(t *testing.T) {
		res := b.post(t, "/api/db/", map[string]any{"name": "s", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": port,
			"sentinelPassword": password, "sentinelMaster": map[string]any{"serviceName": "gamma"}})
		requireStatus(t, res, http.StatusNotFound)
		require.Equal(t, map[string]any{
			"statusCode": float64(404),
			"error":      "Not Found",
			"code":       "SENTINEL_MASTER_UNKNOWN",
			"field":      "sentinelMaster.serviceName",
			"message": "sentinelMaster.serviceName: Master group with this name doesn't exist: the sentinel at 127.0.0.1:" + itoa(port) +
				` monitors no master named "gamma"; it monitors "alpha", "beta", "gone"`,
		}, res.body)
		requireNoSecrets(t, res.raw, password)
		require.Equal(t, 0, b.connectionCount(t), "nothing is stored")
	})
}

// decodeArray decodes a JSON array answer.
func decodeArray(t *testing.T, raw string) []any {
	t.Helper()
	var out []any
	require.NoError(t, json.Unmarshal([]byte(raw), &out), "body: %s", raw)
	return out
}
