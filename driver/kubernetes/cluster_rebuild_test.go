package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// clusterPodNames are the names of the pods of a cluster instance (for podLives).
func clusterPodNames(in clouddb.Instance) map[string]string {
	n := in.Shards
	if in.Replication {
		n *= 2
	}
	names := map[string]string{}
	for i := range n {
		names[kubernetes.Name(in.DatabaseID)+"-"+strconv.Itoa(i)] = ""
	}
	return names
}

// hasClaimVolume reports whether the pod keeps its data on a claim.
func hasClaimVolume(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.Name == "data" {
			return v.PersistentVolumeClaim != nil
		}
	}
	return false
}

// liveClaims counts the database's claims that are not being deleted.
func liveClaims(t *testing.T, ctx context.Context, id int) int {
	t.Helper()
	claims := must(cluster.client.CoreV1().PersistentVolumeClaims(cluster.ns).List(ctx, metav1.ListOptions{
		LabelSelector: kubernetes.LabelDatabase + "=" + strconv.Itoa(id),
	}))
	n := 0
	for _, c := range claims.Items {
		if c.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// requireClusterOf fails unless the cluster of c knows exactly want nodes, none failed.
func requireClusterOf(t *testing.T, ctx context.Context, c redis.Cmdable, want int) {
	t.Helper()
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(nodes), "\n")
	for _, l := range lines {
		if f := strings.Fields(l); len(f) < 3 || slices.ContainsFunc(strings.Split(f[2], ","), func(flag string) bool { return flag == "fail" || flag == "fail?" }) {
			t.Fatalf("the cluster's nodes (want %d, none failed):\n%s", want, nodes)
		}
	}
	if len(lines) != want {
		t.Fatalf("the cluster's nodes (want %d, none failed):\n%s", want, nodes)
	}
}

// TestClusterPersistenceChange: a cluster's persistence changes between none and a
// persistent one, its data kept: every pod is replaced by one of the other volume (a
// claim, or none and the claims deleted), and the cluster is made of the new nodes only.
// A replicated cluster does it one node at a time and serves a writer throughout; one
// without replicas saves each shard's data and loads it into its new nodes.
func TestClusterPersistenceChange(t *testing.T) {
	needCluster(t)
	t.Parallel()
	for _, tc := range []struct {
		name       string
		id, shards int
		replicated bool
	}{{"replicated", 197, 1, true}, {"not replicated", 198, 2, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 8*time.Minute)
			d := newDriver(t, cluster.client, cluster.ns)
			in := instance(t, tc.id, "none")
			in.OSSCluster, in.Shards, in.Replication = true, tc.shards, tc.replicated
			in.MaxMemoryBytes *= int64(tc.shards)
			t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
			ensureRunning(t, ctx, d, in)
			cc := clusterClient(d, in)
			defer cc.Close()
			if tc.replicated {
				writeReplicated(t, ctx, cc, "k", 200)
			} else {
				for i := range 200 {
					if err := cc.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			names := clusterPodNames(in)
			for _, persistence := range []string{"aof-every-1-second", "none"} {
				in.DataPersistence = persistence
				if up, err := d.Running(ctx, in); err != nil || up {
					t.Fatalf("Running on pods of the other persistence (%s wanted) = %v, %v; want false", persistence, up, err)
				}
				lives := podLives(t, ctx, names)
				var w *writer
				var probe *endpointProbe
				if tc.replicated {
					w = startWriter(t, clusterClient(d, in))
					probe = startEndpointProbe(t, d.PublicEndpoint(in.Port), in.Password)
				}
				start := time.Now()
				ensureRunning(t, ctx, d, in)
				t.Logf("persistence %s: Ensure took %v", persistence, time.Since(start).Round(time.Millisecond))
				if probe != nil {
					// A new client that knows only the endpoint is let in throughout: the
					// endpoint routes to another node while node 0's pod is replaced.
					if n, failed := probe.stop(); len(failed) > 0 {
						t.Fatalf("persistence %s: %d of %d new connections to the endpoint failed during the roll: %v", persistence, len(failed), n, failed)
					} else {
						t.Logf("persistence %s: %d new connections to the endpoint, none failed", persistence, n)
					}
				}
				for name, life := range lives {
					p := podNamed(t, ctx, name)
					if string(p.UID) == life[0] || hasClaimVolume(p) != (persistence != "none") {
						t.Fatalf("persistence %s: pod %s (uid %s, was %s) keeps its data on a claim: %v; want a new pod of the other volume",
							persistence, name, p.UID, life[0], hasClaimVolume(p))
					}
				}
				cc2 := clusterClient(d, in)
				defer cc2.Close()
				requireKeys(t, ctx, cc2, "k", 200)
				if w != nil {
					requireServedThroughout(t, ctx, w, cc2, "persistence "+persistence)
				}
				requireClusterOf(t, ctx, cc2, len(names))
				if persistence != "none" && !tc.replicated {
					// The loaded data is in each node's files, synced, before the saved
					// file goes: an AOF rewritten since the load, not left to its fsync.
					if err := cc2.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
						info, err := m.Info(ctx, "persistence").Result()
						if err != nil {
							return err
						}
						rewrites, _ := strconv.Atoi(infoValue(info, "aof_rewrites"))
						base, _ := strconv.Atoi(infoValue(info, "aof_base_size"))
						if rewrites < 1 || base < 500 {
							return fmt.Errorf("%s: %d AOF rewrites, a base of %d bytes: the load is not in its files", m.Options().Addr, rewrites, base)
						}
						return nil
					}); err != nil {
						t.Fatalf("persistence %s: %v", persistence, err)
					}
				}
				want := 0
				if persistence != "none" {
					want = len(names)
				}
				if err := poll(ctx, time.Minute, func() (bool, error) { return liveClaims(t, ctx, in.DatabaseID) == want, nil }); err != nil {
					t.Fatalf("persistence %s: %d claims, want %d", persistence, liveClaims(t, ctx, in.DatabaseID), want)
				}
				if up, err := d.Running(ctx, in); err != nil || !up {
					t.Fatalf("Running after the change to %s = %v, %v", persistence, up, err)
				}
				// Backups read the new nodes.
				var buf strings.Builder
				for s := range in.Shards {
					if _, err := d.Snapshot(ctx, in, s, &buf); err != nil {
						t.Fatalf("Snapshot of shard %d after the change to %s: %v", s, persistence, err)
					}
				}
			}
		})
	}
}

// TestClusterProbeOfBefore: a replicated cluster's pod made by an earlier clouddb, Ready
// once its port listened, is replaced by one of the template's readiness probe (a
// disruption budget would count it serving while it syncs, empty); Running says false
// until then, and the data is kept.
func TestClusterProbeOfBefore(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 199, "none")
	in.OSSCluster, in.Replication = true, true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	writeReplicated(t, ctx, cc, "k", 100)

	// Its StatefulSet as an earlier clouddb made it, and its replica's pod made again
	// from it.
	name := kubernetes.Name(in.DatabaseID)
	api := cluster.client.AppsV1().StatefulSets(cluster.ns)
	sts := must(api.Get(ctx, name, metav1.GetOptions{}))
	orphanStatefulSet(t, ctx, name)
	old := sts.DeepCopy()
	old.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: cluster.ns, Labels: sts.Labels, Annotations: sts.Annotations}
	old.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(16379)}}, PeriodSeconds: 2,
	}
	if _, err := api.Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replica := name + "-1"
	if nodeRole(t, ctx, d, in, replica) != "slave" {
		t.Fatalf("pod %s is not the replica", replica)
	}
	before := podNamed(t, ctx, replica)
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, replica, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	var stale *corev1.Pod
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, replica, metav1.GetOptions{})
		if err != nil || p.UID == before.UID || p.Spec.Containers[0].ReadinessProbe.TCPSocket == nil || !ready(p) {
			return false, nil
		}
		stale = p
		return true, nil
	}); err != nil {
		t.Fatalf("no pod of the older probe: %v", err)
	}
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running with a pod of the probe of before = %v, %v; want false", up, err)
	}
	w := startWriter(t, clusterClient(d, in))
	ensureRunning(t, ctx, d, in)
	p := podNamed(t, ctx, replica)
	if p.UID == stale.UID || p.Spec.Containers[0].ReadinessProbe.Exec == nil {
		t.Fatalf("pod %s after Ensure: uid %s (the old probe's %s), readiness %+v; want a new pod of an exec probe",
			replica, p.UID, stale.UID, p.Spec.Containers[0].ReadinessProbe.ProbeHandler)
	}
	cc2 := clusterClient(d, in)
	defer cc2.Close()
	requireKeys(t, ctx, cc2, "k", 100)
	requireServedThroughout(t, ctx, w, cc2, "the replacement of a pod of the probe of before")
	requireClusterOf(t, ctx, cc2, 2)
	if up, err := d.Running(ctx, in); err != nil || !up {
		t.Fatalf("Running after the replacement = %v, %v", up, err)
	}
}

// TestClusterPersistenceChangeResumes: a cluster without replicas whose persistence
// change was cut short once its data was saved (clouddb died) serves none of it, nor
// backs it up, until the next Ensure, which loads it into the new nodes: every key is
// kept and the saved files are gone.
func TestClusterPersistenceChangeResumes(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	pending := t.TempDir()
	d := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.PendingDir = pending })
	in := instance(t, 200, "aof-every-1-second")
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	for i := range 200 {
		if err := cc.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	in.DataPersistence = "none"
	cut, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupted := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.PendingDir = pending
		c.Logger = slog.New(cancelOn{prefix: "saved a cluster's data", cancel: cancel})
	})
	err := interrupted.Ensure(cut, in)
	if err == nil {
		t.Fatal("the Ensure meant to be cut short once the data was saved succeeded")
	}
	t.Logf("Ensure cut short: %v", err)
	saved := must(filepath.Glob(filepath.Join(pending, "*.rdb")))
	if len(saved) != in.Shards {
		t.Fatalf("files saved for the new nodes: %v, want one per shard", saved)
	}
	if _, err = d.Snapshot(ctx, in, 0, io.Discard); !errors.Is(err, clouddb.ErrServerStarting) {
		t.Fatalf("Snapshot while the data waits for the new nodes = %v, want ErrServerStarting", err)
	}
	if up, rerr := d.Running(ctx, in); rerr != nil || up {
		t.Fatalf("Running while the data waits for the new nodes = %v, %v; want false", up, rerr)
	}
	ensureRunning(t, ctx, d, in)
	cc2 := clusterClient(d, in)
	defer cc2.Close()
	requireKeys(t, ctx, cc2, "k", 200)
	if left := must(filepath.Glob(filepath.Join(pending, "*"))); len(left) != 0 {
		t.Fatalf("files left once the data was loaded: %v", left)
	}
	if err = poll(ctx, time.Minute, func() (bool, error) { return liveClaims(t, ctx, in.DatabaseID) == 0, nil }); err != nil {
		t.Fatalf("%d claims left of a cluster that no longer persists", liveClaims(t, ctx, in.DatabaseID))
	}
}

// infoValue is the value of a field of an INFO reply, "" when it has none.
func infoValue(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// endpointProbe PINGs a database's endpoint on a new connection every 100 ms until
// stopped.
type endpointProbe struct {
	done    chan struct{}
	result  chan probeResult
	stopped bool
}

type probeResult struct {
	n      int
	failed []string
}

func startEndpointProbe(t *testing.T, addr, password string) *endpointProbe {
	t.Helper()
	p := &endpointProbe{done: make(chan struct{}), result: make(chan probeResult, 1)}
	go func() {
		var r probeResult
		for {
			select {
			case <-p.done:
				p.result <- r
				return
			case <-time.After(100 * time.Millisecond):
			}
			c := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
				PoolSize: 1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err := c.Ping(ctx).Err()
			cancel()
			c.Close()
			r.n++
			if err != nil {
				r.failed = append(r.failed, time.Now().Format("15:04:05.000")+" "+err.Error())
			}
		}
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop ends the probes: how many there were, and the failures.
func (p *endpointProbe) stop() (int, []string) {
	if p.stopped {
		return 0, nil
	}
	p.stopped = true
	close(p.done)
	r := <-p.result
	return r.n, r.failed
}
