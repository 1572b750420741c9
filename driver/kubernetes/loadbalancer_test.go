package kubernetes_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"clouddb"
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

// TestClusterLoadBalancer: an OSS Cluster with LoadBalancer Services and TLS has a load
// balancer per node; Ensure waits until each has an address; each node announces its
// own (not the node address, a TEST-NET one nothing answers), which a cluster client
// seeded with the publicEndpoint follows to every shard, verifying each node's
// certificate by that address. A node's load balancer that gets another address (a
// hostname) makes Running false; Ensure has the node announce it and the certificate
// name it, the same pods serving on.
func TestClusterLoadBalancer(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.NodeAddress, c.ServiceType, c.IngressTimeout = "192.0.2.1", corev1.ServiceTypeLoadBalancer, 3*time.Second
	})
	in := instance(t, 415, "none")
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	cert, pair := selfSigned(t, "tenant")
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{cert}}
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })

	if err := d.Ensure(ctx, in); !errors.Is(err, kubernetes.ErrNoIngress) {
		t.Fatalf("Ensure with no load-balancer controller = %v, want ErrNoIngress", err)
	}
	if got := d.PublicEndpointOf(in.DatabaseID, in.Port); got != "" {
		t.Fatalf("publicEndpoint with no ingress = %q, want none", got)
	}
	svcs := cluster.client.CoreV1().Services(cluster.ns)
	names := []string{kubernetes.Name(in.DatabaseID), kubernetes.Name(in.DatabaseID) + "-1"}
	// The load balancers' controller gives every node's Service an address: the node's,
	// which kube-proxy routes for each Service's port.
	setIngress := func(name string, ingress corev1.LoadBalancerIngress) {
		t.Helper()
		svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{ingress}
		if _, err = svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range names {
		svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := svc.Spec.Ports
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(p) != 1 || int(p[0].Port) != p[0].TargetPort.IntValue() ||
			i == 0 && int(p[0].Port) != in.Port || i > 0 && p[0].NodePort != p[0].Port {
			t.Fatalf("node %d's service is %s %+v, want a LoadBalancer on the node's port (the database's for node 0; also its NodePort for the others)", i, svc.Spec.Type, p)
		}
		setIngress(name, corev1.LoadBalancerIngress{IP: nodeIP})
	}
	ensureRunning(t, ctx, d, in)
	endpoint := net.JoinHostPort(nodeIP, strconv.Itoa(in.Port))
	if got := d.PublicEndpointOf(in.DatabaseID, in.Port); got != endpoint {
		t.Fatalf("publicEndpoint = %q, want node 0's load balancer and the database's port, %s", got, endpoint)
	}
	nodes := map[string]string{}
	for i, name := range names {
		nodes[kubernetes.Name(in.DatabaseID)+"-"+strconv.Itoa(i)] = net.JoinHostPort(nodeIP, strconv.Itoa(nodeServicePortOf(t, ctx, name)))
	}
	for _, addr := range nodes {
		waitRoutedTLS(t, addr)
	}
	cc := tlsClusterClient(t, d, in, pair)
	for i := range 100 {
		if err := cc.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatalf("SET through the load balancers: %v", err)
		}
	}
	requireKeys(t, ctx, cc, "k", 100)
	// As node 0 tells (a cluster client would go to any node, one of them at a name
	// that does not resolve once node 1 announces its hostname).
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(testCA.CertificatePEM())
	node0 := redis.NewClient(&redis.Options{Addr: endpoint, Password: in.Password, Protocol: 2, DisableIdentity: true,
		TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
	t.Cleanup(func() { node0.Close() })
	announced := func() map[string]string {
		t.Helper()
		shards, err := node0.ClusterShards(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range shards {
			for _, n := range s.Nodes {
				out[strconv.FormatInt(n.TLSPort, 10)] = n.Hostname
			}
		}
		return out
	}
	for name, addr := range nodes {
		_, port, _ := net.SplitHostPort(addr)
		if got := announced()[port]; got != nodeIP {
			t.Fatalf("node %s announces the host %q, want its load balancer's %s", name, got, nodeIP)
		}
	}

	lives := podLives(t, ctx, nodes)
	setIngress(names[1], corev1.LoadBalancerIngress{Hostname: "node-1.lb.example"})
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running with node 1's load balancer at a new address = %v, %v; want false", up, err)
	}
	ensureRunning(t, ctx, d, in)
	requireSameLives(t, ctx, lives, "a load balancer's new address")
	// Node 0 learns it by the cluster's gossip, within a second or two.
	_, port1, _ := net.SplitHostPort(nodes[kubernetes.Name(in.DatabaseID)+"-1"])
	if err := poll(ctx, 15*time.Second, func() (bool, error) { return announced()[port1] == "node-1.lb.example", nil }); err != nil {
		t.Fatalf("node 1 announces %q after its load balancer's new address, want node-1.lb.example", announced()[port1])
	}
	served := servedCert(t, endpoint, pair)
	if !slices.Contains(served.DNSNames, "node-1.lb.example") || !slices.ContainsFunc(served.IPAddresses, func(ip net.IP) bool { return ip.String() == nodeIP }) {
		t.Fatalf("the certificate names %v %v, want node 1's load balancer's hostname and node 0's address", served.DNSNames, served.IPAddresses)
	}
	if err := d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatal(err)
	}
	if got := labelled(t, ctx, in.DatabaseID); len(got) != 0 {
		t.Fatalf("labelled objects after Remove: %v", got)
	}
}

// nodeServicePortOf is the port of a cluster node's LoadBalancer Service.
func nodeServicePortOf(t *testing.T, ctx context.Context, name string) int {
	t.Helper()
	svc, err := cluster.client.CoreV1().Services(cluster.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return int(svc.Spec.Ports[0].Port)
}
