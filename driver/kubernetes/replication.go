package kubernetes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
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
	"k8s.io/apimachinery/pkg/types"

	"clouddb"
)

// A replicated database runs two pods of its StatefulSet: one is the primary, which its
// Service routes to (by the label LabelRole), the other replicates it. Which one is the
// primary only Ensure decides, never a pod's start: a pod that starts (after a crash, or
// as a new pod of a non-persistent database, empty) is always a replica of whichever pod
// the Service routes to, through the Service's ClusterIP (stable, and reached without
// cluster DNS). Had the crashed primary come back a primary, empty, its replica would
// have resynced from it and lost every key; a replica of a replica, or of itself, syncs
// nothing (redis refuses SYNC while its own link is down), so both keep what they hold
// until Ensure promotes the node that holds the most.
//
// The pod learns what to replicate at each start from two keys of the database's Secret,
// through environment variables (see serverCommand): the kubelet reads them at each
// container start from its watch of the Secret, so that a change is seen at once, where a
// mounted file would follow it up to a minute later.

// LabelRole marks the pod of a replicated database that serves as its primary: the
// database's Service selects it.
const (
	LabelRole   = "clouddb.io/role"
	rolePrimary = "primary"
)

// Keys of a database's Secret: the host and port of the primary a starting node
// replicates, "no" and "one" for a database of one node (redis' REPLICAOF NO ONE).
const (
	keyPrimaryHost = "primary-host"
	keyPrimaryPort = "primary-port"
	envPrimaryHost = "CLOUDDB_PRIMARY_HOST"
	envPrimaryPort = "CLOUDDB_PRIMARY_PORT"
)

// nodeCount is the number of pods the instance runs: a primary and, with replication, a
// replica.
func nodeCount(in clouddb.Instance) int32 {
	if in.Replication {
		return maxNodes
	}
	return 1
}

// maxNodes is the number of pods of a replicated database.
const maxNodes = 2

// serverCommand runs redis-server on the database's config (conf: its Secret key), replicating what the
// Secret's primary keys say (Kubernetes expands $(VAR) in a command: the image needs no
// shell).
func serverCommand(conf string) []string {
	return append([]string{"redis-server", confDir + "/" + conf,
		"--replicaof", "$(" + envPrimaryHost + ")", "$(" + envPrimaryPort + ")"}, socketArgs()...)
}

func primaryEnv(databaseID int) []corev1.EnvVar {
	ref := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: Name(databaseID)}, Key: key,
		}}
	}
	return []corev1.EnvVar{
		{Name: envPrimaryHost, ValueFrom: ref(keyPrimaryHost)},
		{Name: envPrimaryPort, ValueFrom: ref(keyPrimaryPort)},
	}
}

func envEqual(have, want []corev1.EnvVar) bool {
	return slices.EqualFunc(have, want, func(a, b corev1.EnvVar) bool {
		return a.Name == b.Name && a.Value == b.Value && (a.ValueFrom == nil) == (b.ValueFrom == nil) &&
			(a.ValueFrom == nil || a.ValueFrom.SecretKeyRef != nil && b.ValueFrom.SecretKeyRef != nil &&
				a.ValueFrom.SecretKeyRef.Name == b.ValueFrom.SecretKeyRef.Name && a.ValueFrom.SecretKeyRef.Key == b.ValueFrom.SecretKeyRef.Key)
	})
}

// primaryKeys are the Secret's primary keys for a database that runs replicated (two
// nodes, or two until the replica goes) behind svc.
func primaryKeys(replicated bool, svc *corev1.Service) (map[string][]byte, error) {
	if !replicated {
		return map[string][]byte{keyPrimaryHost: []byte("no"), keyPrimaryPort: []byte("one")}, nil
	}
	if net.ParseIP(svc.Spec.ClusterIP) == nil {
		return nil, fmt.Errorf("its service %s has no cluster IP (%q) for its replicas to reach the primary by", svc.Name, svc.Spec.ClusterIP)
	}
	if len(svc.Spec.Ports) != 1 {
		return nil, fmt.Errorf("its service %s has %d ports, not one", svc.Name, len(svc.Spec.Ports))
	}
	// The Service's port: redisPort behind a NodePort, the database's behind a load balancer.
	port := strconv.Itoa(int(svc.Spec.Ports[0].Port))
	return map[string][]byte{keyPrimaryHost: []byte(svc.Spec.ClusterIP), keyPrimaryPort: []byte(port)}, nil
}

// serviceSelector is the selector of the database's Service: its pods, and only the
// primary when it runs replicated.
func serviceSelector(databaseID int, replicated bool) map[string]string {
	s := selector(databaseID)
	if replicated {
		s[LabelRole] = rolePrimary
	}
	return s
}

// nodePodName is the name of the database's pod of that ordinal.
func nodePodName(databaseID, ordinal int) string {
	return Name(databaseID) + "-" + strconv.Itoa(ordinal)
}

// nodeState is what Ensure reads of a node to choose the primary.
type nodeState struct {
	labelled   bool // it carries LabelRole=primary
	master     bool
	offset     int64 // master_repl_offset: how far in the replication stream its data is
	keys       int64
	masterHost string // the primary it replicates, "" for a master
	masterPort int
	linkUp     bool
	// synced: a replica whose link to a primary was up since its server started (its
	// first sync done), so that it holds that primary's data up to the link's loss.
	synced bool
	runID  string
}

// elect chooses the primary among the nodes (by ordinal): the labelled node while it
// serves as a master, since clients write to it; else a master (a node of a database
// that was not replicated, or promoted by an Ensure cut short) with the most data; else
// the node with the most data, the labelled one and then the lowest ordinal on a tie
// (a new database, or one started again: each starts as a replica).
func elect(nodes []nodeState) int {
	for i, n := range nodes {
		if n.labelled && n.master {
			return i
		}
	}
	masters := slices.ContainsFunc(nodes, func(n nodeState) bool { return n.master })
	best := -1
	for i, n := range nodes {
		if masters && !n.master {
			continue
		}
		if best < 0 || more(n, nodes[best]) {
			best = i
		}
	}
	return best
}

// more reports whether a holds more data than b, the labelled one on a tie.
func more(a, b nodeState) bool {
	if a.offset != b.offset {
		return a.offset > b.offset
	}
	if a.keys != b.keys {
		return a.keys > b.keys
	}
	return a.labelled && !b.labelled
}

// readState reads a node's role, replication offset and number of keys.
func readState(ctx context.Context, c *redis.Client, pod *corev1.Pod) (nodeState, error) {
	s := nodeState{labelled: pod.Labels[LabelRole] == rolePrimary}
	if err := ping(ctx, c); err != nil {
		return s, fmt.Errorf("PING: %w", err)
	}
	info, err := c.Info(ctx, "replication", "server").Result()
	if err != nil {
		return s, fmt.Errorf("INFO: %w", err)
	}
	s.master = infoField(info, "role") == "master"
	if s.offset, err = strconv.ParseInt(infoField(info, "master_repl_offset"), 10, 64); err != nil {
		return s, fmt.Errorf("INFO replication: master_repl_offset: %w", err)
	}
	if !s.master {
		s.masterHost = infoField(info, "master_host")
		s.masterPort, _ = strconv.Atoi(infoField(info, "master_port"))
		s.linkUp = infoField(info, "master_link_status") == "up"
		// -1 while no link was ever up (a new, empty node syncing for the first time).
		s.synced = s.linkUp || infoField(info, "master_link_down_since_seconds") != "-1"
	}
	s.runID = infoField(info, "run_id")
	if s.keys, err = c.DBSize(ctx).Result(); err != nil {
		return s, fmt.Errorf("DBSIZE: %w", err)
	}
	return s, nil
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// runNodes is ensureNodes, again when a node's container restarted while it was being
// configured (its status had not shown the crash yet: the next pass finds it as it now
// runs), and after each node replaced for its TLS (see renewNodes).
func (d *Driver) runNodes(ctx context.Context, in clouddb.Instance, secret *corev1.Secret, oldLimit int64, n int) error {
	for restarted, replaced := 0, 0; ; {
		err := d.ensureNodes(ctx, in, secret, oldLimit, n)
		switch {
		case errors.Is(err, errNodeReplaced) && replaced < n:
			replaced++
		case errors.Is(err, errNodeRestarted) && restarted < 2:
			restarted++
			d.log.Info("a node of a database restarted while Ensure configured it: once more", "database_id", in.DatabaseID, "error", err)
		default:
			return err
		}
	}
}

// ensureNodes is Ensure of a database of n > 1 pods (replicated, or whose replication is
// being turned off): it waits for its pods, chooses the primary and promotes it, has the
// other follow it, points the Service at it, and applies the instance live to each node.
// Turning replication off makes node 0 the primary first (a switchover that waits for it
// to have every write), then lets node 1 go.
func (d *Driver) ensureNodes(ctx context.Context, in clouddb.Instance, secret *corev1.Secret, oldLimit int64, n int) error {
	id := in.DatabaseID
	internal := string(secret.Data[keyInternal])
	pods := make([]*corev1.Pod, n)
	clients := make([]*redis.Client, n)
	states := make([]nodeState, n)
	var unread []int
	for i := range n {
		pod, c, s, err := d.readNode(ctx, id, i, secret, answerTimeout)
		if err != nil {
			unread = append(unread, i)
			continue
		}
		defer c.Close()
		pods[i], clients[i], states[i] = pod, c, s
	}
	if len(unread) > 0 {
		if p, ok := orphanedReplica(pods, states, unread, string(secret.Data[keyPrimaryHost])); ok {
			return d.takeOverFrom(ctx, in, pods, clients, states, p, unread)
		}
		// Not a primary lost under a replica that followed it: wait for them, as long as
		// a start may take.
		for _, i := range unread {
			pod, c, s, err := d.readNode(ctx, id, i, secret, d.cfg.StartTimeout)
			if err != nil {
				return err
			}
			defer c.Close()
			pods[i], clients[i], states[i] = pod, c, s
		}
	}
	p := elect(states)
	if !states[p].master {
		if err := clients[p].Do(ctx, "replicaof", "no", "one").Err(); err != nil {
			return fmt.Errorf("database %d: promoting pod %s: REPLICAOF NO ONE: %w", id, pods[p].Name, err)
		}
		d.log.Warn("no node of a replicated database served as its primary: promoted the one with the most data",
			"database_id", id, "pod", pods[p].Name, "offset", states[p].offset, "keys", states[p].keys)
		states[p].master, states[p].masterHost, states[p].linkUp = true, "", false
	}
	if err := d.follow(ctx, in, pods, clients, states, p); err != nil {
		return err
	}
	// Data saved for a new pod (persistence.go) goes to the primary, and from it to the
	// replica.
	if err := d.loadPending(ctx, in, pods[p], secret); err != nil {
		return err
	}
	if !in.Replication && p != 0 {
		if err := d.switchover(ctx, in, pods, clients, p, 0); err != nil {
			return err
		}
		p = 0
		states[0].master, states[1].master = true, false
	}
	if err := d.labelPrimary(ctx, id, pods, p); err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if _, err = d.applyService(ctx, in, sts, ptr(true)); err != nil {
		return err
	}
	if !in.Replication {
		if err := d.dropReplica(ctx, in, pods[0], internal, clients[0].Options().TLSConfig, oldLimit); err != nil {
			return err
		}
		return d.syncSources(ctx, in, pods[0], secret)
	}
	if err := d.renewNodes(ctx, in, sts, pods, clients, states, p); err != nil {
		return err
	}
	if in.TLS != nil {
		if err := d.applyTLSFiles(ctx, in, pods, clients, secret); err != nil {
			return err
		}
	}
	for i, pod := range pods {
		if err := d.applyLive(ctx, in, pod, internal, clients[i].Options().TLSConfig, oldLimit); err != nil {
			return fmt.Errorf("database %d: pod %s: %w", id, pod.Name, err)
		}
	}
	if err := d.waitSynced(ctx, in, pods, clients, p); err != nil {
		return err
	}
	if err := d.samePods(ctx, id, pods); err != nil {
		return err
	}
	// replicaOf sources write into the primary (a new one after a failover).
	if err := d.syncSources(ctx, in, pods[p], secret); err != nil {
		return err
	}
	return d.waitEndpoint(ctx, in, clients[p], states[p].runID)
}

// readNode waits until the node's pod is Ready and its server answers (over TLS as the
// pod serves), and reads its state. A pod may still look Ready for a moment after its
// server died (the kubelet has not seen it yet), so a server that does not answer is
// asked again, for at most StartTimeout.
func (d *Driver) readNode(ctx context.Context, databaseID, ordinal int, secret *corev1.Secret, within time.Duration) (*corev1.Pod, *redis.Client, nodeState, error) {
	deadline := time.Now().Add(within)
	for {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		pod, err := d.waitStarted(wctx, databaseID, ordinal)
		cancel()
		if err != nil {
			return nil, nil, nodeState{}, err
		}
		tc, err := d.podTLS(pod, secret)
		if err != nil {
			return nil, nil, nodeState{}, fmt.Errorf("database %d: %w", databaseID, err)
		}
		c := client(pod, string(secret.Data[keyInternal]), tc)
		s, err := readState(ctx, c, pod)
		if err == nil {
			return pod, c, s, nil
		}
		c.Close()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, nil, nodeState{}, fmt.Errorf("database %d: pod %s: %w", databaseID, pod.Name, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// follow has every node but p replicate p, on p's pod address (the ClusterIP a node
// starts with routes to p only once the label moved, and not through a connection made
// before), in the protocol p serves: while TLS is turned on or off one node at a time
// (see renewNodes), a TLS node follows a plain p with tls-replication off, and a plain
// node follows a TLS p on plainPort, which p opens for as long as such a node follows it.
func (d *Driver) follow(ctx context.Context, in clouddb.Instance, pods []*corev1.Pod, clients []*redis.Client, states []nodeState, p int) error {
	id := in.DatabaseID
	ip := pods[p].Status.PodIP
	plainReplica := false
	for i := range pods {
		if i == p {
			continue
		}
		port := redisPort
		switch {
		case servesTLS(pods[i]):
			if err := setConfig(ctx, clients[i], "tls-replication", yesNo(servesTLS(pods[p]))); err != nil {
				return fmt.Errorf("database %d: pod %s: %w", id, pods[i].Name, err)
			}
		case servesTLS(pods[p]):
			port, plainReplica = plainPort, true
		}
		if !states[i].master && states[i].masterHost == ip && states[i].masterPort == port {
			continue
		}
		if err := clients[i].Do(ctx, "replicaof", ip, strconv.Itoa(port)).Err(); err != nil {
			return fmt.Errorf("database %d: pod %s: REPLICAOF the primary %s: %w", id, pods[i].Name, pods[p].Name, err)
		}
		states[i].master, states[i].masterHost, states[i].masterPort, states[i].linkUp = false, ip, port, false
	}
	if servesTLS(pods[p]) {
		port := 0
		if plainReplica {
			port = plainPort
		}
		if err := setConfig(ctx, clients[p], "port", strconv.Itoa(port)); err != nil {
			return fmt.Errorf("database %d: pod %s: %w", id, pods[p].Name, err)
		}
	}
	return nil
}

// plainPort is where a primary that serves TLS also listens in plain TCP while a node
// that does not follows it (see follow).
const plainPort = redisPort + 1

func servesTLS(pod *corev1.Pod) bool { return pod.Annotations[annotationTLS] != "" }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// setConfig sets a server's setting unless it has that value already (a port set again
// would be listened on again).
func setConfig(ctx context.Context, c *redis.Client, name, value string) error {
	got, err := c.ConfigGet(ctx, name).Result()
	if err != nil {
		return fmt.Errorf("CONFIG GET %s: %w", name, err)
	}
	if got[name] == value {
		return nil
	}
	if err = c.ConfigSet(ctx, name, value).Err(); err != nil {
		return fmt.Errorf("CONFIG SET %s %s: %w", name, value, err)
	}
	return nil
}

// switchover makes node to, a replica of node from, the primary once it has every write
// of from (redis' FAILOVER: from pauses its clients' writes until to caught up, then
// the two swap roles).
func (d *Driver) switchover(ctx context.Context, in clouddb.Instance, pods []*corev1.Pod, clients []*redis.Client, from, to int) error {
	id := in.DatabaseID
	if err := d.waitSynced(ctx, in, pods, clients, from); err != nil {
		return err
	}
	err := clients[from].Do(ctx, "failover", "to", pods[to].Status.PodIP, strconv.Itoa(redisPort), "timeout", "10000").Err()
	if err != nil {
		return fmt.Errorf("database %d: FAILOVER from pod %s to pod %s: %w", id, pods[from].Name, pods[to].Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		role, err := clients[to].Do(ctx, "role").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			d.log.Info("switched a database's primary over to its first node, whose replica goes", "database_id", id, "pod", pods[to].Name)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("database %d: FAILOVER from pod %s to pod %s: not done: %w", id, pods[from].Name, pods[to].Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// labelPrimary moves LabelRole onto pods[p] alone: off the others first, so that the
// Service never routes to two servers.
func (d *Driver) labelPrimary(ctx context.Context, databaseID int, pods []*corev1.Pod, p int) error {
	api := d.cfg.Client.CoreV1().Pods(d.ns)
	for i, pod := range pods {
		if i == p || pod.Labels[LabelRole] == "" {
			continue
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, LabelRole)
		if _, err := api.Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("taking the primary's label off pod %s: %w", pod.Name, err)
		}
	}
	if pods[p].Labels[LabelRole] == rolePrimary {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, LabelRole, rolePrimary)
	if _, err := api.Patch(ctx, pods[p].Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling pod %s the primary: %w", pods[p].Name, err)
	}
	d.log.Info("a database's endpoint routes to a new primary", "database_id", databaseID, "pod", pods[p].Name)
	return nil
}

// waitSynced waits until every node but p has its link to p up, for at most
// StartTimeout; a replica still syncing then is ErrServerStarting.
func (d *Driver) waitSynced(ctx context.Context, in clouddb.Instance, pods []*corev1.Pod, clients []*redis.Client, p int) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	ip := pods[p].Status.PodIP
	for i := range pods {
		if i == p {
			continue
		}
		for {
			info, err := clients[i].Info(ctx, "replication").Result()
			if err == nil && infoField(info, "master_host") == ip && infoField(info, "master_link_status") == "up" {
				break
			}
			select {
			case <-ctx.Done():
				why := "its link is not up"
				if err != nil {
					why = err.Error()
				}
				return fmt.Errorf("database %d: pod %s does not replicate pod %s yet: %s: %w", in.DatabaseID, pods[i].Name, pods[p].Name, why, clouddb.ErrServerStarting)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// dropReplica ends replication turned off: node 0 is the primary (labelled, the Service
// on it), so node 1 goes; then node 0 starts on its own at its next start, and the
// Service selects the database's one pod.
func (d *Driver) dropReplica(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, internal string, tc *tls.Config, oldLimit int64) error {
	id := in.DatabaseID
	if err := d.scale(ctx, id, 1); err != nil {
		return err
	}
	if err := d.dropReplicaPod(ctx, id); err != nil {
		return err
	}
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if _, err = d.applySecret(ctx, in, sts); err != nil {
		return err
	}
	if _, err = d.applyService(ctx, in, sts, ptr(false)); err != nil {
		return err
	}
	d.log.Info("turned a database's replication off: its replica is gone", "database_id", id)
	if err = d.applyLive(ctx, in, pod, internal, tc, oldLimit); err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	c := client(pod, internal, tc)
	defer c.Close()
	return d.waitEndpoint(ctx, in, c, "")
}

// dropReplicaPod deletes the pod of node 1 of a database its StatefulSet runs one node
// of, and waits until it is gone. The StatefulSet's controller would delete it, but not
// while it stops at node 0, a pod it cannot give the template's claim (a roll to
// persistence under way, see makeLostPods): that pod would be left, and served too.
func (d *Driver) dropReplicaPod(ctx context.Context, id int) error {
	err := d.cfg.Client.CoreV1().Pods(d.ns).Delete(ctx, nodePodName(id, 1), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("database %d: deleting its replica's pod: %w", id, err)
	}
	return d.waitGone(ctx, id, "its replica's pod is gone", func(ctx context.Context) (bool, error) {
		_, gerr := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(id, 1), metav1.GetOptions{})
		return apierrors.IsNotFound(gerr), ignoreNotFound(gerr)
	})
}

// waitEndpoint waits until the database's public endpoint (Config.NodeAddress and its
// NodePort) reaches the server behind c, for at most StartTimeout: kube-proxy routes a
// new Service, a new pod, or a Service whose primary changed a moment after the pod is
// ready. It checks the server's run_id, three times in a row on new connections, so
// that a route to another server (the primary before a failover) is not taken for it.
// Without a NodeAddress there is no endpoint to wait for.
func (d *Driver) waitEndpoint(ctx context.Context, in clouddb.Instance, c *redis.Client, runID string) error {
	// A load balancer's address is its own, which clouddb may not reach: Ensure waited
	// for it before it wrote the Secret (waitIngress).
	if d.serviceType() == corev1.ServiceTypeLoadBalancer {
		return nil
	}
	return d.waitEndpointAt(ctx, in, in.Port, c, runID)
}

// waitEndpointAt is waitEndpoint of the NodePort port (a cluster node's own).
func (d *Driver) waitEndpointAt(ctx context.Context, in clouddb.Instance, port int, c *redis.Client, runID string) error {
	if d.cfg.NodeAddress == "" {
		return nil
	}
	if runID == "" {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("database %d: INFO server: %w", in.DatabaseID, err)
		}
		runID = infoField(info, "run_id")
	}
	addr := d.PublicEndpoint(port)
	o := c.Options()
	// reaches reports whether a new connection to addr reaches the server of runID.
	reaches := func(ctx context.Context) error {
		// A plain dial first: a port kube-proxy does not route yet refuses, and go-redis
		// would log each refusal.
		conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		conn.Close()
		pc := redis.NewClient(&redis.Options{Addr: addr, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig, MaxRetries: -1,
			PoolSize: 1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, DisableIdentity: true, ContextTimeoutEnabled: true})
		defer pc.Close()
		info, err := pc.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		if infoField(info, "run_id") != runID {
			return errors.New("it reaches another server")
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	for ok := 0; ok < 3; {
		last := reaches(ctx)
		if last == nil {
			ok++
			continue
		}
		ok = 0
		select {
		case <-ctx.Done():
			return fmt.Errorf("database %d: its endpoint %s does not reach its server yet: %v: %w", in.DatabaseID, addr, last, clouddb.ErrServerStarting)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// primaryKeysOf are the Secret's primary keys for the instance on sts: replicated while
// the instance wants it or sts still runs more than one node (a replica whose going waits
// for the switchover).
func (d *Driver) primaryKeysOf(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet) (map[string][]byte, error) {
	replicated := in.Replication || sts.Spec.Replicas != nil && *sts.Spec.Replicas > 1
	if !replicated {
		return primaryKeys(false, nil)
	}
	svc, err := d.cfg.Client.CoreV1().Services(d.ns).Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: reading its service: %w", in.DatabaseID, err)
	}
	keys, err := primaryKeys(true, svc)
	if err != nil {
		return nil, fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	return keys, nil
}

// primaryPod is the database's pod labelled its primary, or its first pod when none is
// (a database that never ran replicated).
func (d *Driver) primaryPod(ctx context.Context, databaseID int) (*corev1.Pod, error) {
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: serviceSelector(databaseID, true)})
	pods, err := d.cfg.Client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	switch len(pods.Items) {
	case 0:
		return d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(databaseID, 0), metav1.GetOptions{})
	case 1:
		return &pods.Items[0], nil
	}
	return nil, fmt.Errorf("%d pods are labelled its primary", len(pods.Items))
}

// runningNodes is Running of a replicated database (its StatefulSet runs two pods):
// whether its Secret and Service are as Ensure writes them, both pods are Ready with the
// memory the size needs, exactly one is labelled the primary and serves as a master,
// the other replicates it with its link up, and both run img with the instance's
// settings and users.
func (d *Driver) runningNodes(ctx context.Context, in clouddb.Instance, img string) (bool, error) {
	id := in.DatabaseID
	n := int(nodeCount(in))
	pods := make([]*corev1.Pod, n)
	primary := -1
	for i := range n {
		pod, err := d.servingPod(ctx, id, i, in.MaxMemoryBytes)
		if pod == nil || err != nil {
			return false, err
		}
		if pod.Labels[LabelRole] == rolePrimary {
			if primary >= 0 {
				return false, nil
			}
			primary = i
		}
		pods[i] = pod
	}
	if primary < 0 {
		return false, nil
	}
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("database %d: reading its secret: %w", id, err)
	}
	internal := string(secret.Data[keyInternal])
	if !configAsAsked(in, internal, secret.Data) || in.TLS != nil && !d.secretTLSUsable(ctx, in, secret) {
		return false, nil
	}
	if secret.Annotations[annotationPendingLoad] != "" {
		return false, nil
	}
	svc, err := d.cfg.Client.CoreV1().Services(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("database %d: reading its service: %w", id, err)
	}
	keys, err := primaryKeys(true, svc)
	if err != nil || !maps.Equal(svc.Spec.Selector, serviceSelector(id, true)) {
		return false, nil
	}
	for k, v := range keys {
		if string(secret.Data[k]) != string(v) {
			return false, nil
		}
	}
	for i, pod := range pods {
		// Each serves TLS as asked (with the files of the Secret: nodeRunning), on the
		// volume of its persistence and the image of its version, Ready only while it
		// holds the data.
		if pod.Annotations[annotationTLS] != tlsAnnotation(in) || hasVolumeClaim(pod) != persistent(in) || probeOfBefore(pod) ||
			podImage(&pod.Spec) != img {
			return false, nil
		}
		tc, err := d.podTLS(pod, secret)
		if err != nil {
			return false, fmt.Errorf("database %d: %w", id, err)
		}
		ok, err := d.nodeRunning(ctx, in, pod, secret, tc, i == primary, pods[primary].Status.PodIP)
		if err != nil {
			d.log.Warn("a database's pod is ready but its state cannot be read", "database_id", id, "pod", pod.Name, "error", err)
			return false, nil
		}
		if !ok {
			return false, nil
		}
	}
	// replicaOf sources are followed into the primary (replicaof.go).
	return d.following(ctx, in, pods[primary], secret), nil
}

// nodeRunning reports whether the node plays its part, the primary or the replica of the
// primary at primaryIP with its link up, with the instance's settings and users.
func (d *Driver) nodeRunning(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, secret *corev1.Secret, tc *tls.Config, primary bool, primaryIP string) (bool, error) {
	c := client(pod, string(secret.Data[keyInternal]), tc)
	defer c.Close()
	s, err := readState(ctx, c, pod)
	if err != nil {
		return false, err
	}
	if primary != s.master || !primary && (s.masterHost != primaryIP || !s.linkUp) {
		return false, nil
	}
	if ok, err := d.tlsFilesServed(ctx, c, in, secret); !ok || err != nil {
		return false, err
	}
	return liveAsAsked(ctx, c, in)
}

// errNodeRestarted: a node's container restarted, or its pod was replaced, while Ensure
// configured it (see samePods).
var errNodeRestarted = errors.New("a node restarted while Ensure configured it")

// samePods waits until every node's pod is Ready (it holds the data: the primary serves,
// each replica is in sync, see probe.go) and checks that each still runs the container
// Ensure read: a pod's status follows its container's death by up to a second (the
// kubelet's relist), so Ensure may have read it started, configured the container the
// kubelet had just started again, and seen it go only now.
func (d *Driver) samePods(ctx context.Context, databaseID int, pods []*corev1.Pod) error {
	for i, was := range pods {
		now, err := d.waitServing(ctx, databaseID, i)
		if err != nil {
			return err
		}
		if now.UID != was.UID || containerRestarts(now) != containerRestarts(was) {
			// Starting: Ensure, tried again, configures the new container.
			return fmt.Errorf("database %d: pod %s: %w: %w", databaseID, now.Name, errNodeRestarted, clouddb.ErrServerStarting)
		}
	}
	return nil
}

// containerRestarts is how many times the pod's containers were started again.
func containerRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, cs := range pod.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// routeToFirst is the start of replication turned on for a running database of one node:
// that node is the primary, labelled and alone behind the Service before its replica's
// pod exists. The Service selected every pod of the database until then, and would route
// clients to the new replica too for as long as kube-proxy takes to follow the label.
func (d *Driver) routeToFirst(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet) error {
	pod, err := d.waitStarted(ctx, in.DatabaseID, 0)
	if err != nil {
		return err
	}
	if err = d.labelPrimary(ctx, in.DatabaseID, []*corev1.Pod{pod}, 0); err != nil {
		return fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	_, err = d.applyService(ctx, in, sts, ptr(true))
	return err
}

// answerTimeout is how long Ensure waits for a node of a replicated database before it
// considers that node lost, when its replica answers (see orphanedReplica).
const answerTimeout = 15 * time.Second

// orphanedReplica finds, when the nodes in unread do not answer, a node that answers and
// replicates a primary that is gone: a replica whose primary is a pod address Ensure gave
// it (not the Service's, which every node starts with) that no answering node has. It
// then holds that primary's data up to the link's loss, and takes over, as it would
// after the primary's death (its node lost, its server hung). Any other case (nodes
// starting again after a stop, each a replica of the Service; a new node whose first sync
// from its primary had not ended, empty) waits for every node: the one that does not
// answer yet may hold more data.
func orphanedReplica(pods []*corev1.Pod, states []nodeState, unread []int, serviceIP string) (int, bool) {
	answering := map[string]bool{}
	for i, p := range pods {
		if p != nil && !slices.Contains(unread, i) {
			answering[p.Status.PodIP] = true
			if states[i].master {
				return 0, false // a master answers: not a lost primary
			}
		}
	}
	for i, p := range pods {
		if p == nil || slices.Contains(unread, i) {
			continue
		}
		if h := states[i].masterHost; h != "" && h != serviceIP && !answering[h] && net.ParseIP(h) != nil && states[i].synced {
			return i, true
		}
	}
	return 0, false
}

// takeOverFrom promotes node p, whose primary does not answer: the label (and so the
// Service) moves to it, off the unanswering nodes first, so that clients stop reaching a
// primary that may still run. It returns ErrServerStarting: the database serves, but a
// node is missing until its pod answers again (the next Ensure makes it p's replica).
func (d *Driver) takeOverFrom(ctx context.Context, in clouddb.Instance, pods []*corev1.Pod, clients []*redis.Client, states []nodeState, p int, unread []int) error {
	id := in.DatabaseID
	all := slices.Clone(pods)
	for _, i := range unread {
		pod, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, nodePodName(id, i), metav1.GetOptions{})
		if err == nil {
			all[i] = pod
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("database %d: %w", id, err)
		}
	}
	// The silent primary's pod goes first when it still runs at the address p followed
	// (hung: stopped, or busy in a command that does not end): it would otherwise answer
	// the connections open to it afterwards, writes p never gets among them.
	for _, i := range unread {
		if pod := all[i]; pod != nil && pod.DeletionTimestamp == nil && running(pod) && pod.Status.PodIP == states[p].masterHost {
			if err := d.fence(ctx, in, pod); err != nil {
				return err
			}
			all[i] = nil
		}
	}
	// labelPrimary patches every pod it is given: the missing ones are left out.
	var given []*corev1.Pod
	q := 0
	for i, pod := range all {
		if pod == nil {
			continue
		}
		if i == p {
			q = len(given)
		}
		given = append(given, pod)
	}
	if err := d.labelPrimary(ctx, id, given, q); err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if err := clients[p].Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		return fmt.Errorf("database %d: promoting pod %s: REPLICAOF NO ONE: %w", id, pods[p].Name, err)
	}
	d.log.Warn("the primary of a replicated database does not answer: its replica took over",
		"database_id", id, "pod", pods[p].Name, "offset", states[p].offset, "keys", states[p].keys)
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if _, err = d.applyService(ctx, in, sts, ptr(true)); err != nil {
		return err
	}
	info, err := clients[p].Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("database %d: INFO server: %w", id, err)
	}
	if err = d.waitEndpoint(ctx, in, clients[p], infoField(info, "run_id")); err != nil {
		return err
	}
	return fmt.Errorf("database %d: pod %s took over from a primary that does not answer; waiting for its other node: %w",
		id, pods[p].Name, clouddb.ErrServerStarting)
}
