package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// TestClusterPorts: the nodes of a cluster but the first take ports of
// Config.ClusterPorts that no Service of the whole cluster holds (one another namespace
// holds is found taken when the Service is made, and the next is tried), keep them, and
// CLUSTER SLOTS names them; a range with none left is an error that says so.
func TestClusterPorts(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	// The range is 30170-30179; another namespace holds all but its last port, so that the
	// driver, which starts at a random port of the range, nearly always meets one taken.
	const first, free = 30170, 30179
	other, err := cluster.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clouddb-other-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.client.CoreV1().Namespaces().Delete(ctxFor(t, time.Minute), other.Name, metav1.DeleteOptions{})
	})
	var held []corev1.ServicePort
	for p := first; p < free; p++ {
		held = append(held, corev1.ServicePort{Name: "p" + strconv.Itoa(p), Port: int32(p), TargetPort: intstr.FromInt(80), NodePort: int32(p)})
	}
	_, err = cluster.client.CoreV1().Services(other.Name).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "holds-ports"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: held},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.ClusterPorts = [2]int{first, free} })

	in := instance(t, 150, "none")
	in.OSSCluster, in.Shards, in.MaxMemoryBytes = true, 2, 2*in.MaxMemoryBytes
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	for range 2 {
		if err = d.Ensure(ctx, in); err != nil {
			t.Fatal(err)
		}
		svc, gerr := cluster.client.CoreV1().Services(cluster.ns).Get(ctx, kubernetes.Name(in.DatabaseID)+"-1", metav1.GetOptions{})
		if gerr != nil {
			t.Fatal(gerr)
		}
		if got := svc.Spec.Ports[0].NodePort; got != free {
			t.Fatalf("node 1's port is %d, want %d (the one of the range no Service holds)", got, free)
		}
	}
	c := connect(t, d, in, "", in.Password)
	slots, err := c.ClusterSlots(ctx).Result() //nolint:staticcheck // what most clients read
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, s := range slots {
		addrs = append(addrs, s.Nodes[0].Addr)
	}
	want := []string{d.PublicEndpoint(in.Port), d.PublicEndpoint(free)}
	slices.Sort(addrs)
	slices.Sort(want)
	if !slices.Equal(addrs, want) {
		t.Fatalf("CLUSTER SLOTS names %v, want %v", addrs, want)
	}
	cc := clusterClient(d, in)
	defer cc.Close()
	for i := range 100 {
		if serr := cc.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); serr != nil {
			t.Fatalf("a cluster client writes k%d: %v", i, serr)
		}
	}

	full := instance(t, 151, "none")
	full.OSSCluster, full.Shards, full.MaxMemoryBytes = true, 2, 2*full.MaxMemoryBytes
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), full.DatabaseID) })
	err = d.Ensure(ctx, full)
	if err == nil || !strings.Contains(err.Error(), "no free port left") {
		t.Fatalf("Ensure with the range used up = %v, want an error saying no free port is left", err)
	}
}

// TestClusterPodDeleted: a replicated cluster whose endpoint's pod is deleted (a new pod
// is a new node, empty, at a new address) is healed by Ensure: the replica takes the
// shard over, the gone node is forgotten, the new one follows it; every key is served.
// So again for shard 1's primary, then for the pod of its replica that took over (a
// primary at S+s: the empty node of its new pod must not be given the shard's slots).
func TestClusterPodDeleted(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 6*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 152, "none")
	in.OSSCluster, in.Shards, in.Replication, in.MaxMemoryBytes = true, 2, true, 2*in.MaxMemoryBytes
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	writeReplicated(t, ctx, cc, "k", 200)
	for _, ordinal := range []int{0, 1, 3} {
		name := kubernetes.Name(in.DatabaseID) + "-" + strconv.Itoa(ordinal)
		if ordinal == 3 {
			if role := nodeRole(t, ctx, d, in, name); role != "master" {
				t.Fatalf("pod %s is a %s, want shard 1's primary since its replica took over", name, role)
			}
		}
		old := must(cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name, metav1.GetOptions{}))
		if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
		if err := poll(ctx, time.Minute, func() (bool, error) {
			p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, old.Name, metav1.GetOptions{})
			return err == nil && p.UID != old.UID, nil
		}); err != nil {
			t.Fatalf("no new pod %s: %v", old.Name, err)
		}
		ensureRunning(t, ctx, d, in)
		fresh := clusterClient(d, in)
		for i := range 200 {
			if v, err := fresh.Get(ctx, "k"+strconv.Itoa(i)).Result(); err != nil || v != strconv.Itoa(i) {
				fresh.Close()
				t.Fatalf("k%d after pod %s was replaced = %q, %v", i, name, v, err)
			}
		}
		fresh.Close()
		nodes, err := connect(t, d, in, "", in.Password).ClusterNodes(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(nodes), "\n")
		failed := slices.ContainsFunc(lines, func(l string) bool {
			f := strings.Fields(l)
			return len(f) < 3 || slices.ContainsFunc(strings.Split(f[2], ","), func(flag string) bool { return flag == "fail" || flag == "fail?" })
		})
		if len(lines) != 4 || failed {
			t.Fatalf("the cluster's nodes after pod %s was replaced (want 4, none failed):\n%s", name, nodes)
		}
	}
}

// TestClusterSnapshotAfterRestart: a replicated cluster whose primary's server crashed
// (it comes back at once, empty, still its shard's primary with the slots, until Ensure
// has its replica take over) is not backed up from that empty node: Snapshot of its
// shard fails (or holds the data), it never writes an empty RDB as the shard's backup.
func TestClusterSnapshotAfterRestart(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 153, "none")
	in.OSSCluster, in.Shards, in.Replication = true, 1, true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	const keys = 100
	writeReplicated(t, ctx, cc, "snapkey", keys)
	holdsKeys := func(rdb []byte) bool {
		for i := range keys {
			if !bytes.Contains(rdb, []byte("snapkey"+strconv.Itoa(i))) {
				return false
			}
		}
		return true
	}
	var before bytes.Buffer
	if _, err := d.Snapshot(ctx, in, 0, &before); err != nil || !holdsKeys(before.Bytes()) {
		t.Fatalf("Snapshot before the crash: %v (holds every key: %v)", err, err == nil && holdsKeys(before.Bytes()))
	}

	// The snapshot's fork ends before the server is killed (killServer wants one process).
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		busy := false
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			info, err := m.Info(ctx, "persistence").Result()
			busy = busy || err != nil || !strings.Contains(info, "rdb_bgsave_in_progress:0")
			return nil
		})
		return err == nil && !busy, nil
	}); err != nil {
		t.Fatal(err)
	}
	name := kubernetes.Name(in.DatabaseID) + "-0"
	old := must(cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name, metav1.GetOptions{}))
	restarts := old.Status.ContainerStatuses[0].RestartCount
	killServer(t, ctx, cluster.ns, name)
	if err := poll(ctx, time.Minute, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name, metav1.GetOptions{})
		// Its server up: it is not Ready before Ensure (probe.go).
		return err == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount != restarts && started(p), nil
	}); err != nil {
		t.Fatalf("pod %s did not come back: %v", name, err)
	}
	var after bytes.Buffer
	n, err := d.Snapshot(ctx, in, 0, &after)
	if err == nil && !holdsKeys(after.Bytes()) {
		t.Fatalf("Snapshot of shard 0 with its primary restarted empty, before Ensure: %d bytes without the shard's keys (an empty backup), want an error or the data", n)
	}
	t.Logf("Snapshot before Ensure: %d bytes, %v", n, err)
	ensureRunning(t, ctx, d, in)
	var healed bytes.Buffer
	if _, err := d.Snapshot(ctx, in, 0, &healed); err != nil || !holdsKeys(healed.Bytes()) {
		t.Fatalf("Snapshot after Ensure: %v (holds every key: %v)", err, err == nil && holdsKeys(healed.Bytes()))
	}
}

// TestClusterPrimaryLost: a replicated cluster whose primary's pod cannot come back (its
// node lost: here the only node cordoned and the pod deleted, so that its new pod stays
// pending) is served by its replica after Ensure, as a replicated database of one shard
// is (orphanedReplica): the replica holds every key, and never takes over by itself
// (cluster-replica-no-failover). Ensure then waits for the lost node (ErrServerStarting),
// the database's endpoint routed to the replica meanwhile: a new client that knows only
// the endpoint reads every key. Once the node is back, the endpoint is node 0's again.
// Not parallel: it cordons the node.
func TestClusterPrimaryLost(t *testing.T) {
	needCluster(t)
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.StartTimeout = 30 * time.Second })
	in := instance(t, 154, "none")
	in.OSSCluster, in.Shards, in.Replication = true, 1, true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	writeReplicated(t, ctx, cc, "k", 50)
	nodes := must(cluster.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}))
	cordon := func(on bool) {
		for _, n := range nodes.Items {
			nn := must(cluster.client.CoreV1().Nodes().Get(ctxFor(t, time.Minute), n.Name, metav1.GetOptions{}))
			nn.Spec.Unschedulable = on
			if _, err := cluster.client.CoreV1().Nodes().Update(ctxFor(t, time.Minute), nn, metav1.UpdateOptions{}); err != nil {
				t.Errorf("cordon %s %v: %v", n.Name, on, err)
			}
		}
	}
	cordon(true)
	t.Cleanup(func() { cordon(false) })
	name := kubernetes.Name(in.DatabaseID) + "-0"
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	err := d.Ensure(ctx, in)
	if !errors.Is(err, clouddb.ErrServerStarting) || !strings.Contains(err.Error(), "is served by") {
		t.Fatalf("Ensure with shard 0's primary pod lost (its replica holds every key): %v; want the replica to take the shard over, and a wait for the lost node", err)
	}
	replica := redis.NewClient(&redis.Options{Addr: d.PublicEndpoint(nodePort(t, ctx, kubernetes.Name(in.DatabaseID)+"-1")), Password: in.Password, Protocol: 2, DisableIdentity: true})
	defer replica.Close()
	if v, gerr := replica.Get(ctx, "k1").Result(); gerr != nil || v != "1" {
		t.Fatalf("k1 on the replica after Ensure = %q, %v", v, gerr)
	}
	// A client that knows only the database's endpoint reaches the cluster meanwhile:
	// the endpoint routes to the replica (kube-proxy follows a moment later).
	fresh := clusterClient(d, in)
	defer fresh.Close()
	if err = poll(ctx, 30*time.Second, func() (bool, error) { return fresh.Get(ctx, "k1").Val() == "1", nil }); err != nil {
		t.Fatalf("a new client of the endpoint while node 0's pod is lost: GET k1 = %v", fresh.Get(ctx, "k1").Err())
	}
	requireKeys(t, ctx, fresh, "k", 50)
	if up, rerr := d.Running(ctx, in); rerr != nil || up {
		t.Fatalf("Running with node 0's pod lost = %v, %v", up, rerr)
	}
	// Its node back: the endpoint is node 0's again.
	cordon(false)
	ensureRunning(t, ctx, d, in)
	svc := must(cluster.client.CoreV1().Services(cluster.ns).Get(ctx, kubernetes.Name(in.DatabaseID), metav1.GetOptions{}))
	if got := svc.Spec.Selector["statefulset.kubernetes.io/pod-name"]; got != name || svc.Spec.Ports[0].TargetPort.IntValue() != in.Port {
		t.Fatalf("the database's Service routes to %s port %v once node 0 is back, want %s port %d", got, svc.Spec.Ports[0].TargetPort, name, in.Port)
	}
	requireKeys(t, ctx, clusterClient(d, in), "k", 50)
}

func nodePort(t *testing.T, ctx context.Context, svc string) int {
	t.Helper()
	s := must(cluster.client.CoreV1().Services(cluster.ns).Get(ctx, svc, metav1.GetOptions{}))
	return int(s.Spec.Ports[0].NodePort)
}

// TestClusterNodeAddressChanged: a cluster's nodes announce the driver's NodeAddress as
// it is now (a changed --advertise-host), not only from their next start: the pods are
// never restarted for it (OnDelete), and CLUSTER SLOTS would send every client to the
// old address while Running said true. (The test cluster's NodePorts answer on one
// address only: the new one here is none, which Ensure does not try to reach.)
func TestClusterNodeAddressChanged(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 155, "none")
	in.OSSCluster, in.Shards = true, 1
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	moved := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.NodeAddress = "" })
	ensureRunning(t, ctx, moved, in)
	host, err := connect(t, d, in, "", in.Password).Do(ctx, "cluster", "myid").Result()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := connect(t, d, in, "", in.Password).ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && f[0] == host && strings.Contains(f[1], ","+nodeIP) {
			t.Fatalf("the node still announces the old node address %s after Ensure with another (Running said true): %s", nodeIP, l)
		}
	}
}

// TestClusterRestartedPrimaryWritten: a replicated cluster's primary that restarts empty
// (still its shard's primary, its slots its own) takes no write before Ensure has decided
// its shard (NOREPLICAS): a write it took would be lost in the takeover, and a refill
// larger than its replica's data would win over it. After Ensure every key written
// before the crash is served, and writes are taken again.
func TestClusterRestartedPrimaryWritten(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 4*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 156, "none")
	in.OSSCluster, in.Shards, in.Replication = true, 1, true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	c := connect(t, d, in, "", in.Password)
	for i := range 100 {
		if err := c.Set(ctx, "old"+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, "wait", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	name := kubernetes.Name(in.DatabaseID) + "-0"
	old := must(cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name, metav1.GetOptions{}))
	restarts := old.Status.ContainerStatuses[0].RestartCount
	killServer(t, ctx, cluster.ns, name)
	// The restarted primary is not Ready (probe.go): its Service does not route the
	// tenant's clients to it. A client that reaches it all the same (by its pod address,
	// or through a proxy's stale route) writes on as soon as the server answers: refused.
	var back *corev1.Pod
	if err := poll(ctx, time.Minute, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name, metav1.GetOptions{})
		back = p
		return err == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount > restarts && started(p), nil
	}); err != nil {
		t.Fatalf("the restarted primary's server is not up: %v", err)
	}
	direct := redisClient(t, net.JoinHostPort(back.Status.PodIP, strconv.Itoa(in.Port)), "default", in.Password)
	var refused error
	if err := poll(ctx, time.Minute, func() (bool, error) {
		if direct.Ping(ctx).Err() != nil {
			return false, nil
		}
		// Until the node rejoined, the cluster is down for it: a refusal too, but not the
		// one this is about.
		refused = direct.Set(ctx, "new0", 0, 0).Err()
		return refused == nil || !strings.HasPrefix(refused.Error(), "CLUSTERDOWN"), nil
	}); err != nil {
		t.Fatalf("the restarted primary does not answer: %v", err)
	}
	if refused == nil || !strings.HasPrefix(refused.Error(), "NOREPLICAS") {
		t.Fatalf("a write to the restarted primary before Ensure = %v, want NOREPLICAS", refused)
	}
	if p := must(cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, name, metav1.GetOptions{})); ready(p) {
		t.Fatalf("the restarted primary, empty, is Ready before Ensure")
	}
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	missing := 0
	for i := range 100 {
		if cc.Get(ctx, "old"+strconv.Itoa(i)).Err() != nil {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("after Ensure: %d of the 100 keys written before the primary's crash are gone (its replica held them all)", missing)
	}
	if err := cc.Set(ctx, "new0", 0, 0).Err(); err != nil {
		t.Fatalf("a write after Ensure: %v", err)
	}
}

// clusterClient is a cluster client that starts from the database's endpoint, as a
// tenant's does.
func clusterClient(d *kubernetes.Driver, in clouddb.Instance) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{d.PublicEndpoint(in.Port)}, Password: in.Password, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// writeReplicated writes n keys prefix<i> = i through the cluster client and waits until
// every shard's replica has them.
func writeReplicated(t *testing.T, ctx context.Context, cc *redis.ClusterClient, prefix string, n int) {
	t.Helper()
	for i := range n {
		if err := cc.Set(ctx, prefix+strconv.Itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		got, err := m.Wait(ctx, 1, 5000).Result()
		if err == nil && got != 1 {
			err = fmt.Errorf("WAIT 1 on %s: %d replicas", m.Options().Addr, got)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestClusterHungPrimary: a replicated cluster's primary whose server hangs (SIGSTOP:
// its pod runs, its server answers nothing) is taken over by its shard's replica, its
// pod deleted first: Ensure says it waits for the hung node (ErrServerStarting), every
// acknowledged key is served and written through the cluster's clients. A primary that
// is busy instead (a script that runs long: it answers BUSY) is not. The hung node's new
// pod is the new primary's replica.
func TestClusterHungPrimary(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	d := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.StartTimeout = 30 * time.Second })
	in := instance(t, 157, "none")
	in.OSSCluster, in.Shards, in.Replication = true, 1, true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	cc := clusterClient(d, in)
	defer cc.Close()
	writeReplicated(t, ctx, cc, "k", 50)
	primary, replica := kubernetes.Name(in.DatabaseID)+"-0", kubernetes.Name(in.DatabaseID)+"-1"
	lives := podLives(t, ctx, map[string]string{primary: "", replica: ""})

	// Busy: a script of the tenant's that runs 20 s. The server answers BUSY.
	script := redis.NewClient(&redis.Options{Addr: d.PublicEndpoint(in.Port), Password: in.Password, Protocol: 2, DisableIdentity: true,
		ReadTimeout: -1, MaxRetries: -1})
	defer script.Close()
	done := make(chan error, 1)
	go func() {
		done <- script.Eval(context.Background(), "local t = redis.call('time')[1] + 20 while tonumber(redis.call('time')[1]) < t do end return 1", nil).Err()
	}()
	time.Sleep(6 * time.Second) // past busy-reply-threshold: other clients get BUSY
	start := time.Now()
	err := d.Ensure(ctx, in)
	t.Logf("Ensure during the script, after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err = <-done; err != nil {
		t.Fatalf("the script: %v", err)
	}
	requireSameLives(t, ctx, lives, "a busy primary")
	if role := nodeRole(t, ctx, d, in, primary); role != "master" {
		t.Fatalf("pod %s is %s after a busy script, want still the primary", primary, role)
	}

	hung := serverPid(t, ctx, cluster.ns, primary)
	if err = syscall.Kill(hung, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGCONT) })
	start = time.Now()
	err = d.Ensure(ctx, in)
	if !errors.Is(err, clouddb.ErrServerStarting) || !strings.Contains(err.Error(), "is served by") {
		t.Fatalf("Ensure with shard 0's primary hung = %v; want its replica to take the shard over, and a wait for the hung node", err)
	}
	t.Logf("the replica took over in %v: %v", time.Since(start).Round(time.Millisecond), err)
	// Seeded by the replica's endpoint too: the database's endpoint is node 0's, hung.
	cc2 := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:    []string{d.PublicEndpoint(in.Port), d.PublicEndpoint(nodePort(t, ctx, replica))},
		Password: in.Password, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	defer cc2.Close()
	requireKeys(t, ctx, cc2, "k", 50)
	if err = cc2.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatalf("a write after the take-over: %v", err)
	}

	if p := podNamed(t, ctx, primary); p.UID == types.UID(lives[primary][0]) {
		t.Fatalf("pod %s, whose server hung, was not deleted", primary)
	}
	ensureRunning(t, ctx, d, in)
	if role := nodeRole(t, ctx, d, in, primary); role != "slave" {
		t.Fatalf("pod %s, made again for the hung one, is %s; want the new primary's replica", primary, role)
	}
	cc3 := clusterClient(d, in)
	defer cc3.Close()
	requireKeys(t, ctx, cc3, "k", 50)
	if v, err := cc3.Get(ctx, "after").Result(); err != nil || v != "1" {
		t.Fatalf("GET after = %q, %v", v, err)
	}
}

// nodeRole is ROLE's first field of the server of the cluster's pod, read through its
// NodePort as the tenant.
func nodeRole(t *testing.T, ctx context.Context, d *kubernetes.Driver, in clouddb.Instance, pod string) string {
	t.Helper()
	svc := pod
	if pod == kubernetes.Name(in.DatabaseID)+"-0" {
		svc = kubernetes.Name(in.DatabaseID) // node 0's Service is the database's
	}
	c := redis.NewClient(&redis.Options{Addr: d.PublicEndpoint(nodePort(t, ctx, svc)), Password: in.Password, Protocol: 2, DisableIdentity: true})
	defer c.Close()
	r, err := c.Do(ctx, "role").Slice()
	if err != nil || len(r) == 0 {
		t.Fatalf("ROLE of pod %s: %v, %v", pod, r, err)
	}
	return fmt.Sprint(r[0])
}

// TestClusterLongTransaction: a tenant's MULTI/EXEC that keeps its primary silent for
// longer than Ensure waits for an answer (a transaction, unlike a script, never answers
// BUSY) may have the primary taken for hung and its shard taken over, as the local
// driver restarts a server that does not answer; but no write is then lost that was
// acknowledged: the silent server is killed before its replica takes over, so the
// transaction is either answered and kept, or not answered.
func TestClusterLongTransaction(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 6*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 158, "none")
	in.OSSCluster, in.Shards, in.Replication = true, 1, true
	t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)

	// One shard: node 0 (the database's endpoint) serves every slot.
	c := redis.NewClient(&redis.Options{Addr: d.PublicEndpoint(in.Port), Password: in.Password, Protocol: 2, DisableIdentity: true,
		ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1, PoolSize: 2})
	defer c.Close()
	for i := 0; i < 1_000_000; i += 10_000 {
		vals := make([]any, 10_000)
		for j := range vals {
			vals[j] = i + j
		}
		if err := c.RPush(ctx, "{t}big", vals...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	one := time.Hour // the fastest of a few scans
	for range 3 {
		start := time.Now()
		if err := c.Do(ctx, "lpos", "{t}big", "absent").Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		one = min(one, time.Since(start))
	}
	cmds := min(int(40*time.Second/one)+1, 100_000) // 40 s of scans at least
	if err := c.Wait(ctx, 1, 30_000).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	txStart := time.Now()
	go func() {
		var set *redis.StatusCmd
		_, err := c.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
			for range cmds {
				p.Do(context.Background(), "lpos", "{t}big", "absent")
			}
			set = p.Set(context.Background(), "{t}acked", "1", 0)
			return nil
		})
		if errors.Is(err, redis.Nil) {
			err = set.Err()
		}
		done <- err
	}()
	time.Sleep(2 * time.Second)
	err := d.Ensure(ctx, in)
	t.Logf("Ensure during a transaction of %d scans, after %v: %v", cmds, time.Since(txStart).Round(time.Millisecond), err)
	txErr := <-done
	t.Logf("the transaction, after %v: %v", time.Since(txStart).Round(time.Millisecond), txErr)
	if !errors.Is(err, clouddb.ErrServerStarting) || !strings.Contains(err.Error(), "is served by") {
		t.Fatalf("Ensure during a transaction that keeps the primary silent past the answer timeout = %v; want the shard taken over", err)
	}
	for i := 0; ; i++ {
		if err = d.Ensure(ctx, in); err == nil || i == 10 {
			break
		}
		t.Logf("Ensure after the transaction: %v", err)
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		t.Fatalf("Ensure after the transaction: %v", err)
	}
	cc := clusterClient(d, in)
	defer cc.Close()
	v, gerr := cc.Get(ctx, "{t}acked").Result()
	if txErr == nil && (gerr != nil || v != "1") {
		t.Fatalf("GET {t}acked = %q, %v after EXEC acknowledged it: an acknowledged write was lost", v, gerr)
	}
	if txErr != nil && !errors.Is(gerr, redis.Nil) {
		t.Fatalf("GET {t}acked = %q, %v after the transaction failed (%v): want no key", v, gerr, txErr)
	}
}
