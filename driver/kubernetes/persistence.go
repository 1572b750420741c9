package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
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
	"k8s.io/client-go/util/retry"

	"clouddb"
	"clouddb/internal/redisconf"
	"clouddb/redisdata"
)

// Restarts with the data kept. What a running pod cannot take (TLS on or off, see tls.go;
// a new image, see version.go) or
// a StatefulSet cannot (its volume claim: a change of persistence between none and a
// persistent one) needs a new pod, which starts without the data of a pod that did not
// persist. So, first, the old server stops taking writes (CLIENT PAUSE WRITE: a client's
// write waits and, the pod going, is never acknowledged), a snapshot of its data is
// written to pendingFile on clouddb's machine and the database's Secret is marked with
// it (annotationPendingLoad); then the pod (or the StatefulSet, orphaning its Secret,
// Service and claim) is replaced; once the new pod is ready the file is loaded into it
// and the mark removed. An Ensure that fails anywhere in between leaves the mark, and the
// next one loads the file (it never takes a new snapshot over a pending one): nothing is
// lost unless clouddb's TempDir is. The downtime is the new pod's start and the load.

// annotationPendingLoad on a database's Secret names the snapshot file to load into its
// next pod.
const annotationPendingLoad = "clouddb.io/pending-load"

// pendingFile is where a database's data waits for its new pod.
func (d *Driver) pendingFile(id int) string {
	dir := d.cfg.PendingDir
	if dir == "" {
		dir = d.cfg.TempDir
	}
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, fmt.Sprintf("clouddb-k8s-%s-%d.rdb", d.ns, id))
}

// podEndpoint is the pod's server as clouddb's own user.
func (d *Driver) podEndpoint(pod *corev1.Pod, secret *corev1.Secret) (redisdata.Endpoint, error) {
	tc, err := d.podTLS(pod, secret)
	if err != nil {
		return redisdata.Endpoint{}, err
	}
	return redisdata.Endpoint{
		Addr:     net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(redisPort)),
		Username: redisconf.InternalUser,
		Password: string(secret.Data[keyInternal]),
		TLS:      tc,
		NoEvict:  true,
	}, nil
}

// dataPending reports whether the database's data waits for its new pods (its Secret
// is marked); a database without a Secret yet has none waiting.
func (d *Driver) dataPending(ctx context.Context, id int) (bool, error) {
	s, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("database %d: reading its secret: %w", id, err)
	}
	return s.Annotations[annotationPendingLoad] != "", nil
}

// refusePending refuses to read or write a cluster's data while it waits for its new
// pods (cluster_rebuild.go): its load replaces whatever the nodes hold.
func (d *Driver) refusePending(ctx context.Context, id int) error {
	pending, err := d.dataPending(ctx, id)
	if err != nil {
		return err
	}
	if pending {
		return fmt.Errorf("database %d: its pods are being replaced, its data not loaded yet: %w", id, clouddb.ErrServerStarting)
	}
	return nil
}

// saveForRestart pauses the pod's writes, saves its data to pendingFile and marks the
// Secret with it; a pending file is kept as it is (the pod may be one it was not loaded
// into yet).
func (d *Driver) saveForRestart(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, secret *corev1.Secret) error {
	if secret.Annotations[annotationPendingLoad] != "" {
		return nil
	}
	id := in.DatabaseID
	ep, err := d.podEndpoint(pod, secret)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	file := d.pendingFile(id)
	if err = d.saveServers(ctx, []redisdata.Endpoint{ep}, []string{file}, func() error { return d.markPending(ctx, id, file) }); err != nil {
		return fmt.Errorf("database %d: saving its data before its new pod: %w", id, err)
	}
	if err = d.unroute(ctx, in); err != nil {
		return err
	}
	d.log.Info("saved a database's data for its new pod", "database_id", id, "file", file)
	return nil
}

// saveServers saves the data of each server of eps to its file of files, whole, each
// checked to load (checkSaved), then runs mark (which records the files for the new
// pods): every server's writes are first paused (long enough for the new pods to start;
// the old ones go before then), then refused for good (fenceWrites), so none is
// acknowledged that a file lacks however long the snapshots take. On error, mark's
// included, the servers take writes again and the files go.
func (d *Driver) saveServers(ctx context.Context, eps []redisdata.Endpoint, files []string, mark func() error) (err error) {
	pause := strconv.FormatInt((d.cfg.StartTimeout + 2*time.Minute).Milliseconds(), 10)
	var undo []func()
	var clients []*redis.Client
	defer func() {
		if err != nil {
			for _, u := range slices.Backward(undo) {
				u()
			}
			for _, f := range files {
				_ = os.Remove(f)
			}
		}
		// After the undoing, which uses them.
		for _, c := range clients {
			c.Close()
		}
	}()
	for i, ep := range eps {
		c := endpointClient(ep)
		clients = append(clients, c)
		if err = c.Do(ctx, "client", "pause", pause, "write").Err(); err != nil {
			return fmt.Errorf("%s: CLIENT PAUSE: %w", podOf(eps, i), err)
		}
		undo = append(undo, func() { _ = c.Do(context.WithoutCancel(ctx), "client", "unpause").Err() })
		unfence, ferr := fenceWrites(ctx, c)
		if ferr != nil {
			return fmt.Errorf("%s: %w", podOf(eps, i), ferr)
		}
		undo = append(undo, unfence)
	}
	for i, ep := range eps {
		if err = saveSnapshot(ctx, ep, files[i]); err == nil {
			err = d.checkSaved(ctx, files[i])
		}
		if err != nil {
			return fmt.Errorf("%s: %w", podOf(eps, i), err)
		}
	}
	return mark()
}

// podOf names the server i of eps in an error: its address, and which of how many.
func podOf(eps []redisdata.Endpoint, i int) string {
	if len(eps) == 1 {
		return eps[i].Addr
	}
	return fmt.Sprintf("shard %d (%s)", i, eps[i].Addr)
}

// withSaved loads a saved file into a throwaway server on clouddb's machine
// (Config.RedisServer), which checks it, and runs use (when not nil) with that server as
// its source. No limit: it is the database's own data, which it held a moment ago.
func (d *Driver) withSaved(ctx context.Context, file string, use func(src redisdata.Endpoint) error) error {
	temps, err := redisdata.LoadChecked(ctx, redisdata.LoadConfig{Binary: d.cfg.RedisServer, TempDir: d.cfg.TempDir}, []string{file}, 0)
	if err != nil {
		return fmt.Errorf("the data saved for the new pods does not load here (%s): %w", d.cfg.RedisServer, err)
	}
	defer temps[0].Close()
	if use == nil {
		return nil
	}
	return use(temps[0].Endpoint())
}

// loadSaved replaces dst's data with the saved file's, its function libraries included
// (a tenant's FUNCTION LOAD is in its data). dst may be the server the data was saved
// from (an Ensure cut short before it went), which refuses writes since (fenceWrites):
// its writes are open again, its data now the file's.
func (d *Driver) loadSaved(ctx context.Context, file string, dst redisdata.Endpoint) error {
	return d.withSaved(ctx, file, func(src redisdata.Endpoint) error {
		dc := endpointClient(dst)
		err := dc.ConfigSet(ctx, "min-replicas-to-write", "0").Err()
		dc.Close()
		if err != nil {
			return fmt.Errorf("CONFIG SET min-replicas-to-write: %w", err)
		}
		if _, err = redisdata.CopyKeys(ctx, src, dst, redisdata.CopyOptions{Replace: true}); err != nil {
			return err
		}
		return copyFunctions(ctx, src, dst)
	})
}

// fenceWrites has the server of c refuse every write from now on (NOREPLICAS: a
// min-replicas-to-write no server reaches), for a server whose data is being saved for a
// new pod: a write whose client's pause ends before the pod goes (an Ensure that stopped
// there; a connection opened before the Service was routed elsewhere) must not be
// acknowledged, as the saved data would lack it. Writes already paused wait, then fail.
// unfence restores the setting, for a save given up.
func fenceWrites(ctx context.Context, c *redis.Client) (unfence func(), err error) {
	was, err := c.ConfigGet(ctx, "min-replicas-to-write").Result()
	if err != nil {
		return nil, fmt.Errorf("CONFIG GET min-replicas-to-write: %w", err)
	}
	if err = c.ConfigSet(ctx, "min-replicas-to-write", strconv.Itoa(math.MaxInt32)).Err(); err != nil {
		return nil, fmt.Errorf("CONFIG SET min-replicas-to-write: %w", err)
	}
	return func() {
		_ = c.ConfigSet(context.WithoutCancel(ctx), "min-replicas-to-write", was["min-replicas-to-write"]).Err()
	}, nil
}

// checkSaved loads a file just saved into a throwaway server, as the new pod's load will:
// the old pod (or claims) go only once its data is known to load.
func (d *Driver) checkSaved(ctx context.Context, file string) error {
	return d.withSaved(ctx, file, nil)
}

// copyFunctions gives dst the function libraries of src (FUNCTION DUMP and RESTORE), as
// a load of the keys alone would drop them: a tenant's FUNCTION LOAD is in its data.
func copyFunctions(ctx context.Context, src, dst redisdata.Endpoint) error {
	sc, dc := endpointClient(src), endpointClient(dst)
	defer sc.Close()
	defer dc.Close()
	dump, err := sc.FunctionDump(ctx).Result()
	if err != nil {
		return fmt.Errorf("FUNCTION DUMP: %w", err)
	}
	if err = dc.Do(ctx, "function", "restore", dump, "replace").Err(); err != nil {
		return fmt.Errorf("FUNCTION RESTORE: %w", err)
	}
	return nil
}

// persistLoaded has a persistent server write the data just loaded into it to its own
// files, synced (an AOF rewrite, or a snapshot), before the saved file, the only other
// copy, goes: what its AOF holds is synced only once a second, and a snapshot's save
// rule may not run for hours. Without persistence, nothing.
func (d *Driver) persistLoaded(ctx context.Context, in clouddb.Instance, ep redisdata.Endpoint) error {
	p, ok := redisconf.Persistences[in.DataPersistence]
	if !ok || !persistent(in) {
		return nil
	}
	c := endpointClient(ep)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	return writeFilesNow(ctx, c, p.Appendonly == "yes")
}

// writeFilesNow has the server of c write its data to its files, synced, and waits until
// it has: an AOF rewrite (aof) or a snapshot (BGSAVE). One already running (a replica's
// full sync's snapshot) may have begun before the data it must hold was written: this
// one starts after it.
func writeFilesNow(ctx context.Context, c *redis.Client, aof bool) error {
	cmd, count, status, busy := "BGSAVE", "rdb_saves", "rdb_last_bgsave_status", []string{"rdb_bgsave_in_progress"}
	if aof {
		cmd, count, status, busy = "BGREWRITEAOF", "aof_rewrites", "aof_last_bgrewrite_status", []string{"aof_rewrite_in_progress", "aof_rewrite_scheduled"}
	}
	before, started := 0, false
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("INFO persistence: %w", err)
		}
		n, err := strconv.Atoi(infoField(info, count))
		if err != nil {
			return fmt.Errorf("INFO persistence: %s %q: %w", count, infoField(info, count), err)
		}
		switch {
		case !started:
			// Counted from here: nothing else starts one while this is refused, and
			// once this one is taken the next to end is this one.
			before = n
			if err = c.Do(ctx, strings.ToLower(cmd)).Err(); err == nil {
				started = true
				continue
			}
			if !strings.Contains(err.Error(), "in progress") {
				return fmt.Errorf("%s: %w", cmd, err)
			}
		case n > before && !slices.ContainsFunc(busy, func(f string) bool { return infoField(info, f) != "0" }):
			if st := infoField(info, status); st != "ok" {
				return fmt.Errorf("%s: %s", cmd, st)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", cmd, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// saveSnapshot writes a snapshot of ep to file, whole or not at all.
func saveSnapshot(ctx context.Context, ep redisdata.Endpoint, file string) error {
	tmp := file + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	_, err = redisdata.Snapshot(ctx, ep, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// markPending sets (file) or clears ("") the Secret's pending load.
func (d *Driver) markPending(ctx context.Context, id int, file string) error {
	api := d.cfg.Client.CoreV1().Secrets(d.ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := api.Get(ctx, Name(id), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Annotations[annotationPendingLoad] == file {
			return nil
		}
		if file == "" {
			delete(s.Annotations, annotationPendingLoad)
		} else {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[annotationPendingLoad] = file
		}
		_, err = api.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("database %d: marking its secret's pending load: %w", id, err)
	}
	return nil
}

// loadPending loads the Secret's pending file, if any, into the pod, then forgets it.
func (d *Driver) loadPending(ctx context.Context, in clouddb.Instance, pod *corev1.Pod, secret *corev1.Secret) error {
	file := secret.Annotations[annotationPendingLoad]
	if file == "" {
		return nil
	}
	id := in.DatabaseID
	if err := d.unroute(ctx, in); err != nil {
		return err
	}
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("database %d: the data saved before its new pod cannot be loaded: %w", id, err)
	}
	dst, err := d.podEndpoint(pod, secret)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if err = d.loadSaved(ctx, file, dst); err != nil {
		return fmt.Errorf("database %d: loading the data saved before its new pod: %w", id, err)
	}
	if err = d.persistLoaded(ctx, in, dst); err != nil {
		return fmt.Errorf("database %d: the data loaded into its new pod: %w", id, err)
	}
	if err = d.markPending(ctx, id, ""); err != nil {
		return err
	}
	delete(secret.Annotations, annotationPendingLoad)
	if err = os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("cannot remove a loaded snapshot file", "database_id", id, "error", err)
	}
	d.log.Info("loaded a database's data into its new pod", "database_id", id)
	if !persistent(in) {
		// The claims of the StatefulSet of before, which the data no longer needs.
		return d.deleteClaims(ctx, id)
	}
	return nil
}

// settle loads a pending file into the pod, and replaces a pod whose TLS or image is not
// the template's (want) with one that is, its data kept. It returns the pod that serves.
func (d *Driver) settle(ctx context.Context, in clouddb.Instance, secret *corev1.Secret, want *appsv1.StatefulSet, pod *corev1.Pod) (*corev1.Pod, error) {
	if err := d.loadPending(ctx, in, pod, secret); err != nil {
		return nil, err
	}
	if pod.Annotations[annotationTLS] == want.Spec.Template.Annotations[annotationTLS] && podImage(&pod.Spec) == templateImage(want) &&
		hasVolumeClaim(pod) == hasClaim(want) {
		return pod, nil
	}
	id := in.DatabaseID
	// Its volume too: a replicated database's roll to persistence whose replication was
	// turned off before the roll reached node 0.
	d.log.Info("replacing a database's pod for what it cannot take live (TLS on or off, its image, its volume)", "database_id", id, "pod", pod.Name,
		"image", templateImage(want))
	if err := d.saveForRestart(ctx, in, pod, secret); err != nil {
		return nil, err
	}
	if err := d.scale(ctx, id, 0); err != nil {
		return nil, err
	}
	// The old pod's config leaves the Secret with it (see addConfigs): a key the new pod
	// reads too (one made before keys per TLS digest) is the new pod's again.
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: %w", id, err)
	}
	if _, err = d.applySecret(ctx, in, sts); err != nil {
		return nil, err
	}
	if err = d.scale(ctx, id, 1); err != nil {
		return nil, err
	}
	pod, err = d.waitStarted(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	secret, err = d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: reading its secret: %w", id, err)
	}
	if err = d.loadPending(ctx, in, pod, secret); err != nil {
		return nil, err
	}
	return pod, nil
}

// scale sets the database's StatefulSet's replicas to n; to 0, it waits until its pods
// are gone.
func (d *Driver) scale(ctx context.Context, id int, n int32) error {
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if err = d.updateStatefulSet(ctx, sts, func(sts *appsv1.StatefulSet) bool {
		if sts.Spec.Replicas != nil && *sts.Spec.Replicas == n {
			return false
		}
		sts.Spec.Replicas = ptr(n)
		return true
	}); err != nil {
		return fmt.Errorf("database %d: scaling its statefulset to %d: %w", id, n, err)
	}
	if n > 0 {
		return nil
	}
	// Every pod: they stop in parallel.
	return d.waitGone(ctx, id, "its pods are gone", func(ctx context.Context) (bool, error) {
		pods, err := d.podsOf(ctx, id)
		return err == nil && len(pods) == 0, err
	})
}

// claimsOf selects the database's claims (a node's each).
func claimsOf(id int) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: LabelDatabase + "=" + strconv.Itoa(id) + "," + managedSelector}
}

// deleteClaims deletes the database's claims, if any (by a collection: the driver's role
// deletes claims so only).
func (d *Driver) deleteClaims(ctx context.Context, id int) error {
	err := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, claimsOf(id))
	if err != nil {
		return fmt.Errorf("database %d: deleting its claims: %w", id, err)
	}
	return nil
}

// changePersistence replaces the StatefulSet of a database whose persistence changes
// between none and a persistent one, its data kept, and returns the new one (no pod yet,
// as create makes it): the data is saved (a replicated database's primary's, whose
// replica the new StatefulSet's first node loads it into syncs from), the StatefulSet
// scaled to 0 and deleted with its dependents orphaned (Ensure gives the Secret and the
// Service to the new one), and stale claims deleted before the new StatefulSet would
// take them over. A running replicated database keeps its pods instead, replaced one at
// a time (see adoptNodes).
func (d *Driver) changePersistence(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, img string) (*appsv1.StatefulSet, error) {
	id := in.DatabaseID
	secret, err := d.cfg.Client.CoreV1().Secrets(d.ns).Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("database %d: reading its secret: %w", id, err)
	}
	if secret.Annotations[annotationPendingLoad] == "" && in.Replication && sts.Spec.Replicas != nil && *sts.Spec.Replicas == nodeCount(in) {
		return d.adoptNodes(ctx, in, sts, img)
	}
	if secret.Annotations[annotationPendingLoad] == "" {
		pod, rerr := d.runToSave(ctx, in, sts, secret)
		if rerr != nil {
			return nil, rerr
		}
		if err = d.saveForRestart(ctx, in, pod, secret); err != nil {
			return nil, err
		}
	}
	if err = d.scale(ctx, id, 0); err != nil {
		return nil, err
	}
	if err = d.orphanStatefulSet(ctx, in, sts, persistenceChange(in)); err != nil {
		return nil, err
	}
	if persistent(in) {
		if err = d.dropStaleClaims(ctx, id); err != nil {
			return nil, err
		}
	}
	return d.create(ctx, in, img)
}

// persistenceChange says what a change of persistence makes of the database, for the log.
func persistenceChange(in clouddb.Instance) string {
	if persistent(in) {
		return "its data persists"
	}
	return "its data no longer persists"
}

// dropStaleClaims deletes the claims of a database that did not persist, before a
// StatefulSet that persists would take them over with their old data, and waits until
// they are gone.
func (d *Driver) dropStaleClaims(ctx context.Context, id int) error {
	if err := d.deleteClaims(ctx, id); err != nil {
		return err
	}
	return d.waitGone(ctx, id, "its stale claims are gone", func(ctx context.Context) (bool, error) {
		left, err := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns).List(ctx, claimsOf(id))
		return err == nil && len(left.Items) == 0, err
	})
}

// dropUnusedClaims deletes the database's claims that no pod of it mounts (a pod that
// runs on one keeps it: a persistence change taken back while its pods were being
// replaced), and waits until they are gone: a new pod would otherwise take over a claim
// of before, with its old data (and a cluster node's old identity).
func (d *Driver) dropUnusedClaims(ctx context.Context, id int) error {
	api := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns)
	claims, err := api.List(ctx, claimsOf(id))
	if err != nil {
		return fmt.Errorf("database %d: listing its claims: %w", id, err)
	}
	pods, err := d.podsOf(ctx, id)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				used[v.PersistentVolumeClaim.ClaimName] = true
			}
		}
	}
	var gone []types.UID
	for _, c := range claims.Items {
		if used[c.Name] || c.DeletionTimestamp != nil {
			continue
		}
		err = api.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("database %d: deleting its claim %s: %w", id, c.Name, err)
		}
		gone = append(gone, c.UID)
	}
	return d.waitGone(ctx, id, "its stale claims are gone", func(ctx context.Context) (bool, error) {
		left, err := api.List(ctx, claimsOf(id))
		return err == nil && !slices.ContainsFunc(left.Items, func(c corev1.PersistentVolumeClaim) bool { return slices.Contains(gone, c.UID) }), err
	})
}

// orphanStatefulSet deletes the database's StatefulSet sts, its dependents orphaned (its
// pods, if any, run on; Ensure gives the Secret and the Service to the new one), and
// waits until it is gone. why is the change the new one makes, for the log.
func (d *Driver) orphanStatefulSet(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, why string) error {
	id := in.DatabaseID
	d.log.Info("replacing a database's statefulset", "database_id", id, "why", why)
	orphan := metav1.DeletePropagationOrphan
	api := d.cfg.Client.AppsV1().StatefulSets(d.ns)
	err := api.Delete(ctx, sts.Name, metav1.DeleteOptions{PropagationPolicy: &orphan, Preconditions: &metav1.Preconditions{UID: &sts.UID}})
	if ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its statefulset: %w", id, err)
	}
	return d.waitGone(ctx, id, "its old statefulset is gone", func(ctx context.Context) (bool, error) {
		s, gerr := api.Get(ctx, sts.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(gerr) || (gerr == nil && s.UID != sts.UID), ignoreNotFound(gerr)
	})
}

// adoptNodes is changePersistence of a running replicated database, which keeps it
// available: the new StatefulSet adopts the running pods (create makes it with as many
// nodes as run), and renewNodes replaces them one at a time, each new node syncing from
// the primary. Stale claims go first (those no running pod uses); those of a database
// that no longer persists go with its last old pod.
func (d *Driver) adoptNodes(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, img string) (*appsv1.StatefulSet, error) {
	if err := d.orphanStatefulSet(ctx, in, sts, persistenceChange(in)); err != nil {
		return nil, err
	}
	if persistent(in) {
		if err := d.dropUnusedClaims(ctx, in.DatabaseID); err != nil {
			return nil, err
		}
	}
	return d.create(ctx, in, img)
}

// orphanedNodes is the number of nodes, of at most limit, a new StatefulSet of the
// database takes over: up to the highest ordinal of its pods that run (see adoptNodes).
func (d *Driver) orphanedNodes(ctx context.Context, id, limit int) (int32, error) {
	pods, err := d.podsOf(ctx, id)
	if err != nil {
		return 0, err
	}
	var n int32
	for _, p := range pods {
		for i := range limit {
			if p.Name == nodePodName(id, i) && p.DeletionTimestamp == nil {
				n = max(n, int32(i+1))
			}
		}
	}
	return n, nil
}

// runToSave is the pod whose data is the database's, on its StatefulSet of before: its
// one pod, or the primary of its nodes, which Ensure elects and configures first (a
// stopped database runs first: its data is in its pod, or on its claims).
func (d *Driver) runToSave(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, secret *corev1.Secret) (*corev1.Pod, error) {
	id := in.DatabaseID
	nodes := nodeCount(in)
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas > 0 {
		nodes = *sts.Spec.Replicas
	}
	if err := d.scale(ctx, id, nodes); err != nil {
		return nil, err
	}
	if nodes == 1 {
		return d.waitStarted(ctx, id, 0)
	}
	if err := d.runNodes(ctx, in, secret, containerMemory(sts), int(nodes)); err != nil {
		return nil, err
	}
	pod, err := d.primaryPod(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("database %d: %w", id, err)
	}
	return pod, nil
}

// unroute points the database's Service at no pod while its data waits for a new pod: it
// selects the primary's label, which no pod of a one-node database carries. The load
// replaces what the pod holds (FLUSHALL), so a client must not write to the new pod
// before it; Ensure routes the Service again once the data is in (applyService with
// primaryOnly false).
func (d *Driver) unroute(ctx context.Context, in clouddb.Instance) error {
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	_, err = d.applyService(ctx, in, sts, ptr(true))
	return err
}
