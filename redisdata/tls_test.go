package redisdata_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/redisdata"
)

// Snapshot, CopyKeys and the Replicator reach a source over TLS.
func TestTLSSource(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	dir := t.TempDir()
	pool := writeCert(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tlsPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	src := startServer(t, "srcpw", "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "cert.pem"), "--tls-key-file", filepath.Join(dir, "key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "cert.pem"), "--tls-auth-clients", "no")
	fill(t, src, "", 1)
	ep := redisdata.Endpoint{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort)), Password: "srcpw",
		TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}

	var buf bytes.Buffer
	_, err = redisdata.Snapshot(ctx, ep, &buf)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(buf.Bytes(), []byte("REDIS")))

	dst := startServer(t, "")
	_, err = redisdata.CopyKeys(ctx, ep, dst.endpoint(), redisdata.CopyOptions{})
	require.NoError(t, err)
	requireSameData(t, src, dst, allDBs)

	tgt, tgtEP := target(t)
	r := startReplicator(t, tgtEP, []redisdata.Endpoint{ep}, &events{})
	requireStreaming(t, r)
	src.do(0, "set", "over-tls", "1")
	eventuallyGet(t, tgt, 0, "over-tls", "1", within)
	stopPromptly(t, r)

	// A certificate the client does not trust is refused.
	_, err = redisdata.Snapshot(ctx, redisdata.Endpoint{Addr: ep.Addr, Password: "srcpw", TLS: &tls.Config{}}, &buf)
	require.Error(t, err)
}

// writeCert writes a self-signed certificate for 127.0.0.1 to dir and returns a pool
// that trusts it.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redisdata test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}
