package kubernetes_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"clouddb/driver/kubernetes"
)

// TestOrderedStatefulSetReplaced: the StatefulSet of a replicated database made by an
// earlier clouddb (its nodes started in order, an immutable setting; its pods without the
// readiness probe's socket) is replaced by one whose nodes start in parallel: its running
// pods are adopted as they are, the data kept, and a server of such a pod that restarts
// afterwards starts again (the socket is asked for by the new template's command line,
// not by the redis.conf every pod reads).
func TestOrderedStatefulSetReplaced(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 163, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)

	// As an earlier clouddb made it: ordered, its pods of the template of then.
	name := kubernetes.Name(in.DatabaseID)
	api := cluster.client.AppsV1().StatefulSets(cluster.ns)
	sts := must(api.Get(ctx, name, metav1.GetOptions{}))
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Fatalf("a new database's statefulset starts its nodes %s, want in parallel", sts.Spec.PodManagementPolicy)
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
	spec := &old.Spec.Template.Spec
	c := &spec.Containers[0]
	c.Command = slices.DeleteFunc(c.Command, func(a string) bool {
		return strings.HasPrefix(a, "--unixsocket") || a == "700" || strings.HasSuffix(a, ".sock")
	})
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "REDISCLI_AUTH" })
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "run" })
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "run" })
	c.StartupProbe = nil
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}, PeriodSeconds: 2}
	if _, err := api.Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its pods made again from that template.
	for i := range 2 {
		if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, name+"-"+strconv.Itoa(i), metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
	}
	var pods [2]string
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		for i := range pods {
			p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name+"-"+strconv.Itoa(i), metav1.GetOptions{})
			if err != nil || p.Spec.Containers[0].StartupProbe != nil || !ready(p) {
				return false, nil
			}
			pods[i] = string(p.UID)
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the pods of the older template are not up: %v", err)
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
	tenant := connect(t, d, in, "", in.Password)
	if err := tenant.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := tenant.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	// An adopted pod's server restarts, with the redis.conf of today.
	primary := servingPod(t, ctx, cluster.ns, in.DatabaseID)
	before := podNamed(t, ctx, primary)
	killServer(t, ctx, cluster.ns, primary)
	if err := poll(ctx, 90*time.Second, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, primary, metav1.GetOptions{})
		return err == nil && restarts(p) > restarts(before) && started(p), nil
	}); err != nil {
		t.Fatalf("the server of pod %s did not start again: %v; %s", primary, err, podStates(cluster.ns, in.DatabaseID))
	}
	ensureRunning(t, ctx, d, in)
	if v, err := connect(t, d, in, "", in.Password).Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v; want the key kept", v, err)
	}
}
