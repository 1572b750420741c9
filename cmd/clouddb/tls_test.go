package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// tenantCert is a self-signed client certificate and its key, in PEM, as a tenant makes
// one for mutual TLS.
func tenantCert(t *testing.T, name string) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// tlsRedis is a client of a database over TLS that trusts caPEM and presents the pair,
// if any.
func tlsRedis(t *testing.T, db *client.Database, caPEM string, certKey ...string) *redis.Client {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM([]byte(caPEM)))
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if len(certKey) == 2 {
		pair, err := tls.X509KeyPair([]byte(certKey[0]), []byte(certKey[1]))
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{pair}
	}
	r := redis.NewClient(&redis.Options{Addr: db.PublicEndpoint, Password: db.Security.Password, MaxRetries: -1,
		DialTimeout: 2 * time.Second, DialerRetries: 1, TLSConfig: cfg})
	t.Cleanup(func() { r.Close() })
	return r
}

// putRaw sends an update body as Terraform sends it and waits for its task.
func (s *service) putRaw(ctx context.Context, subID, dbID int, body string) {
	s.t.Helper()
	var tk client.Task
	require.NoError(s.t, s.c.Do(ctx, http.MethodPut, fmt.Sprintf("/subscriptions/%d/databases/%d", subID, dbID), []byte(body), &tk))
	_, err := s.c.WaitForTask(ctx, tk.ID)
	require.NoError(s.t, err)
}

// securityFlags are enableTls, tlsClientAuthentication and sslClientAuthentication.
func (s *service) securityFlags(ctx context.Context, subID, dbID int) [3]bool {
	s.t.Helper()
	db, err := s.c.GetDatabase(ctx, subID, dbID)
	require.NoError(s.t, err)
	sec := db.Security
	require.NotNil(s.t, sec.EnableTLS)
	require.NotNil(s.t, sec.TLSClientAuthentication)
	require.NotNil(s.t, sec.SSLClientAuthentication)
	return [3]bool{*sec.EnableTLS, *sec.TLSClientAuthentication, *sec.SSLClientAuthentication}
}

func pemJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestDatabaseTLS drives TLS through the API as Terraform does (§16.3): TLS on, the CA
// from …/certificate, mutual TLS with a client certificate, the certificates cleared with
// null, TLS off; each change applies to the same server, live, with the data kept, and
// the security flags follow. The CA survives a restart.
func TestDatabaseTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startService(t, dir, options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "tls", 0.2)
	// Persistent, so that the data outlives the restart below.
	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("secure"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("Tls-pass-1"),
		DataPersistence: client.Ptr("aof-every-1-second")})
	require.NoError(t, redisOf(t, db).Set(ctx, "k", "kept", 0).Err())
	serverPid, err := s.m.Driver.Pid(db.ID)
	require.NoError(t, err)
	samePid := func() {
		t.Helper()
		p, perr := s.m.Driver.Pid(db.ID)
		require.NoError(t, perr)
		require.Equal(t, serverPid, p, "changed live")
	}
	plain, tlsOnly, mtls := [3]bool{}, [3]bool{true, false, false}, [3]bool{true, true, true}
	require.Equal(t, plain, s.securityFlags(ctx, subID, db.ID))

	cert, err := s.c.GetDatabaseCertificate(ctx, subID, db.ID)
	require.NoError(t, err, "answered with TLS off too")
	caPEM := cert.PublicCertificatePEMString
	require.True(t, strings.HasPrefix(caPEM, "-----BEGIN CERTIFICATE-----"), caPEM)

	// TLS on, as the provider's PUT says it.
	s.putRaw(ctx, subID, db.ID, `{"enableTls": true, "clientTlsCertificates": null}`)
	eventually(t, 20*time.Second, "TLS serves", func() bool {
		return tlsRedis(t, db, caPEM).Get(ctx, "k").Val() == "kept"
	})
	require.Error(t, redisOf(t, db).Ping(ctx).Err(), "plain TCP is refused")
	require.Equal(t, tlsOnly, s.securityFlags(ctx, subID, db.ID))
	samePid()

	// redis-cli --tls --cacert, as the README says.
	caFile := filepath.Join(t.TempDir(), "redis_ca.pem")
	require.NoError(t, os.WriteFile(caFile, []byte(caPEM), 0o600))
	host, port, err := net.SplitHostPort(db.PublicEndpoint)
	require.NoError(t, err)
	out, err := exec.CommandContext(ctx, "redis-cli", "--tls", "--cacert", caFile, "-h", host, "-p", port,
		"--user", "default", "--pass", db.Security.Password, "--no-auth-warning", "get", "k").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "kept", strings.TrimSpace(string(out)))

	// Mutual TLS.
	certA, keyA := tenantCert(t, "a")
	certB, keyB := tenantCert(t, "b")
	s.putRaw(ctx, subID, db.ID, `{"enableTls": true, "clientTlsCertificates": [`+pemJSON(certA)+`]}`)
	eventually(t, 20*time.Second, "mutual TLS", func() bool {
		return tlsRedis(t, db, caPEM).Ping(ctx).Err() != nil && tlsRedis(t, db, caPEM, certA, keyA).Get(ctx, "k").Val() == "kept"
	})
	require.Error(t, tlsRedis(t, db, caPEM, certB, keyB).Ping(ctx).Err(), "a certificate not in the list")
	require.Equal(t, mtls, s.securityFlags(ctx, subID, db.ID))
	samePid()

	// null clears the certificates: TLS stays, without client authentication.
	s.putRaw(ctx, subID, db.ID, `{"enableTls": true, "clientTlsCertificates": null}`)
	eventually(t, 20*time.Second, "TLS without client certificates", func() bool {
		return tlsRedis(t, db, caPEM).Get(ctx, "k").Val() == "kept"
	})
	require.Equal(t, tlsOnly, s.securityFlags(ctx, subID, db.ID))
	samePid()

	// The deprecated single certificate, then TLS off, which erases it.
	s.putRaw(ctx, subID, db.ID, `{"enableTls": true, "clientSslCertificate": `+pemJSON(certB)+`, "clientTlsCertificates": null}`)
	eventually(t, 20*time.Second, "mutual TLS with the SSL certificate", func() bool {
		return tlsRedis(t, db, caPEM).Ping(ctx).Err() != nil && tlsRedis(t, db, caPEM, certB, keyB).Get(ctx, "k").Val() == "kept"
	})
	require.Equal(t, mtls, s.securityFlags(ctx, subID, db.ID))
	s.putRaw(ctx, subID, db.ID, `{"enableTls": false}`)
	eventually(t, 20*time.Second, "plain TCP again", func() bool {
		return redisOf(t, db).Get(ctx, "k").Val() == "kept"
	})
	require.Equal(t, plain, s.securityFlags(ctx, subID, db.ID))
	samePid()

	// Back on for the restart: the CA is the same, and so is the server's certificate chain.
	s.putRaw(ctx, subID, db.ID, `{"enableTls": true}`)
	eventually(t, 20*time.Second, "TLS again", func() bool {
		return tlsRedis(t, db, caPEM).Get(ctx, "k").Val() == "kept"
	})
	s.stop()
	s = startService(t, dir, options{})
	again, err := s.c.GetDatabaseCertificate(ctx, subID, db.ID)
	require.NoError(t, err)
	require.Equal(t, caPEM, again.PublicCertificatePEMString, "the installation CA is made once")
	_, err = s.c.WaitForDatabaseStatus(ctx, subID, db.ID, "active")
	require.NoError(t, err)
	eventually(t, 20*time.Second, "TLS after the restart", func() bool {
		return tlsRedis(t, db, caPEM).Get(ctx, "k").Val() == "kept"
	})
	require.Equal(t, tlsOnly, s.securityFlags(ctx, subID, db.ID))

	_, err = s.c.GetDatabaseCertificate(ctx, subID, db.ID+1000)
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusNotFound, ce.StatusCode)
}

// TestBrowserTLSCloudDatabase: the browser local API registers a connection to a clouddb
// database that serves mutual TLS, with the tenant's client certificate and key, and
// browses its keys.
func TestBrowserTLSCloudDatabase(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "browse-tls", 0.2)
	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("secure"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("Tls-pass-2")})
	cert, key := tenantCert(t, "browser")
	tk, err := s.c.UpdateDatabase(ctx, subID, db.ID, client.UpdateDatabase{EnableTLS: client.Ptr(true), ClientTLSCertificates: &[]string{cert}})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	ca, err := s.c.GetDatabaseCertificate(ctx, subID, db.ID)
	require.NoError(t, err)
	eventually(t, 20*time.Second, "mutual TLS", func() bool {
		return tlsRedis(t, db, ca.PublicCertificatePEMString, cert, key).Set(ctx, "browsed", "over mTLS", 0).Err() == nil
	})

	host, port, err := net.SplitHostPort(db.PublicEndpoint)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	base := "http://" + s.m.BrowserAddr + "/api"
	browserAPI := browserAPIClient(t) // checks the traffic against the OpenAPI document
	register := func(tlsBody map[string]any) (int, []byte) {
		body, merr := json.Marshal(map[string]any{"name": "cloud-tls", "connectionType": "STANDALONE", "host": host, "port": p,
			"password": db.Security.Password, "tls": tlsBody})
		require.NoError(t, merr)
		resp, perr := browserAPI.Post(base+"/db/", "application/json", bytes.NewReader(body))
		require.NoError(t, perr)
		defer resp.Body.Close()
		b, rerr := io.ReadAll(resp.Body)
		require.NoError(t, rerr)
		return resp.StatusCode, b
	}
	// Without the client certificate the connection test fails and nothing is saved.
	status, _ := register(map[string]any{"useTls": true})
	require.Equal(t, http.StatusFailedDependency, status)

	status, b := register(map[string]any{"useTls": true, "clientAuth": true,
		"clientCertificateKeyPair": map[string]any{"new": map[string]any{"name": "tenant", "cert": cert, "key": key}}})
	require.Equal(t, http.StatusCreated, status, string(b))
	require.NotContains(t, string(b), db.Security.Password)
	require.NotContains(t, string(b), strings.Split(key, "\n")[1])
	var rec struct {
		ID int `json:"id"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	resp, err := browserAPI.Get(base + "/db/" + strconv.Itoa(rec.ID) + "/keys/browsed")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Contains(t, string(b), `"over mTLS"`)
}
