package local_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
	"clouddb/internal/pki"
)

// tlsDriver is a driver on dir with ca as its installation CA.
func tlsDriver(t *testing.T, dir string, ca clouddb.CertificateAuthority) *local.Driver {
	t.Helper()
	d, err := local.New(local.Config{Dir: dir, Host: "127.0.0.1", StartTimeout: 10 * time.Second, CA: ca,
		Logger: slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	return d
}

func newCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.New("test CA")
	require.NoError(t, err)
	return ca
}

// clientCert is a self-signed client certificate, as a tenant would make one.
func clientCert(t *testing.T, name string) (certPEM string, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	pair, err = tls.X509KeyPair([]byte(certPEM), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	require.NoError(t, err)
	return certPEM, pair
}

// pairOf turns a PEM certificate and key into a tls.Certificate.
func pairOf(t *testing.T, cert, key []byte) tls.Certificate {
	t.Helper()
	p, err := tls.X509KeyPair(cert, key)
	require.NoError(t, err)
	return p
}

// tlsClient is a client of the database over TLS, trusting ca, presenting certs.
func tlsClient(t *testing.T, port int, password string, ca []byte, certs ...tls.Certificate) *redis.Client {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca))
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: password, Protocol: 2,
		DisableIdentity: true, MaxRetries: -1, DialTimeout: 2 * time.Second, DialerRetries: 1,
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEnsure_TLS: a TLS database refuses plain TCP and serves TLS with the CA's server
// certificate; client certificates are required exactly when the instance has any, and
// only those (and the CA's client certificates) are accepted; every change, TLS off and on
// again included, applies live, to the same process, with the data kept.
func TestEnsure_TLS(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ca := newCA(t)
	dir := t.TempDir()
	b := &testBundle{dir: dir, driver: tlsDriver(t, dir, ca)}
	in := b.instance(t, 91, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "kept", 0).Err())
	serverPid := pid(t, b.driver, 91)
	caPEM := ca.CertificatePEM()

	in.TLS = &clouddb.InstanceTLS{}
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, serverPid, pid(t, b.driver, 91), "TLS turns on live")
	require.Error(t, client(t, in.Port, in.Password).Ping(ctx).Err(), "plain TCP is refused")
	require.Equal(t, "kept", tlsClient(t, in.Port, in.Password, caPEM).Get(ctx, "k").Val())
	require.Error(t, tlsClient(t, in.Port, in.Password, newCA(t).CertificatePEM()).Ping(ctx).Err(), "another CA's client does not trust the server")
	requireRunning(t, b.driver, in, true)
	files, err := filepath.Glob(filepath.Join(dir, "91", "tls-*"))
	require.NoError(t, err)
	require.Len(t, files, 5, "CA bundle, server and client certificates and keys")
	require.NoError(t, b.driver.Ensure(ctx, in))
	again, err := filepath.Glob(filepath.Join(dir, "91", "tls-*"))
	require.NoError(t, err)
	require.Equal(t, files, again, "the certificates are kept, not issued anew")
	require.NoError(t, tlsDriver(t, dir, ca).Ensure(ctx, in))
	again, err = filepath.Glob(filepath.Join(dir, "91", "tls-*"))
	require.NoError(t, err)
	require.Equal(t, files, again, "a restarted clouddb keeps them too")
	for _, f := range files {
		fi, serr := os.Stat(f)
		require.NoError(t, serr)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}

	// Mutual TLS.
	certA, pairA := clientCert(t, "a")
	certB, pairB := clientCert(t, "b")
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certA}}
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, serverPid, pid(t, b.driver, 91))
	require.Equal(t, "kept", tlsClient(t, in.Port, in.Password, caPEM, pairA).Get(ctx, "k").Val())
	require.Error(t, tlsClient(t, in.Port, in.Password, caPEM).Ping(ctx).Err(), "no certificate")
	require.Error(t, tlsClient(t, in.Port, in.Password, caPEM, pairB).Ping(ctx).Err(), "a certificate not in the list")
	otherCert, otherKey, err := newCA(t).IssueClient("stranger")
	require.NoError(t, err)
	require.Error(t, tlsClient(t, in.Port, in.Password, caPEM, pairOf(t, otherCert, otherKey)).Ping(ctx).Err(), "another CA's certificate")
	serverCert, serverKey, err := ca.IssueServer([]string{"127.0.0.1"})
	require.NoError(t, err)
	require.Error(t, tlsClient(t, in.Port, in.Password, caPEM, pairOf(t, serverCert, serverKey)).Ping(ctx).Err(), "a server certificate is no client certificate")
	ownCert, ownKey, err := ca.IssueClient("clouddb")
	require.NoError(t, err)
	require.NoError(t, tlsClient(t, in.Port, in.Password, caPEM, pairOf(t, ownCert, ownKey)).Ping(ctx).Err(), "the CA's client certificates are clouddb's own")
	requireRunning(t, b.driver, in, true)

	// The list changes live; a connection open before stays.
	open := tlsClient(t, in.Port, in.Password, caPEM, pairA)
	require.NoError(t, open.Ping(ctx).Err())
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certB}}
	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, serverPid, pid(t, b.driver, 91))
	require.Error(t, tlsClient(t, in.Port, in.Password, caPEM, pairA).Ping(ctx).Err())
	require.NoError(t, tlsClient(t, in.Port, in.Password, caPEM, pairB).Ping(ctx).Err())
	require.NoError(t, open.Ping(ctx).Err(), "existing connections stay up")
	files, err = filepath.Glob(filepath.Join(dir, "91", "tls-ca-*"))
	require.NoError(t, err)
	require.Len(t, files, 1, "the stale bundle is removed")

	// Drift is put back.
	sock := socketOf(t, ctx, b, in)
	sc := socketClient(t, sock, filepath.Join(dir, "91"))
	require.NoError(t, sc.ConfigSet(ctx, "tls-auth-clients", "no").Err())
	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Error(t, tlsClient(t, in.Port, in.Password, caPEM).Ping(ctx).Err())

	// TLS off, then on again.
	in.TLS = nil
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, serverPid, pid(t, b.driver, 91))
	require.Equal(t, "kept", client(t, in.Port, in.Password).Get(ctx, "k").Val())
	require.Error(t, tlsClient(t, in.Port, in.Password, caPEM, pairB).Ping(ctx).Err())
	requireRunning(t, b.driver, in, true)
	require.NoError(t, open.Ping(ctx).Err(), "existing connections stay up")
	files, err = filepath.Glob(filepath.Join(dir, "91", "tls-*"))
	require.NoError(t, err)
	require.Empty(t, files)
	in.TLS = &clouddb.InstanceTLS{}
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, serverPid, pid(t, b.driver, 91))
	require.Equal(t, "kept", tlsClient(t, in.Port, in.Password, caPEM).Get(ctx, "k").Val())

	// A restarted clouddb adopts it; a stopped one starts with TLS.
	d2 := tlsDriver(t, dir, ca)
	require.NoError(t, d2.Ensure(ctx, in))
	require.Equal(t, serverPid, pid(t, d2, 91))
	require.NoError(t, d2.Stop(ctx, 91))
	require.NoError(t, d2.Ensure(ctx, in))
	require.NotEqual(t, serverPid, pid(t, d2, 91))
	require.NoError(t, tlsClient(t, in.Port, in.Password, caPEM).Ping(ctx).Err())
	require.Error(t, client(t, in.Port, in.Password).Ping(ctx).Err())

	// Another installation CA (a new store): the server certificate is issued anew.
	ca2 := newCA(t)
	d3 := tlsDriver(t, dir, ca2)
	require.NoError(t, d3.Ensure(ctx, in))
	require.NoError(t, tlsClient(t, in.Port, in.Password, ca2.CertificatePEM()).Ping(ctx).Err())
	require.Error(t, tlsClient(t, in.Port, in.Password, caPEM).Ping(ctx).Err())

	// Without a CA, TLS is refused with a reason.
	err = mustDriver(t, dir).Ensure(ctx, in)
	require.ErrorContains(t, err, "certificate authority")
}

// socketOf is the database's unix socket, as its server reports it.
func socketOf(t *testing.T, ctx context.Context, b *testBundle, in clouddb.Instance) string {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(b.dir, fmt.Sprint(in.DatabaseID), "redis.conf"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(conf), "\n") {
		if v, ok := strings.CutPrefix(line, "unixsocket "); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatal("no unixsocket in redis.conf")
	return ""
}

// TestTLS_DataPaths: backups, imports (files and a live server) and replicaOf work on
// TLS databases, mutual TLS included, and from TLS sources: one of this driver's own
// databases by its public endpoint, and another installation's (a server this driver
// does not run) trusted through the CA.
func TestTLS_DataPaths(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ca := newCA(t)
	dir := t.TempDir()
	b := &testBundle{dir: dir, driver: tlsDriver(t, dir, ca)}
	certA, pairA := clientCert(t, "a")
	src := b.instance(t, 92, "none")
	src.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certA}}
	require.NoError(t, b.driver.Ensure(ctx, src))
	sc := tlsClient(t, src.Port, src.Password, ca.CertificatePEM(), pairA)
	require.NoError(t, sc.Set(ctx, "k", "v", 0).Err())

	var buf bytes.Buffer
	_, err := b.driver.Snapshot(ctx, src, 0, &buf)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(buf.Bytes(), []byte("REDIS")))
	rdb := filepath.Join(t.TempDir(), "backup.rdb")
	require.NoError(t, os.WriteFile(rdb, buf.Bytes(), 0o600))

	dst := b.instance(t, 93, "none")
	dst.TLS = &clouddb.InstanceTLS{}
	require.NoError(t, b.driver.Ensure(ctx, dst))
	// An import closes the clients' connections as its server takes over: each check
	// connects anew.
	dstClient := func() *redis.Client { return tlsClient(t, dst.Port, dst.Password, ca.CertificatePEM()) }
	require.NoError(t, b.driver.Load(ctx, dst, []string{rdb}))
	dc := dstClient()
	require.Equal(t, "v", dc.Get(ctx, "k").Val())
	require.NoError(t, dc.FlushAll(ctx).Err())

	// The own mTLS database by its public endpoint (rediss://).
	srcEP := clouddb.RedisEndpoint{Addr: fmt.Sprintf("127.0.0.1:%d", src.Port), Password: src.Password, TLS: true, SameAccount: true}
	require.NoError(t, b.driver.CopyFrom(ctx, dst, srcEP))
	dc = dstClient()
	require.Equal(t, "v", dc.Get(ctx, "k").Val())

	// A TLS server this driver does not run, with a certificate of the CA, reached over
	// TLS trusting it.
	extPort := tlsServer(t, ca)
	ec := tlsClient(t, extPort, "", ca.CertificatePEM())
	require.NoError(t, ec.Set(ctx, "ext", "1", 0).Err())
	extEP := clouddb.RedisEndpoint{Addr: fmt.Sprintf("localhost:%d", extPort), TLS: true}
	require.NoError(t, b.driver.CopyFrom(ctx, dst, extEP))
	dc = dstClient()
	require.Equal(t, "1", dc.Get(ctx, "ext").Val())

	// replicaOf from both TLS sources.
	dst.ReplicaOf = []clouddb.RedisEndpoint{srcEP, extEP}
	require.NoError(t, b.driver.Ensure(ctx, dst))
	require.NoError(t, sc.Set(ctx, "live", "from-src", 0).Err())
	require.NoError(t, ec.Set(ctx, "live-ext", "from-ext", 0).Err())
	eventuallyT(t, 15*time.Second, func() bool {
		return dc.Get(ctx, "live").Val() == "from-src" && dc.Get(ctx, "live-ext").Val() == "from-ext"
	})
	dst.ReplicaOf = nil
	require.NoError(t, b.driver.Ensure(ctx, dst))
}

// tlsServer starts a bare redis-server serving TLS only, with a server certificate of ca,
// no password and no client certificates asked.
func tlsServer(t *testing.T, ca *pki.CA) int {
	t.Helper()
	dir := t.TempDir()
	cert, key, err := ca.IssueServer([]string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), cert, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), key, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertificatePEM(), 0o600))
	port := freePort(t)
	cmd := exec.Command("redis-server", "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", filepath.Join(dir, "cert.pem"), "--tls-key-file", filepath.Join(dir, "key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	cmd.Dir = dir
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	c := tlsClient(t, port, "", ca.CertificatePEM())
	eventuallyT(t, 10*time.Second, func() bool { return c.Ping(context.Background()).Err() == nil })
	return port
}

// TestEnsure_TLSOnServerWithoutSocket: a server started by a clouddb from before the unix
// sockets restarts, with its data, to serve TLS.
func TestEnsure_TLSOnServerWithoutSocket(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ca := newCA(t)
	dir := t.TempDir()
	b := &testBundle{dir: dir, driver: tlsDriver(t, dir, ca)}
	in := b.instance(t, 95, "none")
	_, oldPid := oldStyleServer(t, b, in)
	old := client(t, in.Port, in.Password)
	require.NoError(t, old.ConfigSet(ctx, "maxmemory", "0").Err())
	require.NoError(t, old.Set(ctx, "k", "kept", 0).Err())
	in.TLS = &clouddb.InstanceTLS{}
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NotEqual(t, oldPid, pid(t, b.driver, 95))
	require.Equal(t, "kept", tlsClient(t, in.Port, in.Password, ca.CertificatePEM()).Get(ctx, "k").Val())
	requireRunning(t, b.driver, in, true)
}
