package browser_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/browser"
	"clouddb/internal/dnstest"
)

// TestConnectionAddressGuard: a connection may not point at a link-local or metadata
// address, given literally, as a metadata name, or as a name resolving to one; loopback
// stays allowed.
func TestConnectionAddressGuard(t *testing.T) {
	t.Parallel()
	requireRedis(t)
	key, err := clouddb.ParseKey(clouddb.NewKey())
	require.NoError(t, err)
	cipher, err := clouddb.NewCipher(key)
	require.NoError(t, err)
	resolver := dnstest.Table(t, map[string]netip.Addr{
		"imds.evil.test":  netip.MustParseAddr("169.254.169.254"),
		"local.good.test": netip.MustParseAddr("127.0.0.1"),
	})
	srv, err := browser.Open(browser.Config{Path: filepath.Join(t.TempDir(), "browser.db"), Cipher: cipher,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)), Resolver: resolver})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	b := &testBundle{srv: srv, url: hs.URL}
	const password = "guard-Secret-1"
	rs := startRedis(t, freePort(t), "--requirepass", password)
	standalone := func(host string) map[string]any {
		return map[string]any{"name": "g", "connectionType": "STANDALONE", "host": host, "port": rs.port, "password": password}
	}

	for _, tc := range []struct {
		name, path  string
		body        map[string]any
		field, word string
	}{
		{"MetadataIPv4", "/api/db", standalone("169.254.169.254"), "host", "cloud metadata"},
		{"LinkLocalIPv4", "/api/db", standalone("169.254.10.1"), "host", "link-local"},
		{"LinkLocalIPv6", "/api/db", standalone("[fe80::1]"), "host", "link-local"},
		{"MetadataName", "/api/db", standalone("metadata.google.internal"), "host", "metadata"},
		{"MappedIPv6", "/api/db", standalone("::ffff:169.254.169.254"), "host", "metadata"},
		{"NotTestedStillRefused", "/api/db?test=false", standalone("169.254.169.254"), "host", "metadata"},
		{"NameResolvingToLinkLocal", "/api/db", standalone("imds.evil.test"), "host", "imds.evil.test resolves to a refused address"},
		{"SeedNode", "/api/db", map[string]any{"name": "c", "connectionType": "CLUSTER",
			"seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": rs.port}, map[string]any{"host": "169.254.169.254", "port": 6379}}}, "seedNodes[1].host", "metadata"},
		{"SeedNodeName", "/api/db", map[string]any{"name": "c", "connectionType": "CLUSTER",
			"seedNodes": []any{map[string]any{"host": "imds.evil.test", "port": 6379}}}, "seedNodes[0].host", "resolves to a refused address"},
		{"SentinelHost", "/api/db", map[string]any{"name": "s", "connectionType": "SENTINEL", "sentinelHost": "fe80::2", "sentinelPort": 26379,
			"sentinelMaster": map[string]any{"serviceName": "m"}}, "sentinelHost", "link-local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.post(t, tc.path, tc.body)
			requireError(t, res, http.StatusBadRequest, "ADDRESS_FORBIDDEN", tc.field, tc.word)
			require.Equal(t, 0, b.connectionCount(t), "nothing is stored")
		})
	}

	t.Run("LoopbackAllowed", func(t *testing.T) {
		for _, host := range []string{"127.0.0.1", "localhost", "local.good.test"} {
			res := b.post(t, "/api/db", standalone(host))
			requireStatus(t, res, http.StatusCreated)
			require.Equal(t, host, res.body["host"])
		}
	})
}

// TestCrossSiteFetchesRefused: a request a browser marks as coming from another site
// (an <img> or a link, which carry no Origin) is refused, reads included; the listener's
// own pages (same-origin) and clients that send no Sec-Fetch-Site get through.
func TestCrossSiteFetchesRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, site := range []string{"cross-site", "same-site"} {
		res := b.do(t, http.MethodGet, "/api/db", nil, "Sec-Fetch-Site", site)
		requireError(t, res, http.StatusForbidden, "ORIGIN_NOT_ALLOWED", "", "Sec-Fetch-Site: "+site)
		res = b.do(t, http.MethodGet, "/", nil, "Sec-Fetch-Site", site)
		require.Equal(t, http.StatusForbidden, res.status)
	}
	requireStatus(t, b.do(t, http.MethodGet, "/api/db", nil, "Sec-Fetch-Site", "same-origin"), http.StatusOK)
	requireStatus(t, b.do(t, http.MethodGet, "/api/db", nil), http.StatusOK)
}
