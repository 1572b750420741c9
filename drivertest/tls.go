package drivertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/pki"
)

// tlsOptions are the tenant's client's of in over TLS, trusting the CA whose PEM
// certificate is ca, presenting certs.
func (e *env) tlsOptions(t *testing.T, in clouddb.Instance, ca []byte, certs ...tls.Certificate) *redis.Options {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca), "a PEM certificate")
	o := e.options(t, in, "", in.Password)
	o.TLSConfig = &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}
	return o
}

func (e *env) tlsClient(t *testing.T, in clouddb.Instance, ca []byte, certs ...tls.Certificate) *redis.Client {
	t.Helper()
	return newClient(t, e.tlsOptions(t, in, ca, certs...))
}

// clientCert is a self-signed client certificate, as a tenant makes one.
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

// testTLS: a TLS database serves TLS only, with a certificate of the installation's CA;
// with client certificates it lets in only a client that presents one of them, and the
// driver still snapshots, copies from and loads into it; turned off, it serves plain TCP
// again with its data.
func testTLS(t *testing.T, h Harness) {
	need(t, "TLS", h.TLS)
	e := setup(t, h)
	in := e.instance(t, 2101)
	in.TLS = &clouddb.InstanceTLS{}
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	require.Error(t, e.client(t, in).Ping(e.ctx).Err(), "plain TCP is refused")
	c := e.tlsClient(t, in, h.CA)
	require.NoError(t, c.Set(e.ctx, "k", "v", 0).Err())
	otherCA, err := pki.New("another CA")
	require.NoError(t, err)
	require.Error(t, e.tlsClient(t, in, otherCA.CertificatePEM()).Ping(e.ctx).Err(),
		"the server's certificate is not another CA's")
	n, err := e.d.Snapshot(e.ctx, in, 0, io.Discard)
	require.NoError(t, err, "the driver reaches its TLS database")
	require.Positive(t, n)

	certPEM, pair := clientCert(t, "tenant")
	_, stranger := clientCert(t, "stranger")
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certPEM}}
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	v, err := e.tlsClient(t, in, h.CA, pair).Get(e.ctx, "k").Result()
	require.NoError(t, err, "the key after client certificates were required")
	require.Equal(t, "v", v)
	require.Error(t, e.tlsClient(t, in, h.CA).Ping(e.ctx).Err(), "a client without a certificate")
	require.Error(t, e.tlsClient(t, in, h.CA, stranger).Ping(e.ctx).Err(), "a certificate not the instance's")

	// The driver's own data paths reach a database that asks for a client certificate:
	// a copy from it (a source of the same account that says TLS) and a load into it. A
	// source of another account (its password alone) does not get past the certificate.
	other := filledSource(t, e, 2102, 50, 10)
	file := snapshotFile(t, e, other, 0)
	source := clouddb.RedisEndpoint{Addr: e.addr(t, in), Password: in.Password, TLS: true}
	require.Error(t, e.d.CopyFrom(e.ctx, other, source), "another account's copy with the password, without the certificate")
	requireFilled(t, e, e.client(t, other), 50, 10)
	source.SameAccount = true
	require.NoError(t, e.d.CopyFrom(e.ctx, other, source))
	oc := e.client(t, other)
	require.Equal(t, "v", oc.Get(e.ctx, "k").Val())
	require.EqualValues(t, 1, oc.DBSize(e.ctx).Val(), "the copy replaced the data")
	require.NoError(t, e.d.Load(e.ctx, in, []string{file}))
	e.requireRunning(t, in, true)
	requireFilled(t, e, e.tlsClient(t, in, h.CA, pair), 50, 10)

	in.TLS = nil
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	requireFilled(t, e, e.client(t, in), 50, 10)
	// A plain server waits for the end of a line that a TLS handshake never sends: the
	// handshake fails on the dial's timeout, which a plain client just met is well within.
	o := e.tlsOptions(t, in, h.CA, pair)
	o.DialTimeout = time.Second
	require.Error(t, newClient(t, o).Ping(e.ctx).Err(), "TLS is off")
}

// tlsClusterClient is a cluster client of in over TLS, from its endpoint, trusting the
// CA whose PEM certificate is ca, presenting certs: it verifies every node by the host
// CLUSTER SLOTS names.
func (e *env) tlsClusterClient(t *testing.T, in clouddb.Instance, ca []byte, certs ...tls.Certificate) *redis.ClusterClient {
	t.Helper()
	c := e.clusterClient(t, in)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca), "a PEM certificate")
	o := c.Options()
	o.TLSConfig = &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}
	o.MaxRetries = -1
	tc := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = tc.Close() })
	return tc
}

// testClusterTLS: a replicated OSS Cluster database with TLS and client certificates
// serves TLS only on every node; a TLS cluster client that presents an allowed
// certificate reads and writes every shard, finding the nodes by CLUSTER SLOTS and
// verifying each by the installation's CA; without a certificate, or with another, no
// node lets it in. The driver backs the shards up and loads the backup over TLS; the
// endpoint's master dies and
// its replica, which followed it over TLS, serves the shard with every acknowledged
// write; new client certificates are taken with the data kept.
func testClusterTLS(t *testing.T, h Harness) {
	need(t, "Cluster", h.Cluster)
	need(t, "TLS", h.TLS)
	need(t, "Replication", h.Replication)
	e := setup(t, h)
	in := e.instance(t, 2301)
	in.OSSCluster, in.Shards, in.Replication, in.MaxMemoryBytes = true, 2, true, 2*in.MaxMemoryBytes
	certPEM, pair := clientCert(t, "tenant")
	_, stranger := clientCert(t, "stranger")
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certPEM}}
	e.ensure(t, in)
	e.requireRunning(t, in, true)

	c := e.tlsClusterClient(t, in, h.CA, pair)
	clusterWrite(t, e, c, "k", 300)
	requireReplicasAcked(t, e, c)
	counts := clusterKeys(t, e, c)
	require.Len(t, counts, 2)
	for _, n := range counts {
		require.Positive(t, n, "every shard holds keys")
	}
	forEachMaster(t, e, c, func(m *redis.Client) {
		o := e.options(t, in, "", in.Password)
		o.Addr = m.Options().Addr
		require.Error(t, newClient(t, o).Ping(e.ctx).Err(), "plain TCP at %s", o.Addr)
	})
	require.Error(t, e.tlsClusterClient(t, in, h.CA).Ping(e.ctx).Err(), "a client without a certificate")
	require.Error(t, e.tlsClusterClient(t, in, h.CA, stranger).Ping(e.ctx).Err(), "a certificate not the instance's")
	// The driver's data paths reach every shard over TLS: a backup, loaded back over
	// data written since.
	parts := []string{snapshotFile(t, e, in, 0), snapshotFile(t, e, in, 1)}
	clusterWrite(t, e, c, "since", 20)
	require.NoError(t, e.d.Load(e.ctx, in, parts))
	requireKeys(t, e.ctx, c, "k", 300)
	require.EqualValues(t, 300, sum(clusterKeys(t, e, c)), "the backup's keys alone")

	endpoint := e.addr(t, in)
	h.Kill(t, e.d, in, endpoint)
	e.requireRunning(t, in, false, "the endpoint's master is gone")
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c = e.tlsClusterClient(t, in, h.CA, pair)
	requireKeys(t, e.ctx, c, "k", 300)
	clusterWrite(t, e, c, "after", 50)
	requireReplicasAcked(t, e, c)

	other, otherPair := clientCert(t, "tenant's next")
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{other}}
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c = e.tlsClusterClient(t, in, h.CA, otherPair)
	requireKeys(t, e.ctx, c, "k", 300)
	requireKeys(t, e.ctx, c, "after", 50)
	clusterWrite(t, e, c, "next", 50)
	require.Error(t, e.tlsClusterClient(t, in, h.CA, pair).Ping(e.ctx).Err(), "the certificate no longer the instance's")
}
