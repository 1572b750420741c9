package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
)

// Stop scales the database's StatefulSet to zero and waits until its pods are gone: redis
// persists on SIGTERM as configured, and the claims keep the data.
func (d *Driver) Stop(ctx context.Context, databaseID int) error {
	d.stopSources(databaseID)
	d.tlsChecks.Delete(databaseID)
	_, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Get(ctx, Name(databaseID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("database %d: %w", databaseID, err)
	}
	return d.scale(ctx, databaseID, 0)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// waitGone polls done until it answers true, for at most defaultStopTimeout.
func (d *Driver) waitGone(ctx context.Context, databaseID int, what string, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, defaultStopTimeout)
	defer cancel()
	for {
		ok, err := done(ctx)
		if ok {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("database %d: waiting until %s: %w", databaseID, what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("database %d: waiting until %s: %w", databaseID, what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Remove deletes the database's StatefulSet (its Service and Secret go with it, as its
// dependents), its claims, its pods without an owner, and waits until none of its
// labelled objects is left.
func (d *Driver) Remove(ctx context.Context, databaseID int) error {
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	name := Name(databaseID)
	d.stopSources(databaseID)
	d.ingress.Delete(databaseID)
	d.tlsChecks.Delete(databaseID)
	// Data saved for a new pod (persistence.go) goes with the database.
	files := []string{d.pendingFile(databaseID)}
	for s := range clouddb.MaxShards {
		files = append(files, d.pendingShardFile(databaseID, s))
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("database %d: %w", databaseID, err)
		}
	}
	if err := d.cfg.Client.AppsV1().StatefulSets(d.ns).Delete(ctx, name, del); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its statefulset: %w", databaseID, err)
	}
	// Owned, so the garbage collector deletes them too; deleting them here does not
	// depend on it, nor on an object that lost its owner reference.
	one := metav1.ListOptions{LabelSelector: LabelDatabase + "=" + strconv.Itoa(databaseID) + "," + managedSelector}
	// Its Service, and a cluster's nodes' (see cluster.go).
	svcs, err := d.cfg.Client.CoreV1().Services(d.ns).List(ctx, one)
	if err != nil {
		return fmt.Errorf("database %d: listing its services: %w", databaseID, err)
	}
	for _, svc := range svcs.Items {
		if err = d.cfg.Client.CoreV1().Services(d.ns).Delete(ctx, svc.Name, del); ignoreNotFound(err) != nil {
			return fmt.Errorf("database %d: deleting its service %s: %w", databaseID, svc.Name, err)
		}
	}
	if err = d.cfg.Client.CoreV1().Secrets(d.ns).Delete(ctx, name, del); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its secret: %w", databaseID, err)
	}
	if err = d.cfg.Client.PolicyV1().PodDisruptionBudgets(d.ns).Delete(ctx, name, del); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its disruption budget: %w", databaseID, err)
	}
	// Pods orphaned by a StatefulSet's replacement that did not end (persistence.go).
	pods, err := d.cfg.Client.CoreV1().Pods(d.ns).List(ctx, one)
	if err != nil {
		return fmt.Errorf("database %d: listing its pods: %w", databaseID, err)
	}
	for _, p := range pods.Items {
		if len(p.OwnerReferences) > 0 {
			continue // its StatefulSet's: deleted with it
		}
		if err = d.cfg.Client.CoreV1().Pods(d.ns).Delete(ctx, p.Name, del); ignoreNotFound(err) != nil {
			return fmt.Errorf("database %d: deleting its pod %s: %w", databaseID, p.Name, err)
		}
	}
	if err := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns).DeleteCollection(ctx, del, one); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its volumes: %w", databaseID, err)
	}
	// Its StatefulSets' revisions: those of one orphaned by a replacement (persistence.go,
	// makeLostPods) have no owner left when no StatefulSet adopted them.
	if err := d.cfg.Client.AppsV1().ControllerRevisions(d.ns).DeleteCollection(ctx, del, one); ignoreNotFound(err) != nil {
		return fmt.Errorf("database %d: deleting its statefulsets' revisions: %w", databaseID, err)
	}
	return d.waitGone(ctx, databaseID, "its objects are gone", func(ctx context.Context) (bool, error) {
		left, err := d.objects(ctx, one)
		return err == nil && len(left) == 0, err
	})
}

// objects names the driver's objects that match opts: StatefulSets and their revisions,
// pods, Services, Secrets, disruption budgets and claims.
func (d *Driver) objects(ctx context.Context, opts metav1.ListOptions) ([]string, error) {
	var out []string
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range sts.Items {
		out = append(out, "statefulset/"+o.Name)
	}
	pods, err := d.cfg.Client.CoreV1().Pods(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range pods.Items {
		out = append(out, "pod/"+o.Name)
	}
	svcs, err := d.cfg.Client.CoreV1().Services(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range svcs.Items {
		out = append(out, "service/"+o.Name)
	}
	secrets, err := d.cfg.Client.CoreV1().Secrets(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range secrets.Items {
		out = append(out, "secret/"+o.Name)
	}
	pdbs, err := d.cfg.Client.PolicyV1().PodDisruptionBudgets(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range pdbs.Items {
		out = append(out, "poddisruptionbudget/"+o.Name)
	}
	pvcs, err := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range pvcs.Items {
		out = append(out, "persistentvolumeclaim/"+o.Name)
	}
	revs, err := d.cfg.Client.AppsV1().ControllerRevisions(d.ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, o := range revs.Items {
		out = append(out, "controllerrevision/"+o.Name)
	}
	return out, nil
}

// Instances lists the databases that have a StatefulSet, a claim (data) or a pod in
// the namespace, by their labels.
func (d *Driver) Instances(ctx context.Context) ([]int, error) {
	opts := metav1.ListOptions{LabelSelector: managedSelector}
	seen := map[int]bool{}
	add := func(l map[string]string) {
		if id, err := strconv.Atoi(l[LabelDatabase]); err == nil && id > 0 {
			seen[id] = true
		}
	}
	sts, err := d.cfg.Client.AppsV1().StatefulSets(d.ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing statefulsets: %w", err)
	}
	for _, o := range sts.Items {
		add(o.Labels)
	}
	pvcs, err := d.cfg.Client.CoreV1().PersistentVolumeClaims(d.ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing persistent volume claims: %w", err)
	}
	for _, o := range pvcs.Items {
		add(o.Labels)
	}
	// Pods without their StatefulSet (a replacement of it that did not end) run data too.
	pods, err := d.cfg.Client.CoreV1().Pods(d.ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	for _, o := range pods.Items {
		add(o.Labels)
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
