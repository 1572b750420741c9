package browser_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestTLS(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ca := newCA(t, "test CA")
	rogue := newCA(t, "rogue CA")
	serverCert, serverKey := ca.valid(t, "localhost")
	clientCert, clientKey := ca.valid(t, "client")
	rogueCert, rogueKey := rogue.valid(t, "client")

	const password = "tls-Secret-1"
	dir := t.TempDir()
	port := freePort(t)
	startRedis(t, port, "--port", "0", "--tls-port", itoa(port),
		"--tls-cert-file", writeFile(t, dir, "server.crt", serverCert),
		"--tls-key-file", writeFile(t, dir, "server.key", serverKey),
		"--tls-ca-cert-file", writeFile(t, dir, "ca.crt", ca.pem),
		"--tls-auth-clients", "yes",
		"--requirepass", password)

	// A client of the test's own, to check that the server requires a client certificate.
	pair, err := tls.X509KeyPair([]byte(clientCert), []byte(clientKey))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + itoa(port), Password: password, Protocol: 2, DisableIdentity: true,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: "localhost"}})
	t.Cleanup(func() { rc.Close() })
	require.NoError(t, rc.Set(context.Background(), "greeting", "hello over TLS", 0).Err())

	certID := b.createCert(t, "client", clientCert, clientKey)
	body := func(tls map[string]any) map[string]any {
		return map[string]any{"name": "tls", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": port, "password": password, "tls": tls}
	}
	mutual := func(pair map[string]any) map[string]any {
		return body(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": pair})
	}
	secrets := []string{password, pemBody(clientCert), pemBody(clientKey), pemBody(rogueKey)}

	t.Run("OKWithPairByID", func(t *testing.T) {
		res := b.post(t, "/api/db/", mutual(map[string]any{"id": certID}))
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw, secrets...)
		require.Equal(t, map[string]any{"useTls": true, "clientAuth": true,
			"clientCertificateKeyPair": map[string]any{"id": float64(certID), "name": "client"}}, res.body["tls"])
		require.NotEmpty(t, res.body["version"])

		// Browsing connects with the stored pair.
		val := b.get(t, "/api/db/"+itoa(id(t, res.body["id"]))+"/keys/greeting")
		requireStatus(t, val, http.StatusOK)
		require.Equal(t, "hello over TLS", val.body["value"])
		keys := b.get(t, "/api/db/"+itoa(id(t, res.body["id"]))+"/keys")
		requireStatus(t, keys, http.StatusOK)
		size, err := rc.MemoryUsage(context.Background(), "greeting").Result()
		require.NoError(t, err)
		require.Equal(t, []any{map[string]any{"name": "greeting", "type": "string", "ttl": float64(-1),
			"size": float64(size), "length": float64(len("hello over TLS"))}}, keys.body["keys"])
	})

	t.Run("OKWithNewPair", func(t *testing.T) {
		cert, key := ca.valid(t, "inline")
		res := b.post(t, "/api/db/", mutual(map[string]any{"new": map[string]any{"name": "inline", "cert": cert, "key": key}}))
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw, append(secrets, pemBody(cert), pemBody(key))...)
		stored := res.body["tls"].(map[string]any)["clientCertificateKeyPair"].(map[string]any)
		require.Equal(t, "inline", stored["name"])
		require.Equal(t, []string{"client", "inline"}, b.certNames(t))

		// The inline pair can be reused by id.
		res = b.post(t, "/api/db/", mutual(map[string]any{"id": stored["id"]}))
		requireStatus(t, res, http.StatusCreated)
	})

	for _, tc := range []struct {
		name, code, words string
		body              map[string]any
	}{
		{"PairFromAnotherCA", "CONNECTION_TLS_FAILED", "TLS with the database at 127.0.0.1:" + itoa(port),
			mutual(map[string]any{"new": map[string]any{"name": "rogue", "cert": rogueCert, "key": rogueKey}})},
		{"NoClientCertificate", "CONNECTION_TLS_FAILED", "TLS with the database",
			body(map[string]any{"useTls": true})},
		{"NoTLS", "CONNECTION_FAILED", "does it require TLS?",
			body(nil)},
		{"WrongPassword", "CONNECTION_AUTH_FAILED", "WRONGPASS",
			with(mutual(map[string]any{"id": certID}), map[string]any{"password": "wrong"})},
		{"UnreachableWithNewPair", "CONNECTION_UNREACHABLE", "cannot reach",
			with(mutual(map[string]any{"new": map[string]any{"name": "lost", "cert": clientCert, "key": clientKey}}), map[string]any{"port": freePort(t)})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count, certs := b.connectionCount(t), b.certNames(t)
			res := b.post(t, "/api/db/", tc.body)
			requireError(t, res, http.StatusFailedDependency, tc.code, "", tc.words)
			requireNoSecrets(t, res.raw, secrets...)
			require.Equal(t, count, b.connectionCount(t), "no connection is stored")
			require.Equal(t, certs, b.certNames(t), "no certificate is stored, not even an inline new one")
		})
	}

	t.Run("UntestedSaveWithNewPair", func(t *testing.T) {
		cert, key := ca.valid(t, "untested")
		res := b.post(t, "/api/db/?test=false", with(mutual(map[string]any{"new": map[string]any{"name": "untested", "cert": cert, "key": key}}),
			map[string]any{"port": freePort(t)}))
		requireStatus(t, res, http.StatusCreated)
		require.Contains(t, b.certNames(t), "untested")
	})

}
