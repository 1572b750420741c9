package browser_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCertificates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ca := newCA(t, "test CA")
	cert, key := ca.valid(t, "client")

	t.Run("OK", func(t *testing.T) {
		res := b.post(t, "/api/tls-client-cert/", map[string]any{"name": "client", "cert": cert, "key": key})
		requireStatus(t, res, http.StatusCreated)
		c := res.body["certificate"].(map[string]any)
		require.Equal(t, map[string]any{"id": c["id"], "name": "client"}, c)
		require.Len(t, res.body, 1)
		id(t, c["id"])
		requireNoSecrets(t, res.raw)

		res = b.get(t, "/api/tls-client-cert/")
		requireStatus(t, res, http.StatusOK)
		require.Equal(t, map[string]any{"certificates": []any{map[string]any{"id": c["id"], "name": "client"}}}, res.body)
		requireNoSecrets(t, res.raw)
	})

	t.Run("OKWithChainAndOtherKeyFormats", func(t *testing.T) {
		// The chain after the certificate; the key as SEC 1 after its EC PARAMETERS.
		ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		ecCert := ca.sign(t, "ec", &ecKey.PublicKey)
		sec1, err := x509.MarshalECPrivateKey(ecKey)
		require.NoError(t, err)
		params := pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}})
		b.createCert(t, "sec1", ecCert+ca.pem, string(params)+string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})))

		// RSA with a PKCS #1 key, surrounded by text.
		rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		rsaCert := ca.sign(t, "rsa", &rsaKey.PublicKey)
		b.createCert(t, "pkcs1", "subject=CN rsa\n"+rsaCert, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})))
		require.Equal(t, []string{"client", "sec1", "pkcs1"}, b.certNames(t))
	})

	otherCert, otherKey := ca.valid(t, "other")
	expiredCert, expiredKey := ca.issue(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	futureCert, futureKey := ca.issue(t, "future", time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour))
	garbageCert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER at all")}))
	garbageKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not DER at all")}))
	encryptedKey := string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
	legacyEncryptedKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1}}))

	for _, tc := range []struct {
		name        string
		body        any
		status      int
		code, field string
		words       []string
	}{
		{"KeyNotMatchingCert", map[string]any{"name": "n", "cert": cert, "key": otherKey}, 400, "PRIVATE_KEY_MISMATCH", "key", []string{"does not match"}},
		{"CertExpired", map[string]any{"name": "n", "cert": expiredCert, "key": expiredKey}, 400, "CERTIFICATE_EXPIRED", "cert", []string{"expired on"}},
		{"CertNotYetValid", map[string]any{"name": "n", "cert": futureCert, "key": futureKey}, 400, "CERTIFICATE_NOT_YET_VALID", "cert", []string{"not valid before"}},
		{"CertNotPEM", map[string]any{"name": "n", "cert": "hello", "key": key}, 400, "CERTIFICATE_MALFORMED", "cert", []string{"not a PEM certificate"}},
		{"CertBadDER", map[string]any{"name": "n", "cert": garbageCert, "key": key}, 400, "CERTIFICATE_MALFORMED", "cert", []string{"cannot be parsed"}},
		{"CertIsAKey", map[string]any{"name": "n", "cert": key, "key": key}, 400, "CERTIFICATE_MALFORMED", "cert", []string{`"PRIVATE KEY"`}},
		{"KeyNotPEM", map[string]any{"name": "n", "cert": cert, "key": "hello"}, 400, "PRIVATE_KEY_MALFORMED", "key", []string{"not a PEM private key"}},
		{"KeyBadDER", map[string]any{"name": "n", "cert": cert, "key": garbageKey}, 400, "PRIVATE_KEY_MALFORMED", "key", []string{"cannot be parsed"}},
		{"KeyIsACert", map[string]any{"name": "n", "cert": cert, "key": cert}, 400, "PRIVATE_KEY_MALFORMED", "key", []string{`"CERTIFICATE"`}},
		{"KeyEncrypted", map[string]any{"name": "n", "cert": cert, "key": encryptedKey}, 400, "PRIVATE_KEY_MALFORMED", "key", []string{"encrypted"}},
		{"KeyEncryptedLegacy", map[string]any{"name": "n", "cert": cert, "key": legacyEncryptedKey}, 400, "PRIVATE_KEY_MALFORMED", "key", []string{"encrypted"}},
		{"DuplicateName", map[string]any{"name": "client", "cert": otherCert, "key": otherKey}, 400, "CERTIFICATE_NAME_TAKEN", "name", []string{"This client certificate name is already in use."}},
		{"NameMissing", map[string]any{"cert": cert, "key": key}, 400, "INVALID_FIELD", "name", []string{"is required"}},
		{"NameNull", map[string]any{"name": nil, "cert": cert, "key": key}, 400, "INVALID_FIELD", "name", []string{"is required"}},
		{"NameEmpty", map[string]any{"name": "", "cert": cert, "key": key}, 400, "INVALID_FIELD", "name", []string{"must not be empty"}},
		{"NameBlank", map[string]any{"name": "  ", "cert": cert, "key": key}, 400, "INVALID_FIELD", "name", []string{"must not be blank"}},
		{"NameTooLong", map[string]any{"name": strings.Repeat("n", 501), "cert": cert, "key": key}, 400, "INVALID_FIELD", "name", []string{"at most 500"}},
		{"NameNotString", map[string]any{"name": 7, "cert": cert, "key": key}, 400, "INVALID_FIELD", "name", []string{"must be a string"}},
		{"CertMissing", map[string]any{"name": "n", "key": key}, 400, "INVALID_FIELD", "cert", []string{"is required"}},
		{"CertNotString", map[string]any{"name": "n", "cert": []string{cert}, "key": key}, 400, "INVALID_FIELD", "cert", []string{"must be a string"}},
		{"KeyMissing", map[string]any{"name": "n", "cert": cert}, 400, "INVALID_FIELD", "key", []string{"is required"}},
		{"UnknownField", map[string]any{"name": "n", "cert": otherCert, "key": otherKey, "passphrase": "x"}, 400, "INVALID_FIELD", "passphrase", []string{"is not allowed"}},
		{"MalformedJSON", `{"name": "n",`, 400, "MALFORMED_BODY", "", []string{"malformed JSON"}},
		{"NotAnObject", `["n"]`, 400, "MALFORMED_BODY", "", []string{"must be a JSON object"}},
		{"TwoObjects", `{} {}`, 400, "MALFORMED_BODY", "", []string{"single JSON object"}},
		{"NoBody", "", 400, "MALFORMED_BODY", "", []string{"body is required"}},
		{"TooLarge", `{"name": "` + strings.Repeat("x", 2<<20) + `"}`, 413, "REQUEST_TOO_LARGE", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.certNames(t)
			res := b.post(t, "/api/tls-client-cert", tc.body)
			requireError(t, res, tc.status, tc.code, tc.field, tc.words...)
			requireNoSecrets(t, res.raw)
			require.Equal(t, before, b.certNames(t), "nothing is stored")
		})
	}

	t.Run("Delete", func(t *testing.T) {
		certID := b.createCert(t, "to delete", otherCert, otherKey)
		requireStatus(t, b.del(t, "/api/tls-client-cert/"+itoa(certID)+"/"), http.StatusNoContent)
		require.NotContains(t, b.certNames(t), "to delete")
		requireError(t, b.del(t, "/api/tls-client-cert/"+itoa(certID)), 404, "CERTIFICATE_NOT_FOUND", "")
		requireError(t, b.del(t, "/api/tls-client-cert/999"), 404, "CERTIFICATE_NOT_FOUND", "", "999")
		requireError(t, b.del(t, "/api/tls-client-cert/abc"), 404, "CERTIFICATE_NOT_FOUND", "", "abc")
		// The name is free again.
		b.createCert(t, "to delete", otherCert, otherKey)
	})

	t.Run("SealedAtRest", func(t *testing.T) {
		raw := storeBytes(t, b)
		require.NotContains(t, raw, "BEGIN")
		require.NotContains(t, raw, pemBody(key))
		require.Contains(t, raw, "sealed:v1:")
	})
}

// sign issues a certificate for a given public key.
func (ca *authority) sign(t *testing.T, cn string, pub any) string {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// storeBytes is everything the store has written: its file and its WAL.
func storeBytes(t *testing.T, b *testBundle) string {
	t.Helper()
	var out []byte
	for _, suffix := range []string{"", "-wal"} {
		buf, err := os.ReadFile(b.path + suffix)
		if err == nil {
			out = append(out, buf...)
		}
	}
	require.NotEmpty(t, out)
	return string(out)
}

// pemBody is the first base64 line of a PEM block.
func pemBody(s string) string {
	return strings.Split(s, "\n")[1]
}
