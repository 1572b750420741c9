package browser_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// caNames lists the names of the stored CA certificates, checking the list's shape: a
// bare array of {id, name}, without bodies.
func (b *testBundle) caNames(t *testing.T) []string {
	t.Helper()
	res := b.get(t, "/api/certificates/ca")
	requireStatus(t, res, http.StatusOK)
	requireNoSecrets(t, res.raw)
	list := decodeArray(t, res.raw)
	names := []string{}
	for _, c := range list {
		m := c.(map[string]any)
		require.Len(t, m, 2, "a CA certificate shows as {id, name}: %v", m)
		id(t, m["id"])
		names = append(names, m["name"].(string))
	}
	return names
}

// createCA posts a CA certificate and returns its id.
func (b *testBundle) createCA(t *testing.T, name, certPEM string) int {
	t.Helper()
	res := b.post(t, "/api/certificates/ca", map[string]any{"name": name, "certificate": certPEM})
	requireStatus(t, res, http.StatusCreated)
	require.Equal(t, map[string]any{"id": res.body["id"], "name": name}, res.body)
	requireNoSecrets(t, res.raw)
	return id(t, res.body["id"])
}

func TestCACertificates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ca := newCA(t, "test CA")
	other := newCA(t, "other CA")
	_, key := ca.valid(t, "client")

	// A record that needs no server: saved untested.
	standalone := map[string]any{"name": "db", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": freePort(t)}
	withTLS := func(tls map[string]any) map[string]any { return with(standalone, map[string]any{"tls": tls}) }

	require.Empty(t, b.caNames(t))
	caID := b.createCA(t, "root", ca.pem)
	bundleID := b.createCA(t, "bundle", other.pem+ca.pem)
	require.Equal(t, []string{"root", "bundle"}, b.caNames(t))
	require.NotContains(t, storeBytes(t, b), pemBody(ca.pem), "CA certificates are sealed at rest")

	for _, tc := range []struct {
		name        string
		body        any
		code, field string
		words       []string
	}{
		{"DuplicateName", map[string]any{"name": "root", "certificate": other.pem}, "CERTIFICATE_NAME_TAKEN", "name", []string{`"root" already exists`}},
		{"NotPEM", map[string]any{"name": "n", "certificate": "hello"}, "CERTIFICATE_MALFORMED", "certificate", []string{"not a PEM certificate"}},
		{"AKey", map[string]any{"name": "n", "certificate": key}, "CERTIFICATE_MALFORMED", "certificate", []string{`"PRIVATE KEY"`}},
		{"BadDER", map[string]any{"name": "n", "certificate": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}))}, "CERTIFICATE_MALFORMED", "certificate", []string{"cannot be parsed"}},
		{"NoCertificate", map[string]any{"name": "n"}, "INVALID_FIELD", "certificate", []string{"is required"}},
		{"NoName", map[string]any{"certificate": ca.pem}, "INVALID_FIELD", "name", []string{"is required"}},
		{"BlankName", map[string]any{"name": "  ", "certificate": ca.pem}, "INVALID_FIELD", "name", []string{"must not be blank"}},
		{"UnknownField", map[string]any{"name": "n", "certificate": ca.pem, "key": key}, "INVALID_FIELD", "key", []string{"is not allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.post(t, "/api/certificates/ca", tc.body)
			requireError(t, res, http.StatusBadRequest, tc.code, tc.field, tc.words...)
			requireNoSecrets(t, res.raw, pemBody(key))
			require.Equal(t, []string{"root", "bundle"}, b.caNames(t))
		})
	}

	for _, tc := range []struct {
		name        string
		body        map[string]any
		code, field string
		words       []string
	}{
		{"CAWithoutVerify", withTLS(map[string]any{"useTls": true, "caCert": map[string]any{"id": caID}}), "INVALID_FIELD", "tls.caCert", []string{"verifyServerCert true"}},
		{"VerifyWithoutTLS", withTLS(map[string]any{"verifyServerCert": true}), "INVALID_FIELD", "tls.verifyServerCert", []string{"requires tls.useTls"}},
		{"VerifyNotBoolean", withTLS(map[string]any{"useTls": true, "verifyServerCert": "yes"}), "INVALID_FIELD", "tls.verifyServerCert", []string{"must be a boolean"}},
		{"UnknownCAID", withTLS(map[string]any{"useTls": true, "verifyServerCert": true, "caCert": map[string]any{"id": 999}}), "CA_CERTIFICATE_NOT_FOUND", "tls.caCert.id", []string{"no CA certificate with id 999"}},
		{"IDAndNew", withTLS(map[string]any{"useTls": true, "verifyServerCert": true, "caCert": map[string]any{"id": caID, "new": map[string]any{"name": "x", "certificate": ca.pem}}}), "INVALID_FIELD", "tls.caCert", []string{"not both"}},
		{"Empty", withTLS(map[string]any{"useTls": true, "verifyServerCert": true, "caCert": map[string]any{}}), "INVALID_FIELD", "tls.caCert", []string{"must hold id"}},
		{"ByName", withTLS(map[string]any{"useTls": true, "verifyServerCert": true, "caCert": map[string]any{"id": caID, "name": "root"}}), "INVALID_FIELD", "tls.caCert.name", []string{"is not allowed"}},
		{"NewDuplicateName", withTLS(map[string]any{"useTls": true, "verifyServerCert": true, "caCert": map[string]any{"new": map[string]any{"name": "root", "certificate": other.pem}}}), "CERTIFICATE_NAME_TAKEN", "tls.caCert.new.name", []string{`"root" already exists`}},
		{"NewNotPEM", withTLS(map[string]any{"useTls": true, "verifyServerCert": true, "caCert": map[string]any{"new": map[string]any{"name": "n", "certificate": "junk"}}}), "CERTIFICATE_MALFORMED", "tls.caCert.new.certificate", []string{"not a PEM certificate"}},
		{"NewUnknownField", withTLS(map[string]any{"useTls": true, "verifyServerCert": true, "caCert": map[string]any{"new": map[string]any{"name": "n", "certificate": ca.pem, "key": key}}}), "INVALID_FIELD", "tls.caCert.new.key", []string{"is not allowed"}},
	} {
		t.Run("Connection"+tc.name, func(t *testing.T) {
			count := b.connectionCount(t)
			res := b.post(t, "/api/db?test=false", tc.body)
			requireError(t, res, http.StatusBadRequest, tc.code, tc.field, tc.words...)
			requireNoSecrets(t, res.raw, pemBody(key))
			require.Equal(t, count, b.connectionCount(t))
			require.Equal(t, []string{"root", "bundle"}, b.caNames(t))
		})
	}

	t.Run("InUseAndDelete", func(t *testing.T) {
		res := b.post(t, "/api/db?test=false", withTLS(map[string]any{"useTls": true, "verifyServerCert": true, "caCert": map[string]any{"id": caID}}))
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw)
		require.Equal(t, map[string]any{"useTls": true, "clientAuth": false, "verifyServerCert": true,
			"caCert": map[string]any{"id": float64(caID), "name": "root"}}, res.body["tls"])
		dbID := id(t, res.body["id"])

		got := b.get(t, "/api/db/"+itoa(dbID))
		requireStatus(t, got, http.StatusOK)
		require.Equal(t, res.body["tls"], got.body["tls"])

		// An inline new CA certificate is stored with the record.
		res = b.post(t, "/api/db?test=false", withTLS(map[string]any{"useTls": true, "verifyServerCert": true,
			"caCert": map[string]any{"new": map[string]any{"name": "inline", "certificate": other.pem}}}))
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw)
		inline := res.body["tls"].(map[string]any)["caCert"].(map[string]any)
		require.Equal(t, "inline", inline["name"])
		require.Equal(t, []string{"root", "bundle", "inline"}, b.caNames(t))

		// Refused while a record uses it; then deleted with the record gone.
		del := b.del(t, "/api/certificates/ca/"+itoa(caID))
		requireError(t, del, http.StatusConflict, "CERTIFICATE_IN_USE", "", "used by connection "+itoa(dbID))
		require.Equal(t, []string{"root", "bundle", "inline"}, b.caNames(t))
		requireStatus(t, b.del(t, "/api/db/"+itoa(dbID)), http.StatusNoContent)
		requireStatus(t, b.del(t, "/api/certificates/ca/"+itoa(caID)+"/"), http.StatusNoContent)
		requireStatus(t, b.del(t, "/api/certificates/ca/"+itoa(bundleID)), http.StatusNoContent)
		require.Equal(t, []string{"inline"}, b.caNames(t))

		requireError(t, b.del(t, "/api/certificates/ca/"+itoa(caID)), http.StatusNotFound, "CA_CERTIFICATE_NOT_FOUND", "")
		requireError(t, b.del(t, "/api/certificates/ca/abc"), http.StatusNotFound, "CA_CERTIFICATE_NOT_FOUND", "")

		// The name is free again; ids are not reused.
		require.Greater(t, b.createCA(t, "root", ca.pem), id(t, inline["id"]))
	})

	t.Run("SurvivesRestart", func(t *testing.T) {
		require.NoError(t, b.srv.Close())
		b.start(t)
		require.Equal(t, []string{"inline", "root"}, b.caNames(t))
	})
}

func TestVerifyServerCert(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ca := newCA(t, "test CA")
	rogue := newCA(t, "rogue CA")
	serverCert, serverKey := ca.valid(t, "localhost") // for localhost and 127.0.0.1
	otherCert, otherKey := ca.issueFor(t, "db.example")

	const password = "verify-Secret-1"
	startTLS := func(cert, key string) int {
		dir := t.TempDir()
		port := freePort(t)
		startRedis(t, port, "--port", "0", "--tls-port", itoa(port),
			"--tls-cert-file", writeFile(t, dir, "server.crt", cert),
			"--tls-key-file", writeFile(t, dir, "server.key", key),
			"--tls-ca-cert-file", writeFile(t, dir, "ca.crt", ca.pem),
			"--tls-auth-clients", "no",
			"--requirepass", password)
		return port
	}
	port := startTLS(serverCert, serverKey)
	misnamedPort := startTLS(otherCert, otherKey)

	caID := b.createCA(t, "root", ca.pem)
	rogueID := b.createCA(t, "rogue", rogue.pem)
	body := func(port int, tls map[string]any) map[string]any {
		return map[string]any{"name": "verified", "connectionType": "STANDALONE", "host": "127.0.0.1", "port": port, "password": password, "tls": tls}
	}
	verify := func(caCert map[string]any) map[string]any {
		tls := map[string]any{"useTls": true, "verifyServerCert": true}
		if caCert != nil {
			tls["caCert"] = caCert
		}
		return tls
	}

	t.Run("OKWithRightCA", func(t *testing.T) {
		res := b.post(t, "/api/db/", body(port, verify(map[string]any{"id": caID})))
		requireStatus(t, res, http.StatusCreated)
		requireNoSecrets(t, res.raw, password)
		require.NotEmpty(t, res.body["version"])

		// Browsing verifies the server with the stored CA certificate too.
		keys := b.get(t, "/api/db/"+itoa(id(t, res.body["id"]))+"/keys")
		requireStatus(t, keys, http.StatusOK)
	})

	t.Run("KeptByPatchAndTest", func(t *testing.T) {
		// A PATCH that does not name the server verification keeps it, and the test of the
		// saved record (moved, unsaved, to the misnamed server) verifies it too.
		res := b.post(t, "/api/db/", body(port, verify(map[string]any{"id": caID})))
		requireStatus(t, res, http.StatusCreated)
		rec := itoa(id(t, res.body["id"]))
		patched := b.do(t, http.MethodPatch, "/api/db/"+rec, map[string]any{"name": "renamed"})
		requireStatus(t, patched, http.StatusOK)
		tlsView := patched.body["tls"].(map[string]any)
		require.Equal(t, true, tlsView["verifyServerCert"])
		require.Equal(t, "root", tlsView["caCert"].(map[string]any)["name"])
		requireStatus(t, b.post(t, "/api/db/test/"+rec, map[string]any{}), http.StatusOK)
		moved := b.post(t, "/api/db/test/"+rec, map[string]any{"port": misnamedPort, "password": password})
		requireError(t, moved, http.StatusFailedDependency, "SERVER_CERTIFICATE_REJECTED", "", "certificate for 127.0.0.1")
		requireNoSecrets(t, moved.raw, password)
	})

	t.Run("OKWithRightInlineCA", func(t *testing.T) {
		res := b.post(t, "/api/db/", body(port, verify(map[string]any{"new": map[string]any{"name": "inline", "certificate": ca.pem}})))
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, "inline", res.body["tls"].(map[string]any)["caCert"].(map[string]any)["name"])
	})

	t.Run("OKWithoutVerification", func(t *testing.T) {
		// The default: encrypted, not verified; the misnamed server is accepted.
		res := b.post(t, "/api/db/", body(misnamedPort, map[string]any{"useTls": true}))
		requireStatus(t, res, http.StatusCreated)
		require.Equal(t, map[string]any{"useTls": true, "clientAuth": false}, res.body["tls"])
	})

	for _, tc := range []struct {
		name  string
		body  map[string]any
		words []string
	}{
		{"WrongCA", body(port, verify(map[string]any{"id": rogueID})), []string{"127.0.0.1:" + itoa(port), "not trusted", "unknown authority"}},
		{"WrongInlineCA", body(port, verify(map[string]any{"new": map[string]any{"name": "rogue-inline", "certificate": rogue.pem}})), []string{"not trusted", "unknown authority"}},
		{"SystemRoots", body(port, verify(nil)), []string{"not trusted", "unknown authority"}},
		{"WrongName", body(misnamedPort, verify(map[string]any{"id": caID})), []string{"127.0.0.1:" + itoa(misnamedPort), "not trusted", "certificate for 127.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count, cas := b.connectionCount(t), b.caNames(t)
			res := b.post(t, "/api/db/", tc.body)
			requireError(t, res, http.StatusFailedDependency, "SERVER_CERTIFICATE_REJECTED", "", tc.words...)
			requireNoSecrets(t, res.raw, password)
			require.Equal(t, count, b.connectionCount(t), "no connection is stored")
			require.Equal(t, cas, b.caNames(t), "no CA certificate is stored, not even an inline new one")
		})
	}
}

// issueFor makes a server certificate and key for the DNS name only.
func (ca *authority) issueFor(t *testing.T, dnsName string) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: dnsName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{dnsName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// decodeArray decodes a JSON array answer.
// A store made before migration 0002 opens with its records, which have no CA
// certificate and no username, and takes CA certificates.
func TestMigrationCACertificates(t *testing.T) {
	t.Parallel()
	initSQL, err := os.ReadFile("migration/0001_init.sql")
	require.NoError(t, err)
	key, err := clouddb.ParseKey(clouddb.NewKey())
	require.NoError(t, err)
	cipher, err := clouddb.NewCipher(key)
	require.NoError(t, err)
	b := &testBundle{path: filepath.Join(t.TempDir(), "browser.db"), cipher: cipher}
	old, err := sqlite.OpenPools(b.path, fstest.MapFS{"migration/0001_init.sql": {Data: initSQL}}, 1)
	require.NoError(t, err)
	_, err = old.Writer.Exec(`INSERT INTO connections (name, connection_type, config, created_at) VALUES ('old', 'STANDALONE', '{"host":"127.0.0.1","port":6379,"useTls":true}', 0)`)
	require.NoError(t, err)
	require.NoError(t, old.Close())

	b.start(t)
	res := b.get(t, "/api/db/1")
	requireStatus(t, res, http.StatusOK)
	require.Equal(t, map[string]any{"useTls": true, "clientAuth": false}, res.body["tls"])
	require.NotContains(t, res.body, "username")
	b.createCA(t, "root", newCA(t, "test CA").pem)
	require.Equal(t, []string{"root"}, b.caNames(t))
}
