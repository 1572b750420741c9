package kubernetes_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/driver/kubernetes"
	"clouddb/internal/pki"
)

// tlsClient is a tenant's client of a TLS database at addr, trusting the tests' CA,
// presenting certs.
func tlsClient(t *testing.T, addr, pass string, certs ...tls.Certificate) *redis.Client {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(testCA.CertificatePEM())
	c := redis.NewClient(&redis.Options{
		Addr: addr, Password: pass, MaxRetries: -1, DialTimeout: 5 * time.Second, DisableIdentity: true,
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12},
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// waitRestarted waits until the pod's server, killed, runs again in the same pod, and
// fails at once when it cannot (a crash loop).
func waitRestarted(t *testing.T, ctx context.Context, before *corev1.Pod) *corev1.Pod {
	t.Helper()
	var now *corev1.Pod
	err := poll(ctx, 90*time.Second, func() (bool, error) {
		now = podNamed(t, ctx, before.Name)
		for _, cs := range now.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				msg := ""
				if last := cs.LastTerminationState.Terminated; last != nil {
					msg = last.Message
				}
				return false, fmt.Errorf("it crash-loops: %s", msg)
			}
		}
		return now.UID == before.UID && restarts(now) > restarts(before) && started(now), nil
	})
	if err != nil {
		t.Fatalf("pod %s, its server killed, does not run again: %v", before.Name, err)
	}
	return now
}

// waitMountedConfig waits until the redis.conf the pod's server would start with (its
// mount, seen through the server's /proc root) is the Secret's of the key the pod reads.
func waitMountedConfig(t *testing.T, ctx context.Context, pod *corev1.Pod) {
	t.Helper()
	key, secret := "", ""
	for _, v := range pod.Spec.Volumes {
		if v.Name == "config" && v.Secret != nil {
			secret = v.Secret.SecretName
			for _, it := range v.Secret.Items {
				if it.Path == "redis.conf" {
					key = it.Key
				}
			}
		}
	}
	file := filepath.Join("/proc", strconv.Itoa(serverPid(t, ctx, cluster.ns, pod.Name)), "root/etc/clouddb/redis.conf")
	start := time.Now()
	if err := poll(ctx, 3*time.Minute, func() (bool, error) {
		s, err := cluster.client.CoreV1().Secrets(cluster.ns).Get(ctx, secret, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mounted, err := os.ReadFile(file)
		return err == nil && bytes.Equal(mounted, s.Data[key]), nil
	}); err != nil {
		t.Fatalf("pod %s: its mounted redis.conf is not its secret's %q: %v", pod.Name, key, err)
	}
	t.Logf("pod %s mounts its secret's %s (%v)", pod.Name, key, time.Since(start).Round(time.Second))
}

// TestTLSChangeRestartWindow: a TLS change writes the Secret before the pod is replaced;
// an old pod that restarts in between (here: the replacement failed, its server then
// crashed) starts on the config it was made with, plain, rather than crash-loop on a
// config that names certificates it does not mount; the next Ensure completes the change
// with the data kept.
func TestTLSChangeRestartWindow(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 124, "aof-every-1-second")
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	tenant := connect(t, d, in, "", in.Password)
	reachable(t, ctx, tenant)
	if err := tenant.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// A driver that cannot keep the data for the new pod: its Ensure fails once the
	// Secret and the template changed, before the pod is replaced.
	cfg := driverConfig(cluster.client, cluster.ns)
	cfg.PendingDir = filepath.Join(t.TempDir(), "missing")
	broken, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in.TLS = &clouddb.InstanceTLS{}
	if err = broken.Ensure(ctx, in); err == nil {
		t.Fatal("Ensure saved the data into a directory that does not exist")
	}
	old := podNamed(t, ctx, kubernetes.Name(in.DatabaseID)+"-0")
	if old.Annotations["clouddb.io/tls"] != "" {
		t.Fatal("the failed Ensure replaced the pod")
	}
	// The kubelet refreshes a mounted Secret a minute or so after it changed: the window.
	waitMountedConfig(t, ctx, old)
	killServer(t, ctx, cluster.ns, old.Name)
	waitRestarted(t, ctx, old)

	ensureRunning(t, ctx, d, in)
	c := tlsClient(t, d.PublicEndpoint(in.Port), in.Password)
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k over TLS after the change = %q, %v", got, err)
	}
}

// TestReplicatedTLS: a replicated database with TLS serves TLS only on both nodes, its
// replica following over TLS; a failover keeps every acknowledged write. New client
// certificates are taken live: no pod replaced, no server restarted, a client that
// presents one of them writes throughout, and none of its acknowledged writes is lost.
// TLS turned off, then on again (a new pod for each node, one at a time), keeps the data.
func TestReplicatedTLS(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 122, "none")
	in.Replication = true
	in.TLS = &clouddb.InstanceTLS{}
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	addr := d.PublicEndpoint(in.Port)
	waitRoutedTLS(t, addr)
	c := tlsClient(t, addr, in.Password)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	if err := connect(t, d, in, "", in.Password).Ping(ctx).Err(); err == nil {
		t.Fatal("a plain client was answered")
	}
	writeAcked(t, ctx, c, "k", 200)
	internal := internalPassword(t, ctx, in.DatabaseID)
	for _, name := range []string{kubernetes.Name(in.DatabaseID) + "-0", kubernetes.Name(in.DatabaseID) + "-1"} {
		p := podNamed(t, ctx, name)
		if err := redisClient(t, p.Status.PodIP+":6379", "clouddb-internal", internal).Ping(ctx).Err(); err == nil {
			t.Fatalf("pod %s answers plain TCP", name)
		}
	}

	primary := servingPod(t, ctx, cluster.ns, in.DatabaseID)
	killServer(t, ctx, cluster.ns, primary)
	ensureRunning(t, ctx, d, in)
	if now := servingPod(t, ctx, cluster.ns, in.DatabaseID); now == primary {
		t.Fatalf("the service still routes to %s, whose server was killed", now)
	}
	c = tlsClient(t, addr, in.Password)
	requireKeys(t, ctx, c, "k", 200)
	writeAcked(t, ctx, c, "after", 10) // the killed node is back as a replica, over TLS

	certPEM, keyPEM, err := testCA.IssueClient("tenant")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{string(certPEM)}}
	lives := podLives(t, ctx, nodeNames(in))
	w := startWriter(t, tlsClient(t, addr, in.Password, pair))
	ensureRunning(t, ctx, d, in)
	acked, gap := w.stop()
	t.Logf("new client certificates: %d writes acknowledged during the change, the longest time without one %v", acked, gap.Round(time.Millisecond))
	requireSameLives(t, ctx, lives, "new client certificates")
	c = tlsClient(t, addr, in.Password, pair)
	requireKeys(t, ctx, c, "k", 200)
	requireKeys(t, ctx, c, "w", acked)
	if err := tlsClient(t, addr, in.Password).Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate was answered")
	}
	if gap > 5*time.Second {
		t.Fatalf("no write acknowledged for %v during the change", gap)
	}
	writeAcked(t, ctx, c, "certs", 10)

	in.TLS = nil
	ensureRunning(t, ctx, d, in)
	c = connect(t, d, in, "", in.Password)
	reachable(t, ctx, c)
	requireKeys(t, ctx, c, "k", 200)
	requireKeys(t, ctx, c, "w", acked)
	writeAcked(t, ctx, c, "plain", 10)

	in.TLS = &clouddb.InstanceTLS{}
	ensureRunning(t, ctx, d, in)
	waitRoutedTLS(t, addr)
	c = tlsClient(t, addr, in.Password)
	requireKeys(t, ctx, c, "k", 200)
	requireKeys(t, ctx, c, "plain", 10)
	writeAcked(t, ctx, c, "again", 10)
}

// writeAcked writes n keys prefix<i> = i, and waits until the replica has them (WAIT 1).
func writeAcked(t *testing.T, ctx context.Context, c *redis.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		if err := c.Set(ctx, prefix+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatalf("SET %s%d: %v", prefix, i, err)
		}
	}
	if got, err := c.Wait(ctx, 1, 5*time.Second).Result(); err != nil || got != 1 {
		t.Fatalf("WAIT 1 after the %s keys = %d, %v", prefix, got, err)
	}
}

// requireKeys checks that keys prefix0 .. prefix<n-1> hold their index.
func requireKeys(t *testing.T, ctx context.Context, c redis.Cmdable, prefix string, n int) {
	t.Helper()
	for i := range n {
		if got, err := c.Get(ctx, prefix+strconv.Itoa(i)).Result(); err != nil || got != strconv.Itoa(i) {
			t.Fatalf("GET %s%d = %q, %v", prefix, i, got, err)
		}
	}
}

// writer writes w0, w1, ... in order, one at a time, through c until stopped; a write
// that fails is tried again (the same key) after 20 ms.
type writer struct {
	done    chan struct{}
	result  chan [2]int64
	stopped bool
}

func startWriter(t *testing.T, c redis.Cmdable) *writer {
	t.Helper()
	w := &writer{done: make(chan struct{}), result: make(chan [2]int64, 1)}
	go func() {
		var acked int64
		last, gap := time.Now(), time.Duration(0)
		for {
			select {
			case <-w.done:
				w.result <- [2]int64{acked, int64(max(gap, time.Since(last)))}
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := c.Set(ctx, "w"+strconv.FormatInt(acked, 10), acked, 0).Err()
			cancel()
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			gap = max(gap, time.Since(last))
			last = time.Now()
			acked++
		}
	}()
	t.Cleanup(func() { _, _ = w.stop() })
	return w
}

// stop ends the writes: how many were acknowledged, and the longest time without one.
func (w *writer) stop() (int, time.Duration) {
	if w.stopped {
		return 0, 0
	}
	w.stopped = true
	close(w.done)
	r := <-w.result
	return int(r[0]), time.Duration(r[1])
}

// cancelOn is a log handler that cancels a context when the driver logs a message that
// starts with prefix: an Ensure cut short there, as by clouddb's death.
type cancelOn struct {
	prefix string
	cancel context.CancelFunc
}

func (h cancelOn) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOn) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h cancelOn) WithGroup(string) slog.Handler            { return h }
func (h cancelOn) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.cancel()
	}
	return nil
}

// TestReplicatedTLSChangeResumes: a TLS change of a replicated database cut short once
// the primary handed over to the new node, before the old primary's pod is replaced
// (the two nodes then speak different protocols, the old one following the new), is
// completed by the next Ensure with every key: TLS turned off, then on again.
func TestReplicatedTLSChangeResumes(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 6*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 123, "none")
	in.Replication = true
	in.TLS = &clouddb.InstanceTLS{}
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	addr := d.PublicEndpoint(in.Port)
	waitRoutedTLS(t, addr)
	writeAcked(t, ctx, tlsClient(t, addr, in.Password), "k", 100)

	for _, tlsOn := range []bool{false, true} {
		in.TLS = nil
		if tlsOn {
			in.TLS = &clouddb.InstanceTLS{}
		}
		cut, cancel := context.WithCancel(ctx)
		cfg := driverConfig(cluster.client, cluster.ns)
		cfg.Logger = slog.New(cancelOn{prefix: "handed a database's primary over", cancel: cancel})
		interrupted, err := kubernetes.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err = interrupted.Ensure(cut, in); err == nil {
			t.Fatalf("TLS %v: the Ensure meant to be cut short after the hand-over completed", tlsOn)
		}
		cancel()
		t.Logf("TLS %v: Ensure cut short: %v", tlsOn, err)
		ensureRunning(t, ctx, d, in)
		c := connect(t, d, in, "", in.Password)
		if tlsOn {
			waitRoutedTLS(t, addr)
			c = tlsClient(t, addr, in.Password)
		} else {
			reachable(t, ctx, c)
		}
		requireKeys(t, ctx, c, "k", 100)
		writeAcked(t, ctx, c, "tls-"+strconv.FormatBool(tlsOn), 10)
	}
}

// TestTLSRenewedNearItsEnd: a TLS database (one node, and replicated) whose server
// certificate ends within pki.RenewBefore is not Running, so the reconciler's Ensure
// renews it although nothing else changed: it then serves a new certificate, live (the
// same pods and servers, a writer served throughout), its data kept. A server that
// restarts afterwards serves the renewed certificate too.
func TestTLSRenewedNearItsEnd(t *testing.T) {
	needCluster(t)
	t.Parallel()
	for _, tc := range []struct {
		name       string
		id         int
		replicated bool
	}{{"one node", 181, false}, {"replicated", 182, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 4*time.Minute)
			d := newDriver(t, cluster.client, cluster.ns)
			nearEnd := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.CA = nearEndCA{testCA} })
			in := instance(t, tc.id, "none")
			in.TLS, in.Replication = &clouddb.InstanceTLS{}, tc.replicated
			t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
			if err := nearEnd.Ensure(ctx, in); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			addr := d.PublicEndpoint(in.Port)
			waitRoutedTLS(t, addr)
			if err := tlsClient(t, addr, in.Password).Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			before := servedCert(t, addr)
			if before.NotAfter.After(time.Now().Add(pki.RenewBefore)) {
				t.Fatalf("the certificate ends %v: not the near-end one", before.NotAfter)
			}
			if up, err := d.Running(ctx, in); err != nil || up {
				t.Fatalf("Running with a server certificate near its end = %v, %v; want false (Ensure renews it)", up, err)
			}
			lives := podLives(t, ctx, nodeNames(in))
			w := startWriter(t, tlsClient(t, addr, in.Password))
			ensureRunning(t, ctx, d, in)
			acked, gap := w.stop()
			t.Logf("renewal: %d writes acknowledged meanwhile, the longest time without one %v", acked, gap.Round(time.Millisecond))
			requireSameLives(t, ctx, lives, "renewal")
			now := servedCert(t, addr)
			if now.SerialNumber.Cmp(before.SerialNumber) == 0 || !now.NotAfter.After(time.Now().Add(pki.RenewBefore)) {
				t.Fatalf("after Ensure the endpoint serves a certificate ending %v, serial %v: not renewed", now.NotAfter, now.SerialNumber)
			}
			c := tlsClient(t, addr, in.Password)
			if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("GET k after the renewal = %q, %v; want the key kept", v, err)
			}
			requireKeys(t, ctx, c, "w", acked)
			if gap > 5*time.Second {
				t.Fatalf("no write acknowledged for %v during the renewal", gap)
			}

			// The primary's server restarts in its pod: on the Secret's config and files as
			// they are now.
			victim := servingPod(t, ctx, cluster.ns, in.DatabaseID)
			old := podNamed(t, ctx, victim)
			killServer(t, ctx, cluster.ns, victim)
			waitRestarted(t, ctx, old)
			ensureRunning(t, ctx, d, in)
			waitRoutedTLS(t, addr)
			if got := servedCert(t, addr); got.SerialNumber.Cmp(now.SerialNumber) != 0 {
				t.Fatalf("after a restart the endpoint serves serial %v, not the renewed certificate's %v", got.SerialNumber, now.SerialNumber)
			}
			if !tc.replicated {
				return // a one-node database without persistence restarts empty
			}
			c = tlsClient(t, addr, in.Password)
			if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("GET k after the primary's restart = %q, %v; want the key kept", v, err)
			}
			if p := podNamed(t, ctx, victim); p.UID != old.UID {
				t.Fatalf("pod %s was replaced", victim)
			}
		})
	}
}

// nodeNames are the names of the pods of a database that is not a cluster (for podLives).
func nodeNames(in clouddb.Instance) map[string]string {
	names := map[string]string{kubernetes.Name(in.DatabaseID) + "-0": ""}
	if in.Replication {
		names[kubernetes.Name(in.DatabaseID)+"-1"] = ""
	}
	return names
}
