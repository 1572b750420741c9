// Package kubernetes is the data-plane driver that runs each database as Kubernetes
// objects with client-go, in one namespace: a StatefulSet of one redis pod (two with
// replication: a primary and its replica, see replication.go), a Service that is its
// endpoint (a NodePort on the database's port, to the primary), and a Secret with its
// redis.conf (the password, clouddb's own user, the ACL users). The Service and the
// Secret are owned by the StatefulSet, so that deleting it removes them; the data lives
// on a PersistentVolumeClaim of the StatefulSet when the database persists, and in the
// pod (an emptyDir) otherwise. Every object carries the labels LabelManagedBy and
// LabelDatabase, by which a restarted clouddb finds what exists.
//
// TLS (tls.go; a replicated database's nodes are replaced one at a time, renew.go), a
// persistence change (persistence.go) and replicaOf sources, followed by clouddb itself
// (replicaof.go), are supported as by driver/local; so are UserSetter, StreamLoader and
// ACLChecker (on a pod of each image, aclcheck.go). An OSS Cluster database runs one pod
// per cluster node, each with a Service of its own (see cluster.go), with TLS if asked,
// whose files its nodes take live (cluster_tls.go). Not supported yet, with an explicit
// error: more than one shard without OSS Cluster, changing a cluster's shape, turning TLS
// on or off on a running cluster, and replicaOf sources with OSS Cluster.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"clouddb"
	"clouddb/internal/redisconf"
)

// Labels on every object the driver makes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "clouddb"
	LabelDatabase  = "clouddb.io/database"
	labelName      = "app.kubernetes.io/name"
)

// Defaults of Config.
const (
	DefaultStartTimeout = 2 * time.Minute
	defaultStopTimeout  = 2 * time.Minute
	// DefaultVolumeSize is the size of a persistent database's claim when the size does
	// not decide it: at least twice maxmemory (an AOF before its rewrite, an RDB beside
	// the one being written).
	minVolumeSize = 1 << 30
)

// ErrNotSupported is wrapped by the errors of what this driver does not do yet.
var ErrNotSupported = errors.New("not supported by the kubernetes driver yet")

// Config configures a Driver.
type Config struct {
	// Client talks to the cluster's API server.
	Client k8s.Interface
	// Namespace holds every database's objects.
	Namespace string
	// Images are the redis images by Redis version (major.minor), DefaultVersion's the
	// one of an instance that names none. The image's command must have redis-server on
	// its PATH.
	Images         map[string]string
	DefaultVersion string
	// ImagePullPolicy of the redis container; empty is Kubernetes' default.
	ImagePullPolicy corev1.PullPolicy
	// StorageClass of a persistent database's claim; empty is the cluster's default.
	StorageClass string
	// RunAsUser, if set, is the uid (and gid, and the volumes' group) the server runs as,
	// such as 999, the official redis image's user; the image's own user otherwise (the
	// official image's is root, which its entrypoint leaves, but the driver runs
	// redis-server directly). The volumes must honour fsGroup: hostPath ones, as in the
	// test cluster, do not.
	RunAsUser *int64
	// StartTimeout bounds Ensure's wait for the pod to be Ready and answer PING.
	StartTimeout time.Duration
	// NodeAddress is where the NodePort Services are reached from outside the cluster (a
	// node's address): PublicEndpoint names it.
	NodeAddress string
	// ServiceType is the type of the databases' Services, their publicEndpoint:
	// NodePort (empty means it) or LoadBalancer, whose address the cluster's load-balancer
	// controller gives; Ensure waits IngressTimeout for it (default DefaultIngressTimeout).
	ServiceType    corev1.ServiceType
	IngressTimeout time.Duration
	// Logger receives the driver's logs; it never receives a password.
	Logger *slog.Logger
	// RedisServer is the redis-server binary of clouddb's own machine that Load checks
	// and measures files with (empty: redis-server in PATH), in TempDir (empty: the
	// system's).
	RedisServer string
	TempDir     string
	// PendingDir keeps a database's data while its pod is replaced (a TLS or persistence
	// change, see persistence.go): the only copy until the new pod has it, so it must
	// outlive clouddb's restarts and belong to this installation alone (clouddb's data
	// directory). Empty: TempDir.
	PendingDir string
	// DialSource, if set, opens the connections to import sources (CopyFrom): the place
	// for the address guard, since users choose those addresses.
	DialSource func(ctx context.Context, network, addr string) (net.Conn, error)
	// CA is the installation's certificate authority, which TLS import sources may be
	// signed by, and which issues the certificates of TLS databases.
	CA clouddb.CertificateAuthority
	// ACLCheckIdle is how long the pod that checks ACL rules (CheckACLRules) on an image
	// is kept after its last check, for the next to be fast; DefaultACLCheckIdle if zero.
	ACLCheckIdle time.Duration
	// ClusterNetworks are the cluster's own address ranges (its pod and service
	// networks): a source a tenant names (replicaOf, an import) there is refused, as are
	// the node address, the API server's and the addresses of the namespace's pods and
	// Services, which the driver finds itself.
	ClusterNetworks []netip.Prefix
	// ClusterPorts, LOW and HIGH, are the NodePorts the driver may give the nodes of an
	// OSS Cluster database other than the first (which is on the database's port): a
	// part of the cluster's NodePort range that clouddb never hands to a database as its
	// port. Zero: OSS Cluster is refused.
	ClusterPorts [2]int
}

// Driver is a clouddb.Driver on a Kubernetes cluster.
type Driver struct {
	cfg  Config
	ns   string
	log  *slog.Logger
	repl replicators // of the databases that follow sources (replicaof.go)
	// ingress holds the load balancers' addresses by database id (LoadBalancer Services), as
	// ingressEntry values.
	ingress sync.Map
	acl     *aclChecker // the checkers of ACL rules (aclcheck.go)
	// tlsChecks holds, by database id, the verdict on the certificates of a version of
	// its Secret, as tlsCheck values (see secretTLSUsable).
	tlsChecks sync.Map
}

var _ clouddb.Driver = (*Driver)(nil)

// New returns a Driver for cfg.
func New(cfg Config) (*Driver, error) {
	if cfg.Client == nil {
		return nil, errors.New("kubernetes driver: no client")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("kubernetes driver: no namespace")
	}
	if cfg.Images[cfg.DefaultVersion] == "" {
		return nil, fmt.Errorf("kubernetes driver: no image for the default Redis version %q", cfg.DefaultVersion)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if err := cfg.checkServiceType(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, ns: cfg.Namespace, log: cfg.Logger, acl: newACLChecker()}, nil
}

// Name is the name of the StatefulSet, Service and Secret of a database.
func Name(databaseID int) string { return "clouddb-db-" + strconv.Itoa(databaseID) }

func labels(databaseID int) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelDatabase: strconv.Itoa(databaseID), labelName: "redis"}
}

// selector picks the database's pods; it never changes (a StatefulSet's is immutable).
func selector(databaseID int) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelDatabase: strconv.Itoa(databaseID)}
}

// managedSelector picks every object the driver made.
const managedSelector = LabelManagedBy + "=" + ManagedBy

// PrivateEndpoint is the database's in-cluster address: its Service's DNS name, and the
// Service's port (6379; the database's port with LoadBalancer Services).
func (d *Driver) PrivateEndpoint(databaseID, port int) string {
	if d.serviceType() == corev1.ServiceTypeNodePort {
		port = redisPort
	}
	return net.JoinHostPort(Name(databaseID)+"."+d.ns+".svc", strconv.Itoa(port))
}

// PublicEndpoint is where a client outside the cluster reaches a database of NodePort
// Services: its NodePort, which is the database's port, on Config.NodeAddress.
// PublicEndpointOf is the database's whatever the type of its Service.
func (d *Driver) PublicEndpoint(port int) string {
	return net.JoinHostPort(d.cfg.NodeAddress, strconv.Itoa(port))
}

// supported refuses what the driver cannot run yet rather than run something else.
func (d *Driver) supported(in clouddb.Instance) error {
	var not []string
	if in.Shards > 1 && !in.OSSCluster {
		not = append(not, "more than one shard without OSS Cluster")
	}
	if in.OSSCluster && d.cfg.ClusterPorts[0] <= 0 && in.Shards*perShard(in) > 1 {
		not = append(not, "OSS Cluster without ports for its nodes (Config.ClusterPorts, --k8s-cluster-ports)")
	}
	if in.OSSCluster && len(in.ReplicaOf) > 0 {
		not = append(not, "replicaOf sources with OSS Cluster")
	}
	if in.OSSCluster && in.Shards < 1 {
		return fmt.Errorf("database %d: a cluster of %d shards", in.DatabaseID, in.Shards)
	}
	if len(not) > 0 {
		return fmt.Errorf("database %d: %s: %w", in.DatabaseID, strings.Join(not, ", "), ErrNotSupported)
	}
	if _, ok := redisconf.Persistences[in.DataPersistence]; !ok {
		return fmt.Errorf("database %d: unknown data persistence %q", in.DatabaseID, in.DataPersistence)
	}
	if in.MaxMemoryBytes <= 0 {
		return fmt.Errorf("database %d: no memory limit", in.DatabaseID)
	}
	return validateTLS(in)
}

func (d *Driver) image(in clouddb.Instance) (string, error) {
	v := in.RedisVersion
	if v == "" {
		v = d.cfg.DefaultVersion
	}
	img, ok := d.cfg.Images[v]
	if !ok {
		return "", fmt.Errorf("database %d: Redis %s: no image for it: %w", in.DatabaseID, v, ErrNotSupported)
	}
	return img, nil
}

func persistent(in clouddb.Instance) bool { return in.DataPersistence != "none" }

// Ensure makes the database run as in says: it creates its objects, or changes them and
// the live servers (size, policy, persistence settings, password, users) without a
// restart; with replication, it chooses the primary, promotes it and has the other node
// follow it (see ensureNodes). It waits until the pods are Ready and answer an
// authenticated PING, and the public endpoint reaches the primary.
func (d *Driver) Ensure(ctx context.Context, in clouddb.Instance) error {
	if err := d.supported(in); err != nil {
		return err
	}
	img, err := d.image(in)
	if err != nil {
		return err
	}
	if err = d.checkSources(ctx, in); err != nil {
		return err
	}
	if err = d.checkVersion(ctx, in, img); err != nil {
		return err
	}
	if in.OSSCluster {
		return d.ensureCluster(ctx, in, img)
	}
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		sts, err = d.create(ctx, in, img)
		if err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("database %d: %w", in.DatabaseID, err)
	case isCluster(sts):
		return fmt.Errorf("database %d: turning OSS Cluster off: %w", in.DatabaseID, ErrNotSupported)
	}
	if hasClaim(sts) != persistent(in) {
		// A volume claim template is immutable: a new StatefulSet (persistence.go).
		if sts, err = d.changePersistence(ctx, in, sts, img); err != nil {
			return err
		}
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		// Made by an earlier clouddb, whose nodes started in order; the policy is
		// immutable: a new StatefulSet adopts the pods as they run.
		if err = d.orphanStatefulSet(ctx, in, sts, "its nodes start in parallel"); err != nil {
			return err
		}
		if sts, err = d.create(ctx, in, img); err != nil {
			return err
		}
	}
	if sts, err = d.makeLostPods(ctx, in, sts); err != nil {
		return err
	}
	// The Service first: a replicated database's Secret names its ClusterIP, and a TLS
	// one's certificate its load balancer's address.
	if _, err = d.applyService(ctx, in, sts, nil); err != nil {
		return err
	}
	if _, err = d.waitIngress(ctx, in); err != nil {
		return err
	}
	if err = d.applyDisruptionBudget(ctx, in, sts); err != nil {
		return err
	}
	secret, err := d.applySecret(ctx, in, sts)
	if err != nil {
		return err
	}
	if in.Replication && sts.Spec.Replicas != nil && *sts.Spec.Replicas == 1 {
		if err = d.routeToFirst(ctx, in, sts); err != nil {
			return err
		}
	}
	oldLimit := containerMemory(sts)
	want := d.statefulSet(in, img)
	withTLS(want, in)
	// Replication turned off: the replica goes only once the node that stays is the
	// primary with every write (see ensureNodes).
	nodes := *want.Spec.Replicas
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas > nodes {
		nodes = *sts.Spec.Replicas
	}
	if err = d.updateStatefulSet(ctx, sts, func(sts *appsv1.StatefulSet) bool {
		if sts.Spec.Replicas != nil && *sts.Spec.Replicas == nodes && templateEqual(sts, want) {
			return false
		}
		sts.Spec.Replicas = ptr(nodes)
		sts.Spec.Template = want.Spec.Template
		return true
	}); err != nil {
		return fmt.Errorf("database %d: updating its statefulset: %w", in.DatabaseID, err)
	}
	if err = d.replaceUnscheduled(ctx, in.DatabaseID, want); err != nil {
		return err
	}
	internal := string(secret.Data[keyInternal])
	if nodes > 1 {
		return d.runNodes(ctx, in, secret, oldLimit, int(nodes))
	}
	// Left by a turning off of replication cut short (see dropReplicaPod).
	if sts.Status.Replicas > 1 {
		if err = d.dropReplicaPod(ctx, in.DatabaseID); err != nil {
			return err
		}
	}
	pod, err := d.waitStarted(ctx, in.DatabaseID, 0)
	if err != nil {
		return err
	}
	// A pod of another TLS or image than the template's is replaced, and data saved
	// before a new pod or StatefulSet is loaded (persistence.go).
	if pod, err = d.settle(ctx, in, secret, want, pod); err != nil {
		return err
	}
	tc, err := d.podTLS(pod, secret)
	if err != nil {
		return fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	// Onto the running server: the template changes only the pods to come (OnDelete).
	if err = d.applyLive(ctx, in, pod, internal, tc, oldLimit); err != nil {
		return fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	c := client(pod, internal, tc)
	defer c.Close()
	if in.TLS != nil {
		if err = d.applyTLSFiles(ctx, in, []*corev1.Pod{pod}, []*redis.Client{c}, secret); err != nil {
			return err
		}
	}
	// Its one pod, whatever its label (a turning off of replication cut short).
	if _, err = d.applyService(ctx, in, sts, ptr(false)); err != nil {
		return err
	}
	if err = d.syncSources(ctx, in, pod, secret); err != nil {
		return err
	}
	// Ready: the Service routes to it (and it did not restart meanwhile).
	if err = d.samePods(ctx, in.DatabaseID, []*corev1.Pod{pod}); err != nil {
		return err
	}
	return d.waitEndpoint(ctx, in, c, "")
}

// create makes the StatefulSet with no pod, then its Secret and Service owned by it; the
// caller scales it to one, once they exist. Pods of the database that run without a
// StatefulSet (adoptNodes' change of persistence, cut short) are adopted, as many nodes:
// with fewer, its controller would delete them, and their data.
func (d *Driver) create(ctx context.Context, in clouddb.Instance, img string) (*appsv1.StatefulSet, error) {
	sts := d.statefulSet(in, img)
	n, err := d.orphanedNodes(ctx, in.DatabaseID, maxNodes)
	if err != nil {
		return nil, err
	}
	sts.Spec.Replicas = ptr(n)
	sts, err = d.cfg.Client.AppsV1().StatefulSets(d.ns).Create(ctx, sts, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: creating its statefulset: %w", in.DatabaseID, err)
	}
	d.log.Info("created the statefulset of a database", "database_id", in.DatabaseID, "namespace", d.ns)
	return sts, nil
}

func ptr[T any](v T) *T { return &v }

func ownedBy(sts *appsv1.StatefulSet) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr(true),
	}}
}
