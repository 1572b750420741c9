package cloudapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
	"clouddb/internal/pki"
)

// selfSigned is a client certificate in PEM valid until notAfter, and its key in PEM.
func selfSigned(t *testing.T, name string, notAfter time.Time) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// putDatabase sends a raw update body and waits for its task.
func (e *env) putDatabase(subID, dbID int, body string) *client.Task {
	e.t.Helper()
	r := e.do(http.MethodPut, fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID), mainKey, mainSecret, []byte(body))
	require.Equal(e.t, http.StatusOK, r.status, "body: %s", r.body)
	var tk client.Task
	require.NoError(e.t, json.Unmarshal(r.body, &tk))
	got, _ := e.main.WaitForTask(testCtx(e.t), tk.ID)
	require.NotNil(e.t, got)
	return got
}

// tlsFlags reads the security flags of §16.2 from the raw GET, and checks that no
// certificate body is in it.
func (e *env) tlsFlags(subID, dbID int) [3]bool {
	e.t.Helper()
	r := e.do(http.MethodGet, fmt.Sprintf("/v1/subscriptions/%d/databases/%d", subID, dbID), mainKey, mainSecret, nil)
	require.Equal(e.t, http.StatusOK, r.status, "body: %s", r.body)
	require.NotContains(e.t, string(r.body), "BEGIN CERTIFICATE")
	var v struct {
		Security map[string]any `json:"security"`
	}
	require.NoError(e.t, json.Unmarshal(r.body, &v))
	return [3]bool{v.Security["enableTls"].(bool), v.Security["tlsClientAuthentication"].(bool), v.Security["sslClientAuthentication"].(bool)}
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The TLS fields of an update, as Terraform and the Go client send them (§16.3), and the
// security flags the GET reports after each (§16.2).
func TestDatabaseTLSFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID, dbID := e.activeSubscription("tls")
	certA, _ := selfSigned(t, "a", time.Now().Add(24*time.Hour))
	certB, _ := selfSigned(t, "b", time.Now().Add(24*time.Hour))
	ok := func(body string, want [3]bool) {
		t.Helper()
		tk := e.putDatabase(subID, dbID, body)
		require.Equal(t, client.TaskCompleted, tk.Status, "%s: %+v", body, tk.Response)
		require.Equal(t, want, e.tlsFlags(subID, dbID), body)
	}
	plain, tlsOnly, mtls := [3]bool{}, [3]bool{true, false, false}, [3]bool{true, true, true}

	require.Equal(t, plain, e.tlsFlags(subID, dbID))
	ok(`{"enableTls": true, "clientTlsCertificates": null}`, tlsOnly)
	ok(`{"enableTls": true, "clientTlsCertificates": [`+jsonText(certA)+`, `+jsonText(certB)+`]}`, mtls)
	ok(`{"name": "renamed"}`, mtls)
	// null clears the certificates (Terraform's empty list), it is no "no change".
	ok(`{"enableTls": true, "clientTlsCertificates": null}`, tlsOnly)
	ok(`{"enableTls": true, "clientTlsCertificates": [{"publicCertificatePEMString": `+jsonText(certA)+`}]}`, mtls)
	ok(`{"enableTls": true, "clientTlsCertificates": []}`, tlsOnly)
	// The deprecated field, with the null Terraform sends beside it.
	ok(`{"enableTls": true, "clientSslCertificate": `+jsonText(certA)+`, "clientTlsCertificates": null}`, mtls)
	ok(`{"clientSslCertificate": ""}`, tlsOnly)
	// enableTls false while mTLS is on turns both off and erases the certificates.
	ok(`{"enableTls": true, "clientTlsCertificates": [`+jsonText(certA)+`]}`, mtls)
	ok(`{"enableTls": false}`, plain)
	ok(`{"enableTls": true}`, tlsOnly)
	ok(`{"enableTls": false}`, plain)
	// A client certificate alone turns TLS on (the legacy mTLS request, §16.3 row 2).
	ok(`{"clientSslCertificate": `+jsonText(certB)+`}`, mtls)
	ok(`{"clientSslCertificate": ""}`, plain)

	// A create may carry them too.
	tk, err := e.main.CreateDatabase(testCtx(t), subID, client.CreateDatabase{Name: client.Ptr("tls-create"), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("Create-pass-1"), EnableTLS: client.Ptr(true), ClientTLSCertificates: &[]string{certA}})
	require.NoError(t, err)
	done, err := e.main.WaitForTask(testCtx(t), tk.ID)
	require.NoError(t, err)
	require.Equal(t, mtls, e.tlsFlags(subID, done.ResourceID()))
}

// Certificates that are not PEM certificates, or have expired, fail the task with the
// catalogue's codes; nothing is stored.
func TestDatabaseTLSInvalidCertificates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subID, dbID := e.activeSubscription("badcert")
	good, key := selfSigned(t, "good", time.Now().Add(24*time.Hour))
	expired, _ := selfSigned(t, "old", time.Now().Add(-time.Hour))
	block, _ := pem.Decode([]byte(good))
	garbled := strings.Replace(good, string(pem.EncodeToMemory(block))[40:60], "AAAAAAAAAAAAAAAAAAAA", 1)
	for _, c := range []struct {
		name, body, typ, field string
	}{
		{"NotPEM", `{"enableTls": true, "clientTlsCertificates": ["not a certificate"]}`, "DATABASE_INVALID_CERT", "clientTlsCertificates[0]"},
		{"NotPEMWithoutEnableTls", `{"clientSslCertificate": "-----BEGIN CERTIFICATE-----\nxx\n-----END CERTIFICATE-----\n"}`, "DATABASE_INVALID_CERT", "clientSslCertificate"},
		{"PrivateKey", `{"enableTls": true, "clientTlsCertificates": [` + jsonText(good) + `, ` + jsonText(key) + `]}`, "DATABASE_INVALID_CERT", "clientTlsCertificates[1]"},
		{"Garbled", `{"enableTls": true, "clientTlsCertificates": [` + jsonText(garbled) + `]}`, "DATABASE_INVALID_CERT", "clientTlsCertificates[0]"},
		{"TrailingText", `{"enableTls": true, "clientTlsCertificates": [` + jsonText(good+"trailing") + `]}`, "DATABASE_INVALID_CERT", "clientTlsCertificates[0]"},
		{"Expired", `{"enableTls": true, "clientTlsCertificates": [` + jsonText(expired) + `]}`, "DATABASE_EXPIRED_CERT", "clientTlsCertificates[0]"},
		{"Both", `{"enableTls": true, "clientSslCertificate": ` + jsonText(good) + `, "clientTlsCertificates": [` + jsonText(good) + `]}`, "INVALID_FIELD", "clientSslCertificate"},
		{"TooLong", `{"enableTls": true, "clientTlsCertificates": [` + jsonText(good+strings.Repeat(" ", clouddb.MaxCertificateLength)) + `]}`, "", "clientTlsCertificates[0]"},
		{"TooMany", `{"enableTls": true, "clientTlsCertificates": [` + strings.Repeat(jsonText(good)+",", clouddb.MaxListLength) + jsonText(good) + `]}`, "", "clientTlsCertificates"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk := e.putDatabase(subID, dbID, c.body)
			require.Equal(t, client.TaskFailed, tk.Status)
			te := tk.Response.Error
			require.NotNil(t, te)
			require.Equal(t, "400 BAD_REQUEST", te.Status)
			if c.typ != "" {
				require.Equal(t, c.typ, te.Type)
			}
			switch c.typ {
			case "DATABASE_INVALID_CERT":
				require.True(t, strings.HasPrefix(te.Description, "Database certificate is invalid"), te.Description)
			case "DATABASE_EXPIRED_CERT":
				require.True(t, strings.HasPrefix(te.Description, "Database certificate is expired"), te.Description)
			}
			require.Contains(t, te.Description, c.field)
			require.NotContains(t, te.Description, strings.Split(key, "\n")[1], "no key material in the error")
			require.Equal(t, [3]bool{}, e.tlsFlags(subID, dbID), "nothing changed")
		})
	}
	tk, err := e.main.CreateDatabase(testCtx(t), subID, client.CreateDatabase{Name: client.Ptr("bad-create"), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("Create-pass-1"), ClientSSLCertificate: client.Ptr("nope")})
	require.NoError(t, err)
	got, _ := e.main.WaitForTask(testCtx(t), tk.ID)
	require.Equal(t, client.TaskFailed, got.Status)
	require.Equal(t, "DATABASE_INVALID_CERT", got.Response.Error.Type)
}

// GET …/certificate answers the installation CA for any database of the caller, TLS on
// or not, and 404 as the database's GET does.
func TestDatabaseCertificate(t *testing.T) {
	t.Parallel()
	ca, err := pki.New("test CA")
	require.NoError(t, err)
	e := newEnv(t, func(s *cloudapi.Server) { s.CA = ca })
	subID, dbID := e.activeSubscription("cert")
	got, err := e.main.GetDatabaseCertificate(testCtx(t), subID, dbID)
	require.NoError(t, err)
	require.Equal(t, string(ca.CertificatePEM()), got.PublicCertificatePEMString)
	_, err = e.viewer.GetDatabaseCertificate(testCtx(t), subID, dbID)
	require.NoError(t, err, "a viewer reads it as it reads the database")

	for _, c := range []struct {
		key, secret, path string
		status            int
		typ               string
	}{
		{mainKey, mainSecret, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/certificate", subID, dbID+1000), http.StatusNotFound, "DATABASE_NOT_FOUND"},
		{mainKey, mainSecret, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/certificate", subID+1000, dbID), http.StatusNotFound, "SUBSCRIPTION_NOT_FOUND"},
		{otherKey, otherSecret, fmt.Sprintf("/v1/subscriptions/%d/databases/%d/certificate", subID, dbID), http.StatusNotFound, ""},
		{mainKey, "wrong-secret-0123456789", fmt.Sprintf("/v1/subscriptions/%d/databases/%d/certificate", subID, dbID), http.StatusUnauthorized, ""},
	} {
		r := e.do(http.MethodGet, c.path, c.key, c.secret, nil)
		requireError(t, r, c.status, c.typ)
		require.NotContains(t, string(r.body), "BEGIN CERTIFICATE")
	}
}
