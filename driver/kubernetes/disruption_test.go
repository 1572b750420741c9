package kubernetes_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb/driver/kubernetes"
)

// TestDrainTakesOneNode: a replicated database's pods prefer different nodes, and a
// drain (the eviction API) takes one of them at a time: the second eviction is refused
// while the first pod is away, and Ensure then serves every key from the node that
// stayed. Without replication there is no budget to block a drain.
func TestDrainTakesOneNode(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 160, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	c := connect(t, d, in, "", in.Password)
	fillReplicated(t, ctx, c, 100)
	for i := range 2 {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, kubernetes.Name(in.DatabaseID)+"-"+strconv.Itoa(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a := p.Spec.Affinity
		if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
			a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelHostname {
			t.Fatalf("pod %s does not prefer a node without the database's other pod: %+v", p.Name, a)
		}
	}

	evict := func(name string) error { return evictPod(ctx, name) }
	waitEvictable(t, ctx, in.DatabaseID)
	first, second := kubernetes.Name(in.DatabaseID)+"-0", kubernetes.Name(in.DatabaseID)+"-1"
	if err := evict(first); err != nil {
		t.Fatalf("evicting %s: %v", first, err)
	}
	if err := evict(second); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s while %s is away = %v, want refused (429)", second, first, err)
	}
	ensureRunning(t, ctx, d, in)
	c = connect(t, d, in, "", in.Password)
	if n := c.DBSize(ctx).Val(); n != 100 {
		t.Fatalf("after the drain: %d keys, want 100", n)
	}

	in.Replication = false
	ensureRunning(t, ctx, d, in)
	if got := labelled(t, ctx, in.DatabaseID); slices.Contains(got, "poddisruptionbudget/"+kubernetes.Name(in.DatabaseID)) {
		t.Fatalf("a database of one pod keeps a disruption budget: %v", got)
	}
}

// TestDrainWaitsForCopy: the disruption budget of a replicated database or cluster does
// not let a drain take the second copy of the data while the first node is back empty: a
// new pod (the first evicted, by a drain), or its server restarted in its pod (killed: a
// cluster node keeps serving its slots then, its nodes.conf kept), of a database without
// persistence holds the data only once Ensure had it follow the node that stayed and it
// synced. A drain retries a refused eviction every few seconds: were the other node
// evicted then, the keys would be gone. The budget counts Ready pods, and a pod is Ready
// only once it holds the data (probe.go).
func TestDrainWaitsForCopy(t *testing.T) {
	needCluster(t)
	t.Parallel()
	for _, tc := range []struct {
		name    string
		id      int
		cluster bool
		killed  bool
	}{
		{"replicated, evicted", 162, false, false}, {"cluster, evicted", 161, true, false},
		{"replicated, killed", 164, false, true}, {"cluster, killed", 165, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 4*time.Minute)
			d := newDriver(t, cluster.client, cluster.ns)
			in := instance(t, tc.id, "none")
			in.Replication = true
			if tc.cluster {
				in.OSSCluster, in.Shards = true, 1
			}
			t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
			ensureRunning(t, ctx, d, in)
			fillReplicated(t, ctx, connect(t, d, in, "", in.Password), 100)
			waitEvictable(t, ctx, in.DatabaseID)
			first, second := kubernetes.Name(in.DatabaseID)+"-0", kubernetes.Name(in.DatabaseID)+"-1"
			old := must(cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, first, metav1.GetOptions{}))
			if tc.killed {
				killServer(t, ctx, cluster.ns, first)
			} else if err := evictPod(ctx, first); err != nil {
				t.Fatalf("evicting %s: %v", first, err)
			}
			// A drain's loop: the first comes back, its server listening, empty.
			if err := poll(ctx, time.Minute, func() (bool, error) {
				p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, first, metav1.GetOptions{})
				back := err == nil && (p.UID != old.UID || restarts(p) > restarts(old))
				return back && started(p), nil
			}); err != nil {
				t.Fatalf("%s is not back with its server up: %v", first, err)
			}
			// Two readiness probes at least (the first as its server starts): it stays not
			// Ready, and the budget's controller has seen it; a drain retrying now...
			for range 8 {
				if p := must(cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, first, metav1.GetOptions{})); ready(p) {
					t.Fatalf("%s, back empty, is Ready before Ensure", first)
				}
				time.Sleep(time.Second)
			}
			if err := evictPod(ctx, second); !apierrors.IsTooManyRequests(err) {
				t.Errorf("evicting %s, the only copy of the data, while %s is empty = %v, want refused (429)", second, first, err)
			}
			ensureRunning(t, ctx, d, in)
			if n := connect(t, d, in, "", in.Password).DBSize(ctx).Val(); n != 100 {
				t.Fatalf("after the drain: %d keys, want 100", n)
			}
			// Once the node back holds the data, the budget lets one go again.
			waitEvictable(t, ctx, in.DatabaseID)
		})
	}
}

// fillReplicated writes n keys k<i> = i and waits until the replica has them.
func fillReplicated(t *testing.T, ctx context.Context, c *redis.Client, n int) {
	t.Helper()
	for i := range n {
		if err := c.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, "wait", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}
}

// evictPod asks for the eviction of a pod of the test namespace, as a drain does.
func evictPod(ctx context.Context, name string) error {
	return cluster.client.CoreV1().Pods(cluster.ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.ns}})
}

// waitEvictable waits until the database's disruption budget, which counts its pods
// healthy, allows one eviction.
func waitEvictable(t *testing.T, ctx context.Context, id int) {
	t.Helper()
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		pdb, err := cluster.client.PolicyV1().PodDisruptionBudgets(cluster.ns).Get(ctx, kubernetes.Name(id), metav1.GetOptions{})
		return err == nil && pdb.Status.DisruptionsAllowed == 1, nil
	}); err != nil {
		t.Fatalf("the disruption budget of database %d allows no eviction: %v", id, err)
	}
}
