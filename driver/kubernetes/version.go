package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"clouddb"
)

// Redis versions. A database runs the image of its version (Config.Images); a running
// pod cannot change its image, so a pod of another image than its StatefulSet's template
// (an upgrade, or the operator's new image of the same version) is replaced as for TLS
// turned on or off: a one-node database's with its data saved and loaded into the new
// pod (see settle), a replicated database's one node at a time, the replica first, which
// syncs from the primary of the old version, then the primary after it handed over (see
// renewNodes). Until then Running is false, so the reconciler's Ensure rolls them. A new
// pod whose image cannot be pulled never ran, and holds no data: once the operator
// corrects the image, Ensure replaces it (replaceUnscheduled).
//
// A cluster's pod keeps its identity in its data directory (nodes.conf), so its node
// changes image in place instead: the image of its container is patched, which the
// kubelet restarts on its volumes (rollClusterNode). A replicated cluster's replica goes
// first (it comes back as the replica, syncing from its primary), then each primary hands
// its shard over to its replica (CLUSTER FAILOVER: the replica catches up first, no write
// lost) and is restarted as its replica. A cluster without replicas restarts each
// primary in turn, which loads its data from its volume: only with persistence; without
// (nothing would keep its data) its nodes take a new image of the same version at their
// next restart, and a change of version rebuilds the cluster with its data (see
// cluster_rebuild.go). Nor is a pod's data ever given to an older version than the one
// that wrote it (checkVersion).

// podImage is the image of the pod's server.
func podImage(spec *corev1.PodSpec) string {
	for _, c := range spec.Containers {
		if c.Name == "redis" {
			return c.Image
		}
	}
	return ""
}

// templateImage is the image the StatefulSet's pods are made with.
func templateImage(sts *appsv1.StatefulSet) string { return podImage(&sts.Spec.Template.Spec) }

// versionOf is the Redis version (major.minor) of an image the driver offers, "" for
// another (one an earlier configuration offered).
func (d *Driver) versionOf(image string) string {
	for v, img := range d.cfg.Images {
		if img == image {
			return v
		}
	}
	return ""
}

// checkVersion refuses to run the instance on its image (img, of its version) while a
// pod of the database runs a newer version (its data may not load in an older one).
func (d *Driver) checkVersion(ctx context.Context, in clouddb.Instance, img string) error {
	want := d.versionOf(img)
	pods, err := d.podsOf(ctx, in.DatabaseID)
	if err != nil {
		return err
	}
	for i := range pods {
		have := d.versionOf(podImage(&pods[i].Spec))
		switch {
		case have == "" || have == want:
		case clouddb.CompareRedisVersions(have, want) > 0:
			return fmt.Errorf("database %d: pod %s runs Redis %s, newer than %s: its data would be given to an older server: %w",
				in.DatabaseID, pods[i].Name, have, want, ErrNotSupported)
		}
	}
	return nil
}

// clusterRollable reports whether the cluster's nodes can restart on a new image with
// their data: each shard has a replica to hand over to, or its data is on a volume.
func clusterRollable(in clouddb.Instance) bool { return in.Replication || persistent(in) }

// rollClusterNodes moves one node of the cluster whose pod runs another image than img
// onto img (see the top of this file) and returns errNodeReplaced, for Ensure to
// configure the cluster again; nil when every node runs img (or the cluster cannot
// roll). nodes is the cluster as Ensure made it: each shard served.
func (d *Driver) rollClusterNodes(ctx context.Context, in clouddb.Instance, nodes []*clusterMember, img string) error {
	if !clusterRollable(in) {
		return nil
	}
	var next *clusterMember
	for _, m := range nodes {
		if podImage(&m.pod.Spec) == img {
			continue
		}
		if next == nil || next.master && !m.master {
			next = m // replicas first
		}
	}
	if next == nil {
		return nil
	}
	if next.master && in.Replication {
		// Its shard's replica takes over first: the node restarts as a replica.
		if err := d.handOverFrom(ctx, in, nodes, next); err != nil {
			return err
		}
	}
	if !in.Replication && strings.HasPrefix(in.DataPersistence, "snapshot") {
		// Its restart's own save may outlast the pod's grace period (then it is killed,
		// and starts on its last periodic snapshot).
		if err := writeFilesNow(ctx, next.c, false); err != nil {
			return fmt.Errorf("database %d: pod %s: %w", in.DatabaseID, next.pod.Name, err)
		}
	}
	if err := d.endpointAway(ctx, in, nodes, next); err != nil {
		return err
	}
	return d.rollClusterNode(ctx, in, next.pod, img)
}

// manualFailoverTimeout is how long redis gives a CLUSTER FAILOVER before it gives it
// up (CLUSTER_MF_TIMEOUT), and a second more.
const manualFailoverTimeout = 6 * time.Second

// handOverFrom hands primary's shard over to its replica among nodes (handShardOver).
func (d *Driver) handOverFrom(ctx context.Context, in clouddb.Instance, nodes []*clusterMember, primary *clusterMember) error {
	i := slices.IndexFunc(nodes, func(x *clusterMember) bool { return !x.master && x.masterID == primary.id })
	if i < 0 {
		return fmt.Errorf("database %d: pod %s: its shard has no replica to hand over to: %w", in.DatabaseID, primary.pod.Name, clouddb.ErrServerStarting)
	}
	return d.handShardOver(ctx, in, nodes[i], primary)
}

// handShardOver makes replica the primary of its shard in place of primary, with every
// write of it: CLUSTER FAILOVER has the primary stop taking writes until the replica
// has them all, then swaps them.
func (d *Driver) handShardOver(ctx context.Context, in clouddb.Instance, replica, primary *clusterMember) error {
	// The primary ignores the replica's request (MFSTART) until it knows it as its own
	// replica, which a node that just joined may not be yet in the primary's view.
	if err := d.waitCluster(ctx, in, "the shard's primary to know its replica", func() (bool, error) {
		ns, err := clusterNodesOf(ctx, primary.c)
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(ns, func(n clusterNode) bool { return n.id == replica.id })
		return i >= 0 && ns[i].has("slave") && ns[i].master == primary.id, nil
	}); err != nil {
		return err
	}
	// A manual failover that did not complete within its own timeout (5 s) was given up
	// by redis: asked again.
	var asked time.Time
	if err := d.waitCluster(ctx, in, "the shard's replica to take over", func() (bool, error) {
		for _, c := range []*redis.Client{replica.c, primary.c} {
			ns, err := clusterNodesOf(ctx, c)
			if err != nil {
				return false, err
			}
			i := slices.IndexFunc(ns, func(n clusterNode) bool { return n.id == replica.id })
			if i < 0 || !ns[i].has("master") || len(ns[i].slots) == 0 {
				if time.Since(asked) > manualFailoverTimeout {
					if err = replica.c.Do(ctx, "cluster", "failover").Err(); err != nil {
						return false, fmt.Errorf("pod %s: CLUSTER FAILOVER: %w", replica.pod.Name, err)
					}
					asked = time.Now()
				}
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	d.log.Info("a shard's primary handed over to its replica, to restart or be replaced", "database_id", in.DatabaseID,
		"from", primary.pod.Name, "to", replica.pod.Name)
	return nil
}

// rollClusterNode patches the image of the pod's server to img, waits until the kubelet
// has restarted it on it, and returns errNodeReplaced. A container of img that cannot run
// (an image not pulled, a typo) is patched back to its image of before: the node serves
// again, and the error says why.
func (d *Driver) rollClusterNode(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, img string) error {
	id := in.DatabaseID
	api := d.cfg.Client.CoreV1().Pods(d.ns)
	// Read again: its restarts since Ensure read it count too.
	pod, err := api.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	old := podImage(&pod.Spec)
	d.log.Info("restarting a cluster node on a new image", "database_id", id, "pod", pod.Name, "image", img, "was", old)
	if err = d.patchImage(ctx, pod, img); err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if err = d.waitRestarted(ctx, pod); err != nil {
		perr := d.patchImage(ctx, pod, old)
		if perr == nil {
			perr = d.waitBack(ctx, pod)
		}
		if perr != nil {
			return fmt.Errorf("database %d: pod %s on its new image: %w (and back on %s: %v)", id, pod.Name, err, old, perr)
		}
		d.log.Warn("a cluster node's new image does not run: back on its image of before", "database_id", id, "pod", pod.Name, "image", img, "error", err)
		return fmt.Errorf("database %d: pod %s on its new image %s: %w", id, pod.Name, img, err)
	}
	return fmt.Errorf("database %d: pod %s: %w", id, pod.Name, errNodeReplaced)
}

// waitBack waits, up to StartTimeout, until the pod's server has started again. Not
// waitPod: until the kubelet acts on the pod's image of before, its status still says
// why the other could not run.
func (d *Driver) waitBack(ctx context.Context, pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	for {
		p, err := d.cfg.Client.CoreV1().Pods(d.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.UID == pod.UID && podStarted(p) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s: its server did not start again on its image of before within %v", pod.Name, d.cfg.StartTimeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// patchImage sets the image of the pod's server; the kubelet restarts it on it.
func (d *Driver) patchImage(ctx context.Context, pod *corev1.Pod, img string) error {
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"redis","image":%q}]}}`, img)
	if _, err := d.cfg.Client.CoreV1().Pods(d.ns).Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("pod %s: changing its image: %w", pod.Name, err)
	}
	return nil
}

// waitRestarted waits until the server of pod (as it was read) has started again in it,
// or fails when it shows it cannot run.
func (d *Driver) waitRestarted(ctx context.Context, pod *corev1.Pod) error {
	before := containerRestarts(pod)
	_, err := d.waitPod(ctx, pod.Name, func(p *corev1.Pod) bool { return p.UID == pod.UID }, func(p *corev1.Pod) bool {
		return containerRestarts(p) > before && podStarted(p)
	})
	return err
}

// otherVersionRuns reports whether a pod of the database runs another Redis version
// than img's (of the versions offered).
func (d *Driver) otherVersionRuns(ctx context.Context, in clouddb.Instance, img string) (bool, error) {
	want := d.versionOf(img)
	pods, err := d.podsOf(ctx, in.DatabaseID)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(pods, func(p corev1.Pod) bool {
		have := d.versionOf(podImage(&p.Spec))
		return have != "" && have != want
	}), nil
}

// ServedVersion is the newest Redis version (of the images the driver offers) the
// database's pods run, "" when none runs one: what serves its data, so that a stored
// version from before several versions were offered is made to agree with it rather
// than move its pods (see task.NormalizeRedisVersions).
func (d *Driver) ServedVersion(ctx context.Context, in clouddb.Instance) (string, error) {
	pods, err := d.podsOf(ctx, in.DatabaseID)
	if err != nil {
		return "", err
	}
	served := ""
	for i := range pods {
		if v := d.versionOf(podImage(&pods[i].Spec)); v != "" && (served == "" || clouddb.CompareRedisVersions(v, served) > 0) {
			served = v
		}
	}
	return served, nil
}
