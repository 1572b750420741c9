package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/redisdata"
)

// replicaOf. As driver/local does, a database follows its sources through a replicator
// of redisdata in clouddb's own process, which takes each source's data and changes (over
// TLS when the source says so, verified against the system's roots and the installation's
// CA) and writes them into the pod as clouddb's user, while the tenant's users are
// read-only (see readOnly). Redis's own REPLICAOF would follow one source only, and from
// inside the cluster: the pod would dial an address a tenant chose. Here clouddb dials
// every source, through sourceDial: the address guard of Config.DialSource, and no
// address of the cluster itself (clusterInternal). A source that is one of this driver's
// databases, named by its endpoint and tenant's password, is read as that database's
// internal user on its pod, as CopyFrom does.

// ErrSourceForbidden is wrapped by the errors of a source address the driver refuses.
var ErrSourceForbidden = errors.New("the address is inside the Kubernetes cluster")

// replicators are the replicators of the databases that follow sources.
type replicators struct {
	// sync is held through each syncSources and stopSources, so that two of them for a
	// database (Ensure beside Remove) cannot both start a replicator, one never stopped.
	sync sync.Mutex
	mu   sync.Mutex
	m    map[int]*replica
}

// replica is one database's replicator and what it was started with.
type replica struct {
	r       *redisdata.Replicator
	sources []clouddb.RedisEndpoint
	addrs   []string // the addresses it reads and writes (a pod's changes with a restart)
}

// sourceEndpoints are the endpoints of the instance's sources, the addresses they are
// read at, and the target's.
func (d *Driver) sourceEndpoints(ctx context.Context, in clouddb.Instance, target redisdata.Endpoint) ([]redisdata.Endpoint, []string, error) {
	eps := make([]redisdata.Endpoint, len(in.ReplicaOf))
	addrs := []string{target.Addr}
	for i, s := range in.ReplicaOf {
		if ep, own := d.ownEndpoint(ctx, s); own {
			eps[i] = ep
		} else {
			if err := d.checkSource(ctx, s.Addr); err != nil {
				return nil, nil, fmt.Errorf("database %d: source %s: %w", in.DatabaseID, s.Addr, err)
			}
			eps[i] = redisdata.Endpoint{Addr: s.Addr, Username: s.Username, Password: s.Password, Dial: d.sourceDial}
			if s.TLS {
				eps[i].TLS = d.sourceTLS()
			}
		}
		addrs = append(addrs, eps[i].Addr)
	}
	return eps, addrs, nil
}

// checkSources refuses the instance's sources that are not the driver's databases and
// whose address is the cluster's, before Ensure makes or changes anything.
func (d *Driver) checkSources(ctx context.Context, in clouddb.Instance) error {
	for _, s := range in.ReplicaOf {
		if _, own := d.ownEndpoint(ctx, s); own {
			continue
		}
		if err := d.checkSource(ctx, s.Addr); err != nil {
			return fmt.Errorf("database %d: source %s: %w", in.DatabaseID, s.Addr, err)
		}
	}
	return nil
}

// syncSources makes the database's replicator follow exactly in.ReplicaOf into pod:
// started, restarted with a new list or addresses, or stopped.
func (d *Driver) syncSources(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, secret *corev1.Secret) error {
	d.repl.sync.Lock()
	defer d.repl.sync.Unlock()
	id := in.DatabaseID
	if len(in.ReplicaOf) == 0 {
		d.stopSourcesLocked(id)
		return nil
	}
	target, err := d.podEndpoint(pod, secret)
	if err != nil {
		return err
	}
	eps, addrs, err := d.sourceEndpoints(ctx, in, target)
	if err != nil {
		return err
	}
	d.repl.mu.Lock()
	cur := d.repl.m[id]
	d.repl.mu.Unlock()
	if cur != nil && slices.Equal(cur.sources, in.ReplicaOf) && slices.Equal(cur.addrs, addrs) {
		return nil
	}
	d.stopSourcesLocked(id)
	// Under the database's memory limit: a hostile source's snapshot that unpacks past it
	// fails that source rather than take clouddb's memory.
	opts := redisdata.ReplicatorOptions{Load: redisdata.LoadConfig{Binary: d.cfg.RedisServer, TempDir: d.cfg.TempDir, MaxMemory: in.MaxMemoryBytes}, Logger: d.log,
		OnEvent: func(e redisdata.Event) {
			if e.Err != nil {
				d.log.Warn("a source of a database", "database_id", id, "source", e.Endpoint, "state", e.State, "error", e.Err)
			}
		}}
	rep := &replica{r: redisdata.Start(context.Background(), target, eps, opts), sources: slices.Clone(in.ReplicaOf), addrs: addrs}
	d.repl.mu.Lock()
	if d.repl.m == nil {
		d.repl.m = map[int]*replica{}
	}
	d.repl.m[id] = rep
	d.repl.mu.Unlock()
	d.log.Info("following sources", "database_id", id, "sources", len(eps))
	return nil
}

// stopSources stops the database's replicator, if any.
func (d *Driver) stopSources(id int) {
	d.repl.sync.Lock()
	defer d.repl.sync.Unlock()
	d.stopSourcesLocked(id)
}

func (d *Driver) stopSourcesLocked(id int) {
	d.repl.mu.Lock()
	cur := d.repl.m[id]
	delete(d.repl.m, id)
	d.repl.mu.Unlock()
	if cur != nil {
		cur.r.Stop()
		d.log.Info("stopped following sources", "database_id", id)
	}
}

// following reports whether the database's replicator follows exactly in.ReplicaOf into
// pod (true when it has none and none runs).
func (d *Driver) following(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, secret *corev1.Secret) bool {
	d.repl.mu.Lock()
	cur := d.repl.m[in.DatabaseID]
	d.repl.mu.Unlock()
	if len(in.ReplicaOf) == 0 || cur == nil {
		return len(in.ReplicaOf) == 0 && cur == nil
	}
	target, err := d.podEndpoint(pod, secret)
	if err != nil {
		return false
	}
	_, addrs, err := d.sourceEndpoints(ctx, in, target)
	return err == nil && slices.Equal(cur.sources, in.ReplicaOf) && slices.Equal(cur.addrs, addrs)
}

// checkSource refuses a source address whose host is, or resolves to, an address of the
// cluster (see clusterInternal) or one Config.DialSource's guard refuses, with an error
// that says which.
func (d *Driver) checkSource(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not host:port: %w", err)
	}
	ips, err := lookup(ctx, host)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if err := d.clusterInternal(ctx, ip); err != nil {
			return err
		}
	}
	return nil
}

func lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip.Unmap().WithZone("")}, nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", host, err)
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, nil
}

// clusterInternal refuses an address of the cluster, which a tenant's source must not
// reach through clouddb: the node address (its NodePorts are databases, reached as
// sources only by their endpoint and password, see ownEndpoint), Config.ClusterNetworks
// (the pod and service networks), the API server's, and the pods and Service addresses
// of the driver's namespace (other tenants' servers).
func (d *Driver) clusterInternal(ctx context.Context, ip netip.Addr) error {
	refuse := func(what string) error { return fmt.Errorf("%w: %s is %s", ErrSourceForbidden, ip, what) }
	// clouddb's own machine or pod (its API, its debug listener): never where a tenant's
	// source is when the databases run in the cluster.
	if u := ip.Unmap(); u.IsLoopback() || u.IsUnspecified() {
		return refuse("a loopback address (clouddb's own)")
	}
	if a, err := netip.ParseAddr(d.cfg.NodeAddress); err == nil && a.Unmap() == ip {
		return refuse("the node address")
	}
	for _, p := range d.cfg.ClusterNetworks {
		if p.Contains(ip) {
			return refuse("in the cluster network " + p.String())
		}
	}
	if u := d.apiServerURL(); u != nil {
		if ips, err := lookup(ctx, u.Hostname()); err == nil && slices.Contains(ips, ip) {
			return refuse("the API server's")
		}
	}
	pods, err := d.cfg.Client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("checking the source address against the cluster's pods: %w", err)
	}
	for _, p := range pods.Items {
		for _, a := range p.Status.PodIPs {
			if pa, perr := netip.ParseAddr(a.IP); perr == nil && pa == ip {
				return refuse("a pod's")
			}
		}
	}
	svcs, err := d.cfg.Client.CoreV1().Services(d.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("checking the source address against the cluster's services: %w", err)
	}
	for _, s := range svcs.Items {
		for _, a := range s.Spec.ClusterIPs {
			if sa, err := netip.ParseAddr(a); err == nil && sa == ip {
				return refuse("a service's")
			}
		}
		// A load balancer's address, as the node address: a database there is a source
		// by its endpoint and password only (ownEndpoint).
		for _, lb := range s.Status.LoadBalancer.Ingress {
			if la, err := netip.ParseAddr(lb.IP); err == nil && la.Unmap() == ip {
				return refuse("a load balancer's of the cluster")
			}
		}
	}
	return nil
}

// apiServerURL is the API server the driver's client talks to, nil if unknown.
func (d *Driver) apiServerURL() (u *url.URL) {
	defer func() {
		if recover() != nil { // a fake client has no REST client
			u = nil
		}
	}()
	rc := d.cfg.Client.Discovery().RESTClient()
	if rc == nil {
		return nil
	}
	return rc.Get().URL()
}

// sourceDial opens a connection to a source that is not one of the driver's databases:
// the host is resolved once and every address checked (clusterInternal), and the
// connection goes to that address, so that a name cannot resolve to another one later,
// through Config.DialSource when set.
func (d *Driver) sourceDial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	for _, ip := range ips {
		if err := d.clusterInternal(ctx, ip); err != nil {
			return nil, err
		}
	}
	target := net.JoinHostPort(ips[0].String(), port)
	if d.cfg.DialSource != nil {
		return d.cfg.DialSource(ctx, network, target)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, target)
}
