package local_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/pki"
)

// TestTLS_RenewedNearItsEnd: a TLS database (replicated, and a replicated cluster) whose
// server certificate, or clouddb's client certificate its replicas present, ends within
// pki.RenewBefore is not Running, although nothing else changed and the same Driver
// keeps running, so that the reconciler's Ensure renews it: live, the same processes
// then serving a new certificate (or presenting a new one to their primary), the data
// kept.
func TestTLS_RenewedNearItsEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cluster bool
		client  bool // the client certificate ends soon, not the server's
	}{
		{"replicated/server", false, false},
		{"replicated/client", false, true},
		{"cluster/server", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			ca := newCA(t)
			caPEM := ca.CertificatePEM()
			dir := t.TempDir()
			b := &testBundle{dir: dir, driver: tlsDriver(t, dir, ca)}
			certA, pairA := clientCert(t, "a")
			in := b.instance(t, 97, "none")
			in.Replication = true
			in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certA}} // replicas must present theirs
			if tc.cluster {
				in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 128*mb
			}
			require.NoError(t, b.driver.Ensure(ctx, in))
			dbDir := filepath.Join(dir, strconv.Itoa(in.DatabaseID))
			roots := x509.NewCertPool()
			require.True(t, roots.AppendCertsFromPEM(caPEM))
			var cc *redis.ClusterClient
			if tc.cluster {
				cc = redis.NewClusterClient(&redis.ClusterOptions{
					Addrs: []string{fmt.Sprintf("127.0.0.1:%d", in.Port)}, Password: in.Password, Protocol: 2, DisableIdentity: true,
					TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pairA}, MinVersion: tls.VersionTLS12},
				})
				t.Cleanup(func() { cc.Close() })
				clusterWrite(t, cc, "k", 100)
				requireReplicasAcked(t, cc)
			} else {
				writeAcked(t, tlsClient(t, in.Port, in.Password, caPEM, pairA), "k", 100)
			}
			requireRunning(t, b.driver, in, true)
			pids := serverPids(t, dbDir)
			require.Len(t, pids, map[bool]int{false: 2, true: 4}[tc.cluster])
			ports := tlsPorts(t, dbDir, in)
			served := map[int]*x509.Certificate{}
			for _, p := range ports {
				served[p] = servedCert(t, p, roots, pairA)
				require.True(t, served[p].NotAfter.After(time.Now().Add(pki.RenewBefore)))
			}

			// The file clouddb gave the servers is replaced by one of the same CA, for the
			// same names, that ends within pki.RenewBefore: as the certificate looks once
			// it served most of its life.
			conf := filepath.Join(dbDir, "redis.conf")
			certKey, keyKey, usage := "tls-cert-file", "tls-key-file", x509.ExtKeyUsageServerAuth
			if tc.client {
				certKey, keyKey, usage = "tls-client-cert-file", "tls-client-key-file", x509.ExtKeyUsageClientAuth
			}
			certPath, keyPath := confValue(t, conf, certKey), confValue(t, conf, keyKey)
			nearEnd := replaceNearEnd(t, ca, certPath, keyPath)
			pair, err := tls.LoadX509KeyPair(certPath, keyPath)
			require.NoError(t, err)
			require.False(t, pki.LeafUsable(pair, caPEM, usage, nil), "the replacement needs renewal")
			require.True(t, nearEnd.NotAfter.After(time.Now()), "but has not ended")

			// Running is false (within the time its check of the files' stat takes to
			// come round), with the same Driver, which last saw them usable.
			eventuallyT(t, 15*time.Second, func() bool {
				up, rerr := b.driver.Running(ctx, in)
				require.NoError(t, rerr)
				return !up
			})
			require.NoError(t, b.driver.Ensure(ctx, in))

			// Renewed live: the same processes, the data kept, a new certificate.
			require.Equal(t, pids, serverPids(t, dbDir), "renewed live, by the same processes")
			require.NotEqual(t, certPath, confValue(t, conf, certKey))
			require.NoFileExists(t, certPath, "the replaced file is removed")
			renewed, err := tls.LoadX509KeyPair(confValue(t, conf, certKey), confValue(t, conf, keyKey))
			require.NoError(t, err)
			require.True(t, pki.LeafUsable(renewed, caPEM, usage, nil))
			for _, p := range ports {
				now := servedCert(t, p, roots, pairA)
				if tc.client {
					require.Equal(t, served[p].SerialNumber, now.SerialNumber, "port %d: the server certificate stays", p)
					continue
				}
				require.NotEqual(t, served[p].SerialNumber, now.SerialNumber, "port %d serves a new certificate", p)
				require.NotEqual(t, nearEnd.SerialNumber, now.SerialNumber, "port %d", p)
				require.True(t, now.NotAfter.After(time.Now().Add(pki.RenewBefore)), "port %d serves one ending %v", p, now.NotAfter)
			}
			if tc.cluster {
				clusterRead(t, cc, "k", 100)
				clusterWrite(t, cc, "after", 50)
				requireReplicasAcked(t, cc)
			} else {
				c := tlsClient(t, in.Port, in.Password, caPEM, pairA)
				requireKeys(t, c, "k", 100)
				if tc.client {
					// The replica connects anew, with the renewed certificate, and is let in.
					sc := socketClient(t, socketOf(t, ctx, b, in), dbDir)
					require.NoError(t, sc.ClientKillByFilter(ctx, "TYPE", "replica").Err())
				}
				writeAcked(t, c, "after", 50)
			}
			requireRunning(t, b.driver, in, true)
		})
	}
}

// confValue is the value of the setting key in the redis.conf at path.
func confValue(t *testing.T, path, key string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatalf("no %s in %s", key, path)
	return ""
}

// replaceNearEnd overwrites the certificate at certPath, and its key, with a certificate
// of ca for the same names and usage that ends within pki.RenewBefore, and returns it.
func replaceNearEnd(t *testing.T, ca *pki.CA, certPath, keyPath string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(certPath)
	require.NoError(t, err)
	cert, key, err := ca.Reissue(data, time.Now().Add(pki.RenewBefore/3))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyPath, key, 0o600))
	require.NoError(t, os.WriteFile(certPath, cert, 0o600))
	c, err := pki.ParseCertificate(cert)
	require.NoError(t, err)
	return c
}

// serverPids are the pids of the database's servers (node 0's in dbDir, the others' in
// its node directories), by pid file.
func serverPids(t *testing.T, dbDir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dbDir, "redis.pid"))
	require.NoError(t, err)
	more, err := filepath.Glob(filepath.Join(dbDir, "node*", "redis.pid"))
	require.NoError(t, err)
	out := map[string]int{}
	for _, f := range append(files, more...) {
		out[f] = nodePid(t, filepath.Dir(f))
		require.True(t, out[f] > 0 && !processGone(out[f]), f)
	}
	return out
}

// tlsPorts are the ports the database's servers serve clients on: the endpoint's, and
// for a cluster each node's.
func tlsPorts(t *testing.T, dbDir string, in clouddb.Instance) []int {
	t.Helper()
	if !in.OSSCluster {
		return []int{in.Port}
	}
	data, err := os.ReadFile(filepath.Join(dbDir, "topology.json"))
	require.NoError(t, err)
	var topo struct {
		Ports map[string]struct{ Port, Bus int } `json:"ports"`
	}
	require.NoError(t, json.Unmarshal(data, &topo))
	var ports []int
	for _, p := range topo.Ports {
		ports = append(ports, p.Port)
	}
	require.Len(t, ports, in.Shards*2)
	return ports
}

// servedCert is the certificate a TLS client trusting roots is served on port.
func servedCert(t *testing.T, port int, roots *x509.CertPool, certs ...tls.Certificate) *x509.Certificate {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", port),
		&tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}
