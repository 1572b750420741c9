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
	v, ok := d.ingress.Load(databaseID)
	e, _ := v.(ingressEntry)
	if !ok || e.host == "" && time.Since(e.looked) >= ingressLookupEvery {
		// Not seen by this process yet (a restart; another replica ensured it). A Service
		// without an address is asked again only after a while: API reads (a tenant's
		// lists) must not each cost a request to the cluster, whose rate the driver's
		// failovers share.
		ctx, cancel := context.WithTimeout(context.Background(), ingressLookupTimeout)
		defer cancel()
		e = ingressEntry{looked: time.Now()}
		if svc, err := d.cfg.Client.CoreV1().Services(d.ns).Get(ctx, Name(databaseID), metav1.GetOptions{}); err == nil {
			e.host, _ = ingressOf(svc)
		}
		d.ingress.Store(databaseID, e)
	}
	if e.host == "" {
		return ""
	}
	return net.JoinHostPort(e.host, strconv.Itoa(port))
}

// ingressEntry is a database's load-balancer address as last seen, "" for none at looked.
type ingressEntry struct {
	host   string
	looked time.Time
}

// ingressLookupEvery is how often PublicEndpointOf asks again for the address of a
// Service that had none.
const ingressLookupEvery = 10 * time.Second

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

// waitIngress waits, with LoadBalancer Services, until the database's Service has an
// address, and remembers it for PublicEndpointOf.
func (d *Driver) waitIngress(ctx context.Context, in clouddb.Instance) error {
	if d.serviceType() != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, d.cfg.IngressTimeout)
	defer cancel()
	for {
		svc, err := d.cfg.Client.CoreV1().Services(d.ns).Get(wait, Name(in.DatabaseID), metav1.GetOptions{})
		if err == nil {
			if host, ok := ingressOf(svc); ok {
				d.ingress.Store(in.DatabaseID, ingressEntry{host: host, looked: time.Now()})
				return nil
			}
		}
		select {
		case <-wait.Done():
			if ctx.Err() != nil {
				return fmt.Errorf("database %d: waiting for its load balancer's address: %w", in.DatabaseID, ctx.Err())
			}
			return fmt.Errorf("database %d: %w after %v: does the cluster have a load-balancer controller? (NodePort Services need none)", in.DatabaseID, ErrNoIngress, d.cfg.IngressTimeout)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
