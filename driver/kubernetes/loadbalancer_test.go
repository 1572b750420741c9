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
	// Its NodePort is the database's port too (in the cluster's NodePort range here): not
	// one Kubernetes would choose at random, maybe another database's later.
	if p := svc.Spec.Ports; svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(p) != 1 || p[0].Port != int32(in.Port) || p[0].TargetPort.IntValue() != 6379 ||
		p[0].NodePort != int32(in.Port) {
		t.Fatalf("the service is %s %+v, want a LoadBalancer on the database's port %d to 6379, its NodePort too", svc.Spec.Type, p, in.Port)
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
			int(p[0].NodePort) != int(p[0].Port) || i == 0 && int(p[0].Port) != in.Port {
			t.Fatalf("node %d's service is %s %+v, want a LoadBalancer on the node's port (the database's for node 0), its NodePort too", i, svc.Spec.Type, p)
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

// lbDriver is a driver with LoadBalancer Services, as TestLoadBalancer's.
func lbDriver(t *testing.T) *kubernetes.Driver {
	t.Helper()
	return newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.NodeAddress, c.ServiceType, c.IngressTimeout = "192.0.2.1", corev1.ServiceTypeLoadBalancer, 3*time.Second
	})
}

// ensureBehindLoadBalancer ensures a database of one node with LoadBalancer Services
// (lbDriver): its first Ensure fails for want of the load balancer's address; once the
// test, as the load balancers' controller, gives it the node's, it runs.
func ensureBehindLoadBalancer(t *testing.T, ctx context.Context, d *kubernetes.Driver, in clouddb.Instance) {
	t.Helper()
	if err := d.Ensure(ctx, in); !errors.Is(err, kubernetes.ErrNoIngress) {
		t.Fatalf("Ensure with no ingress = %v, want ErrNoIngress", err)
	}
	setIngress(t, ctx, kubernetes.Name(in.DatabaseID), corev1.LoadBalancerIngress{IP: nodeIP})
	ensureRunning(t, ctx, d, in)
}

// setIngress acts as the load-balancer controller: it writes the Service's
// status.loadBalancer.ingress.
func setIngress(t *testing.T, ctx context.Context, name string, ingress ...corev1.LoadBalancerIngress) {
	t.Helper()
	svcs := cluster.client.CoreV1().Services(cluster.ns)
	svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = ingress
	if _, err = svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestLoadBalancerNewAddressTLS: a TLS database (not a cluster) whose load balancer gets
// a new address is not Running until its certificate names it (Running reads the
// address again), and its publicEndpoint is the new address.
func TestLoadBalancerNewAddressTLS(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := lbDriver(t)
	in := instance(t, 420, "none")
	cert, pair := selfSigned(t, "tenant")
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{cert}}
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureBehindLoadBalancer(t, ctx, d, in)
	name := kubernetes.Name(in.DatabaseID)
	endpoint := net.JoinHostPort(nodeIP, strconv.Itoa(in.Port))
	waitRoutedTLS(t, endpoint)
	if got := servedCert(t, endpoint, pair); !slices.ContainsFunc(got.IPAddresses, func(ip net.IP) bool { return ip.String() == nodeIP }) {
		t.Fatalf("the certificate names %v %v, want the load balancer's %s", got.DNSNames, got.IPAddresses, nodeIP)
	}

	// The load balancer's controller moves it to a new address (a hostname).
	const newHost = "db-420.lb.example"
	setIngress(t, ctx, name, corev1.LoadBalancerIngress{Hostname: newHost})
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running after the load balancer moved to %s = %v, %v; want false (the certificate does not name it)", newHost, up, err)
	}
	if got, want := d.PublicEndpointOf(in.DatabaseID, in.Port), net.JoinHostPort(newHost, strconv.Itoa(in.Port)); got != want {
		t.Errorf("PublicEndpointOf after the load balancer moved = %q, want %q", got, want)
	}
	ensureRunning(t, ctx, d, in)
	// kube-proxy no longer routes the old address (and the new name resolves nowhere):
	// the certificate as the Service's NodePort serves it, verified for the new name.
	svc := must(cluster.client.CoreV1().Services(cluster.ns).Get(ctx, name, metav1.GetOptions{}))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(testCA.CertificatePEM())
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(nodeIP, strconv.Itoa(int(svc.Spec.Ports[0].NodePort))),
		&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, ServerName: newHost, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("after Ensure the served certificate is not valid for the load balancer's new address %s: %v", newHost, err)
	}
	conn.Close()
}

// TestLoadBalancerEndpointAfterRemove: once a database is removed its publicEndpoint is
// none, and a new database of the same id whose Service has no address yet has none
// either (not the removed one's load balancer's, which may be someone else's by then).
func TestLoadBalancerEndpointAfterRemove(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := lbDriver(t)
	in := instance(t, 421, "none")
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureBehindLoadBalancer(t, ctx, d, in)
	if got := d.PublicEndpointOf(in.DatabaseID, in.Port); got == "" {
		t.Fatal("no public endpoint")
	}
	if err := d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatal(err)
	}
	removed := d.PublicEndpointOf(in.DatabaseID, in.Port)
	// A new database of the same id, whose load balancer has no address yet.
	again := instance(t, 421, "none")
	err := d.Ensure(ctx, again)
	if !errors.Is(err, kubernetes.ErrNoIngress) {
		t.Fatalf("Ensure of the new database with no ingress = %v, want ErrNoIngress", err)
	}
	if got := d.PublicEndpointOf(again.DatabaseID, again.Port); got != "" || removed != "" {
		t.Fatalf("PublicEndpointOf after Remove = %q, and of a new database of the same id whose Service has no address = %q; want none (the removed database's load balancer)", removed, got)
	}
}

// TestClusterLoadBalancerDualStack: dual-stack load balancers that list an IPv6 address
// before an IPv4 one serve a cluster, whose nodes announce the IPv4 one. Then clouddb
// restarted with the other type of Service, and back: LoadBalancer -> NodePort ->
// LoadBalancer, every key kept.
func TestClusterLoadBalancerDualStack(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := lbDriver(t)
	in := instance(t, 422, "none")
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	if err := d.Ensure(ctx, in); !errors.Is(err, kubernetes.ErrNoIngress) {
		t.Fatalf("Ensure with no ingress = %v, want ErrNoIngress", err)
	}
	names := []string{kubernetes.Name(in.DatabaseID), kubernetes.Name(in.DatabaseID) + "-1"}
	for _, n := range names {
		setIngress(t, ctx, n, corev1.LoadBalancerIngress{IP: "2001:db8::7"}, corev1.LoadBalancerIngress{IP: nodeIP})
	}
	if err := d.Ensure(ctx, in); err != nil {
		t.Errorf("Ensure of a cluster whose load balancers have an IPv4 address too: %v", err)
	}
	for _, n := range names {
		setIngress(t, ctx, n, corev1.LoadBalancerIngress{IP: nodeIP})
	}
	ensureRunning(t, ctx, d, in)
	cc := func(addr string) *redis.ClusterClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, Password: in.Password, Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	lb := cc(d.PublicEndpointOf(in.DatabaseID, in.Port))
	if err := poll(ctx, 30*time.Second, func() (bool, error) { return lb.Set(ctx, "probe", 1, 0).Err() == nil, nil }); err != nil {
		t.Fatalf("no write through the load balancers: %v", lb.Set(ctx, "probe", 1, 0).Err())
	}
	for i := range 50 {
		if err := lb.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// clouddb restarted with NodePort Services.
	np := newDriver(t, cluster.client, cluster.ns)
	ensureRunning(t, ctx, np, in)
	npc := cc(np.PublicEndpoint(in.Port))
	if err := poll(ctx, 30*time.Second, func() (bool, error) { return npc.Get(ctx, "k0").Err() == nil, nil }); err != nil {
		t.Fatalf("no read through the NodePorts after the switch: %v", npc.Get(ctx, "k0").Err())
	}
	requireKeys(t, ctx, npc, "k", 50)
	// And back.
	d2 := lbDriver(t)
	if err := d2.Ensure(ctx, in); err != nil {
		if !errors.Is(err, kubernetes.ErrNoIngress) {
			t.Fatalf("Ensure back with LoadBalancer Services: %v", err)
		}
		for _, n := range names {
			setIngress(t, ctx, n, corev1.LoadBalancerIngress{IP: nodeIP})
		}
	}
	ensureRunning(t, ctx, d2, in)
	lb2 := cc(d2.PublicEndpointOf(in.DatabaseID, in.Port))
	if err := poll(ctx, 30*time.Second, func() (bool, error) { return lb2.Get(ctx, "k0").Err() == nil, nil }); err != nil {
		t.Fatalf("no read through the load balancers after switching back: %v", lb2.Get(ctx, "k0").Err())
	}
	requireKeys(t, ctx, lb2, "k", 50)
}

// TestLoadBalancerOwnEndpoints: with LoadBalancer Services, an import from one of the
// driver's own databases by its public endpoint (its load balancer) or by its private
// one (PrivateEndpoint: the Service's name and the database's port) is taken as such
// (not dialled as a foreign source, which the private name would be refused as).
func TestLoadBalancerOwnEndpoints(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := lbDriver(t)
	src, dst := instance(t, 424, "none"), instance(t, 425, "none")
	for _, in := range []clouddb.Instance{src, dst} {
		t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
		ensureBehindLoadBalancer(t, ctx, d, in)
	}
	c := redisClient(t, net.JoinHostPort(nodeIP, strconv.Itoa(src.Port)), "", src.Password)
	reachable(t, ctx, c)
	for i := range 10 {
		if err := c.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	into := redisClient(t, net.JoinHostPort(nodeIP, strconv.Itoa(dst.Port)), "", dst.Password)
	reachable(t, ctx, into)
	// By its public endpoint (its load balancer's address).
	if err := d.CopyFrom(ctx, dst, clouddb.RedisEndpoint{Addr: d.PublicEndpointOf(src.DatabaseID, src.Port), Password: src.Password, SameAccount: true}); err != nil {
		t.Fatalf("CopyFrom the public endpoint %s: %v", d.PublicEndpointOf(src.DatabaseID, src.Port), err)
	}
	requireKeys(t, ctx, into, "k", 10)
	// By its private one, after one more key.
	if err := c.Set(ctx, "k10", 10, 0).Err(); err != nil {
		t.Fatal(err)
	}
	private := d.PrivateEndpoint(src.DatabaseID, src.Port)
	if err := d.CopyFrom(ctx, dst, clouddb.RedisEndpoint{Addr: private, Password: src.Password, SameAccount: true}); err != nil {
		t.Fatalf("CopyFrom the database's own private endpoint %s (as PrivateEndpoint gives it): %v", private, err)
	}
	requireKeys(t, ctx, into, "k", 11)
}
