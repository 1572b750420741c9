package kubernetes_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"k8s.io/apimachinery/pkg/types"

	"clouddb"
	"clouddb/driver/kubernetes"
	"clouddb/internal/pki"
)

// nearEndCA is testCA, but its server certificates end within pki.RenewBefore: as one
// that has served most of its life looks to the driver.
type nearEndCA struct{ *pki.CA }

func (c nearEndCA) IssueServer(hosts []string) (certPEM, keyPEM []byte, err error) {
	cert, _, err := c.CA.IssueServer(hosts)
	if err != nil {
		return nil, nil, err
	}
	return c.Reissue(cert, time.Now().Add(pki.RenewBefore/3))
}

// selfSigned is a tenant's self-signed client certificate.
func selfSigned(t *testing.T, name string) (string, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsClusterClient is a tenant's cluster client of a TLS cluster, from its endpoint,
// trusting testCA, presenting certs: it verifies every node by the host CLUSTER SLOTS
// names (the node address).
func tlsClusterClient(t *testing.T, d *kubernetes.Driver, in clouddb.Instance, certs ...tls.Certificate) *redis.ClusterClient {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(testCA.CertificatePEM())
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{d.PublicEndpointOf(in.DatabaseID, in.Port)}, Password: in.Password, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		DialTimeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12},
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// nodeEndpoints are the public endpoints of a cluster's nodes, by pod name.
func nodeEndpoints(t *testing.T, ctx context.Context, d *kubernetes.Driver, in clouddb.Instance) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range in.Shards * 2 {
		svc := kubernetes.Name(in.DatabaseID)
		if i > 0 {
			svc += "-" + strconv.Itoa(i)
		}
		out[kubernetes.Name(in.DatabaseID)+"-"+strconv.Itoa(i)] = d.PublicEndpoint(nodePort(t, ctx, svc))
	}
	return out
}

// servedCert is the certificate the server at addr serves, verified by testCA for the
// host of addr, to a client presenting certs.
func servedCert(t *testing.T, addr string, certs ...tls.Certificate) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(testCA.CertificatePEM())
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("a TLS connection to %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// podLives are the UID and restart count of each pod.
func podLives(t *testing.T, ctx context.Context, names map[string]string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for name := range names {
		p := podNamed(t, ctx, name)
		out[name] = [2]string{string(p.UID), strconv.Itoa(int(restarts(p)))}
	}
	return out
}

func requireSameLives(t *testing.T, ctx context.Context, before map[string][2]string, what string) {
	t.Helper()
	for name, life := range before {
		p := podNamed(t, ctx, name)
		if p.UID != types.UID(life[0]) || strconv.Itoa(int(restarts(p))) != life[1] {
			t.Fatalf("%s: pod %s was replaced or its server restarted (uid %s, %d restarts; was %s, %s)", what, name, p.UID, restarts(p), life[0], life[1])
		}
	}
}

// TestClusterTLS: a replicated cluster with TLS and a required client certificate: a
// go-redis ClusterClient over TLS, verifying each node by the CA and the node address
// CLUSTER SLOTS names, reads and writes every shard through the nodes' public endpoints;
// without a certificate no node lets a client in, and no node's pod answers plain TCP.
// Its server certificate near its end (issued so by the first driver) makes Running
// false; Ensure renews it live: every node then serves the new certificate from the same
// pod and server (no restart, no failover), a writer through the cluster client is served
// throughout and every key is kept. New client certificates are taken the same way. A
// node's server that then restarts serves the renewed certificate. TLS turned off, then
// on again, gives a new cluster each time, every key kept.
func TestClusterTLS(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	nearEnd := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.CA = nearEndCA{testCA} })
	in := instance(t, 180, "none")
	in.OSSCluster, in.Shards, in.Replication, in.MaxMemoryBytes = true, 2, true, 2*in.MaxMemoryBytes
	certA, pairA := selfSigned(t, "tenant A")
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certA}}
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	start := time.Now()
	if err := nearEnd.Ensure(ctx, in); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	t.Logf("Ensure of the TLS cluster took %v", time.Since(start).Round(time.Millisecond))
	nodes := nodeEndpoints(t, ctx, d, in)
	for _, addr := range nodes {
		waitRoutedTLS(t, addr)
	}
	cc := tlsClusterClient(t, d, in, pairA)
	writeReplicated(t, ctx, cc, "k", 200)
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if n, err := m.DBSize(ctx).Result(); err != nil || n == 0 {
			return errors.New(m.Options().Addr + " holds no key")
		}
		return nil
	}); err != nil {
		t.Fatalf("every shard holds keys: %v", err)
	}
	if err := tlsClusterClient(t, d, in).Set(ctx, "nocert", 1, 0).Err(); err == nil {
		t.Fatal("a client without a certificate was let in")
	}
	internal := internalPassword(t, ctx, in.DatabaseID)
	first := map[string]*x509.Certificate{}
	for name, addr := range nodes {
		_, port, _ := net.SplitHostPort(addr)
		p := podNamed(t, ctx, name)
		if err := redisClient(t, net.JoinHostPort(p.Status.PodIP, port), "clouddb-internal", internal).Ping(ctx).Err(); err == nil {
			t.Fatalf("pod %s answers plain TCP", name)
		}
		first[name] = servedCert(t, addr, pairA)
		if first[name].NotAfter.After(time.Now().Add(pki.RenewBefore)) {
			t.Fatalf("node %s's certificate ends %v: not the near-end one", name, first[name].NotAfter)
		}
	}
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running with a server certificate near its end = %v, %v; want false (Ensure renews it)", up, err)
	}

	lives := podLives(t, ctx, nodes)
	w := startWriter(t, cc)
	ensureRunning(t, ctx, d, in)
	acked, gap := w.stop()
	t.Logf("renewal: %d writes acknowledged meanwhile, the longest time without one %v", acked, gap.Round(time.Millisecond))
	requireSameLives(t, ctx, lives, "renewal")
	var serial *big.Int
	for name, addr := range nodes {
		now := servedCert(t, addr, pairA)
		if now.SerialNumber.Cmp(first[name].SerialNumber) == 0 || !now.NotAfter.After(time.Now().Add(pki.RenewBefore)) {
			t.Fatalf("node %s serves a certificate ending %v, serial %v: not renewed", name, now.NotAfter, now.SerialNumber)
		}
		if serial != nil && serial.Cmp(now.SerialNumber) != 0 {
			t.Fatalf("node %s serves another certificate than the other nodes", name)
		}
		serial = now.SerialNumber
	}
	cc = tlsClusterClient(t, d, in, pairA)
	requireKeys(t, ctx, cc, "k", 200)
	requireKeys(t, ctx, cc, "w", acked)
	if gap > 5*time.Second {
		t.Fatalf("no write acknowledged for %v during the renewal", gap)
	}

	certB, pairB := selfSigned(t, "tenant B")
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certB}}
	ensureRunning(t, ctx, d, in)
	requireSameLives(t, ctx, lives, "new client certificates")
	cb := tlsClusterClient(t, d, in, pairB)
	requireKeys(t, ctx, cb, "k", 200)
	writeReplicated(t, ctx, cb, "b", 50)
	if err := tlsClusterClient(t, d, in, pairA).Set(ctx, "old", 1, 0).Err(); err == nil {
		t.Fatal("a client presenting a certificate no longer the instance's was let in")
	}

	// A server that restarts in its pod starts on the Secret's config and files as they
	// are now (its shard's replica takes over; the node comes back as its replica).
	victim := kubernetes.Name(in.DatabaseID) + "-1"
	before := podNamed(t, ctx, victim)
	killServer(t, ctx, cluster.ns, victim)
	waitRestarted(t, ctx, before)
	ensureRunning(t, ctx, d, in)
	cb = tlsClusterClient(t, d, in, pairB)
	requireKeys(t, ctx, cb, "k", 200)
	requireKeys(t, ctx, cb, "b", 50)
	if got := servedCert(t, nodes[victim], pairB); got.SerialNumber.Cmp(serial) != 0 {
		t.Fatalf("the restarted node serves serial %v, not the renewed certificate's", got.SerialNumber)
	}
	lives = podLives(t, ctx, nodes)

	// TLS off, then on again: a new cluster each time (new pods, new nodes), the data
	// saved and loaded.
	tlsOn := in
	in.TLS = nil
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running of a TLS cluster whose TLS is turned off = %v, %v; want false", up, err)
	}
	ensureRunning(t, ctx, d, in)
	for name, life := range lives {
		if p := podNamed(t, ctx, name); string(p.UID) == life[0] {
			t.Fatalf("pod %s kept through TLS turned off", name)
		}
	}
	plain := clusterClient(d, in)
	defer plain.Close()
	requireKeys(t, ctx, plain, "k", 200)
	requireKeys(t, ctx, plain, "b", 50)
	writeReplicated(t, ctx, plain, "plain", 50)
	requireClusterOf(t, ctx, plain, len(nodes))
	if up, err := d.Running(ctx, in); err != nil || !up {
		t.Fatalf("Running once TLS is off = %v, %v", up, err)
	}

	in = tlsOn
	ensureRunning(t, ctx, d, in)
	for _, addr := range nodes {
		waitRoutedTLS(t, addr)
	}
	cb = tlsClusterClient(t, d, in, pairB)
	requireKeys(t, ctx, cb, "k", 200)
	requireKeys(t, ctx, cb, "plain", 50)
	if err := tlsClusterClient(t, d, in).Set(ctx, "nocert", 1, 0).Err(); err == nil {
		t.Fatal("a client without a certificate was let in once TLS was on again")
	}
	requireClusterOf(t, ctx, cb, len(nodes))
	if up, err := d.Running(ctx, in); err != nil || !up {
		t.Fatalf("Running once TLS is on again = %v, %v", up, err)
	}
}
