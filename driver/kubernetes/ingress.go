package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	host := d.ingressHosts(ctx, databaseID)[Name(databaseID)]
	if host == "" {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// ingressEntry is what a database's Services had as load-balancer addresses, by Service
// name (none for a Service without one), when looked.
type ingressEntry struct {
	hosts  map[string]string
	looked time.Time
}

// ingressLookupEvery is how often ingressHosts asks again for the addresses of a
// database whose Services had none.
const ingressLookupEvery = 10 * time.Second

// ingressHosts are the load-balancer addresses of the database's Services by Service
// name, as this process last saw them (waitIngress; Running of a cluster), or as read
// now when it has not seen them yet (a restart; another replica ensured it). A database
// without one is asked again only after a while: API reads (a tenant's lists) must not
// each cost a request to the cluster, whose rate the driver's failovers share. None with
// NodePort Services.
func (d *Driver) ingressHosts(ctx context.Context, databaseID int) map[string]string {
	if d.serviceType() != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	v, ok := d.ingress.Load(databaseID)
	e, _ := v.(ingressEntry)
	if !ok || len(e.hosts) == 0 && time.Since(e.looked) >= ingressLookupEvery {
		e = ingressEntry{looked: time.Now()}
		if svcs, err := d.databaseServices(ctx, databaseID); err == nil {
			e.hosts = ingressByName(svcs)
		}
		d.ingress.Store(databaseID, e)
	}
	return e.hosts
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

// ingressByName are the load-balancer addresses of those Services that have one.
func ingressByName(svcs []corev1.Service) map[string]string {
	out := map[string]string{}
	for i := range svcs {
		if host, ok := ingressOf(&svcs[i]); ok {
			out[svcs[i].Name] = host
		}
	}
	return out
}

// ingressOf is the Service's load-balancer address, if it has one.
func ingressOf(svc *corev1.Service) (string, bool) {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP, true
		}
		if in.Hostname != "" {
			return in.Hostname, true
		}
	}
	return "", false
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
			hosts := ingressByName(svcs)
			for _, n := range names {
				if hosts[n] == "" {
					missing = n
					break
				}
			}
			if missing == "" {
				d.ingress.Store(in.DatabaseID, ingressEntry{hosts: hosts, looked: time.Now()})
				return hosts, nil
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
