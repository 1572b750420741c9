package kubernetes

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"clouddb"
)

// A replicated database (or cluster) survives the loss of one of its pods: its replica
// holds the data and Ensure fails over to it. Two voluntary disruptions at once (a node
// drain evicting both, two nodes drained together) could take both copies, so such a
// database has a PodDisruptionBudget of one pod unavailable at a time, and its pods
// prefer different nodes. A database of one pod per shard gets neither: a budget that
// forbids its only pod's eviction would block every drain.

// applyDisruptionBudget creates, updates or deletes the database's PodDisruptionBudget
// as it has replicas or not.
func (d *Driver) applyDisruptionBudget(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet) error {
	api := d.cfg.Client.PolicyV1().PodDisruptionBudgets(d.ns)
	name := Name(in.DatabaseID)
	one := intstr.FromInt32(1)
	want := policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: &one,
		Selector:       &metav1.LabelSelector{MatchLabels: selector(in.DatabaseID)},
	}
	// Again on a conflict: the disruption controller writes the budget's status.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pdb, err := api.Get(ctx, name, metav1.GetOptions{})
		found := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if !in.Replication {
			if !found {
				return nil
			}
			if err = api.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		if found {
			if pdb.Spec.MaxUnavailable != nil && *pdb.Spec.MaxUnavailable == one && pdb.Spec.MinAvailable == nil &&
				pdb.Spec.Selector != nil && maps.Equal(pdb.Spec.Selector.MatchLabels, want.Selector.MatchLabels) &&
				len(pdb.OwnerReferences) == 1 && pdb.OwnerReferences[0].UID == sts.UID {
				return nil
			}
		} else {
			pdb = &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.ns}}
		}
		pdb.Labels, pdb.OwnerReferences, pdb.Spec = labels(in.DatabaseID), ownedBy(sts), want
		if found {
			_, err = api.Update(ctx, pdb, metav1.UpdateOptions{})
		} else {
			_, err = api.Create(ctx, pdb, metav1.CreateOptions{})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("database %d: writing its disruption budget: %w", in.DatabaseID, err)
	}
	return nil
}

// spreadPods has the pods of a replicated database prefer nodes that run none of its
// other pods: a node lost then takes one copy of the data, not both. Preferred only, so
// that a one-node cluster runs them too.
func spreadPods(in clouddb.Instance) *corev1.Affinity {
	if !in.Replication {
		return nil
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: selector(in.DatabaseID)},
				TopologyKey:   corev1.LabelHostname,
			},
		}},
	}}
}
