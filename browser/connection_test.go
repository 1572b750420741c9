package browser_test

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// with returns a copy of body with the changes; a nil value removes the field.
func with(body map[string]any, changes map[string]any) map[string]any {
	out := maps.Clone(body)
	for k, v := range changes {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

func TestConnectionValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ca := newCA(t, "test CA")
	cert, key := ca.valid(t, "client")
	_, otherKey := ca.valid(t, "other")
	expiredCert, expiredKey := ca.issue(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	b.createCert(t, "existing", cert, key)

	standalone := map[string]any{"name": "s", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": 6379}
	cluster := map[string]any{"name": "c", "connectionType": "CLUSTER", "seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": 7000}}}
	sentinel := map[string]any{"name": "m", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": 26379,
		"sentinelMaster": map[string]any{"serviceName": "mymaster"}}
	withTLS := func(tls map[string]any) map[string]any { return with(standalone, map[string]any{"tls": tls}) }
	newPair := func(pair map[string]any) map[string]any {
		return withTLS(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{"new": pair}})
	}

	for _, tc := range []struct {
		name        string
		body        any
		status      int
		code, field string
		words       []string
	}{
		{"NameMissing", with(standalone, map[string]any{"name": nil}), 400, "INVALID_FIELD", "name", []string{"is required"}},
		{"NameNotString", with(standalone, map[string]any{"name": 1}), 400, "INVALID_FIELD", "name", []string{"must be a string"}},
		{"TypeMissing", with(standalone, map[string]any{"connectionType": nil}), 400, "INVALID_FIELD", "connectionType", []string{"is required"}},
		{"TypeUnknown", with(standalone, map[string]any{"connectionType": "standalone"}), 400, "INVALID_FIELD", "connectionType", []string{"STANDALONE, CLUSTER, SENTINEL"}},

		{"StandaloneHostMissing", with(standalone, map[string]any{"host": nil}), 400, "INVALID_FIELD", "host", []string{"is required"}},
		{"StandaloneHostEmpty", with(standalone, map[string]any{"host": ""}), 400, "INVALID_FIELD", "host", []string{"must not be empty"}},
		{"StandaloneHostNotAHost", with(standalone, map[string]any{"host": "redis://a b"}), 400, "INVALID_FIELD", "host", []string{"host name or an IP address"}},
		{"StandaloneHostNotString", with(standalone, map[string]any{"host": 127}), 400, "INVALID_FIELD", "host", []string{"must be a string"}},
		{"StandalonePortMissing", with(standalone, map[string]any{"port": nil}), 400, "INVALID_FIELD", "port", []string{"is required"}},
		{"StandalonePortString", with(standalone, map[string]any{"port": "6379"}), 400, "INVALID_FIELD", "port", []string{"integer from 1 to 65535"}},
		{"StandalonePortZero", with(standalone, map[string]any{"port": 0}), 400, "INVALID_FIELD", "port", []string{"integer from 1 to 65535"}},
		{"StandalonePortTooLarge", with(standalone, map[string]any{"port": 65536}), 400, "INVALID_FIELD", "port", []string{"integer from 1 to 65535"}},
		{"StandalonePortFraction", with(standalone, map[string]any{"port": 6379.5}), 400, "INVALID_FIELD", "port", []string{"integer from 1 to 65535"}},
		{"StandalonePasswordNotString", with(standalone, map[string]any{"password": 42}), 400, "INVALID_FIELD", "password", []string{"must be a string"}},
		{"StandaloneWithSeedNodes", with(standalone, map[string]any{"seedNodes": []any{}}), 400, "INVALID_FIELD", "seedNodes", []string{"is not allowed for connectionType STANDALONE"}},
		{"StandaloneWithSentinelHost", with(standalone, map[string]any{"sentinelHost": "h"}), 400, "INVALID_FIELD", "sentinelHost", []string{"is not allowed for connectionType STANDALONE"}},
		{"StandaloneUnknownField", with(standalone, map[string]any{"db": 1}), 400, "INVALID_FIELD", "db", []string{"is not allowed"}},

		{"ClusterSeedNodesMissing", with(cluster, map[string]any{"seedNodes": nil}), 400, "INVALID_FIELD", "seedNodes", []string{"is required"}},
		{"ClusterSeedNodesEmpty", with(cluster, map[string]any{"seedNodes": []any{}}), 400, "INVALID_FIELD", "seedNodes", []string{"at least one node"}},
		{"ClusterSeedNodesNotArray", with(cluster, map[string]any{"seedNodes": map[string]any{"host": "h", "port": 1}}), 400, "INVALID_FIELD", "seedNodes", []string{"must be an array"}},
		{"ClusterSeedNodeNotObject", with(cluster, map[string]any{"seedNodes": []any{"127.0.0.1:7000"}}), 400, "INVALID_FIELD", "seedNodes[0]", []string{"must be an object"}},
		{"ClusterSeedNodeHostMissing", with(cluster, map[string]any{"seedNodes": []any{map[string]any{"host": "h", "port": 1}, map[string]any{"port": 7000}}}), 400, "INVALID_FIELD", "seedNodes[1].host", []string{"is required"}},
		{"ClusterSeedNodePortInvalid", with(cluster, map[string]any{"seedNodes": []any{map[string]any{"host": "h", "port": -1}}}), 400, "INVALID_FIELD", "seedNodes[0].port", []string{"integer from 1 to 65535"}},
		{"ClusterSeedNodeUnknownField", with(cluster, map[string]any{"seedNodes": []any{map[string]any{"host": "h", "port": 1, "role": "x"}}}), 400, "INVALID_FIELD", "seedNodes[0].role", []string{"is not allowed"}},
		{"ClusterWithHost", with(cluster, map[string]any{"host": "h"}), 400, "INVALID_FIELD", "host", []string{"is not allowed for connectionType CLUSTER"}},
		{"ClusterWithPort", with(cluster, map[string]any{"port": 1}), 400, "INVALID_FIELD", "port", []string{"is not allowed for connectionType CLUSTER"}},

		{"SentinelHostMissing", with(sentinel, map[string]any{"sentinelHost": nil}), 400, "INVALID_FIELD", "sentinelHost", []string{"is required"}},
		{"SentinelPortMissing", with(sentinel, map[string]any{"sentinelPort": nil}), 400, "INVALID_FIELD", "sentinelPort", []string{"is required"}},
		{"SentinelPortInvalid", with(sentinel, map[string]any{"sentinelPort": true}), 400, "INVALID_FIELD", "sentinelPort", []string{"integer from 1 to 65535"}},
		{"SentinelPasswordNotString", with(sentinel, map[string]any{"sentinelPassword": []any{}}), 400, "INVALID_FIELD", "sentinelPassword", []string{"must be a string"}},
		{"SentinelMasterMissing", with(sentinel, map[string]any{"sentinelMaster": nil}), 400, "INVALID_FIELD", "sentinelMaster", []string{"is required"}},
		{"SentinelMasterNotObject", with(sentinel, map[string]any{"sentinelMaster": "mymaster"}), 400, "INVALID_FIELD", "sentinelMaster", []string{"must be an object"}},
		{"SentinelServiceNameMissing", with(sentinel, map[string]any{"sentinelMaster": map[string]any{"authPass": "x"}}), 400, "INVALID_FIELD", "sentinelMaster.serviceName", []string{"is required"}},
		{"SentinelServiceNameEmpty", with(sentinel, map[string]any{"sentinelMaster": map[string]any{"serviceName": ""}}), 400, "INVALID_FIELD", "sentinelMaster.serviceName", []string{"must not be empty"}},
		{"SentinelAuthPassNotString", with(sentinel, map[string]any{"sentinelMaster": map[string]any{"serviceName": "m", "authPass": 1}}), 400, "INVALID_FIELD", "sentinelMaster.authPass", []string{"must be a string"}},
		{"SentinelMasterUnknownField", with(sentinel, map[string]any{"sentinelMaster": map[string]any{"serviceName": "m", "password": "x"}}), 400, "INVALID_FIELD", "sentinelMaster.password", []string{"is not allowed"}},
		{"SentinelWithPassword", with(sentinel, map[string]any{"password": "x"}), 400, "INVALID_FIELD", "password", []string{"is not allowed for connectionType SENTINEL"}},
		{"SentinelWithHost", with(sentinel, map[string]any{"host": "h"}), 400, "INVALID_FIELD", "host", []string{"is not allowed for connectionType SENTINEL"}},

		{"TLSNotObject", with(standalone, map[string]any{"tls": "yes"}), 400, "INVALID_FIELD", "tls", []string{"must be an object"}},
		{"TLSUseTLSNotBool", withTLS(map[string]any{"useTls": "true"}), 400, "INVALID_FIELD", "tls.useTls", []string{"must be a boolean"}},
		{"TLSClientAuthNotBool", withTLS(map[string]any{"useTls": true, "clientAuth": 1}), 400, "INVALID_FIELD", "tls.clientAuth", []string{"must be a boolean"}},
		{"TLSClientAuthWithoutTLS", withTLS(map[string]any{"clientAuth": true, "clientCertificateKeyPair": map[string]any{"id": 1}}), 400, "INVALID_FIELD", "tls.clientAuth", []string{"requires tls.useTls"}},
		{"TLSClientAuthWithoutPair", withTLS(map[string]any{"useTls": true, "clientAuth": true}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair", []string{"is required when tls.clientAuth is true"}},
		{"TLSPairWithoutTLS", withTLS(map[string]any{"clientCertificateKeyPair": map[string]any{"id": 1}}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair", []string{"requires tls.useTls"}},
		{"TLSPairEmpty", withTLS(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{}}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair", []string{"must hold id"}},
		{"TLSPairBoth", withTLS(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{"id": 1, "new": map[string]any{"name": "n", "cert": cert, "key": key}}}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair", []string{"not both"}},
		{"TLSPairIDNotInteger", withTLS(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{"id": "1"}}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair.id", []string{"must be an integer"}},
		{"TLSPairIDZero", withTLS(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{"id": 0}}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair.id", []string{"must be an integer"}},
		{"TLSPairIDUnknown", withTLS(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{"id": 999}}), 400, "CERTIFICATE_NOT_FOUND", "tls.clientCertificateKeyPair.id", []string{"999"}},
		{"TLSPairUnknownField", withTLS(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{"id": 1, "name": "existing"}}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair.name", []string{"is not allowed"}},
		{"TLSUnknownField", withTLS(map[string]any{"useTls": true, "servername": "h"}), 400, "INVALID_FIELD", "tls.servername", []string{"is not allowed"}},
		{"TLSNewPairNotObject", withTLS(map[string]any{"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{"new": "x"}}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair.new", []string{"must be an object"}},
		{"TLSNewPairKeyMissing", newPair(map[string]any{"name": "n", "cert": cert}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair.new.key", []string{"is required"}},
		{"TLSNewPairNameMissing", newPair(map[string]any{"cert": cert, "key": key}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair.new.name", []string{"is required"}},
		{"TLSNewPairKeyMismatch", newPair(map[string]any{"name": "n", "cert": cert, "key": otherKey}), 400, "PRIVATE_KEY_MISMATCH", "tls.clientCertificateKeyPair.new.key", []string{"does not match"}},
		{"TLSNewPairExpired", newPair(map[string]any{"name": "n", "cert": expiredCert, "key": expiredKey}), 400, "CERTIFICATE_EXPIRED", "tls.clientCertificateKeyPair.new.cert", nil},
		{"TLSNewPairMalformed", newPair(map[string]any{"name": "n", "cert": "x", "key": key}), 400, "CERTIFICATE_MALFORMED", "tls.clientCertificateKeyPair.new.cert", nil},
		{"TLSNewPairNameTaken", newPair(map[string]any{"name": "existing", "cert": cert, "key": key}), 400, "CERTIFICATE_NAME_TAKEN", "tls.clientCertificateKeyPair.new.name", []string{"This client certificate name is already in use."}},
		{"TLSNewPairUnknownField", newPair(map[string]any{"name": "n", "cert": cert, "key": key, "ca": "x"}), 400, "INVALID_FIELD", "tls.clientCertificateKeyPair.new.ca", []string{"is not allowed"}},

		{"MalformedJSON", `{"name":`, 400, "MALFORMED_BODY", "", nil},
		{"NotAnObject", `"STANDALONE"`, 400, "MALFORMED_BODY", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.post(t, "/api/db/", tc.body)
			requireError(t, res, tc.status, tc.code, tc.field, tc.words...)
			requireNoSecrets(t, res.raw, pemBody(key))
			require.Equal(t, 0, b.connectionCount(t), "nothing is stored")
			require.Equal(t, []string{"existing"}, b.certNames(t), "no certificate is stored")
		})
	}

	t.Run("TestParameterInvalid", func(t *testing.T) {
		res := b.post(t, "/api/db/?test=maybe", standalone)
		requireError(t, res, 400, "INVALID_FIELD", "test", "true or false")
	})

	t.Run("IntegralFloatPortAccepted", func(t *testing.T) {
		res := b.post(t, "/api/db/?test=false", with(standalone, map[string]any{"port": 6379.0, "name": ""}))
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, float64(6379), res.body["port"])
		require.Equal(t, "", res.body["name"], "any string is a valid name")
		requireStatus(t, b.del(t, "/api/db/"+itoa(id(t, res.body["id"]))), http.StatusNoContent)
	})
}

func TestStandalone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const password = "standalone-Secret-1"
	srv := startRedis(t, freePort(t), "--requirepass", password)
	body := map[string]any{"name": "local", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": srv.port, "password": password}
	closedPort := freePort(t)

	var dbID int
	t.Run("OK", func(t *testing.T) {
		res := b.post(t, "/api/db/", body)
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw, password)
		dbID = id(t, res.body["id"])
		require.Equal(t, "local", res.body["name"])
		require.Equal(t, "STANDALONE", res.body["connectionType"])
		require.Equal(t, "127.0.0.1", res.body["host"])
		require.Equal(t, float64(srv.port), res.body["port"])
		require.Equal(t, true, res.body["password"])
		require.Equal(t, map[string]any{"useTls": false, "clientAuth": false}, res.body["tls"])
		require.True(t, strings.HasPrefix(res.body["version"].(string), "7."), "version %v", res.body["version"])
		require.NotEmpty(t, res.body["lastConnection"])
		require.NotEmpty(t, res.body["createdAt"])
		for _, absent := range []string{"seedNodes", "nodes", "sentinelHost", "sentinelMaster", "sentinelPassword", "master"} {
			require.NotContains(t, res.body, absent)
		}

		for _, path := range []string{"/api/db/" + itoa(dbID), "/api/db/" + itoa(dbID) + "/"} {
			got := b.get(t, path)
			requireStatus(t, got, http.StatusOK)
			require.Equal(t, res.body, got.body)
		}
		list := b.get(t, "/api/db")
		requireStatus(t, list, http.StatusOK)
		require.Equal(t, map[string]any{"dbs": []any{res.body}}, list.body)
		requireNoSecrets(t, list.raw, password)
	})

	for _, tc := range []struct {
		name        string
		body        map[string]any
		code, words string
	}{
		{"WrongPassword", with(body, map[string]any{"password": "wrong"}), "CONNECTION_AUTH_FAILED", "WRONGPASS"},
		{"NoPassword", with(body, map[string]any{"password": nil}), "CONNECTION_AUTH_FAILED", "NOAUTH"},
		{"Unreachable", with(body, map[string]any{"port": closedPort}), "CONNECTION_UNREACHABLE", "127.0.0.1:" + itoa(closedPort)},
		{"TLSToPlainServer", with(body, map[string]any{"tls": map[string]any{"useTls": true}}), "CONNECTION_TLS_FAILED", "TLS with the database at 127.0.0.1:" + itoa(srv.port)},
		{"ClusterAtStandalone", map[string]any{"name": "c", "connectionType": "CLUSTER", "password": password,
			"seedNodes": []any{map[string]any{"host": "127.0.0.1", "port": srv.port}}}, "NOT_A_CLUSTER", "not in cluster mode"},
		{"SentinelAtStandalone", map[string]any{"name": "m", "connectionType": "SENTINEL", "sentinelHost": "127.0.0.1", "sentinelPort": srv.port,
			"sentinelPassword": password, "sentinelMaster": map[string]any{"serviceName": "mymaster"}}, "NOT_A_SENTINEL", "is not a sentinel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.connectionCount(t)
			res := b.post(t, "/api/db", tc.body)
			requireError(t, res, http.StatusFailedDependency, tc.code, "", tc.words)
			requireNoSecrets(t, res.raw, password)
			require.Equal(t, before, b.connectionCount(t), "nothing is stored")
		})
	}

	t.Run("UntestedSave", func(t *testing.T) {
		res := b.post(t, "/api/db?test=false", with(body, map[string]any{"name": "later", "port": closedPort}))
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, "later", res.body["name"])
		require.NotContains(t, res.body, "version")
		require.NotContains(t, res.body, "lastConnection")
		// Browsing it says the database cannot be reached.
		keys := b.get(t, "/api/db/"+itoa(id(t, res.body["id"]))+"/keys")
		requireError(t, keys, http.StatusFailedDependency, "CONNECTION_UNREACHABLE", "")
		requireStatus(t, b.del(t, "/api/db/"+itoa(id(t, res.body["id"]))), http.StatusNoContent)
	})

	t.Run("CertificateInUse", func(t *testing.T) {
		ca := newCA(t, "ca")
		cert, key := ca.valid(t, "client")
		certID := b.createCert(t, "in use", cert, key)
		res := b.post(t, "/api/db?test=false", with(body, map[string]any{"name": "tls", "tls": map[string]any{
			"useTls": true, "clientAuth": true, "clientCertificateKeyPair": map[string]any{"id": certID}}}))
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, map[string]any{"useTls": true, "clientAuth": true,
			"clientCertificateKeyPair": map[string]any{"id": float64(certID), "name": "in use"}}, res.body["tls"])
		requireNoSecrets(t, res.raw, pemBody(cert), pemBody(key))
		connID := id(t, res.body["id"])

		requireError(t, b.del(t, "/api/tls-client-cert/"+itoa(certID)), http.StatusConflict, "CERTIFICATE_IN_USE", "", "connection "+itoa(connID))
		requireStatus(t, b.del(t, "/api/db/"+itoa(connID)+"/"), http.StatusNoContent)
		requireStatus(t, b.del(t, "/api/tls-client-cert/"+itoa(certID)), http.StatusNoContent)
	})

	t.Run("Delete", func(t *testing.T) {
		res := b.post(t, "/api/db", with(body, map[string]any{"name": "to delete"}))
		requireStatus(t, res, http.StatusCreated)
		path := "/api/db/" + itoa(id(t, res.body["id"]))
		requireStatus(t, b.del(t, path), http.StatusNoContent)
		requireError(t, b.get(t, path), http.StatusNotFound, "CONNECTION_NOT_FOUND", "")
		requireError(t, b.del(t, path), http.StatusNotFound, "CONNECTION_NOT_FOUND", "")
	})

	t.Run("SealedAtRest", func(t *testing.T) {
		raw := storeBytes(t, b)
		require.NotContains(t, raw, password)
		require.Contains(t, raw, "sealed:v1:")
	})

	t.Run("Browse", func(t *testing.T) {
		testBrowse(t, b, dbID, client(t, srv.addr(), password))
	})

	t.Run("Reopen", func(t *testing.T) {
		before := b.get(t, "/api/db/"+itoa(dbID))
		requireStatus(t, before, http.StatusOK)
		require.NoError(t, b.srv.Close())
		b.start(t)
		after := b.get(t, "/api/db/"+itoa(dbID))
		requireStatus(t, after, http.StatusOK)
		require.Equal(t, before.body, after.body)
		// The sealed password still opens.
		res := b.get(t, "/api/db/"+itoa(dbID)+"/keys/str")
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, "hello", res.body["value"])
	})
}

func TestSecurity(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("HostNotLoopback", func(t *testing.T) {
		for _, host := range []string{"evil.example", "evil.example:5540", "localhost.evil.example", "10.0.0.1:5540", "0.0.0.0:5540"} {
			res := b.do(t, http.MethodGet, "/api/db/", nil, "Host", host)
			requireError(t, res, http.StatusForbidden, "HOST_NOT_ALLOWED", "", host)
			res = b.do(t, http.MethodPost, "/api/tls-client-cert/", `{}`, "Host", host)
			requireError(t, res, http.StatusForbidden, "HOST_NOT_ALLOWED", "")
		}
	})

	t.Run("HostLoopback", func(t *testing.T) {
		for _, host := range []string{"localhost", "localhost:5540", "LOCALHOST:5540", "app.localhost:5540", "127.0.0.1:5540", "127.1.2.3", "[::1]:5540"} {
			requireStatus(t, b.do(t, http.MethodGet, "/api/db/", nil, "Host", host), http.StatusOK)
		}
	})

	t.Run("ForeignOrigin", func(t *testing.T) {
		for _, origin := range []string{"http://evil.example", "https://evil.example:5540", "null", "http://localhost.evil.example", "file://", "chrome-extension://abc"} {
			res := b.do(t, http.MethodPost, "/api/db/", `{}`, "Origin", origin)
			requireError(t, res, http.StatusForbidden, "ORIGIN_NOT_ALLOWED", "")
			res = b.do(t, http.MethodGet, "/api/tls-client-cert", nil, "Origin", origin)
			requireError(t, res, http.StatusForbidden, "ORIGIN_NOT_ALLOWED", "")
		}
	})

	t.Run("LoopbackOrigin", func(t *testing.T) {
		for _, origin := range []string{"http://localhost:3000", "http://127.0.0.1", "https://[::1]:8443", "http://app.localhost:8080"} {
			res := b.do(t, http.MethodGet, "/api/tls-client-cert/", nil, "Origin", origin)
			requireStatus(t, res, http.StatusOK)
			require.Empty(t, res.header.Get("Access-Control-Allow-Origin"))
		}
	})

	t.Run("TrailingSlash", func(t *testing.T) {
		for _, path := range []string{"/api/db", "/api/db/", "/api/tls-client-cert", "/api/tls-client-cert/"} {
			requireStatus(t, b.get(t, path), http.StatusOK)
		}
		for _, path := range []string{"/api/db", "/api/db/", "/api/tls-client-cert", "/api/tls-client-cert/"} {
			requireError(t, b.post(t, path, `{}`), http.StatusBadRequest, "INVALID_FIELD", "name")
		}
	})

	t.Run("UnknownIDs", func(t *testing.T) {
		for _, path := range []string{"/api/db/999", "/api/db/999/", "/api/db/abc", "/api/db/-1", "/api/db/999/keys", "/api/db/999/keys/", "/api/db/999/keys/foo"} {
			requireError(t, b.get(t, path), http.StatusNotFound, "CONNECTION_NOT_FOUND", "")
		}
		requireError(t, b.del(t, "/api/db/999"), http.StatusNotFound, "CONNECTION_NOT_FOUND", "")
		requireError(t, b.del(t, "/api/tls-client-cert/999/"), http.StatusNotFound, "CERTIFICATE_NOT_FOUND", "")
	})

	t.Run("UnknownRoutes", func(t *testing.T) {
		requireError(t, b.get(t, "/api/nothing"), http.StatusNotFound, "NOT_FOUND", "")
		// "/" is the web UI (ui.go); other paths outside /api/ and /ui/ are unrouted.
		requireError(t, b.get(t, "/nothing"), http.StatusNotFound, "NOT_FOUND", "")
		res := b.do(t, http.MethodPut, "/api/db/", `{}`)
		requireError(t, res, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "")
		require.Contains(t, res.header.Get("Allow"), "POST")
		res = b.do(t, http.MethodDelete, "/api/db/1/keys/foo", nil)
		requireError(t, res, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "")
		require.Equal(t, "GET, HEAD", res.header.Get("Allow"))
	})
}
