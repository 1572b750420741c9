package kubernetes_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// faulty is a Kubernetes client whose calls fail where its hooks say: an API error, or
// clouddb dying, at that step.
type faulty struct {
	k8s.Interface
	serviceUpdate     func(*corev1.Service) error
	statefulSetCreate func() error
	statefulSetDelete func() error
	podDelete         func() error
}

var errInjected = errors.New("injected: the API server did not answer")

func (c faulty) CoreV1() corev1client.CoreV1Interface { return faultyCore{c.Interface.CoreV1(), c} }
func (c faulty) AppsV1() appsv1client.AppsV1Interface { return faultyApps{c.Interface.AppsV1(), c} }

type faultyCore struct {
	corev1client.CoreV1Interface
	f faulty
}

func (c faultyCore) Services(ns string) corev1client.ServiceInterface {
	return faultyServices{c.CoreV1Interface.Services(ns), c.f}
}
func (c faultyCore) Pods(ns string) corev1client.PodInterface {
	return faultyPods{c.CoreV1Interface.Pods(ns), c.f}
}

type faultyApps struct {
	appsv1client.AppsV1Interface
	f faulty
}

func (c faultyApps) StatefulSets(ns string) appsv1client.StatefulSetInterface {
	return faultySets{c.AppsV1Interface.StatefulSets(ns), c.f}
}

type faultyServices struct {
	corev1client.ServiceInterface
	f faulty
}

func (s faultyServices) Update(ctx context.Context, svc *corev1.Service, opts metav1.UpdateOptions) (*corev1.Service, error) {
	if s.f.serviceUpdate != nil {
		if err := s.f.serviceUpdate(svc); err != nil {
			return nil, err
		}
	}
	return s.ServiceInterface.Update(ctx, svc, opts)
}

type faultyPods struct {
	corev1client.PodInterface
	f faulty
}

func (p faultyPods) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if p.f.podDelete != nil {
		if err := p.f.podDelete(); err != nil {
			return err
		}
	}
	return p.PodInterface.Delete(ctx, name, opts)
}

type faultySets struct {
	appsv1client.StatefulSetInterface
	f faulty
}

func (s faultySets) Create(ctx context.Context, sts *appsv1.StatefulSet, opts metav1.CreateOptions) (*appsv1.StatefulSet, error) {
	if s.f.statefulSetCreate != nil {
		if err := s.f.statefulSetCreate(); err != nil {
			return nil, err
		}
	}
	return s.StatefulSetInterface.Create(ctx, sts, opts)
}

func (s faultySets) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if s.f.statefulSetDelete != nil {
		if err := s.f.statefulSetDelete(); err != nil {
			return err
		}
	}
	return s.StatefulSetInterface.Delete(ctx, name, opts)
}

// TestClusterRebuildCutAfterSave: a cluster rebuild (persistence none -> aof, no
// replicas: its data saved) whose Ensure stops right after the Secret is marked leaves
// the old node running, its writes paused for a while only: once they are no longer
// paused (here: unpaused at once), the old node refuses every write (a client's open
// connection included), so none is acknowledged that the saved data lacks; the next
// Ensure loads the data, every key acknowledged before kept.
func TestClusterRebuildCutAfterSave(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 6*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 410, "none")
	in.OSSCluster, in.Shards = true, 1
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	if err := cc.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// The Service updates that route the nodes to no pod, saveCluster's last step after the mark.
	unroute := func(svc *corev1.Service) error {
		if _, ok := svc.Spec.Selector[kubernetes.LabelRole]; ok {
			return errInjected
		}
		return nil
	}
	dFail := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.Client = faulty{Interface: cluster.client, serviceUpdate: unroute} })
	in.DataPersistence = "aof-every-1-second"
	err := dFail.Ensure(ctx, in)
	t.Logf("Ensure cut short after the mark: %v", err)
	if err == nil {
		t.Fatal("Ensure did not fail")
	}
	s := must(cluster.client.CoreV1().Secrets(cluster.ns).Get(ctx, kubernetes.Name(in.DatabaseID), metav1.GetOptions{}))
	if s.Annotations["clouddb.io/pending-load"] == "" {
		t.Fatal("no pending mark: the cut was not after the mark")
	}
	// The pause's end, now.
	old := podNamed(t, ctx, kubernetes.Name(in.DatabaseID)+"-0")
	port := nodePort(t, ctx, kubernetes.Name(in.DatabaseID))
	internal := redisClient(t, net.JoinHostPort(old.Status.PodIP, strconv.Itoa(port)), "clouddb-internal", internalPassword(t, ctx, in.DatabaseID))
	if err = internal.Do(ctx, "client", "unpause").Err(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = cc.Set(wctx, "after", "acknowledged", 0).Err()
	cancel()
	if err == nil || !strings.Contains(err.Error(), "NOREPLICAS") {
		t.Fatalf("a write to the old node once its data was saved = %v, want it refused (NOREPLICAS)", err)
	}

	ensureRunning(t, ctx, d, in)
	cc2 := clusterClient(d, in)
	defer cc2.Close()
	if v, err := cc2.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("before = %q, %v", v, err)
	}
}

// TestClusterRemoveAfterCutRebuild: a replicated cluster's persistence change whose
// Ensure stops between the orphaning delete of the StatefulSet and the new one (the
// adopting path) leaves the pods running without an owner; Instances still lists the
// database, and its Remove deletes them.
func TestClusterRemoveAfterCutRebuild(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 10*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 411, "none")
	in.OSSCluster, in.Shards, in.Replication = true, 1, true
	sel := metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=411"}
	t.Cleanup(func() {
		cctx := ctxFor(t, time.Minute)
		_ = cluster.client.CoreV1().Pods(cluster.ns).DeleteCollection(cctx, metav1.DeleteOptions{}, sel)
		_ = d.Remove(cctx, in.DatabaseID)
	})
	ensureRunning(t, ctx, d, in)

	dFail := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.Client = faulty{Interface: cluster.client, statefulSetCreate: func() error { return errInjected }}
	})
	in.DataPersistence = "aof-every-1-second"
	err := dFail.Ensure(ctx, in)
	t.Logf("Ensure cut short before the new statefulset: %v", err)
	if err == nil {
		t.Fatal("Ensure did not fail")
	}
	ownerless := 0
	for _, p := range must(cluster.client.CoreV1().Pods(cluster.ns).List(ctx, sel)).Items {
		if len(p.OwnerReferences) == 0 {
			ownerless++
		}
	}
	if ownerless != 2 {
		t.Fatalf("pods left without their statefulset by the cut: %d, want both", ownerless)
	}
	if !slices.Contains(must(d.Instances(ctx)), in.DatabaseID) {
		t.Errorf("Instances after the cut does not list database %d, whose pods run", in.DatabaseID)
	}
	rctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	rerr := d.Remove(rctx, in.DatabaseID)
	t.Logf("Remove: %v", rerr)
	pods := must(cluster.client.CoreV1().Pods(cluster.ns).List(ctx, sel))
	var left []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			left = append(left, p.Name+" (owners "+strconv.Itoa(len(p.OwnerReferences))+")")
		}
	}
	if rerr != nil || len(left) > 0 {
		t.Errorf("Remove = %v; pods still running after it: %v", rerr, left)
	}
	if slices.Contains(must(d.Instances(ctx)), in.DatabaseID) {
		t.Errorf("Instances after Remove lists database %d", in.DatabaseID)
	}
}

// TestClusterRebuildKeepsFunctions: a tenant's Redis Functions (FUNCTION LOAD, allowed to
// tenants: not @admin) are kept by a rebuild that saves and loads (persistence change
// without replicas), as its keys are.
func TestClusterRebuildKeepsFunctions(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 412, "none")
	in.OSSCluster, in.Shards = true, 1
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	lib := "#!lua name=tenantlib\nredis.register_function('tenantfn', function() return 'ok' end)"
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.FunctionLoad(ctx, lib).Err()
	}); err != nil {
		t.Fatalf("FUNCTION LOAD as the tenant: %v", err)
	}
	if err := cc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := cc.FCall(ctx, "tenantfn", []string{"k"}).Text(); err != nil || v != "ok" {
		t.Fatalf("FCALL before: %q, %v", v, err)
	}
	in.DataPersistence = "aof-every-1-second"
	ensureRunning(t, ctx, d, in)
	cc2 := clusterClient(d, in)
	defer cc2.Close()
	if v, err := cc2.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("k after the rebuild = %q, %v", v, err)
	}
	if v, err := cc2.FCall(ctx, "tenantfn", []string{"k"}).Text(); err != nil || v != "ok" {
		t.Errorf("the tenant's function library after the rebuild: FCALL = %q, %v", v, err)
	}
}

// TestClusterPersistenceTakenBackUnscheduled: a replicated cluster's persistence change
// none -> persistent whose new pod cannot be scheduled (its claim never binds: a storage
// class that does not exist, a quota) is taken back by the user; the pending pod of the
// claim template is replaced by one without a claim and Ensure converges.
func TestClusterPersistenceTakenBackUnscheduled(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 10*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 413, "none")
	in.OSSCluster, in.Shards, in.Replication = true, 1, true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)

	bad := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.StorageClass = "clouddb-no-such-class"
		c.StartTimeout = 20 * time.Second
	})
	in.DataPersistence = "aof-every-1-second"
	for i := range 3 {
		err := bad.Ensure(ctx, in)
		t.Logf("Ensure %d onto claims that cannot bind: %v", i, err)
	}
	in.DataPersistence = "none" // the user takes the change back
	var last error
	for i := range 6 {
		last = d.Ensure(ctx, in)
		t.Logf("Ensure %d after the change is taken back: %v", i, last)
		if last == nil {
			break
		}
		time.Sleep(5 * time.Second)
	}
	pods := must(cluster.client.CoreV1().Pods(cluster.ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=413"}))
	for _, p := range pods.Items {
		t.Logf("pod %s phase %s node %q claim volume %v", p.Name, p.Status.Phase, p.Spec.NodeName, hasClaimVolume(&p))
	}
	if last != nil {
		t.Errorf("Ensure never converges after the persistence change is taken back: %v", last)
	}
	for _, p := range pods.Items {
		if hasClaimVolume(&p) || !ready(&p) {
			t.Errorf("pod %s once the change is taken back: on a claim %v, ready %v; want a ready pod without one", p.Name, hasClaimVolume(&p), ready(&p))
		}
	}
}

// TestClusterPersistenceTakenBackKeepsClaims: a replicated cluster going from a
// persistent persistence to none is cut after its first node was replaced (the others
// still run on their claims, their data persisted there); the user takes the change
// back: the nodes that run on their claims keep them and their pods, every key is kept.
func TestClusterPersistenceTakenBackKeepsClaims(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 10*time.Minute)
	d, in := replicatedClusterWithKeys(t, ctx, 414, "aof-every-1-second")

	in.DataPersistence = "none"
	ensureCut(t, ctx, in, 1)
	// The roll under way: node 0 replaced without a claim, the others on theirs.
	sel := metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=414"}
	onClaims := map[string]types.UID{}
	for _, p := range must(cluster.client.CoreV1().Pods(cluster.ns).List(ctx, sel)).Items {
		if hasClaimVolume(&p) {
			onClaims[p.Name] = p.UID
		}
	}
	if len(onClaims) != 3 {
		t.Fatalf("pods on a claim once the roll was cut: %v, want 3 of 4", onClaims)
	}
	claimsBefore := map[string]types.UID{}
	for _, c := range must(cluster.client.CoreV1().PersistentVolumeClaims(cluster.ns).List(ctx, sel)).Items {
		claimsBefore[c.Name] = c.UID
	}

	in.DataPersistence = "aof-every-1-second"
	ensureRunning(t, ctx, d, in)
	// The nodes that ran on their claims kept them (and their pods): only the other is new.
	for name, uid := range onClaims {
		p := podNamed(t, ctx, name)
		if p.UID != uid {
			t.Errorf("pod %s, on its claim before the change was taken back, was replaced", name)
		}
		for _, v := range p.Spec.Volumes {
			if c := v.PersistentVolumeClaim; c != nil {
				now := must(cluster.client.CoreV1().PersistentVolumeClaims(cluster.ns).Get(ctx, c.ClaimName, metav1.GetOptions{}))
				if now.UID != claimsBefore[c.ClaimName] || now.DeletionTimestamp != nil {
					t.Errorf("claim %s of running pod %s was deleted or made again", c.ClaimName, name)
				}
			}
		}
	}
	if n := liveClaims(t, ctx, in.DatabaseID); n != 4 {
		t.Errorf("%d claims once the change is taken back, want 4", n)
	}
	cc2 := clusterClient(d, in)
	defer cc2.Close()
	requireKeys(t, ctx, cc2, "k", 100)
}

// TestClusterRebuildUnreadableSave: a rebuild whose saved files clouddb's local
// redis-server cannot read (simulated: one older than the pods' image refuses their RDB
// version) gives up before anything goes: the old pods and claims stay, no mark.
func TestClusterRebuildUnreadableSave(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 417, "aof-every-1-second")
	in.OSSCluster, in.Shards = true, 1
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	if err := cc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "redis-server")
	if err := os.WriteFile(old, []byte("#!/bin/sh\necho \"# Can't handle RDB format version 12\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dOld := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.RedisServer = old })
	in.DataPersistence = "none"
	for i := range 2 {
		err := dOld.Ensure(ctx, in)
		t.Logf("Ensure %d with a redis-server that cannot read the files: %v", i, err)
		if err == nil || !strings.Contains(err.Error(), "does not load here") {
			t.Fatalf("Ensure %d with a redis-server that cannot read the files = %v, want the check of the saved data to fail", i, err)
		}
	}
	claims := liveClaims(t, ctx, in.DatabaseID)
	pods := must(cluster.client.CoreV1().Pods(cluster.ns).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=417"}))
	var withClaim int
	for _, p := range pods.Items {
		if hasClaimVolume(&p) {
			withClaim++
		}
	}
	s := must(cluster.client.CoreV1().Secrets(cluster.ns).Get(ctx, kubernetes.Name(in.DatabaseID), metav1.GetOptions{}))
	t.Logf("live claims %d, pods on a claim %d, pending mark %q", claims, withClaim, s.Annotations["clouddb.io/pending-load"])
	if claims != 1 || withClaim != 1 || s.Annotations["clouddb.io/pending-load"] != "" {
		t.Fatalf("after a save that does not load: %d claims, %d pods on one, mark %q; want the old pod and claim kept, no mark",
			claims, withClaim, s.Annotations["clouddb.io/pending-load"])
	}
	if left := must(filepath.Glob(filepath.Join(os.TempDir(), "clouddb-k8s-"+cluster.ns+"-417-*"))); len(left) != 0 {
		t.Errorf("files left by the save given up: %v", left)
	}
	// The old node takes writes again, and a driver that reads the files completes it.
	if err := cc.Set(ctx, "k2", "v2", 0).Err(); err != nil {
		t.Fatalf("a write once the save was given up: %v", err)
	}
	ensureRunning(t, ctx, d, in)
	cc2 := clusterClient(d, in)
	defer cc2.Close()
	for k, v := range map[string]string{"k": "v", "k2": "v2"} {
		if got, err := cc2.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("%s after the change = %q, %v", k, got, err)
		}
	}
}

// TestSaveCutShortRefusesWrites: a one-node database whose pod is replaced for TLS turned
// on, the Ensure cut short once its data was saved: the old pod, whose writes are no
// longer paused (here: unpaused at once), refuses a write on a connection opened before
// (it would be acknowledged, then lost by the load); the next Ensure loads the saved data
// (into the old pod itself, which then takes writes again, before it is replaced) and
// every key acknowledged before is kept.
func TestSaveCutShortRefusesWrites(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 418, "none")
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	open := redis.NewClient(&redis.Options{Addr: d.PublicEndpoint(in.Port), Password: in.Password, PoolSize: 1, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer open.Close()
	reachable(t, ctx, open)
	for i := range 50 {
		if err := open.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	in.TLS = &clouddb.InstanceTLS{}
	cut, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupted := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.Logger = slog.New(cancelOn{prefix: "saved a database's data", cancel: cancel})
	})
	if err := interrupted.Ensure(cut, in); err == nil {
		t.Fatal("the Ensure meant to be cut short once the data was saved succeeded")
	}
	old := podNamed(t, ctx, kubernetes.Name(in.DatabaseID)+"-0")
	internal := redisClient(t, net.JoinHostPort(old.Status.PodIP, "6379"), "clouddb-internal", internalPassword(t, ctx, in.DatabaseID))
	if err := internal.Do(ctx, "client", "unpause").Err(); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	err := open.Set(wctx, "late", "1", 0).Err()
	wcancel()
	if err == nil || !strings.Contains(err.Error(), "NOREPLICAS") {
		t.Fatalf("a write to the old pod once its data was saved = %v, want it refused (NOREPLICAS)", err)
	}

	ensureRunning(t, ctx, d, in)
	addr := d.PublicEndpoint(in.Port)
	waitRoutedTLS(t, addr)
	c := tlsClient(t, addr, in.Password)
	requireKeys(t, ctx, c, "k", 50)
	if err = c.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatalf("a write once the pod is replaced: %v", err)
	}
	if p := podNamed(t, ctx, old.Name); p.UID == old.UID {
		t.Fatalf("pod %s was not replaced for TLS", old.Name)
	}
}

// TestClusterPodLostMidRoll: a replicated cluster's roll to persistence is cut after node
// 0, then pod 3 is lost (shard 1's other node is pod 1, the next pod of before). The
// StatefulSet's controller does not make pod 3 again: it stops at pod 1, whose volumes
// it cannot make its claim's. Ensure has it made again, and the roll goes on to the end:
// every pod on its claim, every key kept.
func TestClusterPodLostMidRoll(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 10*time.Minute)
	d, in := replicatedClusterWithKeys(t, ctx, 416, "none")

	in.DataPersistence = "aof-every-1-second"
	ensureCut(t, ctx, in, 1)
	sel := metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=416"}
	var onClaims []string
	for _, p := range must(cluster.client.CoreV1().Pods(cluster.ns).List(ctx, sel)).Items {
		if hasClaimVolume(&p) {
			onClaims = append(onClaims, p.Name)
		}
	}
	if want := kubernetes.Name(in.DatabaseID) + "-0"; !slices.Equal(onClaims, []string{want}) {
		t.Fatalf("pods on a claim once the roll was cut: %v, want only %s", onClaims, want)
	}

	lost := kubernetes.Name(in.DatabaseID) + "-3"
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, lost, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	// What this test is for: the controller does not make it again by itself.
	if err := poll(ctx, 15*time.Second, func() (bool, error) {
		_, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, lost, metav1.GetOptions{})
		return err == nil, nil
	}); err == nil {
		t.Fatalf("the StatefulSet's controller made pod %s again by itself: the case this test is for no longer arises", lost)
	}

	ensureRunning(t, ctx, d, in)
	pods := must(cluster.client.CoreV1().Pods(cluster.ns).List(ctx, sel)).Items
	if len(pods) != 4 {
		t.Fatalf("%d pods after the roll, want 4", len(pods))
	}
	for _, p := range pods {
		if !hasClaimVolume(&p) {
			t.Errorf("pod %s is not on a claim after the roll", p.Name)
		}
	}
	if n := liveClaims(t, ctx, in.DatabaseID); n != 4 {
		t.Errorf("%d claims after the roll, want 4", n)
	}
	cc2 := clusterClient(d, in)
	defer cc2.Close()
	requireKeys(t, ctx, cc2, "k", 100)
}

// TestLostPodsCutWithPlainSet: a replacement of pods lost mid-roll cut after the
// StatefulSet without claims made the lost pod (its orphaning fails) leaves that
// StatefulSet. The database is not Running; the next Ensure goes on to the end, every
// pod on its claim, every key kept; Remove leaves nothing.
func TestLostPodsCutWithPlainSet(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 12*time.Minute)
	d, in := replicatedClusterWithKeys(t, ctx, 423, "none")

	in.DataPersistence = "aof-every-1-second"
	ensureCut(t, ctx, in, 1)
	lost := kubernetes.Name(in.DatabaseID) + "-3"
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, lost, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	// The orphaning of the claims StatefulSet passes; the plain one's fails.
	var deletes atomic.Int32
	cut2 := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.Client = faulty{Interface: cluster.client, statefulSetDelete: func() error {
			if deletes.Add(1) == 2 {
				return errInjected
			}
			return nil
		}}
	})
	if err := cut2.Ensure(ctx, in); err == nil {
		t.Fatal("the Ensure meant to be cut at the plain StatefulSet's orphaning succeeded")
	}
	sts, err := cluster.client.AppsV1().StatefulSets(cluster.ns).Get(ctx, kubernetes.Name(in.DatabaseID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("left: statefulset with %d claim templates, deletes %d", len(sts.Spec.VolumeClaimTemplates), deletes.Load())
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running with the claimless StatefulSet left = %v, %v; want false", up, err)
	}
	ensureRunning(t, ctx, d, in)
	allOnClaims(t, ctx, in, 4)
	cc2 := clusterClient(d, in)
	defer cc2.Close()
	requireKeys(t, ctx, cc2, "k", 100)
	if err := d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatal(err)
	}
	if got := labelled(t, ctx, in.DatabaseID); len(got) != 0 {
		t.Fatalf("labelled objects after Remove: %v", got)
	}
}

func allOnClaims(t *testing.T, ctx context.Context, in clouddb.Instance, n int) {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=" + strconv.Itoa(in.DatabaseID)}
	pods := must(cluster.client.CoreV1().Pods(cluster.ns).List(ctx, sel)).Items
	if len(pods) != n {
		t.Fatalf("%d pods, want %d", len(pods), n)
	}
	for _, p := range pods {
		if !hasClaimVolume(&p) {
			t.Errorf("pod %s is not on a claim", p.Name)
		}
	}
	if got := liveClaims(t, ctx, in.DatabaseID); got != n {
		t.Errorf("%d claims, want %d", got, n)
	}
}

// TestLostPodsCutThenRemove: a replacement of pods lost mid-roll cut after the claimless
// StatefulSet was orphaned, before the StatefulSet of claims is made again (an API
// error, clouddb stopped), then the database removed: nothing is left, the
// ControllerRevisions that the orphanings left without an owner included.
func TestLostPodsCutThenRemove(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 428, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	in.DataPersistence = "aof-every-1-second"
	ensureCut(t, ctx, in, 0)
	name := kubernetes.Name(in.DatabaseID)
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, name+"-1", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	var creates atomic.Int32
	cut2 := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.Client = faulty{Interface: cluster.client, statefulSetCreate: func() error {
			if creates.Add(1) == 2 {
				return errInjected
			}
			return nil
		}}
	})
	err := cut2.Ensure(ctx, in)
	t.Logf("Ensure cut at the second StatefulSet create (%d creates): %v", creates.Load(), err)
	if creates.Load() != 2 {
		t.Fatalf("%d StatefulSet creates, want 2 (the claimless one, then the one of claims again)", creates.Load())
	}
	if err = d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatal(err)
	}
	sel := metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=" + strconv.Itoa(in.DatabaseID)}
	var left []string
	if err = poll(ctx, 30*time.Second, func() (bool, error) {
		revs, lerr := cluster.client.AppsV1().ControllerRevisions(cluster.ns).List(ctx, sel)
		if lerr != nil {
			return false, lerr
		}
		left = left[:0]
		for _, r := range revs.Items {
			left = append(left, r.Name+" (owners "+strconv.Itoa(len(r.OwnerReferences))+")")
		}
		return len(left) == 0, nil
	}); err != nil {
		t.Fatalf("controller revisions of the database left 30 s after Remove: %v", left)
	}
}

// cutAfterPodDeletes is a driver whose pod deletes fail after the first n: its Ensure
// is cut there, as by an API error or clouddb stopped.
func cutAfterPodDeletes(t *testing.T, n int32) *kubernetes.Driver {
	t.Helper()
	var left atomic.Int32
	left.Store(n)
	return newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.Client = faulty{Interface: cluster.client, podDelete: func() error {
			if left.Add(-1) < 0 {
				return errInjected
			}
			return nil
		}}
	})
}

// ensureCut runs an Ensure of in cut after its first n pod deletes (cutAfterPodDeletes),
// again while it fails before that (a wait that ran out on this busy machine): the
// tests of what a cut leaves need it cut there.
func ensureCut(t *testing.T, ctx context.Context, in clouddb.Instance, n int32) {
	t.Helper()
	cut := cutAfterPodDeletes(t, n)
	for try := 1; ; try++ {
		err := cut.Ensure(ctx, in)
		switch {
		case err == nil:
			t.Fatalf("the Ensure meant to be cut after %d pod deletes succeeded", n)
		case errors.Is(err, errInjected):
			return
		case try == 3:
			t.Fatalf("the Ensure meant to be cut after %d pod deletes failed before, 3 times: %v", n, err)
		}
		t.Logf("the Ensure meant to be cut after %d pod deletes failed before (%v): again", n, err)
	}
}

// replicatedClusterWithKeys is a running replicated cluster of two shards of that id and
// persistence, removed at the end of the test, whose shards and replicas hold k0 to k99.
func replicatedClusterWithKeys(t *testing.T, ctx context.Context, id int, persistence string) (*kubernetes.Driver, clouddb.Instance) {
	t.Helper()
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, id, persistence)
	in.OSSCluster, in.Shards, in.Replication = true, 2, true
	in.MaxMemoryBytes *= 2
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	writeReplicated(t, ctx, cc, "k", 100)
	return d, in
}
