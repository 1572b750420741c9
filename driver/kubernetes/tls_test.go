package kubernetes_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// tlsClient is a tenant's client of a TLS database at addr, trusting the tests' CA.
func tlsClient(t *testing.T, addr, pass string) *redis.Client {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(testCA.CertificatePEM())
	c := redis.NewClient(&redis.Options{
		Addr: addr, Password: pass, MaxRetries: -1, DialTimeout: 5 * time.Second, DisableIdentity: true,
		TLSConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
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
		return now.UID == before.UID && restarts(now) > restarts(before) && ready(now), nil
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
	in := instance(t, 121, "aof-every-1-second")
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
