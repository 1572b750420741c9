package kubernetes_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// TestClusterPorts: the nodes of a cluster but the first take ports of
// Config.ClusterPorts that no Service of the whole cluster holds (one another namespace
// holds is found taken when the Service is made, and the next is tried), keep them, and
// CLUSTER SLOTS names them; a range with none left is an error that says so.
func TestClusterPorts(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	// The range is 30170-30179; another namespace holds all but its last port, so that the
	// driver, which starts at a random port of the range, nearly always meets one taken.
	const first, free = 30170, 30179
	other, err := cluster.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clouddb-other-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.client.CoreV1().Namespaces().Delete(ctxFor(t, time.Minute), other.Name, metav1.DeleteOptions{})
	})
	var held []corev1.ServicePort
	for p := first; p < free; p++ {
		held = append(held, corev1.ServicePort{Name: "p" + strconv.Itoa(p), Port: int32(p), TargetPort: intstr.FromInt(80), NodePort: int32(p)})
	}
	_, err = cluster.client.CoreV1().Services(other.Name).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "holds-ports"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: held},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.ClusterPorts = [2]int{first, free} })

	in := instance(t, 150, "none")
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	for range 2 {
		if err = d.Ensure(ctx, in); err != nil {
			t.Fatal(err)
		}
		svc, err := cluster.client.CoreV1().Services(cluster.ns).Get(ctx, kubernetes.Name(in.DatabaseID)+"-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := svc.Spec.Ports[0].NodePort; got != free {
			t.Fatalf("node 1's port is %d, want %d (the one of the range no Service holds)", got, free)
		}
	}
	c := connect(t, d, in, "", in.Password)
	slots, err := c.ClusterSlots(ctx).Result() //nolint:staticcheck // what most clients read
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, s := range slots {
		addrs = append(addrs, s.Nodes[0].Addr)
	}
	want := []string{d.PublicEndpoint(in.Port), d.PublicEndpoint(free)}
	if len(addrs) != 2 || !(addrs[0] == want[0] && addrs[1] == want[1] || addrs[0] == want[1] && addrs[1] == want[0]) {
		t.Fatalf("CLUSTER SLOTS names %v, want %v", addrs, want)
	}
	cc := clusterClient(d, in)
	defer cc.Close()
	for i := range 100 {
		if err := cc.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatalf("a cluster client writes k%d: %v", i, err)
		}
	}

	full := instance(t, 151, "none")
	full.OSSCluster, full.Shards, full.MaxMemoryBytes = true, 2, 2*full.MaxMemoryBytes
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), full.DatabaseID) })
	err = d.Ensure(ctx, full)
	if err == nil || !strings.Contains(err.Error(), "no free port left") {
		t.Fatalf("Ensure with the range used up = %v, want an error saying no free port is left", err)
	}
}

// TestClusterPodDeleted: a replicated cluster whose endpoint's pod is deleted (a new pod
// is a new node, empty, at a new address) is healed by Ensure: the replica takes the
// shard over, the gone node is forgotten, the new one follows it; every key is served.
func TestClusterPodDeleted(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 152, "none")
	in.OSSCluster, in.Shards, in.Replication, in.MaxMemoryBytes = true, 2, true, 2*in.MaxMemoryBytes
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	for i := range 200 {
		if err := cc.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.Wait(ctx, 1, 5000).Result()
		if err == nil && n != 1 {
			err = fmt.Errorf("WAIT 1 on %s: %d replicas", m.Options().Addr, n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	old := must(cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, kubernetes.Name(in.DatabaseID)+"-0", metav1.GetOptions{}))
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Minute, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, old.Name, metav1.GetOptions{})
		return err == nil && p.UID != old.UID, nil
	}); err != nil {
		t.Fatalf("no new pod %s: %v", old.Name, err)
	}
	ensureRunning(t, ctx, d, in)
	fresh := clusterClient(d, in)
	defer fresh.Close()
	for i := range 200 {
		if v, err := fresh.Get(ctx, "k"+strconv.Itoa(i)).Result(); err != nil || v != strconv.Itoa(i) {
			t.Fatalf("k%d after the pod was replaced = %q, %v", i, v, err)
		}
	}
	nodes, err := connect(t, d, in, "", in.Password).ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(nodes), "\n")
	failed := slices.ContainsFunc(lines, func(l string) bool {
		f := strings.Fields(l)
		return len(f) < 3 || slices.ContainsFunc(strings.Split(f[2], ","), func(flag string) bool { return flag == "fail" || flag == "fail?" })
	})
	if len(lines) != 4 || failed {
		t.Fatalf("the cluster's nodes after the pod was replaced (want 4, none failed):\n%s", nodes)
	}
}

// clusterClient is a cluster client that starts from the database's endpoint, as a
// tenant's does.
func clusterClient(d *kubernetes.Driver, in clouddb.Instance) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{d.PublicEndpoint(in.Port)}, Password: in.Password, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}
