package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	mathrand "math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"clouddb"
	"clouddb/internal/backoff"
	"clouddb/internal/redisconf"
	"clouddb/redisdata"
)

// An OSS Cluster database (Instance.OSSCluster) is a Redis Cluster of the pods of its
// StatefulSet: shard s of S is served by pod s, and with replication by pod S+s as well
// (so that turning replication on only adds pods), each with its share of the memory
// limit. Node i listens, inside its pod, on its own port P(i), which is also the NodePort
// of its own Service (node 0's is the database's Service, on the database's port; the
// others' are the driver's to choose from Config.ClusterPorts, and the Service keeps
// them). So the address a node gives for
// itself serves everyone with one port: clients outside the cluster reach
// NodeAddress:P(i) (each node announces NodeAddress as its hostname, and CLUSTER SLOTS,
// CLUSTER SHARDS and MOVED name hostnames), and the nodes reach each other directly on
// their pod addresses, P(i) for replication and busPort for the cluster bus: no Service
// address, no NAT between nodes. A node's port comes from a file of its own in the
// Secret (<pod name>.conf, included by the server's command line), since the pods of a
// StatefulSet share one template.
//
// A node whose server crashed comes back in the same pod at once (the kubelet), with its
// nodes.conf but, without persistence, empty: still its shard's primary for the cluster.
// Its replica would resync from it and lose every key, so a node never serves
// replication before Ensure says so: replicas log in to their primary as the user
// clusterReplUser, which the config file turns off; Ensure turns it on, on every node,
// only once each shard's primary holds the shard's data, after having a replica that
// holds more than its restarted primary take the shard over (CLUSTER FAILOVER TAKEOVER:
// no vote of the other primaries, so that two shards fail over as well). Until then a
// replicated shard's restarted primary takes no write either (min-replicas-to-write).
// Replicas never fail over on their own (cluster-replica-no-failover): Ensure also has a
// replica take over from a primary whose pod runs no server (lostNode).

// clusterReplUser is the user replicas log in to their primary as (see above): it may
// only replicate.
const clusterReplUser = "clouddb-replication"

// The cluster bus port of every node inside its pod, how long a node may be silent
// before the others mark it failed, and how long Ensure waits for the cluster to agree.
const (
	busPort            = 16379
	clusterNodeTimeout = 2000
	clusterSlots       = 16384
	clusterWait        = 30 * time.Second
)

// The shape of a cluster, on its StatefulSet: its number of shards, and whether it has
// replicas (once it had, its replicas may serve shards: replication stays on).
const (
	annotationShards     = "clouddb.io/shards"
	annotationReplicated = "clouddb.io/replicated"
)

// envPodName is the pod's name in its server's environment: the command line names the
// node's own config file by it.
const envPodName = "CLOUDDB_POD_NAME"

// clusterSettings are the lines of a cluster node's redis.conf, after the others.
func clusterSettings(in clouddb.Instance, internal string) [][]string {
	s := [][]string{
		{"cluster-enabled", "yes"},
		{"cluster-config-file", "nodes.conf"},
		{"cluster-port", strconv.Itoa(busPort)},
		{"cluster-node-timeout", strconv.Itoa(clusterNodeTimeout)},
		// A shard whose primary is down does not stop the others serving their slots.
		{"cluster-require-full-coverage", "no"},
		{"cluster-allow-replica-migration", "no"},
		{"cluster-replica-no-failover", "yes"},
		{"cluster-preferred-endpoint-type", "hostname"},
		{"user", clusterReplUser, "off", "resetkeys", "resetchannels", "-@all", "+psync", "+replconf", "+ping", ">" + internal},
		{"masteruser", clusterReplUser},
	}
	if in.Replication {
		// A primary that restarted (empty without persistence, still serving its slots)
		// takes no write before Ensure has decided its shard: one it took would be lost
		// when its replica, which holds the shard's data, takes over, and a refill larger
		// than the replica's data would win over it. Ensure opens writes (0) with
		// replication (see replicationOn).
		s = append(s, []string{"min-replicas-to-write", "1"})
	}
	return s
}

// nodeConfigKey is the Secret key of the config file of the node of that pod.
func nodeConfigKey(pod string) string { return pod + ".conf" }

// nodeConfig is node i's own config file: its port (TLS only, with TLS), and the host
// clients reach it at (see clusterHosts).
func nodeConfig(port int, withTLS bool, host string) []byte {
	var b []byte
	if withTLS {
		b = appendLine(b, "port", "0")
		b = appendLine(b, "tls-port", strconv.Itoa(port))
	} else {
		b = appendLine(b, "port", strconv.Itoa(port))
	}
	return appendLine(b, "cluster-announce-hostname", host)
}

// clusterHosts are the hosts the cluster's nodes announce to clients, by node: with
// NodePort Services the node address (Config.NodeAddress); with LoadBalancer ones each
// node's own load balancer's address, once every node's Service has one (waitIngress).
// An IPv6 address cannot be one: redis refuses ':' in an announced hostname.
func (d *Driver) clusterHosts(ctx context.Context, in clouddb.Instance) ([]string, error) {
	hosts := make([]string, clusterNodeCount(in))
	if d.serviceType() != corev1.ServiceTypeLoadBalancer {
		for i := range hosts {
			hosts[i] = d.cfg.NodeAddress
		}
		return hosts, nil
	}
	lbs, err := d.waitIngress(ctx, in)
	if err != nil {
		return nil, err
	}
	for i := range hosts {
		name := nodeServiceName(in.DatabaseID, i)
		if hosts[i] = lbs[name]; strings.Contains(hosts[i], ":") {
			return nil, fmt.Errorf("database %d: service %s: its load balancer's address %s is IPv6, which a cluster node cannot announce (a hostname can be): %w",
				in.DatabaseID, name, hosts[i], ErrNotSupported)
		}
	}
	return hosts, nil
}

// clusterNodeCount is the number of nodes (pods) of a cluster instance.
func clusterNodeCount(in clouddb.Instance) int {
	return in.Shards * perShard(in)
}

// shardNodes are the indexes of the nodes of shard s: the one it starts with as its
// primary, and its replica's with replication.
func shardNodes(in clouddb.Instance, s int) []int {
	if in.Replication {
		return []int{s, in.Shards + s}
	}
	return []int{s}
}

func perShard(in clouddb.Instance) int {
	if in.Replication {
		return 2
	}
	return 1
}

// shardInstance is the instance one node runs: its shard's share of the memory limit.
func shardInstance(in clouddb.Instance) clouddb.Instance {
	in.MaxMemoryBytes /= int64(in.Shards)
	return in
}

// slotRange is the range of slots shard s of n serves.
func slotRange(s, n int) (lo, hi int) {
	return s * clusterSlots / n, (s+1)*clusterSlots/n - 1
}

// isCluster reports whether the StatefulSet runs cluster nodes (its container has the
// bus port).
func isCluster(sts *appsv1.StatefulSet) bool {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "bus" }) {
			return true
		}
	}
	return false
}

// clusterStatefulSet is the StatefulSet of a cluster instance: each pod's server reads
// the shared config file, then its node's own (its port), and is started once its bus
// listens (its client port differs from pod to pod; a probe's port cannot).
func (d *Driver) clusterStatefulSet(in clouddb.Instance, img string) *appsv1.StatefulSet {
	n := clusterNodeCount(in)
	sts := d.statefulSet(shardInstance(in), img)
	sts.Spec.Replicas = ptr(int32(n))
	sts.Annotations = map[string]string{annotationShards: strconv.Itoa(in.Shards), annotationReplicated: strconv.FormatBool(in.Replication)}
	spec := &sts.Spec.Template.Spec
	c := &spec.Containers[0]
	c.Command = append([]string{"redis-server", confDir + "/" + confFile, "--include", confDir + "/" + nodeConfigKey("$("+envPodName+")")}, socketArgs()...)
	c.Env = []corev1.EnvVar{{Name: envPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}, probeEnv(in.DatabaseID)}
	c.Ports = []corev1.ContainerPort{{Name: "bus", ContainerPort: busPort}}
	c.StartupProbe = startupProbe(busPort)
	if in.TLS != nil {
		sts.Spec.Template.Annotations = map[string]string{annotationTLS: tlsLive}
	}
	for i := range spec.Volumes {
		if spec.Volumes[i].Name != "config" {
			continue
		}
		if in.TLS != nil {
			// The whole Secret, refreshed as one: the TLS files change (see cluster_tls.go).
			spec.Volumes[i].Secret.Items = nil
			continue
		}
		for j := range n {
			key := nodeConfigKey(nodePodName(in.DatabaseID, j))
			spec.Volumes[i].Secret.Items = append(spec.Volumes[i].Secret.Items, corev1.KeyToPath{Key: key, Path: key})
		}
	}
	return sts
}

// nodeServiceName is the name of node i's Service: node 0's is the database's.
func nodeServiceName(databaseID, i int) string {
	if i == 0 {
		return Name(databaseID)
	}
	return nodePodName(databaseID, i)
}

// applyNodeServices creates or updates each node's Service (see the top of this file)
// and returns the nodes' ports, and whether the database's Service routes to another
// node than node 0 (its pod lost, see lostNode). A new node's port is a free one of
// Config.ClusterPorts: NodePorts are the whole cluster's, so a port another namespace
// holds is found taken only when the Service is made, and the next one is tried.
func (d *Driver) applyNodeServices(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, routed bool) (ports []int, elsewhere bool, err error) {
	id := in.DatabaseID
	have, err := d.databaseServices(ctx, id)
	if err != nil {
		return nil, false, err
	}
	ports = make([]int, clusterNodeCount(in))
	var taken map[int]bool // the namespace's NodePorts, listed once a node needs a port
	for i := range ports {
		var old *corev1.Service
		for k := range have {
			if have[k].Name == nodeServiceName(id, i) {
				old = &have[k]
			}
		}
		port := 0
		if i == 0 {
			port = in.Port
		} else if old != nil {
			port = nodeServicePort(old)
		}
		for tries := 0; ; tries++ {
			if port == 0 {
				if taken == nil {
					var err error
					if taken, err = d.namespaceNodePorts(ctx); err != nil {
						return nil, false, fmt.Errorf("database %d: %w", id, err)
					}
				}
				if port = d.freeClusterPort(taken); port == 0 {
					return nil, false, fmt.Errorf("database %d: no free port left in the cluster nodes' range %d-%d", id, d.cfg.ClusterPorts[0], d.cfg.ClusterPorts[1])
				}
			}
			// The database's Service goes on to another node while node 0's pod is lost
			// (see lostNode).
			routeTo, target := i, port
			if i == 0 && routed && old != nil {
				if k, kport, ok := d.endpointElsewhere(ctx, in, old); ok {
					routeTo, target, elsewhere = k, kport, true
				}
			}
			aerr := d.applyNodeService(ctx, in, sts, i, port, routeTo, target, old, routed)
			if aerr == nil {
				ports[i] = port
				break
			}
			if i == 0 || tries >= 20 || !portTaken(aerr) {
				return nil, false, aerr
			}
			taken[port], port = true, 0
		}
		if taken != nil {
			taken[ports[i]] = true
		}
	}
	return ports, elsewhere, nil
}

// portTaken reports whether a Service was refused for a NodePort another one holds.
func portTaken(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "already allocated")
}

// namespaceNodePorts are the NodePorts of the Services of the driver's namespace.
func (d *Driver) namespaceNodePorts(ctx context.Context) (map[int]bool, error) {
	svcs, err := d.cfg.Client.CoreV1().Services(d.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing services: %w", err)
	}
	out := map[int]bool{}
	for _, s := range svcs.Items {
		for _, p := range s.Spec.Ports {
			if p.NodePort != 0 {
				out[int(p.NodePort)] = true
			}
		}
	}
	return out, nil
}

// freeClusterPort is a port of Config.ClusterPorts not in taken, from a random start so
// that two clouddb instances sharing the range seldom try the same; 0 when none is left.
func (d *Driver) freeClusterPort(taken map[int]bool) int {
	lo, hi := d.cfg.ClusterPorts[0], d.cfg.ClusterPorts[1]
	if lo <= 0 || hi < lo {
		return 0
	}
	n := hi - lo + 1
	start := mathrand.IntN(n)
	for k := range n {
		if p := lo + (start+k)%n; !taken[p] {
			return p
		}
	}
	return 0
}

// applyNodeService creates or updates node i's Service, svc when it has one: port
// redisPort inside the cluster (its DNS name, as every database's), port and NodePort
// the node's own, to the pod of node routeTo on its port target (node i's own, but for
// the database's Service while node 0's pod is lost).
func (d *Driver) applyNodeService(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, i, port, routeTo, target int, svc *corev1.Service, routed bool) error {
	id := in.DatabaseID
	name := nodeServiceName(id, i)
	api := d.cfg.Client.CoreV1().Services(d.ns)
	sel := selector(id)
	sel[appsv1.StatefulSetPodNameLabel] = nodePodName(id, routeTo)
	if !routed {
		sel[LabelRole] = rolePrimary // no cluster node carries it: no pod
	}
	typ := d.serviceType()
	want := corev1.ServicePort{Name: "redis", Protocol: corev1.ProtocolTCP, Port: redisPort, TargetPort: intstr.FromInt(target), NodePort: int32(port)}
	found := svc != nil
	if typ == corev1.ServiceTypeLoadBalancer {
		// On the node's port at its own load balancer's address, as the node announces
		// it. The other nodes' ports also stay NodePorts, which keeps them the
		// namespace's own (see applyNodeServices); node 0's, the database's port, need
		// not be in the NodePort range (see lbNodePort).
		want.Port = int32(port)
		if i == 0 {
			want.NodePort = lbNodePort(in, svc)
		}
	}
	if found {
		svc = svc.DeepCopy()
		if svc.Spec.Type == typ && len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Port == want.Port &&
			svc.Spec.Ports[0].NodePort == want.NodePort && svc.Spec.Ports[0].TargetPort == want.TargetPort &&
			maps.Equal(svc.Spec.Selector, sel) && len(svc.OwnerReferences) == 1 && svc.OwnerReferences[0].UID == sts.UID {
			return nil
		}
	} else {
		svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.ns}}
	}
	svc.Labels, svc.OwnerReferences = labels(id), ownedBy(sts)
	svc.Spec.Type, svc.Spec.Selector, svc.Spec.Ports = typ, sel, []corev1.ServicePort{want}
	write := func() error {
		var err error
		if found {
			_, err = api.Update(ctx, svc, metav1.UpdateOptions{})
		} else {
			_, err = api.Create(ctx, svc, metav1.CreateOptions{})
		}
		return err
	}
	err := write()
	if err != nil && apierrors.IsInvalid(err) && typ == corev1.ServiceTypeLoadBalancer && i == 0 && want.NodePort != 0 {
		svc.Spec.Ports[0].NodePort = 0 // Kubernetes' choice (see lbNodePort)
		err = write()
	}
	if err != nil {
		if apierrors.IsInvalid(err) && !portTaken(err) {
			return fmt.Errorf("database %d: service %s on port %d (a cluster node's port must be a NodePort of the cluster's range: see --db-ports and --k8s-cluster-ports): %w", id, name, port, err)
		}
		return fmt.Errorf("database %d: writing service %s: %w", id, name, err)
	}
	return nil
}

// nodePorts are the ports of the cluster's nodes, as their Services hold them; 0 for a
// node that has none.
func (d *Driver) nodePorts(ctx context.Context, in clouddb.Instance) ([]int, error) {
	svcs, err := d.databaseServices(ctx, in.DatabaseID)
	if err != nil {
		return nil, err
	}
	return nodePortsOf(in, svcs), nil
}

// nodePortsOf are nodePorts of the database's Services svcs.
func nodePortsOf(in clouddb.Instance, svcs []corev1.Service) []int {
	ports := make([]int, clusterNodeCount(in))
	for i := range ports {
		for _, s := range svcs {
			if s.Name != nodeServiceName(in.DatabaseID, i) {
				continue
			}
			ports[i] = nodeServicePort(&s)
			if i == 0 && ports[i] == 0 && routedElsewhere(in.DatabaseID, &s) >= 0 && len(s.Spec.Ports) == 1 {
				// The database's Service, to another node for now: node 0's port is its own.
				ports[i] = int(s.Spec.Ports[0].Port)
				if s.Spec.Type == corev1.ServiceTypeNodePort {
					ports[i] = int(s.Spec.Ports[0].NodePort)
				}
			}
		}
	}
	return ports
}

// routedElsewhere is the node the database's Service svc routes to when that is not node
// 0 (see lostNode), -1 otherwise.
func routedElsewhere(id int, svc *corev1.Service) int {
	pod := svc.Spec.Selector[appsv1.StatefulSetPodNameLabel]
	for k := 1; k < clouddb.MaxShards*2; k++ {
		if pod == nodePodName(id, k) {
			return k
		}
	}
	return -1
}

// endpointElsewhere reports the node, and its port, that the database's Service svc
// routes to while node 0's pod is not Ready (lostNode routed it there); false once node
// 0's is, or when it routes to node 0.
func (d *Driver) endpointElsewhere(ctx context.Context, in clouddb.Instance, svc *corev1.Service) (int, int, bool) {
	k := routedElsewhere(in.DatabaseID, svc)
	if k < 0 || k >= clusterNodeCount(in) || len(svc.Spec.Ports) != 1 {
		return 0, 0, false
	}
	pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(in.DatabaseID, 0), metav1.GetOptions{})
	if err == nil && pod.DeletionTimestamp == nil && podReady(pod) {
		return 0, 0, false
	}
	return k, svc.Spec.Ports[0].TargetPort.IntValue(), true
}

// routeEndpointTo has the database's Service route to node k's pod, on its port: while
// node 0's pod is lost, a client that knows only the database's endpoint reaches the
// cluster through another node, which tells it the slots. Not while the Service routes
// to no pod (a load pending, see cluster_rebuild.go).
func (d *Driver) routeEndpointTo(ctx context.Context, in clouddb.Instance, k, port int) error {
	api := d.cfg.Client.CoreV1().Services(d.ns)
	svc, err := api.Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("database %d: reading its service: %w", in.DatabaseID, err)
	}
	pod := nodePodName(in.DatabaseID, k)
	if svc.Spec.Selector[LabelRole] != "" || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Selector[appsv1.StatefulSetPodNameLabel] == pod && svc.Spec.Ports[0].TargetPort.IntValue() == port {
		return nil
	}
	svc.Spec.Selector[appsv1.StatefulSetPodNameLabel] = pod
	svc.Spec.Ports[0].TargetPort = intstr.FromInt(port)
	if _, err = api.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("database %d: routing its service to pod %s: %w", in.DatabaseID, pod, err)
	}
	d.log.Info("a cluster's endpoint routes to another node while node 0's pod is lost", "database_id", in.DatabaseID, "pod", pod)
	return nil
}

// endpointAway has the database's Service route to a node other than m before a roll
// restarts or replaces m's pod, and waits until the endpoint reaches it: to node 0's
// shard mate when m is node 0 (which handed its shard over first when it served it),
// to node 0 otherwise (where applyNodeServices routed it back once node 0 was Ready, or
// still elsewhere: then back now). A cluster without replicas has no other node of node
// 0's shard: its endpoint waits for the pod, as a new client does.
func (d *Driver) endpointAway(ctx context.Context, in clouddb.Instance, nodes []*clusterMember, m *clusterMember) error {
	if !in.Replication {
		return nil
	}
	to := nodes[0]
	if m.idx == 0 {
		to = nodes[in.Shards]
	}
	if err := d.routeEndpointTo(ctx, in, to.idx, to.port); err != nil {
		return err
	}
	if d.serviceType() == corev1.ServiceTypeLoadBalancer {
		return nil // its address is its own (see waitIngress)
	}
	return d.waitEndpointAt(ctx, in, in.Port, to.c, "")
}

// nodeServicePort is the port of the node a Service of applyNodeService routes to, 0
// for a Service of another shape: a NodePort Service's NodePort, a LoadBalancer one's
// port, the node's port either way.
func nodeServicePort(svc *corev1.Service) int {
	if len(svc.Spec.Ports) != 1 {
		return 0
	}
	p := svc.Spec.Ports[0]
	switch t := p.TargetPort.IntValue(); {
	case svc.Spec.Type == corev1.ServiceTypeNodePort && int(p.NodePort) == t,
		svc.Spec.Type == corev1.ServiceTypeLoadBalancer && int(p.Port) == t:
		return t
	}
	return 0
}

// nodeClient opens a connection to a cluster node's server as clouddb's own user, of
// the database's Secret: over TLS, with clouddb's client certificate, to a pod that
// serves it.
func (d *Driver) nodeClient(pod *corev1.Pod, port int, secret *corev1.Secret) (*redis.Client, error) {
	tc, err := d.podTLS(pod, secret)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	return clientAt(pod, port, string(secret.Data[keyInternal]), tc), nil
}

// ensureCluster is Ensure of an OSS Cluster instance; again when a node's container
// restarted while it was being configured (its pod's status had not shown the crash
// yet): the next pass finds it as it now runs.
func (d *Driver) ensureCluster(ctx context.Context, in clouddb.Instance, img string) error {
	for restarted, rolled := 0, 0; ; {
		err := d.ensureClusterOnce(ctx, in, img)
		switch {
		case errors.Is(err, errNodeReplaced) && rolled < clusterNodeCount(in):
			rolled++ // a node restarted on a new image (see version.go)
		case errors.Is(err, errNodeRestarted) && restarted < 2:
			restarted++
			d.log.Info("a node of a cluster restarted while Ensure configured it: once more", "database_id", in.DatabaseID, "error", err)
		default:
			return err
		}
	}
}

// createCluster creates the StatefulSet of a cluster instance with that many pods: none
// for a new one (its pods start once the Services and the Secret they read are), all of
// them for one that adopts running pods.
func (d *Driver) createCluster(ctx context.Context, in clouddb.Instance, img string, pods int) (*appsv1.StatefulSet, error) {
	want := d.clusterStatefulSet(in, img)
	want.Spec.Replicas = ptr(int32(pods))
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: creating its statefulset: %w", in.DatabaseID, err)
	}
	d.log.Info("created the statefulset of a database", "database_id", in.DatabaseID, "namespace", d.ns, "nodes", clusterNodeCount(in), "pods", pods)
	return sts, nil
}

func (d *Driver) ensureClusterOnce(ctx context.Context, in clouddb.Instance, img string) error {
	id := in.DatabaseID
	shardIn := shardInstance(in)
	n := clusterNodeCount(in)
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Made with no pod, the pods start once the Services and the Secret they read
		// are; or with the pods that run, orphaned by a replacement that did not end
		// (cluster_rebuild.go), so that it does not delete them.
		pods, oerr := d.orphanedNodes(ctx, id, n)
		if oerr != nil {
			return oerr
		}
		if pods == 0 {
			// Data saved for new nodes (a rebuild cut short before its old claims went):
			// claims of before would give the new nodes old identities.
			if pending, perr := d.dataPending(ctx, id); perr != nil {
				return perr
			} else if pending {
				if err = d.dropStaleClaims(ctx, id); err != nil {
					return err
				}
			}
		}
		if sts, err = d.createCluster(ctx, in, img, int(pods)); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("database %d: %w", id, err)
	case !isCluster(sts):
		return fmt.Errorf("database %d: turning OSS Cluster on for a running database: %w", id, ErrNotSupported)
	case sts.Annotations[annotationShards] != strconv.Itoa(in.Shards):
		return fmt.Errorf("database %d: changing the number of shards of a cluster (%s, %d wanted): %w",
			id, sts.Annotations[annotationShards], in.Shards, ErrNotSupported)
	case sts.Annotations[annotationReplicated] == "true" && !in.Replication:
		// Its replicas may serve shards since a failover; as driver/local, not built.
		return fmt.Errorf("database %d: turning replication off on a cluster: %w", id, ErrNotSupported)
	}
	rebuild := hasClaim(sts) != persistent(in) || clusterTLS(sts) != (in.TLS != nil)
	if !rebuild && !clusterRollable(in) {
		// Its nodes cannot restart on the new version with their data (version.go).
		if rebuild, err = d.otherVersionRuns(ctx, in, img); err != nil {
			return err
		}
	}
	if rebuild {
		// A volume claim template is immutable, a cluster cannot mix plain and TLS nodes,
		// and nodes without a volume or a replica restart empty: a new StatefulSet
		// (cluster_rebuild.go).
		if sts, err = d.rebuildCluster(ctx, in, sts, img); err != nil {
			return err
		}
	}
	if sts, err = d.makeLostPods(ctx, in, sts); err != nil {
		return err
	}
	pending, err := d.dataPending(ctx, id)
	if err != nil {
		return err
	}
	// Data that waits for the new nodes: no client reaches them before it is in.
	ports, elsewhere, err := d.applyNodeServices(ctx, in, sts, !pending)
	if err != nil {
		return err
	}
	// Before the Secret: the nodes' config files, and a TLS cluster's certificate, name
	// these hosts.
	hosts, err := d.clusterHosts(ctx, in)
	if err != nil {
		return err
	}
	if err = d.applyDisruptionBudget(ctx, in, sts); err != nil {
		return err
	}
	nodeConfs := map[string][]byte{}
	for i, port := range ports {
		nodeConfs[nodeConfigKey(nodePodName(id, i))] = nodeConfig(port, in.TLS != nil, hosts[i])
	}
	secret, err := d.applySecretWith(ctx, shardIn, sts, nodeConfs)
	if err != nil {
		return err
	}
	oldLimit := containerMemory(sts)
	want := d.clusterStatefulSet(in, img)
	if err = d.updateStatefulSet(ctx, sts, func(sts *appsv1.StatefulSet) bool {
		if sts.Spec.Replicas != nil && int(*sts.Spec.Replicas) == n && templateEqual(sts, want) &&
			maps.Equal(sts.Annotations, want.Annotations) {
			return false
		}
		// Replication turned on adds pods S to 2S-1, each its shard's replica.
		sts.Spec.Replicas = ptr(int32(n))
		sts.Spec.Template = want.Spec.Template
		sts.Annotations = want.Annotations
		return true
	}); err != nil {
		return fmt.Errorf("database %d: updating its statefulset: %w", id, err)
	}
	if err = d.replaceUnscheduled(ctx, id, want); err != nil {
		return err
	}
	nodes := make([]*clusterMember, n)
	for i := range n {
		m, rerr := d.readClusterNode(ctx, id, i, ports[i], secret, answerTimeout)
		if errors.Is(rerr, clouddb.ErrServerStarting) || noAnswer(rerr) && ctx.Err() == nil {
			if lerr := d.lostNode(ctx, in, i, ports, secret, rerr); lerr != nil {
				return lerr
			}
			m, rerr = d.readClusterNode(ctx, id, i, ports[i], secret, d.cfg.StartTimeout)
		}
		if rerr != nil {
			return rerr
		}
		defer m.c.Close()
		nodes[i] = m
	}
	for _, m := range nodes {
		if err = d.applyLiveTo(ctx, shardIn, m.pod, m.c, oldLimit); err != nil {
			return fmt.Errorf("database %d: pod %s: %w", id, m.pod.Name, err)
		}
		// The node's address for the other nodes: its pod's (not persisted by redis: set
		// again after each start of the server).
		if err = m.c.ConfigSet(ctx, "cluster-announce-ip", m.pod.Status.PodIP).Err(); err != nil {
			return fmt.Errorf("database %d: pod %s: CONFIG SET cluster-announce-ip: %w", id, m.pod.Name, err)
		}
		// The host clients reach it at, as now configured: its file is read only at the
		// server's start, and a changed NodeAddress or load balancer restarts no pod.
		if err = m.c.ConfigSet(ctx, "cluster-announce-hostname", hosts[m.idx]).Err(); err != nil {
			return fmt.Errorf("database %d: pod %s: CONFIG SET cluster-announce-hostname: %w", id, m.pod.Name, err)
		}
	}
	if in.TLS != nil {
		pods, clients := make([]*corev1.Pod, n), make([]*redis.Client, n)
		for i, m := range nodes {
			pods[i], clients[i] = m.pod, m.c
		}
		if err = d.applyTLSFiles(ctx, in, pods, clients, secret); err != nil {
			return err
		}
	}
	if err = d.clusterFailover(ctx, in, nodes); err != nil {
		return err
	}
	if err = d.formCluster(ctx, in, nodes); err != nil {
		return err
	}
	pods := make([]*corev1.Pod, n)
	for i, m := range nodes {
		pods[i] = m.pod
	}
	if err = d.samePods(ctx, id, pods); err != nil {
		return err
	}
	if loaded, lerr := d.loadPendingCluster(ctx, in, secret); lerr != nil {
		return lerr
	} else if loaded {
		if _, _, err = d.applyNodeServices(ctx, in, sts, true); err != nil {
			return err
		}
	}
	// Each node's part as formCluster made it (a new node now replicates its shard's
	// primary), for the replacements and rolls that hand a shard over.
	for _, m := range nodes {
		if err = m.read(ctx); err != nil {
			return fmt.Errorf("database %d: pod %s: %w", id, m.pod.Name, err)
		}
	}
	if err = d.renewClusterNodes(ctx, in, sts, nodes); err != nil {
		return err
	}
	if err = d.rollClusterNodes(ctx, in, nodes, img); err != nil {
		return err
	}
	// Node 0 is back: the database's Service routes to it again. (A pass that routed it
	// elsewhere since, lostNode or a roll's endpointAway, ended before this.)
	if elsewhere {
		if err = d.routeEndpointTo(ctx, in, 0, ports[0]); err != nil {
			return err
		}
	}
	// Every node's own NodePort (node 0's is the database's): clients follow CLUSTER
	// SLOTS there, and kube-proxy routes a node a moment after its pod is Ready again. A
	// load balancer's address is its own (clouddb may not reach it): waited for above.
	for _, m := range nodes {
		if d.serviceType() == corev1.ServiceTypeLoadBalancer {
			break
		}
		if err = d.waitEndpointAt(ctx, in, m.port, m.c, ""); err != nil {
			return err
		}
	}
	return nil
}

// readClusterNode waits until node i's pod is ready and reads its part in the cluster.
func (d *Driver) readClusterNode(ctx context.Context, databaseID, i, port int, secret *corev1.Secret, within time.Duration) (*clusterMember, error) {
	deadline := time.Now().Add(within)
	for {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		pod, err := d.waitStarted(wctx, databaseID, i)
		cancel()
		if err != nil {
			return nil, err
		}
		c, err := d.nodeClient(pod, port, secret)
		if err != nil {
			return nil, fmt.Errorf("database %d: %w", databaseID, err)
		}
		m := &clusterMember{idx: i, pod: pod, port: port, c: c}
		if err = ping(ctx, m.c); err == nil {
			if err = m.read(ctx); err == nil {
				return m, nil
			}
		}
		m.c.Close()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("database %d: pod %s: %w", databaseID, pod.Name, &serverError{err})
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lostNode is what Ensure does when node i does not answer within answerTimeout (err)
// and its pod runs no server (pending, its node lost, being deleted), or runs one that
// answers nothing at all (hung: no reply, not even BUSY or LOADING, as the local driver
// takes a silent server): when its shard's other node serves the shard, or is a replica
// with data whose link to its primary is down (for a hung primary, whatever its link)
// and so takes the shard over (CLUSTER FAILOVER TAKEOVER: replicas never fail over on
// their own), the shard is served and Ensure returns ErrServerStarting at once, to be
// tried again until node i is back (it then rejoins as a replica). A hung node's pod is
// deleted first (fence). Otherwise it returns nil: Ensure waits for node i the rest of
// StartTimeout, as for a cluster being made.
func (d *Driver) lostNode(ctx context.Context, in clouddb.Instance, i int, ports []int, secret *corev1.Secret, err error) error {
	if !in.Replication {
		return nil
	}
	// A server that runs and answers LOADING, or has not started, is starting or loading
	// its data (a volume's AOF): waited for, as its replica may lack its last writes. A
	// pod that does not run its server is lost, and one whose server answers nothing hung.
	pod, gerr := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(in.DatabaseID, i), metav1.GetOptions{})
	hung := false
	if gerr == nil && pod.DeletionTimestamp == nil && running(pod) {
		if !noAnswer(err) || !podStarted(pod) {
			return nil
		}
		hung = true
	}
	s := i % in.Shards
	j := shardNodes(in, s)[0]
	if j == i {
		j = shardNodes(in, s)[1]
	}
	other, oerr := d.readClusterNode(ctx, in.DatabaseID, j, ports[j], secret, time.Second)
	if oerr != nil {
		return nil
	}
	defer other.c.Close()
	switch {
	case other.master && other.slots:
	case !other.master && (!other.linkUp || hung) && (other.keys > 0 || other.linkUp):
		d.log.Warn("a shard's primary does not answer: its replica takes over", "database_id", in.DatabaseID,
			"lost", nodePodName(in.DatabaseID, i), "hung", hung, "replica", other.pod.Name, "replica_keys", other.keys, "error", err)
		if hung {
			// Its server goes first: silent (stopped, or busy with a command that does not
			// end), it would otherwise answer its clients afterwards, writes its shard no
			// longer keeps among them.
			if ferr := d.fence(ctx, in, pod); ferr != nil {
				return ferr
			}
		}
		if terr := d.takeOver(ctx, in, other, []*clusterMember{other}); terr != nil {
			return terr
		}
		// A node just promoted serves once the cluster is ok for it (redis waits the node
		// timeout before a master that was in a minority serves again).
		if werr := d.waitCluster(ctx, in, "the new primary to serve", func() (bool, error) {
			info, ierr := other.c.ClusterInfo(ctx).Result()
			return ierr == nil && infoField(info, "cluster_state") == "ok", ierr
		}); werr != nil {
			return werr
		}
	default:
		return nil
	}
	// Served: its Service routes to it once its pod is Ready (probe.go).
	if _, werr := d.waitServing(ctx, in.DatabaseID, other.idx); werr != nil {
		return werr
	}
	if i == 0 {
		if rerr := d.routeEndpointTo(ctx, in, other.idx, ports[other.idx]); rerr != nil {
			return rerr
		}
	}
	return fmt.Errorf("database %d: node %s is not back (%v); its shard is served by %s: %w",
		in.DatabaseID, nodePodName(in.DatabaseID, i), err, other.pod.Name, clouddb.ErrServerStarting)
}

// fence deletes the pod of a node whose server does not answer (its StatefulSet makes it
// again) and waits until its container is gone: killed, it acknowledges nothing more.
func (d *Driver) fence(ctx context.Context, in clouddb.Instance, pod *corev1.Pod) error {
	d.log.Warn("deleting the pod of a node whose server does not answer", "database_id", in.DatabaseID, "pod", pod.Name)
	// A second: a server stopped or busy in a command does not act on SIGTERM before
	// the kubelet's SIGKILL.
	return d.deletePod(ctx, in.DatabaseID, pod, ptr(int64(1)))
}

// serverError is what a node's server did when clouddb asked it (its pod started): an
// answer it refused with, or no answer.
type serverError struct{ err error }

func (e *serverError) Error() string { return e.err.Error() }
func (e *serverError) Unwrap() error { return e.err }

// noAnswer reports whether err is a server's silence: its pod started, a read or dial of
// the server that timed out; not a reply (BUSY, LOADING), a refused connection, nor an
// error of the Kubernetes API.
func noAnswer(err error) bool {
	var se *serverError
	if !errors.As(err, &se) {
		return false
	}
	var ne net.Error
	return errors.As(se.err, &ne) && ne.Timeout()
}

// clusterMember is what Ensure knows of a node.
type clusterMember struct {
	idx  int
	pod  *corev1.Pod
	port int
	c    *redis.Client
	// Read by read.
	id       string
	master   bool
	slots    bool // it serves slots
	replOn   bool // clusterReplUser is on: it has not restarted since an Ensure
	linkUp   bool
	masterID string
	keys     int64
	runID    string // the server's, to tell it from one started since
}

// addr is the node's address for the other nodes, as CLUSTER NODES shows it.
func (m *clusterMember) addr() string {
	return net.JoinHostPort(m.pod.Status.PodIP, strconv.Itoa(m.port)) + "@" + strconv.Itoa(busPort)
}

// read reads the node's part in the cluster.
func (m *clusterMember) read(ctx context.Context) error {
	nodes, err := clusterNodesOf(ctx, m.c)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.has("myself") {
			m.id, m.master, m.slots, m.masterID = n.id, n.has("master"), len(n.slots) > 0, n.master
		}
	}
	flags, err := m.c.Do(ctx, "acl", "getuser", clusterReplUser).Result()
	if err != nil {
		return fmt.Errorf("ACL GETUSER %s: %w", clusterReplUser, err)
	}
	m.replOn = userOn(flags)
	info, err := m.c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("INFO replication: %w", err)
	}
	m.linkUp = infoField(info, "master_link_status") == "up"
	if info, err = m.c.Info(ctx, "server").Result(); err != nil {
		return fmt.Errorf("INFO server: %w", err)
	}
	m.runID = infoField(info, "run_id")
	if m.keys, err = m.c.DBSize(ctx).Result(); err != nil {
		return fmt.Errorf("DBSIZE: %w", err)
	}
	return nil
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	flags            []string
	slots            []string
}

func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

// addrIs reports whether a CLUSTER NODES address (ip:port@bus, then ",hostname" when the
// node has one) is want.
func addrIs(addr, want string) bool {
	return addr == want || strings.HasPrefix(addr, want+",")
}

func clusterNodesOf(ctx context.Context, c *redis.Client) ([]clusterNode, error) {
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES: %w", err)
	}
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		out = append(out, clusterNode{id: f[0], addr: f[1], flags: strings.Split(f[2], ","), master: f[3], slots: f[8:]})
	}
	return out, nil
}

// clusterFailover has, in each shard whose serving node restarted since the last Ensure
// (clusterReplUser off) with fewer keys than its replica, or is gone, the replica take
// the shard over.
func (d *Driver) clusterFailover(ctx context.Context, in clouddb.Instance, nodes []*clusterMember) error {
	if !in.Replication {
		return nil
	}
	for s := range in.Shards {
		a, b := nodes[s], nodes[in.Shards+s]
		owner, other := a, b
		if b.master && b.slots {
			owner, other = b, a
		}
		if !owner.master || !owner.slots {
			// No node serves the shard: a new shard, or one whose serving node is gone
			// (a node of a new pod joins as a new node, empty, wherever the gone one was:
			// at S+s too, after a failover). The node that had followed it takes over,
			// before formCluster forgets the gone node and would give its slots to the
			// empty one.
			for _, m := range []*clusterMember{a, b} {
				if !m.master && m.keys > 0 {
					if err := d.takeOver(ctx, in, m, nodes); err != nil {
						return err
					}
					break
				}
			}
			continue
		}
		if other.master {
			continue // a new node, which joins as the replica
		}
		if owner.replOn || other.keys <= owner.keys {
			continue
		}
		d.log.Warn("a shard's primary restarted with less data than its replica: the replica takes over",
			"database_id", in.DatabaseID, "pod", owner.pod.Name, "keys", owner.keys, "replica_keys", other.keys)
		if err := d.takeOver(ctx, in, other, nodes); err != nil {
			return err
		}
	}
	return nil
}

// takeOver makes the replica m its shard's primary and waits until every node knows it.
func (d *Driver) takeOver(ctx context.Context, in clouddb.Instance, m *clusterMember, nodes []*clusterMember) error {
	if err := m.c.Do(ctx, "cluster", "failover", "takeover").Err(); err != nil {
		return fmt.Errorf("database %d: pod %s: CLUSTER FAILOVER TAKEOVER: %w", in.DatabaseID, m.pod.Name, err)
	}
	if err := d.waitCluster(ctx, in, "every node to know the new primary", func() (bool, error) {
		for _, x := range nodes {
			ns, err := clusterNodesOf(ctx, x.c)
			if err != nil {
				return false, err
			}
			// A node that does not know m (a new pod's, not met yet) learns it by gossip
			// once formCluster has it meet the others.
			i := slices.IndexFunc(ns, func(n clusterNode) bool { return n.id == m.id })
			if i >= 0 && (!ns[i].has("master") || len(ns[i].slots) == 0) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	m.master, m.slots = true, true
	d.log.Warn("a shard's replica took over", "database_id", in.DatabaseID, "pod", m.pod.Name)
	return nil
}

// formCluster makes the nodes one cluster, as far as they are not one yet: node 0 meets
// every node it does not know, each shard's primary gets the slots of its range no node
// serves, each shard's other node replicates the primary, the primaries then serve
// replication (clusterReplUser on) and it waits until every node sees every slot served
// and each replica's link is up.
func (d *Driver) formCluster(ctx context.Context, in clouddb.Instance, nodes []*clusterMember) error {
	id := in.DatabaseID
	for _, m := range nodes {
		// A new node gets a config epoch of its own before it meets the others, so that
		// no two primaries start with the same one.
		info, err := m.c.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("database %d: pod %s: CLUSTER INFO: %w", id, m.pod.Name, err)
		}
		if infoField(info, "cluster_known_nodes") == "1" && infoField(info, "cluster_current_epoch") == "0" {
			if err = m.c.Do(ctx, "cluster", "set-config-epoch", m.idx+1).Err(); err != nil {
				return fmt.Errorf("database %d: pod %s: CLUSTER SET-CONFIG-EPOCH: %w", id, m.pod.Name, err)
			}
		}
	}
	members := map[string]bool{}
	for _, m := range nodes {
		members[m.id] = true
	}
	// Nodes of pods that are gone (a new pod without its volume is a new node) are
	// forgotten, by every node that knows them.
	for _, x := range nodes {
		view, err := clusterNodesOf(ctx, x.c)
		if err != nil {
			return fmt.Errorf("database %d: pod %s: %w", id, x.pod.Name, err)
		}
		for _, k := range view {
			if members[k.id] || k.has("handshake") {
				continue
			}
			if ferr := x.c.Do(ctx, "cluster", "forget", k.id).Err(); ferr != nil {
				d.log.Warn("CLUSTER FORGET of a gone node failed", "database_id", id, "pod", x.pod.Name, "node", k.id, "error", ferr)
			}
		}
	}
	err := d.waitCluster(ctx, in, "every node to know the others at their addresses", func() (bool, error) {
		done := true
		for _, x := range nodes {
			view, nerr := clusterNodesOf(ctx, x.c)
			if nerr != nil {
				return false, nerr
			}
			for _, m := range nodes {
				i := slices.IndexFunc(view, func(n clusterNode) bool { return n.id == m.id })
				if i >= 0 && addrIs(view[i].addr, m.addr()) && !view[i].has("handshake") && !view[i].has("noaddr") {
					continue
				}
				done = false
				// Node 0 introduces a node the cluster does not know (gossip tells the
				// others); a node that knows another at an address it no longer has (a
				// new pod) meets it where it is now, which updates the address. Again
				// after a handshake that failed: one lasts only the node timeout.
				if i < 0 && x != nodes[0] || slices.ContainsFunc(view, func(n clusterNode) bool { return n.has("handshake") && addrIs(n.addr, m.addr()) }) {
					continue
				}
				// Still m at that address: a pod deleted meanwhile leaves its address to
				// another pod, maybe another tenant's cluster node, whose bus port is the
				// same (its client port, a NodePort, is not: no other node answers there).
				if myID, ierr := m.c.Do(ctx, "cluster", "myid").Text(); ierr != nil || myID != m.id {
					return false, fmt.Errorf("pod %s: the node read is no longer at %s (%v)", m.pod.Name, m.addr(), ierr)
				}
				if merr := x.c.Do(ctx, "cluster", "meet", m.pod.Status.PodIP, m.port, busPort).Err(); merr != nil {
					return false, fmt.Errorf("pod %s: CLUSTER MEET pod %s: %w", x.pod.Name, m.pod.Name, merr)
				}
			}
		}
		return done, nil
	})
	if err != nil {
		return err
	}
	if err = d.assignSlots(ctx, in, nodes); err != nil {
		return err
	}
	if in.Replication {
		if err = d.pairReplicas(ctx, in, nodes); err != nil {
			return err
		}
	}
	if err = d.replicationOn(ctx, in, nodes); err != nil {
		return err
	}
	return d.waitCluster(ctx, in, "every node to see every slot served, every replica in sync", func() (bool, error) {
		for _, m := range nodes {
			info, ierr := m.c.ClusterInfo(ctx).Result()
			if ierr != nil {
				return false, ierr
			}
			if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_ok") != strconv.Itoa(clusterSlots) {
				return false, nil
			}
			repl, ierr := m.c.Info(ctx, "replication").Result()
			if ierr != nil {
				return false, ierr
			}
			if infoField(repl, "role") != "master" && infoField(repl, "master_link_status") != "up" {
				return false, nil
			}
		}
		return true, nil
	})
}

// replicationOn turns clusterReplUser on, on every node, the last step of Ensure's
// decisions: only on the server Ensure read. A node's client reconnects by itself, so a
// server that restarted since (without persistence: empty, still its shard's primary)
// would otherwise be turned on, and its replica, which had refused to follow it, would
// resync from it and lose every key. The run_id is read in the same transaction as the
// ACL SETUSER; a restarted server is turned off again at once and Ensure starts over.
func (d *Driver) replicationOn(ctx context.Context, in clouddb.Instance, nodes []*clusterMember) error {
	for _, m := range nodes {
		var info *redis.StringCmd
		_, err := m.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			info = p.Info(ctx, "server")
			p.Do(ctx, "acl", "setuser", clusterReplUser, "on")
			// Writes open (also on a node whose writes a save given up left refused,
			// see fenceWrites).
			p.ConfigSet(ctx, "min-replicas-to-write", "0")
			return nil
		})
		if err != nil {
			return fmt.Errorf("database %d: pod %s: ACL SETUSER %s on: %w", in.DatabaseID, m.pod.Name, clusterReplUser, err)
		}
		if runID := infoField(info.Val(), "run_id"); runID != m.runID {
			if _, err = m.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "acl", "setuser", clusterReplUser, "off")
				if in.Replication {
					p.ConfigSet(ctx, "min-replicas-to-write", "1")
				}
				return nil
			}); err != nil {
				return fmt.Errorf("database %d: pod %s: ACL SETUSER %s off: %w", in.DatabaseID, m.pod.Name, clusterReplUser, err)
			}
			return fmt.Errorf("database %d: pod %s (run_id %s, read as %s): %w: %w", in.DatabaseID, m.pod.Name, runID, m.runID, errNodeRestarted, clouddb.ErrServerStarting)
		}
	}
	return nil
}

// assignSlots gives each shard's primary the slots of its range that no node serves.
func (d *Driver) assignSlots(ctx context.Context, in clouddb.Instance, nodes []*clusterMember) error {
	shards, err := nodes[0].c.ClusterShards(ctx).Result()
	if err != nil {
		return fmt.Errorf("database %d: CLUSTER SHARDS: %w", in.DatabaseID, err)
	}
	var owned [clusterSlots]bool
	for _, sh := range shards {
		for _, r := range sh.Slots {
			for i := max(int(r.Start), 0); i <= min(int(r.End), clusterSlots-1); i++ {
				owned[i] = true
			}
		}
	}
	for s := range in.Shards {
		m := nodes[s]
		if in.Replication && !m.master && nodes[in.Shards+s].master {
			m = nodes[in.Shards+s] // the shard failed over
		}
		lo, hi := slotRange(s, in.Shards)
		for i := lo; i <= hi; {
			if owned[i] {
				i++
				continue
			}
			j := i
			for j < hi && !owned[j+1] {
				j++
			}
			if err := m.c.Do(ctx, "cluster", "addslotsrange", i, j).Err(); err != nil {
				return fmt.Errorf("database %d: shard %d: CLUSTER ADDSLOTSRANGE %d %d: %w", in.DatabaseID, s, i, j, err)
			}
			i = j + 1
		}
	}
	return nil
}

// pairReplicas makes the node of each shard that serves no slots replicate the one that
// does.
func (d *Driver) pairReplicas(ctx context.Context, in clouddb.Instance, nodes []*clusterMember) error {
	return d.waitCluster(ctx, in, "each shard's replica to follow its primary", func() (bool, error) {
		ns, err := clusterNodesOf(ctx, nodes[0].c)
		if err != nil {
			return false, err
		}
		byID := map[string]clusterNode{}
		for _, n := range ns {
			byID[n.id] = n
		}
		done := true
		for s := range in.Shards {
			p, r := nodes[s], nodes[in.Shards+s]
			if len(byID[r.id].slots) > 0 {
				p, r = r, p
			}
			if byID[r.id].master == p.id && byID[r.id].has("slave") {
				continue
			}
			done = false
			if rerr := r.c.Do(ctx, "cluster", "replicate", p.id).Err(); rerr != nil {
				// The replica may not know the primary as one yet (gossip): again.
				d.log.Debug("CLUSTER REPLICATE not taken yet", "database_id", in.DatabaseID, "pod", r.pod.Name, "error", rerr)
			}
		}
		return done, nil
	})
}

// waitCluster polls cond until it holds, up to clusterWait; then the error wraps
// ErrServerStarting.
func (d *Driver) waitCluster(ctx context.Context, in clouddb.Instance, what string, cond func() (bool, error)) error {
	if err := backoff.Until(ctx, clusterWait, cond); err != nil {
		return fmt.Errorf("database %d: waiting for %s: %v: %w", in.DatabaseID, what, err, clouddb.ErrServerStarting)
	}
	return nil
}

// runningCluster is Running of a cluster instance: its StatefulSet runs its nodes with
// their share of the memory (serving TLS or not, as the instance), its Secret and
// Services are as Ensure writes them (with TLS: certificates that need no renewal yet,
// the instance's client certificates), and every node is Ready, announces its addresses,
// serves replication, runs with the instance's settings, users and TLS files and sees the
// cluster ok with every slot served; with replication, each replica's link is up.
func (d *Driver) runningCluster(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet) (bool, error) {
	id := in.DatabaseID
	shardIn := shardInstance(in)
	n := clusterNodeCount(in)
	img, err := d.image(in)
	if err != nil || !isCluster(sts) || sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != n || containerMemory(sts) != memoryLimit(shardIn.MaxMemoryBytes) ||
		clusterTLS(sts) != (in.TLS != nil) || templateImage(sts) != img || hasClaim(sts) != persistent(in) {
		return false, nil
	}
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("database %d: reading its secret: %w", id, err)
	}
	internal := string(secret.Data[keyInternal])
	if conf, cerr := clusterConfig(shardIn, internal, secret.Data); cerr != nil || string(secret.Data[keyConfig]) != string(conf) ||
		string(secret.Data[keyPrimaryHost]) != "no" || secret.Annotations[annotationPendingLoad] != "" {
		return false, nil
	}
	svcs, err := d.databaseServices(ctx, id)
	if err != nil {
		return false, err
	}
	ports, hosts := nodePortsOf(in, svcs), make([]string, n)
	if d.serviceType() == corev1.ServiceTypeLoadBalancer {
		// As they are now (secretTLSUsable's certificate names them too).
		lbs := d.rememberIngress(id, svcs).hosts
		for i := range hosts {
			if hosts[i] = lbs[nodeServiceName(id, i)]; hosts[i] == "" {
				return false, nil // a node without its load balancer's address yet
			}
		}
	} else {
		for i := range hosts {
			hosts[i] = d.cfg.NodeAddress
		}
	}
	if in.TLS != nil && !d.secretTLSUsable(ctx, in, secret) {
		return false, nil
	}
	if ports[0] != in.Port {
		return false, nil
	}
	for i := range svcs {
		if svcs[i].Name == Name(id) && routedElsewhere(id, &svcs[i]) >= 0 {
			return false, nil // to another node while node 0's pod is lost
		}
	}
	for i := range n {
		if ports[i] == 0 || string(secret.Data[nodeConfigKey(nodePodName(id, i))]) != string(nodeConfig(ports[i], in.TLS != nil, hosts[i])) {
			return false, nil
		}
		pod, err := d.servingPod(ctx, id, i, shardIn.MaxMemoryBytes)
		if pod == nil || err != nil {
			return false, err
		}
		if (pod.Annotations[annotationTLS] != "") != (in.TLS != nil) {
			return false, nil
		}
		// On the image of its version, when the cluster can restart on one (version.go);
		// replicated, on the volume and probe of the template (cluster_rebuild.go).
		if podImage(&pod.Spec) != img && clusterRollable(in) ||
			in.Replication && (hasVolumeClaim(pod) != persistent(in) || probeOfBefore(pod)) {
			return false, nil
		}
		why, err := d.nodeRunningCluster(ctx, shardIn, pod, ports[i], hosts[i], secret)
		if err != nil {
			d.log.Warn("a database's pod is ready but its state cannot be read", "database_id", id, "pod", pod.Name, "error", err)
			return false, nil
		}
		if why != "" {
			d.log.Info("a cluster node does not play its part", "database_id", id, "pod", pod.Name, "why", why)
			return false, nil
		}
	}
	return true, nil
}

// userOn reports whether an ACL GETUSER reply has the flag on.
func userOn(reply any) bool {
	fields, _ := aclFields(reply)
	flags, _ := fields["flags"].([]any)
	return slices.ContainsFunc(flags, func(f any) bool { return fmt.Sprint(f) == "on" })
}

// nodeRunningCluster reports whether the node of pod plays its part: it serves
// replication (Ensure turned clusterReplUser on since its start), announces its pod's
// address and host, follows its primary if a replica, sees every slot served by the cluster of
// its nodes, and runs with the instance's settings and users, and TLS files of the Secret.
func (d *Driver) nodeRunningCluster(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, port int, host string, secret *corev1.Secret) (string, error) {
	c, err := d.nodeClient(pod, port, secret)
	if err != nil {
		return "", err
	}
	defer c.Close()
	m := &clusterMember{pod: pod, port: port, c: c}
	if err = ping(ctx, c); err != nil {
		return "", err
	}
	if err = m.read(ctx); err != nil {
		return "", err
	}
	switch {
	case !m.replOn:
		return "its server started since the last Ensure (it serves no replication yet)", nil
	case !m.master && !m.linkUp:
		return "a replica whose link to its primary is down", nil
	}
	got, err := c.ConfigGet(ctx, "cluster-announce-ip").Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET cluster-announce-ip: %w", err)
	}
	if got["cluster-announce-ip"] != pod.Status.PodIP {
		return "it does not announce its pod's address", nil
	}
	if got, err = c.ConfigGet(ctx, "cluster-announce-hostname").Result(); err != nil {
		return "", fmt.Errorf("CONFIG GET cluster-announce-hostname: %w", err)
	}
	if got["cluster-announce-hostname"] != host {
		return "it does not announce the host clients reach it at", nil
	}
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("CLUSTER INFO: %w", err)
	}
	if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_ok") != strconv.Itoa(clusterSlots) ||
		infoField(info, "cluster_known_nodes") != strconv.Itoa(clusterNodeCount(in)) {
		return fmt.Sprintf("it sees the cluster %s, %s slots served, %s nodes", infoField(info, "cluster_state"),
			infoField(info, "cluster_slots_ok"), infoField(info, "cluster_known_nodes")), nil
	}
	if in.TLS != nil {
		served, serr := tlsServed(ctx, c, tlsFileSettings(in, secret.Data))
		if serr != nil {
			return "", serr
		}
		if !served {
			return "it does not serve its secret's TLS files", nil
		}
	}
	ok, err := liveAsAsked(ctx, c, in)
	if err != nil || ok {
		return "", err
	}
	return "its settings or users are not the instance's", nil
}

// shardPrimary is the primary of shard s of a cluster as clouddb's own user, on its pod's
// address, with the shard's slots.
func (d *Driver) shardPrimary(ctx context.Context, in clouddb.Instance, s int) (redisdata.Shard, error) {
	id := in.DatabaseID
	if s < 0 || s >= in.Shards {
		return redisdata.Shard{}, fmt.Errorf("database %d has %d shards, not shard %d", id, in.Shards, s)
	}
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return redisdata.Shard{}, fmt.Errorf("database %d: reading its secret: %w", id, err)
	}
	internal := string(secret.Data[keyInternal])
	ports, err := d.nodePorts(ctx, in)
	if err != nil {
		return redisdata.Shard{}, err
	}
	lo, hi := slotRange(s, in.Shards)
	for _, i := range shardNodes(in, s) {
		pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(id, i), metav1.GetOptions{})
		if err != nil || !podReady(pod) || pod.Status.PodIP == "" || ports[i] == 0 {
			continue
		}
		// The node that serves the shard's slots, since Ensure turned replication on there
		// (with replication): a master without slots (a new pod's node, not yet a replica)
		// or a restarted primary, empty until Ensure has its replica take over, would give
		// an empty snapshot as the shard's backup.
		tc, err := d.podTLS(pod, secret)
		if err != nil {
			return redisdata.Shard{}, fmt.Errorf("database %d: pod %s: %w", id, pod.Name, err)
		}
		m := &clusterMember{pod: pod, port: ports[i], c: clientAt(pod, ports[i], internal, tc)}
		err = m.read(ctx)
		m.c.Close()
		if err == nil && m.master && m.slots && (m.replOn || !in.Replication) {
			return redisdata.Shard{Endpoint: redisdata.Endpoint{
				Addr:     net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(ports[i])),
				Username: redisconf.InternalUser,
				Password: internal,
				TLS:      tc,
				NoEvict:  true,
			}, Lo: lo, Hi: hi}, nil
		}
	}
	return redisdata.Shard{}, fmt.Errorf("database %d: shard %d has no primary serving its slots since Ensure (a node restarted or replaced: Ensure heals it): %w", id, s, clouddb.ErrServerStarting)
}

// snapshotCluster writes an RDB snapshot of shard s's primary.
func (d *Driver) snapshotCluster(ctx context.Context, in clouddb.Instance, s int, w io.Writer) (int64, error) {
	if err := d.refusePending(ctx, in.DatabaseID); err != nil {
		return 0, err
	}
	sh, err := d.shardPrimary(ctx, in, s)
	if err != nil {
		return 0, err
	}
	return redisdata.Snapshot(ctx, sh.Endpoint, w)
}

// loadCluster copies the checked files' keys into the cluster, each into the shard that
// serves its slot. It goes key by key over the network (as Load does into one server),
// not by a reload of each shard; the total fits the memory limit (checked by Load), a
// shard's share is not checked before: a shard that fills refuses the keys past its
// share (an error of the copy).
func (d *Driver) loadCluster(ctx context.Context, in clouddb.Instance, temps []*redisdata.TempServer) error {
	shards := make([]redisdata.Shard, in.Shards)
	for s := range shards {
		sh, err := d.shardPrimary(ctx, in, s)
		if err != nil {
			return err
		}
		shards[s] = sh
	}
	for i, t := range temps {
		if _, err := redisdata.CopyKeysToCluster(ctx, t.Endpoint(), shards, redisdata.CopyOptions{Replace: i == 0}); err != nil {
			return fmt.Errorf("copy the data into the cluster: %w", err)
		}
	}
	return nil
}
