package kubernetes

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/internal/redisconf"
	"clouddb/redisdata"
)

// What a cluster's running pods cannot take: a persistence change between none and a
// persistent one (each node's data directory moves between an emptyDir and a claim, and
// a StatefulSet's volume claim templates cannot change), TLS turned on or off (each
// node's port and the cluster bus change protocol, and a cluster cannot mix plain and
// TLS nodes), or, for a cluster with neither replicas nor persistence, a new Redis
// version (its nodes would restart empty, see version.go). So a new StatefulSet, and
// every node gets a new pod; a new pod without its volume is a new node (nodes.conf is in
// the data directory), which Ensure has join the cluster as it does for a pod lost
// without persistence (formCluster).
//
//   - A running replicated cluster whose persistence changes keeps serving: the new
//     StatefulSet adopts the running pods and renewClusterNodes replaces them one at a
//     time, in ordinal order (as renewNodes does, for the StatefulSet controller's sake),
//     a primary after it handed its shard over to its replica; each new node syncs from
//     its shard's primary.
//   - Otherwise (TLS turned on or off, a version, no replicas, not every node running), as
//     persistence.go does for one node: each shard's data is saved, from the node that
//     holds it (a cluster whose shards are not all decided is first ensured as it was, a
//     stopped one started on its claims), its writes paused and then refused for good
//     (fenceWrites), to a file of its own on clouddb's machine, checked to load; the
//     Secret is marked (annotationPendingLoad, naming shard 0's
//     file) and the nodes' Services routed to no pod; then the old StatefulSet goes with
//     its claims, a new one forms a new cluster, the files are loaded into it and the
//     Services route again. An Ensure that fails in between finds the mark and goes on
//     from there. The downtime is the new cluster's start and the load.

// pendingShardFile is where shard s of a cluster's data waits for the cluster's new pods;
// shard 0's is also the name the Secret's mark holds.
func (d *Driver) pendingShardFile(id, s int) string {
	base := strings.TrimSuffix(d.pendingFile(id), ".rdb")
	return base + "-shard-" + strconv.Itoa(s) + ".rdb"
}

// rebuildCluster replaces the StatefulSet of a cluster whose persistence changes
// between none and a persistent one, or whose TLS is turned on or off (see the top of
// this file), and returns the new one: with the running pods adopted, or with no pod
// yet, its data saved.
func (d *Driver) rebuildCluster(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, img string) (*appsv1.StatefulSet, error) {
	id := in.DatabaseID
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: reading its secret: %w", id, err)
	}
	pending := secret.Annotations[annotationPendingLoad] != ""
	n := clusterNodeCount(in)
	if !pending && clusterTLS(sts) == (in.TLS != nil) && in.Replication && sts.Annotations[annotationReplicated] == "true" &&
		sts.Spec.Replicas != nil && int(*sts.Spec.Replicas) == n {
		if err = d.orphanStatefulSet(ctx, in, sts, persistenceChange(in)); err != nil {
			return nil, err
		}
		if persistent(in) {
			if err = d.dropUnusedClaims(ctx, id); err != nil {
				return nil, err
			}
		}
		return d.createCluster(ctx, in, img, n)
	}
	if !pending {
		if err = d.saveCluster(ctx, in, sts, secret); err != nil {
			return nil, err
		}
	}
	// From here the data waits in its files (the old nodes take no write): a failure is
	// the next Ensure's to go on from, not the database's error.
	later := func(err error) (*appsv1.StatefulSet, error) {
		return nil, fmt.Errorf("%w: %w", err, clouddb.ErrServerStarting)
	}
	if err = d.scale(ctx, id, 0); err != nil {
		return later(err)
	}
	if err = d.orphanStatefulSet(ctx, in, sts, rebuildWhy(in, sts)); err != nil {
		return later(err)
	}
	// Claims of before would give the new nodes the old ones' nodes.conf, and data the
	// load replaces; gone, whatever the new persistence (a cluster without persistence
	// uses none).
	if err = d.dropStaleClaims(ctx, id); err != nil {
		return later(err)
	}
	if sts, err = d.createCluster(ctx, in, img, 0); err != nil {
		return later(err)
	}
	return sts, nil
}

// rebuildWhy says what a cluster's new StatefulSet makes of it, for the log.
func rebuildWhy(in clouddb.Instance, sts *appsv1.StatefulSet) string {
	switch {
	case clusterTLS(sts) != (in.TLS != nil) && in.TLS != nil:
		return "TLS turned on"
	case clusterTLS(sts) != (in.TLS != nil):
		return "TLS turned off"
	case hasClaim(sts) != persistent(in):
		return persistenceChange(in)
	}
	return "its Redis version changes"
}

// saveCluster saves each shard's data to its pending file and marks the Secret with
// them (see the top of this file), its writes paused and the nodes' Services routed to
// no pod. A stopped cluster without persistence has no data left to save.
func (d *Driver) saveCluster(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, secret *corev1.Secret) error {
	id := in.DatabaseID
	if (sts.Spec.Replicas == nil || *sts.Spec.Replicas == 0) && !hasClaim(sts) {
		return nil
	}
	shards, err := d.shardPrimaries(ctx, in)
	if err != nil {
		// A shard not served since the last Ensure (a restarted primary not yet taken
		// over from, a stopped cluster): the cluster as it was first.
		was, werr := d.clusterAsItWas(in, sts, secret)
		if werr != nil {
			return werr
		}
		if err = d.ensureCluster(ctx, was, templateImage(sts)); err != nil {
			return fmt.Errorf("database %d: running it as it was, to save its data: %w", id, err)
		}
		if shards, err = d.shardPrimaries(ctx, in); err != nil {
			return err
		}
	}
	eps := make([]redisdata.Endpoint, len(shards))
	files := make([]string, len(shards))
	for s, sh := range shards {
		eps[s], files[s] = sh.Endpoint, d.pendingShardFile(id, s)
	}
	if err = d.saveServers(ctx, eps, files, func() error { return d.markPending(ctx, id, files[0]) }); err != nil {
		return fmt.Errorf("database %d: saving its data before its new pods: %w", id, err)
	}
	if _, _, err = d.applyNodeServices(ctx, in, sts, false); err != nil {
		return fmt.Errorf("%w: %w", err, clouddb.ErrServerStarting)
	}
	d.log.Info("saved a cluster's data for its new pods", "database_id", id, "shards", in.Shards)
	return nil
}

// shardPrimaries are the primaries of every shard of the cluster (see shardPrimary).
func (d *Driver) shardPrimaries(ctx context.Context, in clouddb.Instance) ([]redisdata.Shard, error) {
	shards := make([]redisdata.Shard, in.Shards)
	for s := range shards {
		sh, err := d.shardPrimary(ctx, in, s)
		if err != nil {
			return nil, err
		}
		shards[s] = sh
	}
	return shards, nil
}

// clusterAsItWas is in as the cluster of sts runs: its persistence (told from its
// Secret's config) and TLS (its client certificates from the Secret's CA bundle) of
// before.
func (d *Driver) clusterAsItWas(in clouddb.Instance, sts *appsv1.StatefulSet, secret *corev1.Secret) (clouddb.Instance, error) {
	was := in
	if hasClaim(sts) != persistent(in) {
		was.DataPersistence = "none"
		if hasClaim(sts) {
			if was.DataPersistence = persistenceOf(secret.Data[keyConfig]); was.DataPersistence == "" {
				return was, fmt.Errorf("database %d: its persistence of before cannot be told from its secret's config, so its data cannot be started to be saved", in.DatabaseID)
			}
		}
	}
	if clusterTLS(sts) != (in.TLS != nil) {
		was.TLS = nil
		if clusterTLS(sts) {
			was.TLS = &clouddb.InstanceTLS{ClientCertificates: d.tenantCertificates(secret.Data[keyTLSCA])}
		}
	}
	return was, nil
}

// tenantCertificates are the tenant's client certificates of a CA bundle caBundle made:
// its certificates but the CA's.
func (d *Driver) tenantCertificates(bundle []byte) []string {
	ca := map[string]bool{}
	for rest := d.cfg.CA.CertificatePEM(); ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		ca[string(b.Bytes)] = true
	}
	var out []string
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" && !ca[string(b.Bytes)] {
			out = append(out, string(pem.EncodeToMemory(b)))
		}
	}
	return out
}

// loadPendingCluster loads the shards' pending files into the cluster (formed, its
// Services routed to no pod), one at a time (each through a throwaway server on
// clouddb's machine), with their function libraries, then forgets them; a replicated
// cluster's replicas have it all first. It reports whether there were any. Its errors
// are ErrServerStarting: the files were checked before the old nodes went, and the next
// Ensure tries again.
func (d *Driver) loadPendingCluster(ctx context.Context, in clouddb.Instance, secret *corev1.Secret) (bool, error) {
	mark := secret.Annotations[annotationPendingLoad]
	if mark == "" {
		return false, nil
	}
	id := in.DatabaseID
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("database %d: loading the data saved before its new pods: %w: %w", id, err, clouddb.ErrServerStarting)
	}
	// Named as the mark says (shard 0's), wherever the files were written.
	files := make([]string, in.Shards)
	for s := range files {
		files[s] = strings.TrimSuffix(mark, "-shard-0.rdb") + "-shard-" + strconv.Itoa(s) + ".rdb"
		if _, err := os.Stat(files[s]); err != nil {
			return fail(err)
		}
	}
	shards, err := d.shardPrimaries(ctx, in)
	if err != nil {
		return fail(err)
	}
	for s, f := range files {
		err = d.withSaved(ctx, f, func(src redisdata.Endpoint) error {
			if _, cerr := redisdata.CopyKeysToCluster(ctx, src, shards, redisdata.CopyOptions{Replace: s == 0}); cerr != nil {
				return cerr
			}
			return copyFunctions(ctx, src, shards[s].Endpoint)
		})
		if err != nil {
			return fail(err)
		}
	}
	if in.Replication {
		for s, sh := range shards {
			c := endpointClient(sh.Endpoint)
			n, werr := c.Wait(ctx, 1, clusterWait).Result()
			c.Close()
			if werr == nil && n < 1 {
				werr = errors.New("its replica did not acknowledge the load")
			}
			if werr != nil {
				return fail(fmt.Errorf("shard %d: WAIT: %w", s, werr))
			}
		}
	}
	for s, sh := range shards {
		if err = d.persistLoaded(ctx, in, sh.Endpoint); err != nil {
			return fail(fmt.Errorf("shard %d: %w", s, err))
		}
	}
	if err = d.markPending(ctx, id, ""); err != nil {
		return fail(err)
	}
	delete(secret.Annotations, annotationPendingLoad)
	for _, f := range files {
		if err = os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("cannot remove a loaded snapshot file", "database_id", id, "error", err)
		}
	}
	d.log.Info("loaded a cluster's data into its new pods", "database_id", id, "shards", in.Shards)
	return true, nil
}

// persistenceOf is the data persistence a server of the config file conf runs with;
// "" when it is none of clouddb's.
func persistenceOf(conf []byte) string {
	lines := strings.Split(string(conf), "\n")
	for name, p := range redisconf.Persistences {
		if name == "none" {
			continue
		}
		if !slices.ContainsFunc(p.Directives(), func(l []string) bool {
			return !slices.Contains(lines, strings.TrimSuffix(string(appendLine(nil, l[0], l[1:]...)), "\n"))
		}) {
			return name
		}
	}
	return ""
}

// renewClusterNodes replaces, in a replicated cluster, the pod of a node that differs
// from those the template of sts makes in what a running pod cannot take: the other kind
// of volume (a persistence change, see the top of this file) or a readiness probe of
// before (see probeOfBefore). Nodes of another volume go in ordinal order (the
// StatefulSet's controller stops at an old pod whose volumes it fails to make its
// claim's); the others replicas first. A primary hands its shard over to its replica
// first; the new pod is a new node, which the next pass has join as the shard's replica.
// It returns errNodeReplaced after a replacement, nil when no node is left to replace. A
// cluster without replicas keeps pods of an old probe (it has no node to hand over to).
func (d *Driver) renewClusterNodes(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, nodes []*clusterMember) error {
	if !in.Replication {
		return nil
	}
	claim := hasClaim(sts)
	oldVolume := func(m *clusterMember) bool { return hasVolumeClaim(m.pod) != claim }
	var next *clusterMember
	left := 0
	for _, m := range nodes {
		if !oldVolume(m) && !probeOfBefore(m.pod) {
			continue
		}
		left++
		switch {
		case next == nil:
			next = m
		case oldVolume(m) != oldVolume(next):
			if oldVolume(m) {
				next = m
			}
		case !oldVolume(m) && next.master && !m.master:
			next = m // replicas first
		}
	}
	if next == nil {
		return nil
	}
	if next.master {
		if err := d.handOverFrom(ctx, in, nodes, next); err != nil {
			return err
		}
	}
	if oldVolume(next) && left == 1 && !claim {
		// The claims of before go with the last pod that uses one (kept until it is gone).
		if err := d.deleteClaims(ctx, in.DatabaseID); err != nil {
			return err
		}
	}
	if err := d.endpointAway(ctx, in, nodes, next); err != nil {
		return err
	}
	return d.replaceNode(ctx, in, next.pod)
}
