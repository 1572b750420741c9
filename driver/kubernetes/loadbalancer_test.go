package kubernetes_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"clouddb/driver/kubernetes"
)

// TestLoadBalancer: with LoadBalancer Services, Ensure fails, saying why, while the
// Service has no address; once it has one the database's publicEndpoint is that address
// and the database's port, which a client PINGs. The test cluster has no load-balancer
// controller: the test acts as one, writing the Service's status.loadBalancer.ingress
// (the node's address, which kube-proxy then routes for the Service's port).
func TestLoadBalancer(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 3*time.Minute)
	newLB := func() *kubernetes.Driver {
		d, err := kubernetes.New(kubernetes.Config{
			Client: cluster.client, Namespace: cluster.ns, Images: map[string]string{redisVersion: redisImage},
			DefaultVersion: redisVersion, ImagePullPolicy: corev1.PullNever, StartTimeout: 90 * time.Second,
			// Not where a client goes with LoadBalancer Services: a TEST-NET address that
			// nothing answers, so that an endpoint built of it fails the test.
			NodeAddress: "192.0.2.1", ServiceType: corev1.ServiceTypeLoadBalancer, IngressTimeout: 3 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := newLB()
	in := instance(t, 121, "none")
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })

	start := time.Now()
	err := d.Ensure(ctx, in)
	if !errors.Is(err, kubernetes.ErrNoIngress) {
		t.Fatalf("Ensure with no load-balancer controller = %v, want ErrNoIngress", err)
	}
	t.Logf("Ensure without an ingress failed in %v: %v", time.Since(start).Round(time.Millisecond), err)
	if got := d.PublicEndpointOf(in.DatabaseID, in.Port); got != "" {
		t.Fatalf("publicEndpoint with no ingress = %q, want none", got)
	}
	svcs := cluster.client.CoreV1().Services(cluster.ns)
	svc, err := svcs.Get(ctx, kubernetes.Name(in.DatabaseID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := svc.Spec.Ports; svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(p) != 1 || p[0].Port != int32(in.Port) || p[0].TargetPort.IntValue() != 6379 {
		t.Fatalf("the service is %s %+v, want a LoadBalancer on the database's port %d to 6379", svc.Spec.Type, p, in.Port)
	}
	nodePort := svc.Spec.Ports[0].NodePort

	// The load balancer's controller gives the Service an address.
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: nodeIP}}
	if _, err = svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ensureRunning(t, ctx, d, in)
	endpoint := net.JoinHostPort(nodeIP, strconv.Itoa(in.Port))
	if got := d.PublicEndpointOf(in.DatabaseID, in.Port); got != endpoint {
		t.Fatalf("publicEndpoint = %q, want the ingress and the database's port, %s", got, endpoint)
	}
	if got, want := d.PrivateEndpoint(in.DatabaseID, in.Port), kubernetes.Name(in.DatabaseID)+"."+cluster.ns+".svc:"+strconv.Itoa(in.Port); got != want {
		t.Fatalf("privateEndpoint = %q, want %q", got, want)
	}
	c := redisClient(t, endpoint, "", in.Password)
	reachable(t, ctx, c)
	if err = c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A second Ensure (the reconciler's) changes nothing: the same NodePort.
	ensureRunning(t, ctx, d, in)
	if svc, err = svcs.Get(ctx, kubernetes.Name(in.DatabaseID), metav1.GetOptions{}); err != nil || svc.Spec.Ports[0].NodePort != nodePort {
		t.Fatalf("after a second Ensure the service is %+v, %v; want its NodePort %d kept", svc, err, nodePort)
	}

	// A hostname, read by a driver that did not ensure the database (clouddb restarted).
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "db.example"}}
	if _, err = svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := newLB().PublicEndpointOf(in.DatabaseID, in.Port), "db.example:"+strconv.Itoa(in.Port); got != want {
		t.Fatalf("publicEndpoint of a hostname ingress = %q, want %q", got, want)
	}
	if err = d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatal(err)
	}
	if got := labelled(t, ctx, in.DatabaseID); len(got) != 0 {
		t.Fatalf("labelled objects after Remove: %v", got)
	}
}

// TestServiceTypeRefused: a type other than NodePort and LoadBalancer is refused.
func TestServiceTypeRefused(t *testing.T) {
	_, err := kubernetes.New(kubernetes.Config{
		Client: &k8s.Clientset{}, Namespace: "x", Images: map[string]string{redisVersion: "r"}, DefaultVersion: redisVersion,
		ServiceType: corev1.ServiceTypeClusterIP,
	})
	if err == nil || err.Error() != `kubernetes driver: service type "ClusterIP": want NodePort or LoadBalancer` {
		t.Fatalf("New with a ClusterIP service type = %v", err)
	}
}
