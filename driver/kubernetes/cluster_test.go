package kubernetes_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

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
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{d.PublicEndpoint(in.Port)}, Password: in.Password, Protocol: 2, DisableIdentity: true})
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
