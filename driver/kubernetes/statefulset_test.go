package kubernetes_test

import (
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb/driver/kubernetes"
)

// TestOrderedStatefulSetReplaced: the StatefulSet of a replicated database made by an
// earlier clouddb, whose nodes start in order (an immutable setting), is replaced by one
// whose nodes start in parallel: its running pods are adopted as they are, the data kept.
func TestOrderedStatefulSetReplaced(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 163, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	if err := connect(t, d, in, "", in.Password).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// As an earlier clouddb made it: the same StatefulSet, its nodes in order.
	name := kubernetes.Name(in.DatabaseID)
	api := cluster.client.AppsV1().StatefulSets(cluster.ns)
	sts := must(api.Get(ctx, name, metav1.GetOptions{}))
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Fatalf("a new database's statefulset starts its nodes %s, want in parallel", sts.Spec.PodManagementPolicy)
	}
	pods := [2]string{}
	for i := range pods {
		pods[i] = string(podNamed(t, ctx, name+"-"+strconv.Itoa(i)).UID)
	}
	orphan := metav1.DeletePropagationOrphan
	if err := api.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Minute, func() (bool, error) {
		_, err := api.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the statefulset is not gone: %v", err)
	}
	old := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.ns, Labels: sts.Labels}, Spec: sts.Spec}
	old.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	if _, err := api.Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ensureRunning(t, ctx, d, in)
	if got := must(api.Get(ctx, name, metav1.GetOptions{})).Spec.PodManagementPolicy; got != appsv1.ParallelPodManagement {
		t.Fatalf("after Ensure, the statefulset starts its nodes %s, want in parallel", got)
	}
	for i, uid := range pods {
		if p := podNamed(t, ctx, name+"-"+strconv.Itoa(i)); string(p.UID) != uid {
			t.Errorf("pod %s was replaced, want adopted as it ran", p.Name)
		}
	}
	if v, err := connect(t, d, in, "", in.Password).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v; want the key kept", v, err)
	}
}
