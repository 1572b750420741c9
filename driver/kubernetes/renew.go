package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
)

// The nodes of a replicated database are replaced one at a time when what a running pod
// cannot take changes (TLS on or off, see tls.go; its image, see version.go; its
// volume, see adoptNodes; its readiness probe, see probeOfBefore), so that
// the other node serves meanwhile and no data leaves the cluster: the replica's pod
// first, whose new pod syncs from the primary; then the primary hands over to the new
// node (handOver) and its own pod is replaced in turn, to come back as the replica. Each
// step leaves the database in a state the next Ensure starts from (it elects the
// primary, has the other node follow it, and replaces what is still old).

// errNodeReplaced: Ensure replaced a node's pod; its next pass over the nodes has the new
// one follow the primary.
var errNodeReplaced = errors.New("a node's pod was replaced")

// renewNodes replaces a node whose pod differs from those the template of sts, the
// database's StatefulSet, makes (the template, not the instance: a StatefulSet of before
// runs until its data is saved, see runToSave): it serves TLS otherwise (turned on or
// off, or with files it cannot take live: made before they were), runs another image
// (see version.go), has the other kind of volume (a persistence change, see
// adoptNodes), or is Ready on another test than whether it holds the data
// (probeOfBefore). A replica goes first; the primary p, after it handed over to the
// other node. When volumes change, in ordinal order instead:
// the StatefulSet's controller makes pods in that order, and stops at an old pod whose
// volumes it fails to make its claim's. It returns errNodeReplaced after a replacement,
// nil when every node is as the template makes it.
func (d *Driver) renewNodes(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, pods []*corev1.Pod, clients []*redis.Client, states []nodeState, p int) error {
	tlsMark, img, claim := sts.Spec.Template.Annotations[annotationTLS], templateImage(sts), hasClaim(sts)
	oldVolume := func(i int) bool { return hasVolumeClaim(pods[i]) != claim }
	next, left := -1, 0
	// first reports whether stale node i goes before node next.
	first := func(i int) bool {
		switch {
		case next < 0:
			return true
		case oldVolume(i) != oldVolume(next):
			return oldVolume(i)
		case oldVolume(i):
			return false // the lower ordinal, next
		}
		return next == p
	}
	for i := range pods {
		if pods[i].Annotations[annotationTLS] == tlsMark && podImage(&pods[i].Spec) == img && !oldVolume(i) && !probeOfBefore(pods[i]) {
			continue
		}
		left++
		if first(i) {
			next = i
		}
	}
	if next < 0 {
		return nil
	}
	if oldVolume(next) && left == 1 && !claim {
		// The claims of before go with the last pod that uses one (kept until it is gone).
		if err := d.deleteClaims(ctx, in.DatabaseID); err != nil {
			return err
		}
	}
	if next != p {
		return d.replaceNode(ctx, in, pods[next])
	}
	q := 0
	if p == 0 {
		q = 1
	}
	if err := d.waitSynced(ctx, in, pods, clients, p); err != nil {
		return err
	}
	if err := d.handOver(ctx, in, pods, clients, states, p, q); err != nil {
		return err
	}
	return d.replaceNode(ctx, in, pods[p])
}

// probeOfBefore reports whether the pod was made by an earlier clouddb whose pods were
// Ready once their port listened: a disruption budget counts such a pod as serving while
// it syncs, empty, so a drain could evict the only copy of the data (see probe.go).
func probeOfBefore(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == "redis" {
			return c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil
		}
	}
	return false
}

// hasVolumeClaim reports whether the pod keeps its data on a claim (a persistent
// database), not an emptyDir.
func hasVolumeClaim(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == "data" {
			return v.PersistentVolumeClaim != nil
		}
	}
	return false
}

// handOver makes node to, a replica of node from with its link up, the primary once it
// holds every write of from: from's clients' writes pause, to catches up and is
// promoted, from follows it (refusing writes from then on: a paused write fails, it is
// never acknowledged), and the label, and with it the Service, moves to to. redis'
// FAILOVER would need from to reach to in to's protocol, which it cannot when TLS is
// turned on (from has no certificate).
func (d *Driver) handOver(ctx context.Context, in clouddb.Instance, pods []*corev1.Pod, clients []*redis.Client, states []nodeState, from, to int) error {
	id := in.DatabaseID
	// Longer than the wait below: the writes resume by themselves if clouddb stops here.
	if err := clients[from].Do(ctx, "client", "pause", "20000", "write").Err(); err != nil {
		return fmt.Errorf("database %d: pod %s: CLIENT PAUSE: %w", id, pods[from].Name, err)
	}
	unpause := func() { _ = clients[from].Do(context.WithoutCancel(ctx), "client", "unpause").Err() }
	info, err := clients[from].Info(ctx, "replication").Result()
	if err != nil {
		unpause()
		return fmt.Errorf("database %d: pod %s: INFO replication: %w", id, pods[from].Name, err)
	}
	last := infoField(info, "master_repl_offset")
	if err = waitOffset(ctx, clients[to], pods[from].Status.PodIP, last); err != nil {
		unpause()
		return fmt.Errorf("database %d: pod %s does not catch up with pod %s (offset %s): %v: %w", id, pods[to].Name, pods[from].Name, last, err, clouddb.ErrServerStarting)
	}
	if err = clients[to].Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		unpause()
		return fmt.Errorf("database %d: promoting pod %s: REPLICAOF NO ONE: %w", id, pods[to].Name, err)
	}
	states[to].master, states[to].masterHost, states[to].linkUp = true, "", false
	if err = d.follow(ctx, in, pods, clients, states, to); err != nil {
		return err
	}
	if err = d.labelPrimary(ctx, id, pods, to); err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	d.log.Info("handed a database's primary over to its other node, whose pod is new", "database_id", id, "pod", pods[to].Name)
	return nil
}

// waitOffset waits, 10 s at most, until the replica c, linked to the primary at
// primaryIP, has processed its replication stream up to offset.
func waitOffset(ctx context.Context, c *redis.Client, primaryIP, offset string) error {
	want, err := strconv.ParseInt(offset, 10, 64)
	if err != nil {
		return fmt.Errorf("master_repl_offset %q: %w", offset, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && infoField(info, "master_host") == primaryIP && infoField(info, "master_link_status") == "up" {
			if got, perr := strconv.ParseInt(infoField(info, "slave_repl_offset"), 10, 64); perr == nil && got >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// replaceNode deletes the node's pod, which its StatefulSet makes again from its
// template (OnDelete), and waits until it is gone; it returns errNodeReplaced.
func (d *Driver) replaceNode(ctx context.Context, in clouddb.Instance, pod *corev1.Pod) error {
	d.log.Info("replacing a node of a database for what its pod cannot take (TLS on or off, image, persistence, probes)", "database_id", in.DatabaseID, "pod", pod.Name)
	if err := d.deletePod(ctx, in.DatabaseID, pod, nil); err != nil {
		return err
	}
	return fmt.Errorf("database %d: pod %s: %w", in.DatabaseID, pod.Name, errNodeReplaced)
}

// lostPodGrace is how long a pod missing behind one without a claim may take to be
// made again before makeLostPods takes it for one the controller will not make.
const lostPodGrace = 10 * time.Second

// makeLostPods has the pods of sts made again that its controller will not make: a
// StatefulSet of claims whose pods still run on volumes of before (a persistence roll
// under way, see renewNodes) makes no pod past the first such one (its update of that
// pod fails, and the controller stops there), so a pod lost mid-roll would never come
// back, and the roll, which waits for it, never go on; worse, its shard's other node
// then holds the only copy, and it is the next to be replaced. A StatefulSet without
// claims, of the same pods, makes the missing ones (on volumes of before, to be rolled
// in turn), then the StatefulSet of claims is made again and adopts them all. It returns
// the StatefulSet the database has then.
func (d *Driver) makeLostPods(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet) (*appsv1.StatefulSet, error) {
	if !hasClaim(sts) || sts.Spec.Replicas == nil {
		return sts, nil
	}
	id, want := in.DatabaseID, int(*sts.Spec.Replicas)
	var lost []int
	deadline := time.Now().Add(lostPodGrace)
	for {
		pods, err := d.podsOf(ctx, id)
		if err != nil {
			return nil, err
		}
		if lost = lostBehindOld(pods, id, want); len(lost) == 0 {
			return sts, nil
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	d.log.Warn("pods of a database are lost behind pods of before that have no claim: made again without one", "database_id", id, "ordinals", lost)
	again := recreatable(sts)
	if err := d.orphanStatefulSet(ctx, in, sts, "its lost pods are made again without a claim"); err != nil {
		return nil, err
	}
	api := d.cfg.Client.AppsV1().StatefulSets(d.ns)
	plain := recreatable(sts)
	plain.Spec.VolumeClaimTemplates = nil
	plain.Spec.Template.Spec.Volumes = append(plain.Spec.Template.Spec.Volumes,
		corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	made, err := api.Create(ctx, plain, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: creating a statefulset without claims: %w", id, err)
	}
	if err = d.waitGone(ctx, id, "its lost pods are made again", func(ctx context.Context) (bool, error) {
		pods, perr := d.podsOf(ctx, id)
		if perr != nil {
			return false, perr
		}
		have := map[string]bool{}
		for _, p := range pods {
			have[p.Name] = true
		}
		for _, i := range lost {
			if !have[nodePodName(id, i)] {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	if err = d.orphanStatefulSet(ctx, in, made, "its lost pods are made again: its claims back"); err != nil {
		return nil, err
	}
	if sts, err = api.Create(ctx, again, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("database %d: creating its statefulset again: %w", id, err)
	}
	return sts, nil
}

// lostBehindOld are the ordinals below want that have no pod, past the lowest one whose
// pod has no claim (see makeLostPods); none while a pod before that one is missing: the
// controller makes it first, on its claim (a StatefulSet without claims would make it on
// an emptyDir, to be replaced later onto a claim that holds a node of before).
func lostBehindOld(pods []corev1.Pod, id, want int) []int {
	have := map[string]bool{}
	firstOld := want
	for i := range pods {
		have[pods[i].Name] = true
		for o := range want {
			if pods[i].Name == nodePodName(id, o) && !hasVolumeClaim(&pods[i]) && o < firstOld {
				firstOld = o
			}
		}
	}
	for o := range firstOld {
		if !have[nodePodName(id, o)] {
			return nil
		}
	}
	var lost []int
	for o := firstOld + 1; o < want; o++ {
		if !have[nodePodName(id, o)] {
			lost = append(lost, o)
		}
	}
	return lost
}

// recreatable is sts as a StatefulSet to create: its name, labels, annotations and spec.
func recreatable(sts *appsv1.StatefulSet) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: sts.Name, Namespace: sts.Namespace, Labels: sts.Labels, Annotations: sts.Annotations},
		Spec:       *sts.Spec.DeepCopy(),
	}
}
