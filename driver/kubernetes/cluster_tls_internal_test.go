package kubernetes

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
	"log/slog"
	"maps"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/internal/pki"
	"clouddb/internal/redisconf"
)

// TestClusterTLSLiveReload: a cluster node's server started from a TLS cluster's Secret
// (its redis.conf and the node's file, the files where the pod would mount them) serves
// TLS only, on its port, and lets in only a client that presents one of the instance's
// certificates or the CA's. New material (a renewed server certificate, other client
// certificates) is taken by the server without a restart: the CONFIG SET of the new
// files waits while they are not there (the kubelet has not refreshed the pod's volume
// yet), then the server serves the new certificate and the new client certificates. On
// a local redis-server, not a cluster.
func TestClusterTLSLiveReload(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	port, bus := freePort(t), freePort(t)
	dir := t.TempDir()
	ca, err := pki.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's certificates, self-signed as a tenant makes them (one of the
	// installation's CA would be let in whatever the bundle names).
	tenant := func(name string) (string, tls.Certificate) {
		key, kerr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if kerr != nil {
			t.Fatal(kerr)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, kerr := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if kerr != nil {
			t.Fatal(kerr)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	certA, pairA := tenant("tenant A")
	certB, pairB := tenant("tenant B")

	d := &Driver{cfg: Config{CA: ca, NodeAddress: "127.0.0.1", StartTimeout: 20 * time.Second}, ns: "ns", log: slog.New(slog.DiscardHandler)}
	const internal = "internal-secret"
	in := clouddb.Instance{
		DatabaseID: 7, Password: "pw1", MaxMemoryBytes: 64 << 20, EvictionPolicy: "volatile-lru",
		DataPersistence: "none", Shards: 1, OSSCluster: true, TLS: &clouddb.InstanceTLS{ClientCertificates: []string{certA}},
	}
	data := map[string][]byte{keyInternal: []byte(internal)}
	if err = d.addTLSData(context.Background(), in, nil, data); err != nil {
		t.Fatal(err)
	}
	if err = addClusterTLSConfig(in, internal, data); err != nil {
		t.Fatal(err)
	}
	// here is a path of the pod's config volume on this machine.
	here := func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(confDir+"/"), []byte(dir+"/")) }
	// mount writes the Secret's data as the kubelet does.
	mount := func(data map[string][]byte) {
		for k, v := range data {
			if k == keyConfig {
				v = configHere(here(v))
			}
			if werr := os.WriteFile(filepath.Join(dir, k), v, 0o600); werr != nil {
				t.Fatal(werr)
			}
		}
	}
	mount(data)
	node := filepath.Join(dir, "node.conf")
	if err = os.WriteFile(node, nodeConfig(port, true, d.cfg.NodeAddress), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, filepath.Join(dir, keyConfig), "--include", node, "--bind", "127.0.0.1", "--dir", dir, "--cluster-port", strconv.Itoa(bus))
	var logs bytes.Buffer
	cmd.Stdout = &logs
	if err = cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Annotations: map[string]string{annotationTLS: tlsLive}},
		Status: corev1.PodStatus{PodIP: "127.0.0.1"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: Name(in.DatabaseID)}, Data: data}
	c, err := d.nodeClient(pod, port, secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for c.Ping(ctx).Err() != nil {
		if ctx.Err() != nil {
			t.Fatalf("redis-server does not serve TLS: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	runID := infoField(c.Info(ctx, "server").Val(), "run_id")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// tenantPing is a PING of a tenant that trusts the CA, presenting certs.
	tenantPing := func(certs ...tls.Certificate) error {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.CertificatePEM())
		tc := redis.NewClient(&redis.Options{Addr: addr, Password: in.Password, MaxRetries: -1, DisableIdentity: true,
			TLSConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}})
		defer tc.Close()
		return tc.Ping(ctx).Err()
	}
	served := func() *x509.Certificate {
		t.Helper()
		conn, derr := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // reads the certificate served
		if derr != nil {
			t.Fatal(derr)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	if err = tenantPing(pairA); err != nil {
		t.Fatalf("a tenant presenting its certificate: %v", err)
	}
	if err = tenantPing(); err == nil {
		t.Fatal("a tenant without a certificate was let in")
	}
	plain := redis.NewClient(&redis.Options{Addr: addr, Password: in.Password, MaxRetries: -1, DisableIdentity: true, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer plain.Close()
	if err = plain.Ping(ctx).Err(); err == nil {
		t.Fatal("the node answers plain TCP")
	}
	first := served()

	// The server certificate renewed (the old one gone), other client certificates.
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certB}}
	renewed := map[string][]byte{}
	maps.Copy(renewed, data)
	delete(renewed, keyTLSCert)
	next := map[string][]byte{keyInternal: []byte(internal)}
	if err = d.addTLSData(context.Background(), in, renewed, next); err != nil {
		t.Fatal(err)
	}
	if err = addClusterTLSConfig(in, internal, next); err != nil {
		t.Fatal(err)
	}
	args := []any{"config", "set"}
	var want [][2]string
	for _, s := range tlsFileSettings(in, next) {
		s[1] = string(here([]byte(s[1])))
		want = append(want, s)
		args = append(args, s[0], s[1])
	}
	if ok, serr := tlsServed(ctx, c, want); serr != nil || ok {
		t.Fatalf("tlsServed before the change = %v, %v; want false", ok, serr)
	}
	done := make(chan error, 1)
	go func() { done <- loadTLSFiles(ctx, c, args) }()
	select {
	case err = <-done:
		t.Fatalf("the new files were loaded before they were there: %v", err)
	case <-time.After(time.Second):
	}
	mount(next)
	if err = <-done; err != nil {
		t.Fatalf("loading the new files once there: %v", err)
	}
	if ok, serr := tlsServed(ctx, c, want); serr != nil || !ok {
		t.Fatalf("tlsServed after the change = %v, %v; want true", ok, serr)
	}
	now := served()
	if now.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("the server still serves the certificate of before")
	}
	if now.SerialNumber.Cmp(leaf(t, next[keyTLSCert]).SerialNumber) != 0 {
		t.Fatal("the server does not serve the renewed certificate")
	}
	if err = tenantPing(pairB); err != nil {
		t.Fatalf("a tenant presenting the new certificate: %v", err)
	}
	if err = tenantPing(pairA); err == nil {
		t.Fatal("a tenant presenting a certificate no longer the instance's was let in")
	}
	if got := infoField(c.Info(ctx, "server").Val(), "run_id"); got != runID {
		t.Fatalf("the server restarted (run_id %s, was %s)", got, runID)
	}
	if u := c.Do(ctx, "acl", "whoami").Val(); u != redisconf.InternalUser {
		t.Fatalf("clouddb's connection is %v", u)
	}
}

func leaf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	c, err := pki.ParseCertificate(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
