package kubernetes_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// A tenant's source (replicaOf, an import) may not point clouddb at the cluster itself:
// a pod's or Service's address, the node's (a NodePort that is no database's endpoint
// with its password, the kubelet) or the API server's; each is refused with
// ErrSourceForbidden before anything dials it, and a database's endpoint with its
// password still works.
func TestSourceGuard(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	src, dst := instance(t, 401, "none"), instance(t, 402, "none")
	for _, in := range []clouddb.Instance{src, dst} {
		t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
		if err := d.Ensure(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	pod, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, kubernetes.Name(src.DatabaseID)+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := cluster.client.CoreV1().Services(cluster.ns).Get(ctx, kubernetes.Name(src.DatabaseID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(cluster.config.Host)
	if err != nil {
		t.Fatal(err)
	}
	for what, addr := range map[string]string{
		"a pod's address":            net.JoinHostPort(pod.Status.PodIP, "6379"),
		"a service's address":        net.JoinHostPort(svc.Spec.ClusterIP, "6379"),
		"the node, on no database's": net.JoinHostPort(nodeIP, strconv.Itoa(src.Port+1)),
		"the node's kubelet":         net.JoinHostPort(nodeIP, "10250"),
		"the API server":             api.Host,
		"clouddb's own loopback":     "127.0.0.1:8080",
		"clouddb's own loopback, v6": "[::1]:8080",
	} {
		// A wrong password: a Service address with the right one is the database itself
		// (its private endpoint), and the refusal must come before any dial.
		ep := clouddb.RedisEndpoint{Addr: addr, Password: "not-" + src.Password}
		in := dst
		in.ReplicaOf = []clouddb.RedisEndpoint{ep}
		if err := d.Ensure(ctx, in); !errors.Is(err, kubernetes.ErrSourceForbidden) {
			t.Errorf("replicaOf %s (%s): got %v, want ErrSourceForbidden", what, addr, err)
		}
		if err := d.CopyFrom(ctx, dst, ep); !errors.Is(err, kubernetes.ErrSourceForbidden) {
			t.Errorf("a copy from %s (%s): got %v, want ErrSourceForbidden", what, addr, err)
		}
	}
	// The database's endpoint, with its password, is the database itself.
	in := dst
	in.ReplicaOf = []clouddb.RedisEndpoint{{Addr: d.PublicEndpoint(src.Port), Password: src.Password}}
	if err := d.Ensure(ctx, in); err != nil {
		t.Fatalf("replicaOf a database by its endpoint: %v", err)
	}
	if ok, err := d.Running(ctx, in); err != nil || !ok {
		t.Fatalf("Running: %v, %v", ok, err)
	}
	if ok, err := d.Running(ctx, dst); err != nil || ok {
		t.Fatalf("Running without the sources it follows: %v, %v, want false", ok, err)
	}
}
