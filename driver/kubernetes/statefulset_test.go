package kubernetes_test

import (
	"context"
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
// earlier clouddb (its nodes started in order, an immutable setting; its pods Ready once
// their port listened, without the readiness probe's socket) is replaced by one whose
// nodes start in parallel. A server of such a pod that restarts meanwhile starts again
// (the socket is asked for by the new template's command line, not by the redis.conf
// every pod reads). Its pods, which a disruption budget would count as serving while
// they sync, empty, are replaced one at a time by pods of the new template, the data
// kept.
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
	orphanStatefulSet(t, ctx, name)
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

	// A server of the template of then restarts, reading the redis.conf of today.
	before := podNamed(t, ctx, name+"-0")
	killServer(t, ctx, cluster.ns, before.Name)
	if err := poll(ctx, 90*time.Second, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, before.Name, metav1.GetOptions{})
		return err == nil && restarts(p) > restarts(before) && ready(p), nil
	}); err != nil {
		t.Fatalf("the server of pod %s did not start again: %v; %s", before.Name, err, podStates(cluster.ns, in.DatabaseID))
	}
	// The nodes as the earlier clouddb ran them: pod 0 the primary with the data, pod 1
	// its replica in sync.
	internal := internalPassword(t, ctx, in.DatabaseID)
	p0, p1 := podNamed(t, ctx, name+"-0"), podNamed(t, ctx, name+"-1")
	c0 := redisClient(t, p0.Status.PodIP+":6379", "clouddb-internal", internal)
	c1 := redisClient(t, p1.Status.PodIP+":6379", "clouddb-internal", internal)
	if err := c0.Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c1.Do(ctx, "replicaof", p0.Status.PodIP, "6379").Err(); err != nil {
		t.Fatal(err)
	}
	writeAcked(t, ctx, c0, "k", 100)

	ensureRunning(t, ctx, d, in)
	if got := must(api.Get(ctx, name, metav1.GetOptions{})).Spec.PodManagementPolicy; got != appsv1.ParallelPodManagement {
		t.Fatalf("after Ensure, the statefulset starts its nodes %s, want in parallel", got)
	}
	for i, uid := range pods {
		p := podNamed(t, ctx, name+"-"+strconv.Itoa(i))
		if string(p.UID) == uid {
			t.Errorf("pod %s of the earlier template was kept", p.Name)
		}
		if rp := p.Spec.Containers[0].ReadinessProbe; rp == nil || rp.Exec == nil {
			t.Errorf("pod %s is Ready on %+v, not on whether it holds the data", p.Name, rp)
		}
	}
	if up, err := d.Running(ctx, in); err != nil || !up {
		t.Fatalf("Running after the pods were replaced = %v, %v", up, err)
	}
	requireKeys(t, ctx, connect(t, d, in, "", in.Password), "k", 100)
}

// orphanStatefulSet deletes the StatefulSet name, its pods left running without it (as
// a replacement of it cut short leaves them), and waits until it is gone.
func orphanStatefulSet(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	api := cluster.client.AppsV1().StatefulSets(cluster.ns)
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
}
