package kubernetes

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/redisdata"
)

// internalEndpoint is the database's running server as clouddb's own user, on its pod's
// address: its primary's, whose replica gets what is written there (see podEndpoint).
func (d *Driver) internalEndpoint(ctx context.Context, databaseID int) (redisdata.Endpoint, error) {
	pod, err := d.primaryPod(ctx, databaseID)
	if err != nil {
		return redisdata.Endpoint{}, fmt.Errorf("database %d: %w", databaseID, err)
	}
	if !podReady(pod) || pod.Status.PodIP == "" {
		return redisdata.Endpoint{}, fmt.Errorf("database %d: pod %s is not ready", databaseID, pod.Name)
	}
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(databaseID), metav1.GetOptions{})
	if err != nil {
		return redisdata.Endpoint{}, fmt.Errorf("database %d: reading its secret: %w", databaseID, err)
	}
	// Its data waits to be loaded into a new pod (persistence.go), whose load replaces
	// whatever the pod holds: nothing else reads or writes it until then.
	if secret.Annotations[annotationPendingLoad] != "" {
		return redisdata.Endpoint{}, fmt.Errorf("database %d: its pod is being replaced, its data not loaded yet: %w", databaseID, clouddb.ErrServerStarting)
	}
	// Over TLS as the pod serves; NoEvict: large RESTOREs of an import must not be cut
	// by the tenants' client memory limit.
	ep, err := d.podEndpoint(pod, secret)
	if err != nil {
		return redisdata.Endpoint{}, fmt.Errorf("database %d: %w", databaseID, err)
	}
	return ep, nil
}

// Snapshot writes an RDB snapshot of the database's live data to w, taken over the
// replication protocol from its pod (nothing touches the pod's files).
func (d *Driver) Snapshot(ctx context.Context, in clouddb.Instance, shard int, w io.Writer) (int64, error) {
	if in.OSSCluster {
		return d.snapshotCluster(ctx, in, shard, w)
	}
	if shard != 0 {
		return 0, fmt.Errorf("database %d has one shard, not shard %d", in.DatabaseID, shard)
	}
	ep, err := d.internalEndpoint(ctx, in.DatabaseID)
	if err != nil {
		return 0, err
	}
	return redisdata.Snapshot(ctx, ep, w)
}

// Load replaces the database's data with that of the RDB files: each is loaded into a
// throwaway redis-server on clouddb's own machine first (Config.RedisServer), which
// checks it and measures what it needs; only when every one loaded and together they fit
// the memory limit is the database emptied and filled, key by key, over the network.
func (d *Driver) Load(ctx context.Context, in clouddb.Instance, files []string) error {
	if err := d.supported(in); err != nil {
		return err
	}
	temps, err := redisdata.LoadChecked(ctx, redisdata.LoadConfig{Binary: d.cfg.RedisServer, TempDir: d.cfg.TempDir, MaxMemory: in.MaxMemoryBytes},
		files, in.MaxMemoryBytes)
	if err != nil {
		return err
	}
	defer func() {
		for _, t := range temps {
			t.Close()
		}
	}()
	if in.OSSCluster {
		if err = d.refusePending(ctx, in.DatabaseID); err != nil {
			return err
		}
		return d.loadCluster(ctx, in, temps)
	}
	dst, err := d.internalEndpoint(ctx, in.DatabaseID)
	if err != nil {
		return err
	}
	for i, t := range temps {
		if _, err := redisdata.CopyKeys(ctx, t.Endpoint(), dst, redisdata.CopyOptions{Replace: i == 0}); err != nil {
			return fmt.Errorf("copy the data into the database: %w", err)
		}
	}
	return nil
}

// CopyFrom replaces the database's data with a point-in-time copy of a live server's:
// a snapshot of it, loaded as Load does.
func (d *Driver) CopyFrom(ctx context.Context, in clouddb.Instance, src clouddb.RedisEndpoint) error {
	tmp, err := os.CreateTemp(d.cfg.TempDir, ".import-*.rdb")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	ep, own := d.ownEndpoint(ctx, src)
	if !own {
		// Dialled as replicaOf's sources: Config.DialSource's guard, no cluster address.
		ep = redisdata.Endpoint{Addr: src.Addr, Username: src.Username, Password: src.Password, Dial: d.sourceDial}
		if src.TLS {
			ep.TLS = d.sourceTLS()
		}
	}
	if _, err := redisdata.Snapshot(ctx, ep, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return d.Load(ctx, in, []string{tmp.Name()})
}

// sourceTLS verifies a TLS source against the system's roots and the installation's CA.
func (d *Driver) sourceTLS() *tls.Config {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if d.cfg.CA != nil {
		roots.AppendCertsFromPEM(d.cfg.CA.CertificatePEM())
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
}

// ownEndpoint is the internal endpoint of the database of this driver that e names, by
// its public or private endpoint, when e holds its default user's password and that
// password logs in (see tenantLogsIn): a tenant's password may not take a snapshot (the
// replication commands are the server's administration), clouddb's own user may, and it
// grants nothing the password's holder could not read already.
func (d *Driver) ownEndpoint(ctx context.Context, e clouddb.RedisEndpoint) (redisdata.Endpoint, bool) {
	if e.Username != "" && e.Username != "default" {
		return redisdata.Endpoint{}, false
	}
	host, portText, err := net.SplitHostPort(e.Addr)
	if err != nil {
		return redisdata.Endpoint{}, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return redisdata.Endpoint{}, false
	}
	id := 0
	svcs, err := d.cfg.Client.CoreV1().Services(d.ns).List(ctx, metav1.ListOptions{LabelSelector: managedSelector})
	if err != nil {
		return redisdata.Endpoint{}, false
	}
	for _, svc := range svcs.Items {
		n, aerr := strconv.Atoi(svc.Labels[LabelDatabase])
		if aerr != nil || len(svc.Spec.Ports) != 1 {
			continue
		}
		public := host == d.cfg.NodeAddress && int(svc.Spec.Ports[0].NodePort) == port
		if d.serviceType() == corev1.ServiceTypeLoadBalancer {
			public = slices.Contains(ingressAddrs(&svc), host) && int(svc.Spec.Ports[0].Port) == port
		}
		// On the Service's port: 6379 with NodePort Services, the database's with
		// LoadBalancer ones (as PrivateEndpoint gives it).
		private := port == int(svc.Spec.Ports[0].Port) && (host == svc.Name+"."+d.ns+".svc" || host == svc.Name+"."+d.ns+".svc.cluster.local" || host == svc.Spec.ClusterIP)
		if public || private {
			id = n
			break
		}
	}
	if id == 0 {
		return redisdata.Endpoint{}, false
	}
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil || subtle.ConstantTimeCompare(secret.Data[keyPassword], []byte(e.Password)) != 1 {
		return redisdata.Endpoint{}, false
	}
	ep, err := d.internalEndpoint(ctx, id)
	if err != nil || !tenantLogsIn(ctx, ep, e.Password) {
		return redisdata.Endpoint{}, false
	}
	// Nor, from another account, past a client certificate the tenant must present.
	if !e.SameAccount && asksClientCerts(ctx, ep) {
		return redisdata.Endpoint{}, false
	}
	return ep, true
}

// asksClientCerts reports whether ep's server requires a client certificate (true when it
// cannot tell).
func asksClientCerts(ctx context.Context, ep redisdata.Endpoint) bool {
	if ep.TLS == nil {
		return false
	}
	c := redis.NewClient(&redis.Options{Addr: ep.Addr, Username: ep.Username, Password: ep.Password, TLSConfig: ep.TLS, MaxRetries: -1,
		PoolSize: 1, DialTimeout: 5 * time.Second, ContextTimeoutEnabled: true, DisableIdentity: true})
	defer c.Close()
	got, err := c.ConfigGet(ctx, "tls-auth-clients").Result()
	return err != nil || got["tls-auth-clients"] != "no"
}

// tenantLogsIn reports whether password logs in to ep's server as its default user, as
// the password's holder would: not when the default user is off. Only then does
// clouddb's own user read it for them. (A server that requires client certificates is
// reached with clouddb's own, as driver/local does: an import from one's own mutual-TLS
// database names it by its rediss:// endpoint and password alone.)
func tenantLogsIn(ctx context.Context, ep redisdata.Endpoint, password string) bool {
	o := &redis.Options{Addr: ep.Addr, Username: "default", Password: password, TLSConfig: ep.TLS, MaxRetries: -1, PoolSize: 1,
		DialTimeout: 5 * time.Second, ContextTimeoutEnabled: true, DisableIdentity: true}
	c := redis.NewClient(o)
	defer c.Close()
	return c.Ping(ctx).Err() == nil
}
