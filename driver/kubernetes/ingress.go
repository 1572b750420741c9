package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
)

// DefaultIngressTimeout bounds Ensure's wait for a LoadBalancer Service's address: cloud
// load balancers take a minute or two to provision.
const DefaultIngressTimeout = 3 * time.Minute

// ErrNoIngress is wrapped by Ensure's error when a LoadBalancer Service got no address
// in time: most often, the cluster has no load-balancer controller.
var ErrNoIngress = errors.New("its LoadBalancer Service has no address")

// ingressLookupTimeout bounds PublicEndpointOf's read of a Service it has not seen yet:
// it answers an API request.
const ingressLookupTimeout = 2 * time.Second

func (c *Config) checkServiceType() error {
	switch c.ServiceType {
	case "":
		c.ServiceType = corev1.ServiceTypeNodePort
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	default:
		return fmt.Errorf("kubernetes driver: service type %q: want NodePort or LoadBalancer", c.ServiceType)
	}
	if c.IngressTimeout == 0 {
		c.IngressTimeout = DefaultIngressTimeout
	}
	return nil
}

func (d *Driver) serviceType() corev1.ServiceType { return d.cfg.ServiceType }

// PublicEndpointOf is where a client outside the cluster reaches the database: with
// NodePort Services PublicEndpoint(port); with LoadBalancer ones its Service's address
// (status.loadBalancer.ingress, an IP or a hostname) and port, the database's, or "" while
// the Service has none.
func (d *Driver) PublicEndpointOf(databaseID, port int) string {
	if d.serviceType() == corev1.ServiceTypeNodePort {
		return d.PublicEndpoint(port)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ingressLookupTimeout)
	defer cancel()
	host := d.ingressHosts(ctx, databaseID).hosts[Name(databaseID)]
	if host == "" {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// ingressEntry is what a database's Services had as load-balancer addresses when
// looked: each Service's preferred one by Service name (see ingressOf; none for a
// Service without one), and every address of them all, which its certificate names.
type ingressEntry struct {
	hosts  map[string]string
	all    []string
	looked time.Time
}

// ingressLookupEvery is how often ingressHosts asks again for the addresses of a
// database whose Services had none.
const ingressLookupEvery = 10 * time.Second

// ingressHosts are the load-balancer addresses of the database's Services, as this
// process last saw them (waitIngress; Running, which reads them again), or as read now
// when it has not seen them yet (a restart; another replica ensured it). A database
// without one is asked again only after a while: API reads (a tenant's lists) must not
// each cost a request to the cluster, whose rate the driver's failovers share. None with
// NodePort Services.
func (d *Driver) ingressHosts(ctx context.Context, databaseID int) ingressEntry {
	if d.serviceType() != corev1.ServiceTypeLoadBalancer {
		return ingressEntry{}
	}
	v, ok := d.ingress.Load(databaseID)
	e, _ := v.(ingressEntry)
	if !ok || len(e.hosts) == 0 && time.Since(e.looked) >= ingressLookupEvery {
		svcs, err := d.databaseServices(ctx, databaseID)
		if err != nil {
			// Asked again after a while too.
			d.ingress.Store(databaseID, ingressEntry{looked: time.Now()})
			return ingressEntry{}
		}
		e = d.rememberIngress(databaseID, svcs)
	}
	return e
}

// rememberIngress keeps the load-balancer addresses of the database's Services svcs, as
// just read, for ingressHosts, and returns them.
func (d *Driver) rememberIngress(databaseID int, svcs []corev1.Service) ingressEntry {
	e := ingressEntry{hosts: map[string]string{}, looked: time.Now()}
	for i := range svcs {
		if host, ok := ingressOf(&svcs[i]); ok {
			e.hosts[svcs[i].Name] = host
		}
		e.all = append(e.all, ingressAddrs(&svcs[i])...)
	}
	slices.Sort(e.all)
	e.all = slices.Compact(e.all)
	d.ingress.Store(databaseID, e)
	return e
}

// databaseServices are the database's Services: its own and, of a cluster, its nodes'.
func (d *Driver) databaseServices(ctx context.Context, databaseID int) ([]corev1.Service, error) {
	svcs, err := d.cfg.Client.CoreV1().Services(d.ns).List(ctx, metav1.ListOptions{
		LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: selector(databaseID)}),
	})
	if err != nil {
		return nil, fmt.Errorf("database %d: listing its services: %w", databaseID, err)
	}
	return svcs.Items, nil
}

// ingressAddrs are every address of the Service's load balancer, IPs and hostnames.
func ingressAddrs(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		for _, a := range []string{in.IP, in.Hostname} {
			if a != "" {
				out = append(out, a)
			}
		}
	}
	return out
}

// ingressOf is the Service's load-balancer address, if it has one: an IPv4 address
// first, then a hostname, then an IPv6 address (a dual-stack load balancer lists both
// kinds of IP, in either order; a cluster node cannot announce an IPv6 one, see
// clusterHosts).
func ingressOf(svc *corev1.Service) (string, bool) {
	var host, v6 string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			if a.Unmap().Is4() {
				return a.Unmap().String(), true
			}
			if v6 == "" {
				v6 = in.IP
			}
		}
		if host == "" {
			host = in.Hostname
		}
	}
	if host != "" {
		return host, true
	}
	return v6, v6 != ""
}

// waitIngress waits, with LoadBalancer Services, until each of the database's Services
// (a cluster's: every node's) has an address, remembers them for ingressHosts and returns
// them by Service name; nil with NodePort Services.
func (d *Driver) waitIngress(ctx context.Context, in clouddb.Instance) (map[string]string, error) {
	if d.serviceType() != corev1.ServiceTypeLoadBalancer {
		return nil, nil
	}
	names := []string{Name(in.DatabaseID)}
	if in.OSSCluster {
		names = names[:0]
		for i := range clusterNodeCount(in) {
			names = append(names, nodeServiceName(in.DatabaseID, i))
		}
	}
	wait, cancel := context.WithTimeout(ctx, d.cfg.IngressTimeout)
	defer cancel()
	for {
		svcs, err := d.databaseServices(wait, in.DatabaseID)
		missing := ""
		if err == nil {
			e := d.rememberIngress(in.DatabaseID, svcs)
			for _, n := range names {
				if e.hosts[n] == "" {
					missing = n
					break
				}
			}
			if missing == "" {
				return e.hosts, nil
			}
		}
		select {
		case <-wait.Done():
			if ctx.Err() != nil {
				return nil, fmt.Errorf("database %d: waiting for its load balancer's address: %w", in.DatabaseID, ctx.Err())
			}
			if err != nil {
				return nil, fmt.Errorf("database %d: waiting for its load balancer's address: %w", in.DatabaseID, err)
			}
			return nil, fmt.Errorf("database %d: service %s: %w after %v: does the cluster have a load-balancer controller? (NodePort Services need none)", in.DatabaseID, missing, ErrNoIngress, d.cfg.IngressTimeout)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
