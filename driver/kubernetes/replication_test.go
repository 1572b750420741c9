package kubernetes_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"clouddb"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"clouddb/driver/kubernetes"
)

// TestFailoverBehindClouddbsBack: the primary of a replicated database that is not
// persistent dies while clouddb is not looking, and Kubernetes starts it again, empty,
// before any Ensure: first in the same pod (its server killed), then as a new pod (the
// pod deleted). Neither time does the replica lose a key to the empty node; Running
// says the database needs Ensure, and Ensure promotes the replica, moves the primary's
// label and with it the Service, and has the empty node follow the new primary.
func TestFailoverBehindClouddbsBack(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 6*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 111, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	name := kubernetes.Name(in.DatabaseID)
	requirePrimary(t, ctx, in.DatabaseID, name+"-0")

	tenant := connect(t, d, in, "", in.Password)
	for i := range 300 {
		if err := tenant.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := tenant.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v; want the replica's acknowledgement", n, err)
	}
	internal := internalPassword(t, ctx, in.DatabaseID)

	for round, kill := range []struct {
		name string
		do   func(primary *corev1.Pod)
		back func(primary, p *corev1.Pod) bool
	}{
		{"its server killed", func(primary *corev1.Pod) {
			killServer(t, ctx, cluster.ns, primary.Name)
		}, func(primary, p *corev1.Pod) bool { return p.UID == primary.UID && restarts(p) > restarts(primary) }},
		{"its pod deleted", func(primary *corev1.Pod) {
			if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, primary.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
				t.Fatal(err)
			}
		}, func(primary, p *corev1.Pod) bool { return p.UID != primary.UID }},
	} {
		primaryName := servingPod(t, ctx, cluster.ns, in.DatabaseID)
		primary := podNamed(t, ctx, primaryName)
		replica := podNamed(t, ctx, otherPod(name, primaryName))
		kill.do(primary)
		start := time.Now()
		var back *corev1.Pod
		if err := poll(ctx, 90*time.Second, func() (bool, error) {
			p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, primaryName, metav1.GetOptions{})
			back = p
			return err == nil && kill.back(primary, p) && started(p), nil
		}); err != nil {
			t.Fatalf("round %d (%s): the primary's pod did not come back: %v", round, kill.name, err)
		}
		t.Logf("round %d (%s): the primary's pod was back, its server up, in %v", round, kill.name, time.Since(start).Round(time.Millisecond))
		// Time for a full sync of the replica from the empty node, had it started a primary.
		time.Sleep(3 * time.Second)
		r := redisClient(t, replica.Status.PodIP+":6379", "clouddb-internal", internal)
		if n, err := r.DBSize(ctx).Result(); err != nil || n != 300 {
			t.Fatalf("round %d (%s): the replica holds %d keys (%v) before Ensure, want 300", round, kill.name, n, err)
		}
		b := redisClient(t, back.Status.PodIP+":6379", "clouddb-internal", internal)
		if role := roleOf(t, ctx, b); role != "slave" {
			t.Fatalf("round %d (%s): the node back after the crash is a %s, want a replica", round, kill.name, role)
		}
		// Empty, it is not Ready (over two readiness probes at least, the first as its
		// server started): the budget counts it away, and the Service does not route
		// clients to it although it is still labelled.
		for range 7 {
			if p := podNamed(t, ctx, back.Name); ready(p) {
				t.Fatalf("round %d (%s): the node back after the crash, empty, is Ready before Ensure", round, kill.name)
			}
			time.Sleep(time.Second)
		}
		if up, err := d.Running(ctx, in); err != nil || up {
			t.Fatalf("round %d (%s): Running before Ensure = %v, %v; want false, nil", round, kill.name, up, err)
		}

		ensureRunning(t, ctx, d, in)
		requirePrimary(t, ctx, in.DatabaseID, replica.Name)
		if got := servingPod(t, ctx, cluster.ns, in.DatabaseID); got != replica.Name {
			t.Fatalf("round %d (%s): the service routes to %s, want the promoted %s", round, kill.name, got, replica.Name)
		}
		tenant = connect(t, d, in, "", in.Password)
		if n, err := tenant.DBSize(ctx).Result(); err != nil || n != 300 {
			t.Fatalf("round %d (%s): the endpoint's server holds %d keys (%v), want 300", round, kill.name, n, err)
		}
		if role := roleOf(t, ctx, tenant); role != "master" {
			t.Fatalf("round %d (%s): the endpoint reaches a %s", round, kill.name, role)
		}
		if n, err := b.DBSize(ctx).Result(); err != nil || n != 300 {
			t.Fatalf("round %d (%s): the new replica holds %d keys (%v), want 300 (Ensure returns once it synced)", round, kill.name, n, err)
		}
	}
}

// requirePrimary checks that the database's pod named want alone carries the primary's
// label.
func requirePrimary(t *testing.T, ctx context.Context, id int, want string) {
	t.Helper()
	pods, err := cluster.client.CoreV1().Pods(cluster.ns).List(ctx, metav1.ListOptions{
		LabelSelector: kubernetes.LabelDatabase + "=" + strconv.Itoa(id) + "," + kubernetes.LabelRole + "=primary",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != want {
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		t.Fatalf("pods labelled the primary: %v, want %s", names, want)
	}
}

func podNamed(t *testing.T, ctx context.Context, name string) *corev1.Pod {
	t.Helper()
	p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// otherPod is the name of the other pod of a replicated database's StatefulSet name.
func otherPod(name, pod string) string {
	if strings.HasSuffix(pod, "-0") {
		return name + "-1"
	}
	return name + "-0"
}

func roleOf(t *testing.T, ctx context.Context, c *redis.Client) string {
	t.Helper()
	text, err := c.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	role := infoValue(text, "role")
	if role == "" {
		t.Fatal("INFO replication has no role")
	}
	return role
}

// TestReplicationOffKeepsData: a replicated database whose primary is its second node
// (after a failover) turned back to one node keeps every key on its first, which serves
// the endpoint alone; turned on again, a new replica syncs.
func TestReplicationOffKeepsData(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 112, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	name := kubernetes.Name(in.DatabaseID)
	tenant := connect(t, d, in, "", in.Password)
	if err := tenant.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := tenant.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	before := podNamed(t, ctx, name+"-0")
	killServer(t, ctx, cluster.ns, name+"-0")
	// Back (restarted by the kubelet, empty) before Ensure: a pod whose status still
	// shows the killed container ready turns not ready a moment later, which an Ensure
	// that ran meanwhile cannot see (the reconciler's next check would).
	if err := poll(ctx, 90*time.Second, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name+"-0", metav1.GetOptions{})
		return err == nil && restarts(p) > restarts(before) && started(p), nil
	}); err != nil {
		t.Fatalf("node 0's pod did not come back: %v", err)
	}
	ensureRunning(t, ctx, d, in)
	requirePrimary(t, ctx, in.DatabaseID, name+"-1")
	tenant = connect(t, d, in, "", in.Password)
	// Written on node 1 just before the switch back, unacknowledged.
	for i := range 100 {
		if err := tenant.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	in.Replication = false
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running with replication off before Ensure = %v, %v; want false, nil", up, err)
	}
	ensureRunning(t, ctx, d, in)
	if _, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name+"-1", metav1.GetOptions{}); err == nil {
		t.Fatal("the replica's pod is still there")
	}
	tenant = connect(t, d, in, "", in.Password)
	if n, err := tenant.DBSize(ctx).Result(); err != nil || n != 101 {
		t.Fatalf("the database holds %d keys (%v), want 101", n, err)
	}
	if got := servingPod(t, ctx, cluster.ns, in.DatabaseID); got != name+"-0" {
		t.Fatalf("the service routes to %s", got)
	}
	if role := roleOf(t, ctx, tenant); role != "master" {
		t.Fatalf("node 0 is a %s", role)
	}
	svc, err := cluster.client.CoreV1().Services(cluster.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := svc.Spec.Selector[kubernetes.LabelRole]; ok {
		t.Fatalf("the service of a database of one node selects by role: %v", svc.Spec.Selector)
	}

	in.Replication = true
	ensureRunning(t, ctx, d, in)
	tenant = connect(t, d, in, "", in.Password)
	if n, err := tenant.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 after replication was turned on again = %d, %v", n, err)
	}
}

// TestFailoverOfHungPrimary: a primary that stops answering without dying (its server
// hung here, SIGSTOP; a lost node alike), whose pod still looks ready, is taken over by
// its replica: Ensure deletes its pod (so that it acknowledges no write a client sent it
// meanwhile), moves the label and the Service to the replica, which serves every
// acknowledged key, and says it waits for the other node (ErrServerStarting). Once the
// pod is back, Ensure makes it the new primary's replica.
func TestFailoverOfHungPrimary(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 113, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	name := kubernetes.Name(in.DatabaseID)
	tenant := connect(t, d, in, "", in.Password)
	for i := range 100 {
		if err := tenant.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := tenant.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	primary := servingPod(t, ctx, cluster.ns, in.DatabaseID)
	hungPod := podNamed(t, ctx, primary)
	// A client whose connection is open to the primary, and whose write waits for it.
	late := redis.NewClient(&redis.Options{Addr: d.PublicEndpoint(in.Port), Password: in.Password, PoolSize: 1, ReadTimeout: 2 * time.Minute, Protocol: 2, DisableIdentity: true})
	defer late.Close()
	if err := late.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	hung := serverPid(t, ctx, cluster.ns, primary)
	if err := syscall.Kill(hung, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGCONT) })
	lateDone := make(chan error, 1)
	go func() { lateDone <- late.Set(ctx, "late", "1", 0).Err() }()

	start := time.Now()
	err := d.Ensure(ctx, in)
	if !errors.Is(err, clouddb.ErrServerStarting) {
		t.Fatalf("Ensure with a hung primary = %v, want ErrServerStarting", err)
	}
	t.Logf("the replica took over in %v: %v", time.Since(start).Round(time.Millisecond), err)
	// Its pod went before: resumed, its server would acknowledge the waiting write, which
	// the new primary never gets (gone with the process, the signal finds none).
	_ = syscall.Kill(hung, syscall.SIGCONT)
	if p, gerr := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, primary, metav1.GetOptions{}); gerr == nil && p.UID == hungPod.UID {
		t.Fatalf("the hung primary's pod %s is still there", primary)
	}
	var lateErr error
	select {
	case lateErr = <-lateDone:
	case <-time.After(time.Minute):
		t.Fatal("the write waiting for the hung primary got no answer")
	}
	t.Logf("the write waiting for the hung primary: %v", lateErr)
	want := int64(101)
	if lateErr == nil {
		want++ // acknowledged: it must be kept
	}
	requirePrimary(t, ctx, in.DatabaseID, otherPod(name, primary))
	if got := servingPod(t, ctx, cluster.ns, in.DatabaseID); got != otherPod(name, primary) {
		t.Fatalf("the service routes to %s", got)
	}
	tenant = connect(t, d, in, "", in.Password)
	if n, err := tenant.DBSize(ctx).Result(); err != nil || n != 100 {
		t.Fatalf("the new primary holds %d keys (%v), want 100", n, err)
	}
	if err := tenant.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatalf("a write to the new primary: %v", err)
	}

	ensureRunning(t, ctx, d, in)
	requirePrimary(t, ctx, in.DatabaseID, otherPod(name, primary))
	tenant = connect(t, d, in, "", in.Password)
	if n, err := tenant.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 once the old primary's pod is back = %d, %v: it is not the new one's replica", n, err)
	}
	if n, err := tenant.DBSize(ctx).Result(); err != nil || n != want {
		t.Fatalf("the database holds %d keys (%v), want %d", n, err, want)
	}
}

// TestReplicatedPersistenceChange: a replicated database's persistence changed between
// none and a persistent one (a new StatefulSet: its claims) replaces its pods one at a
// time: it keeps every key, those a client wrote during the change and saw acknowledged
// included, the client waits a moment at most, and both nodes replicate again; the
// claims come and go with the persistence.
func TestReplicatedPersistenceChange(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 114, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	c := connect(t, d, in, "", in.Password)
	reachable(t, ctx, c)
	writeAcked(t, ctx, c, "k", 200)

	for _, persistence := range []string{"aof-every-1-second", "none"} {
		in.DataPersistence = persistence
		before := map[string]types.UID{}
		for _, i := range []string{"-0", "-1"} {
			before[i] = podNamed(t, ctx, kubernetes.Name(in.DatabaseID)+i).UID
		}
		w := startWriter(t, connect(t, d, in, "", in.Password))
		ensureRunning(t, ctx, d, in)
		acked, gap := w.stop()
		t.Logf("persistence %s: %d writes acknowledged during the change, the longest time without one %v", persistence, acked, gap.Round(time.Millisecond))
		for i, uid := range before {
			if podNamed(t, ctx, kubernetes.Name(in.DatabaseID)+i).UID == uid {
				t.Fatalf("persistence %s: pod %s was not replaced", persistence, kubernetes.Name(in.DatabaseID)+i)
			}
		}
		if gap > 5*time.Second {
			t.Fatalf("persistence %s: no write acknowledged for %v: both nodes were out", persistence, gap)
		}
		c = connect(t, d, in, "", in.Password)
		requireKeys(t, ctx, c, "k", 200)
		requireKeys(t, ctx, c, "w", acked)
		writeAcked(t, ctx, c, persistence, 10)
		claims, err := cluster.client.CoreV1().PersistentVolumeClaims(cluster.ns).List(ctx, metav1.ListOptions{
			LabelSelector: kubernetes.LabelDatabase + "=" + strconv.Itoa(in.DatabaseID),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if persistence != "none" {
			want = 2
		}
		// Deleted claims may wait for their pods to go (kubernetes.io/pvc-protection).
		live := 0
		for _, cl := range claims.Items {
			if cl.DeletionTimestamp == nil {
				live++
			}
		}
		if live != want {
			t.Fatalf("persistence %s: %d claims, want %d", persistence, live, want)
		}
	}
	requireKeys(t, ctx, c, "aof-every-1-second", 10)
}

// TestReplicatedPersistenceChangeResumes: a persistence change cut short once the old
// StatefulSet is gone, its pods running on without one, is resumed by the next Ensure:
// the new StatefulSet adopts them (one of no pods would delete them, and the data of a
// database without persistence), then replaces them with the data kept.
func TestReplicatedPersistenceChangeResumes(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 115, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	c := connect(t, d, in, "", in.Password)
	reachable(t, ctx, c)
	writeAcked(t, ctx, c, "k", 100)

	name := kubernetes.Name(in.DatabaseID)
	orphanStatefulSet(t, ctx, name)
	in.DataPersistence = "aof-every-1-second"
	ensureRunning(t, ctx, d, in)
	c = connect(t, d, in, "", in.Password)
	requireKeys(t, ctx, c, "k", 100)
	writeAcked(t, ctx, c, "after", 10)
	for _, i := range []string{"-0", "-1"} {
		p := podNamed(t, ctx, name+i)
		for _, v := range p.Spec.Volumes {
			if v.Name == "data" && v.PersistentVolumeClaim == nil {
				t.Fatalf("pod %s keeps its data out of a claim", p.Name)
			}
		}
	}
}

// TestStoppedReplicatedPersistenceChange: a stopped replicated database whose
// persistence changes runs first on its StatefulSet of before (its data is on its
// claims), then moves to the new one with every key.
func TestStoppedReplicatedPersistenceChange(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 116, "aof-every-1-second")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	c := connect(t, d, in, "", in.Password)
	reachable(t, ctx, c)
	writeAcked(t, ctx, c, "k", 100)
	time.Sleep(1100 * time.Millisecond) // appendfsync everysec
	if err := d.Stop(ctx, in.DatabaseID); err != nil {
		t.Fatal(err)
	}
	in.DataPersistence = "none"
	ensureRunning(t, ctx, d, in)
	c = connect(t, d, in, "", in.Password)
	requireKeys(t, ctx, c, "k", 100)
	writeAcked(t, ctx, c, "after", 10)
}

// TestReplicationOffMidRoll: a replicated database's roll to persistence is cut before
// its first pod was replaced, then its replica's pod is lost behind the old pod 0 (made
// again without a claim, see makeLostPods) and replication is turned off. The replica's
// pod goes (the StatefulSet's controller, stopped at pod 0, would not delete it: it
// would be served beside it), and the node that stays is moved onto its claim, as the
// instance's persistence says, before the database is Running: every acknowledged key
// survives its pod's deletion.
func TestReplicationOffMidRoll(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 426, "none")
	in.Replication = true
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	c := connect(t, d, in, "", in.Password)
	reachable(t, ctx, c)
	writeAcked(t, ctx, c, "k", 100)

	in.DataPersistence = "aof-every-1-second"
	ensureCut(t, ctx, in, 0)
	name := kubernetes.Name(in.DatabaseID)
	for _, p := range []string{name + "-0", name + "-1"} {
		if hasClaimVolume(podNamed(t, ctx, p)) {
			t.Fatalf("pod %s is on a claim: the roll was not cut before it", p)
		}
	}
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, name+"-1", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	in.Replication = false
	replicationOffEnsured(t, ctx, d, in)
	c = connect(t, d, in, "", in.Password)
	requireKeys(t, ctx, c, "k", 100)
	p0 := podNamed(t, ctx, name+"-0")
	onClaim := hasClaimVolume(p0)
	t.Logf("after Ensure: pod %s on a claim: %v; claims: %d", p0.Name, onClaim, liveClaims(t, ctx, in.DatabaseID))
	for i := range 10 {
		if err := c.Set(ctx, "after"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // appendfsync everysec
	// The pod goes (a drain, an eviction): a persistent database keeps its data.
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, p0.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Minute, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, p0.Name, metav1.GetOptions{})
		return err == nil && p.UID != p0.UID, nil
	}); err != nil {
		t.Fatal(err)
	}
	ensureRunning(t, ctx, d, in)
	c = connect(t, d, in, "", in.Password)
	reachable(t, ctx, c)
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// 100 before, 40 probes through the endpoint (replicationOffEnsured), 10 after.
	if !onClaim || n != 150 {
		t.Fatalf("persistent, Running, replication turned off mid-roll: pod 0 was on a claim: %v; after its pod went the database holds %d keys, want 150 (acknowledged, persisted as asked)", onClaim, n)
	}
}

// replicationOffEnsured has Ensure turn in's replication off, and Ensure again as the
// reconciler would once: it must end with the one node, pod 1 gone, and Running; then
// 40 writes through the endpoint, each on a new connection, all taken.
func replicationOffEnsured(t *testing.T, ctx context.Context, d *kubernetes.Driver, in clouddb.Instance) {
	t.Helper()
	start := time.Now()
	first := d.Ensure(ctx, in)
	t.Logf("Ensure with replication off (%v): %v", time.Since(start).Round(time.Second), first)
	var second error
	if up, err := d.Running(ctx, in); first != nil || err != nil || !up {
		second = d.Ensure(ctx, in)
	}
	up, rerr := d.Running(ctx, in)
	name := kubernetes.Name(in.DatabaseID)
	_, gerr := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name+"-1", metav1.GetOptions{})
	sts := must(cluster.client.AppsV1().StatefulSets(cluster.ns).Get(ctx, name, metav1.GetOptions{}))
	// Writes through the endpoint, each on a connection of its own (kube-proxy picks a pod
	// per connection).
	failed, last := 0, error(nil)
	for i := range 40 {
		c := redis.NewClient(&redis.Options{Addr: d.PublicEndpoint(in.Port), Password: in.Password, MaxRetries: -1,
			DialTimeout: 5 * time.Second, DisableIdentity: true, PoolSize: 1})
		if err := c.Set(ctx, "probe"+strconv.Itoa(i), i, 0).Err(); err != nil {
			failed, last = failed+1, err
		}
		c.Close()
	}
	p0 := must(cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name+"-0", metav1.GetOptions{}))
	if first != nil || second != nil || !up || gerr == nil || failed > 0 {
		t.Fatalf("replication turned off mid-roll to persistence: Ensure = %v; Ensure again = %v; Running = %v, %v; "+
			"statefulset replicas %d; pod %s-1 still there: %v; %d of 40 writes through the endpoint failed (last: %v); pod 0 on a claim: %v",
			first, second, up, rerr, *sts.Spec.Replicas, name, gerr == nil, failed, last, hasClaimVolume(p0))
	}
}
