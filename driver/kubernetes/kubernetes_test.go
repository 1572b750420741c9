package kubernetes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// The cluster the tests run on: scripts/k8s-test-cluster.sh up prints these (make
// test-k8s sets them, and tears the cluster down after).
var (
	kubeconfig   = os.Getenv("CLOUDDB_K8S_KUBECONFIG")
	redisImage   = os.Getenv("CLOUDDB_K8S_REDIS_IMAGE")
	nodeIP       = os.Getenv("CLOUDDB_K8S_NODE_IP")
	storageClass = os.Getenv("CLOUDDB_K8S_STORAGE_CLASS")
)

// cluster is the admin's access to the test cluster and the namespace of this run.
var cluster struct {
	config *rest.Config
	client k8s.Interface
	ns     string
}

const redisVersion = "7.0"

func TestMain(m *testing.M) {
	if kubeconfig == "" {
		fmt.Println("driver/kubernetes: the tests that need a Kubernetes cluster skip: run `make test-k8s`, or set CLOUDDB_K8S_KUBECONFIG, CLOUDDB_K8S_REDIS_IMAGE and CLOUDDB_K8S_NODE_IP as `scripts/k8s-test-cluster.sh up` prints them")
		os.Exit(m.Run())
	}
	code, err := withNamespace(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver/kubernetes:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// withNamespace runs the tests in a namespace of their own, deleted after.
func withNamespace(m *testing.M) (int, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, err
	}
	// The tests, in parallel, share this client and its rate limiter: client-go's default
	// (5 requests a second) made them wait on each other.
	cfg.QPS, cfg.Burst = 100, 200
	c, err := k8s.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clouddb-test-"}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("creating the test namespace: %w", err)
	}
	cluster.config, cluster.client, cluster.ns = cfg, c, ns.Name
	defer func() { _ = c.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}) }()
	// Pods need the namespace's default service account, which a controller makes.
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return 0, fmt.Errorf("namespace %s has no default service account: %w", ns.Name, err)
	}
	return m.Run(), nil
}

func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := f()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func needCluster(t *testing.T) {
	t.Helper()
	if kubeconfig == "" {
		t.Skip("no Kubernetes cluster: run `make test-k8s` (CLOUDDB_K8S_KUBECONFIG is not set)")
	}
}

func newDriver(t *testing.T, c k8s.Interface, ns string) *kubernetes.Driver {
	t.Helper()
	return newDriverWith(t, c, ns, nil)
}

// newDriverWith is newDriver with its Config changed by change.
func newDriverWith(t *testing.T, c k8s.Interface, ns string, change func(*kubernetes.Config)) *kubernetes.Driver {
	t.Helper()
	cfg := driverConfig(c, ns)
	if change != nil {
		change(&cfg)
	}
	d, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// driverConfig is the Config of newDriver's drivers; they log to stderr with
// CLOUDDB_K8S_TEST_LOG set (to find where an Ensure spends its time).
func driverConfig(c k8s.Interface, ns string) kubernetes.Config {
	var logger *slog.Logger
	if os.Getenv("CLOUDDB_K8S_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return kubernetes.Config{
		Logger:          logger,
		Client:          c,
		Namespace:       ns,
		Images:          map[string]string{redisVersion: redisImage},
		DefaultVersion:  redisVersion,
		ImagePullPolicy: corev1.PullNever,
		StorageClass:    storageClass,
		StartTimeout:    90 * time.Second,
		NodeAddress:     nodeIP,
		CA:              testCA,
		// Below the ports the tests hand to databases (nextPort, conformancePort), and
		// TestClusterPorts' own.
		ClusterPorts: [2]int{30000, 30169},
	}
}

func password(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// nextPort hands each database of the run a NodePort of its own, from 31000 up and well
// below the end of the NodePort range, 32767 (TestConformance uses 30201-30999).
var nextPort atomic.Int32

func init() { nextPort.Store(31000 + int32(time.Now().Unix()%800)*2) }

func instance(t *testing.T, id int, persistence string) clouddb.Instance {
	return clouddb.Instance{
		DatabaseID:      id,
		Port:            int(nextPort.Add(1)),
		Password:        password(t),
		MaxMemoryBytes:  100 << 20,
		EvictionPolicy:  "volatile-lru",
		DataPersistence: persistence,
		Shards:          1,
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// connect opens a client to the database's public endpoint (its NodePort on the node's
// address), from this host, as user (the default user when "").
func connect(t *testing.T, d *kubernetes.Driver, in clouddb.Instance, user, pass string) *redis.Client {
	t.Helper()
	return redisClient(t, d.PublicEndpoint(in.Port), user, pass)
}

func redisClient(t *testing.T, addr, user, pass string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, Username: user, Password: pass,
		MaxRetries: -1, DialTimeout: 5 * time.Second, DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// internalPassword is clouddb's own password of the database, from its Secret.
func internalPassword(t *testing.T, ctx context.Context, id int) string {
	t.Helper()
	s, err := cluster.client.CoreV1().Secrets(cluster.ns).Get(ctx, kubernetes.Name(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := string(s.Data["internal-password"])
	if p == "" {
		t.Fatal("the secret has no internal password")
	}
	return p
}

func ensureRunning(t *testing.T, ctx context.Context, d *kubernetes.Driver, in clouddb.Instance) {
	t.Helper()
	start := time.Now()
	if err := d.Ensure(ctx, in); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	t.Logf("Ensure of database %d took %v", in.DatabaseID, time.Since(start).Round(time.Millisecond))
	up, err := d.Running(ctx, in)
	if err != nil || !up {
		t.Fatalf("Running after Ensure = %v, %v; want true, nil", up, err)
	}
}

// reachable waits until the database answers PING through its public endpoint: after a
// new Service or pod is ready, kube-proxy takes a moment to route the NodePort to it.
func reachable(t *testing.T, ctx context.Context, c *redis.Client) {
	t.Helper()
	start := time.Now()
	var last error
	if err := poll(ctx, 15*time.Second, func() (bool, error) {
		last = c.Ping(ctx).Err()
		return last == nil, nil
	}); err != nil {
		t.Fatalf("no PING through the endpoint: %v (%v)", last, err)
	}
	t.Logf("the NodePort routed to the pod %v after it was ready", time.Since(start).Round(time.Millisecond))
}

func pod(t *testing.T, ctx context.Context, id int) *corev1.Pod {
	t.Helper()
	p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, kubernetes.Name(id)+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// labelled lists every object of the kinds the driver makes that carries the database's
// label, and its StatefulSets' revisions left without an owner.
func labelled(t *testing.T, ctx context.Context, id int) []string {
	t.Helper()
	return labelledIn(t, ctx, cluster.ns, id)
}

func labelledIn(t *testing.T, ctx context.Context, ns string, id int) []string {
	t.Helper()
	c := cluster.client
	opts := metav1.ListOptions{LabelSelector: kubernetes.LabelDatabase + "=" + strconv.Itoa(id)}
	var out []string
	sts, err := c.AppsV1().StatefulSets(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range sts.Items {
		out = append(out, "statefulset/"+o.Name)
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range pods.Items {
		out = append(out, "pod/"+o.Name)
	}
	svcs, err := c.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range svcs.Items {
		out = append(out, "service/"+o.Name)
	}
	secrets, err := c.CoreV1().Secrets(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range secrets.Items {
		out = append(out, "secret/"+o.Name)
	}
	pdbs, err := c.PolicyV1().PodDisruptionBudgets(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range pdbs.Items {
		out = append(out, "poddisruptionbudget/"+o.Name)
	}
	pvcs, err := c.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range pvcs.Items {
		out = append(out, "persistentvolumeclaim/"+o.Name)
	}
	revs, err := c.AppsV1().ControllerRevisions(ns).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range revs.Items {
		// A StatefulSet's own revisions go with it; one without an owner is left over.
		if len(o.OwnerReferences) == 0 {
			out = append(out, "controllerrevision/"+o.Name)
		}
	}
	slices.Sort(out)
	return out
}

func instances(t *testing.T, ctx context.Context, d *kubernetes.Driver) []int {
	t.Helper()
	ids, err := d.Instances(ctx)
	if err != nil {
		t.Fatalf("Instances: %v", err)
	}
	return ids
}

// TestLifecycle takes one persistent database through its life: created and reached
// through its NodePort, resized live, its pod killed and healed, stopped and started,
// removed, its data kept throughout.
func TestLifecycle(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 8*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 101, "aof-every-1-second")
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })

	ensureRunning(t, ctx, d, in)
	name := kubernetes.Name(in.DatabaseID)
	want := []string{"persistentvolumeclaim/data-" + name + "-0", "pod/" + name + "-0", "secret/" + name, "service/" + name, "statefulset/" + name}
	if got := labelled(t, ctx, in.DatabaseID); !slices.Equal(got, want) {
		t.Fatalf("labelled objects = %v, want %v", got, want)
	}
	sts, err := cluster.client.AppsV1().StatefulSets(cluster.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, owned := range []metav1.Object{
		must(cluster.client.CoreV1().Services(cluster.ns).Get(ctx, name, metav1.GetOptions{})),
		must(cluster.client.CoreV1().Secrets(cluster.ns).Get(ctx, name, metav1.GetOptions{})),
	} {
		refs := owned.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != sts.UID || refs[0].Kind != "StatefulSet" {
			t.Fatalf("%s is owned by %+v, want the statefulset %s", owned.GetName(), refs, sts.UID)
		}
	}
	if got := instances(t, ctx, d); !slices.Contains(got, in.DatabaseID) {
		t.Fatalf("Instances = %v, want it to hold %d", got, in.DatabaseID)
	}

	// The tenant, from this host, through the NodePort.
	tenant := connect(t, d, in, "", in.Password)
	reachable(t, ctx, tenant)
	if got, err := tenant.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING through %s = %q, %v", d.PublicEndpoint(in.Port), got, err)
	}
	if err := connect(t, d, in, "", "wrong-password").Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("PING with a wrong password = %v, want WRONGPASS", err)
	}
	if err := tenant.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	internal := connect(t, d, in, "clouddb-internal", internalPassword(t, ctx, in.DatabaseID))
	maxmemory := func() string {
		t.Helper()
		v, err := internal.ConfigGet(ctx, "maxmemory").Result()
		if err != nil {
			t.Fatal(err)
		}
		return v["maxmemory"]
	}
	if got := maxmemory(); got != strconv.Itoa(100<<20) {
		t.Fatalf("maxmemory = %s, want %d", got, 100<<20)
	}

	// A larger size: applied live, same pod (no restart), data kept, container resized.
	before := pod(t, ctx, in.DatabaseID)
	in.MaxMemoryBytes = 300 << 20
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running with a new size before Ensure = %v, %v; want false, nil", up, err)
	}
	ensureRunning(t, ctx, d, in)
	if got := maxmemory(); got != strconv.Itoa(300<<20) {
		t.Fatalf("maxmemory after the change = %s, want %d", got, 300<<20)
	}
	after := pod(t, ctx, in.DatabaseID)
	if after.UID != before.UID || restarts(after) != restarts(before) {
		t.Fatalf("the pod was replaced or restarted by a size change (uid %s -> %s, restarts %d -> %d)", before.UID, after.UID, restarts(before), restarts(after))
	}
	if got := limitOf(after); got <= 300<<20 {
		t.Fatalf("the container's memory limit is %d after the change, want more than maxmemory %d", got, 300<<20)
	}
	if got, err := tenant.Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("GET k after the size change = %q, %v; want v1", got, err)
	}
	// And smaller again.
	in.MaxMemoryBytes = 200 << 20
	ensureRunning(t, ctx, d, in)
	if got := maxmemory(); got != strconv.Itoa(200<<20) {
		t.Fatalf("maxmemory after shrinking = %s, want %d", got, 200<<20)
	}
	if got := pod(t, ctx, in.DatabaseID); got.UID != before.UID {
		t.Fatal("the pod was replaced by a smaller size")
	}

	// Killed: Kubernetes brings the pod back, with the data of its volume.
	if err := tenant.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // appendfsync everysec
	if err := cluster.client.CoreV1().Pods(cluster.ns).Delete(ctx, before.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := poll(ctx, 90*time.Second, func() (bool, error) {
		p, err := cluster.client.CoreV1().Pods(cluster.ns).Get(ctx, before.Name, metav1.GetOptions{})
		return err == nil && p.UID != before.UID && ready(p), nil
	}); err != nil {
		t.Fatalf("the killed pod did not come back: %v", err)
	}
	t.Logf("a killed pod was back and ready in %v", time.Since(start).Round(time.Millisecond))
	if up, err := d.Running(ctx, in); err != nil || !up {
		t.Fatalf("Running after the pod came back = %v, %v", up, err)
	}
	// The smaller size's limit, which the running container kept its larger one for.
	if got := limitOf(pod(t, ctx, in.DatabaseID)); got <= 200<<20 || got >= limitOf(after) {
		t.Fatalf("the new pod's memory limit is %d, want more than 200 MiB and less than the larger size's %d", got, limitOf(after))
	}
	reachable(t, ctx, tenant)
	if got, err := tenant.Get(ctx, "k").Result(); err != nil || got != "v2" {
		t.Fatalf("GET k after the pod was killed = %q, %v; want v2", got, err)
	}
	if got := maxmemory(); got != strconv.Itoa(200<<20) {
		t.Fatalf("maxmemory of the new pod = %s, want %d", got, 200<<20)
	}

	// Stopped: no pod, the claim stays, the database is still listed; started again with
	// its data.
	if err := tenant.Set(ctx, "k", "v3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := d.Stop(ctx, in.DatabaseID); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %v", time.Since(start).Round(time.Millisecond))
	want = []string{"persistentvolumeclaim/data-" + name + "-0", "secret/" + name, "service/" + name, "statefulset/" + name}
	if got := labelled(t, ctx, in.DatabaseID); !slices.Equal(got, want) {
		t.Fatalf("labelled objects after Stop = %v, want %v", got, want)
	}
	if up, err := d.Running(ctx, in); err != nil || up {
		t.Fatalf("Running after Stop = %v, %v; want false, nil", up, err)
	}
	if got := instances(t, ctx, d); !slices.Contains(got, in.DatabaseID) {
		t.Fatalf("Instances after Stop = %v, want it to hold %d", got, in.DatabaseID)
	}
	ensureRunning(t, ctx, d, in)
	reachable(t, ctx, tenant)
	if got, err := tenant.Get(ctx, "k").Result(); err != nil || got != "v3" {
		t.Fatalf("GET k after Stop and Ensure = %q, %v; want v3", got, err)
	}

	// A new driver (clouddb restarted) adopts it as it is.
	d2 := newDriver(t, cluster.client, cluster.ns)
	if up, err := d2.Running(ctx, in); err != nil || !up {
		t.Fatalf("Running on a new driver = %v, %v", up, err)
	}
	ensureRunning(t, ctx, d2, in)

	start = time.Now()
	if err := d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	t.Logf("Remove took %v", time.Since(start).Round(time.Millisecond))
	if got := labelled(t, ctx, in.DatabaseID); len(got) != 0 {
		t.Fatalf("labelled objects after Remove: %v", got)
	}
	if got := instances(t, ctx, d); slices.Contains(got, in.DatabaseID) {
		t.Fatalf("Instances after Remove = %v", got)
	}
	if err := d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatalf("a second Remove: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// started reports whether the pod's server listens (its startup probe passed), whatever
// it holds: a replicated database's restarted node is not Ready before Ensure.
func started(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil && cs.Started != nil && *cs.Started {
			return true
		}
	}
	return false
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// limitOf is the memory limit the pod's container runs with, as the kubelet reports it.
func limitOf(p *corev1.Pod) int64 {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Resources != nil {
			if q, ok := cs.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.Value()
			}
		}
	}
	return 0
}

// TestTenantCannotAdminister: the tenant's password (and a named user's, whatever its
// rule) runs the data commands and none of the server's administration.
func TestTenantCannotAdminister(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 3*time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	in := instance(t, 102, "none")
	in.Users = []clouddb.DatabaseUser{{Name: "alice", Password: password(t), Rule: "+@all ~*"}}
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)

	internal := connect(t, d, in, "clouddb-internal", internalPassword(t, ctx, in.DatabaseID))
	for _, who := range []struct{ user, pass string }{{"", in.Password}, {"alice", in.Users[0].Password}} {
		c := connect(t, d, in, who.user, who.pass)
		reachable(t, ctx, c)
		if err := c.Set(ctx, "a", "1", 0).Err(); err != nil {
			t.Fatalf("%q: SET: %v", who.user, err)
		}
		user := who.user
		if user == "" {
			user = "default"
		}
		for _, cmd := range [][]any{
			{"config", "set", "maxmemory", "1"},
			{"config", "get", "maxmemory"},
			{"debug", "sleep", "0"},
			{"shutdown", "nosave"},
			{"replicaof", "127.0.0.1", "1"},
			{"acl", "setuser", "eve", "on", ">pw", "+@all"},
			{"module", "list"},
			{"migrate", "127.0.0.1", "1", "a", "0", "1"},
		} {
			err := c.Do(ctx, cmd...).Err()
			// DEBUG is also off for every connection (enable-debug-command no), which
			// redis checks first: ACL DRYRUN below shows the user's own denial.
			if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "DEBUG command not allowed") {
				t.Errorf("%q: %v = %v, want NOPERM", who.user, cmd, err)
			}
			dry, err := internal.Do(ctx, append([]any{"acl", "dryrun", user}, cmd...)...).Text()
			if err != nil || !strings.Contains(dry, "no permissions") {
				t.Errorf("ACL DRYRUN %s %v = %q, %v; want no permissions", user, cmd, dry, err)
			}
		}
		if dry, err := internal.Do(ctx, "acl", "dryrun", user, "set", "a", "2").Text(); err != nil || dry != "OK" {
			t.Errorf("ACL DRYRUN %s SET = %q, %v; want OK", user, dry, err)
		}
	}
	// Still up and its settings untouched.
	if up, err := d.Running(ctx, in); err != nil || !up {
		t.Fatalf("Running = %v, %v", up, err)
	}
	if v, err := internal.ConfigGet(ctx, "maxmemory").Result(); err != nil || v["maxmemory"] != strconv.Itoa(100<<20) {
		t.Fatalf("maxmemory = %v, %v", v, err)
	}
	// A changed password works at once, the old one no longer.
	old := in.Password
	in.Password = password(t)
	ensureRunning(t, ctx, d, in)
	if err := connect(t, d, in, "", in.Password).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with the new password: %v", err)
	}
	if err := connect(t, d, in, "", old).Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("PING with the old password = %v, want WRONGPASS", err)
	}
}

// TestCannotRun: a pod that cannot start fails Ensure with its reason, and Running says
// it too.
func TestCannotRun(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 3*time.Minute)
	c := cluster.client
	d, err := kubernetes.New(kubernetes.Config{
		Client: c, Namespace: cluster.ns, Images: map[string]string{redisVersion: "localhost/clouddb-no-such-image:1"},
		DefaultVersion: redisVersion, ImagePullPolicy: corev1.PullNever, StorageClass: storageClass,
		StartTimeout: 60 * time.Second, NodeAddress: nodeIP,
	})
	if err != nil {
		t.Fatal(err)
	}
	in := instance(t, 103, "none")
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	err = d.Ensure(ctx, in)
	if err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("Ensure with an image that is not there = %v, want the pod's reason ErrImageNeverPull", err)
	}
	if errors.Is(err, clouddb.ErrServerStarting) {
		t.Fatalf("Ensure = %v: not a server that starts", err)
	}
	up, err := d.Running(ctx, in)
	if up || err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("Running = %v, %v; want false and the pod's reason", up, err)
	}
	if err := d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatal(err)
	}
	if got := labelled(t, ctx, in.DatabaseID); len(got) != 0 {
		t.Fatalf("labelled objects after Remove: %v", got)
	}
}

// TestNotSupported: what the driver cannot run yet is refused, by name, before any
// object is made.
func TestNotSupported(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, time.Minute)
	d := newDriver(t, cluster.client, cluster.ns)
	base := instance(t, 104, "none")
	for name, change := range map[string]func(*clouddb.Instance){
		"shards": func(in *clouddb.Instance) { in.Shards = 2 },
		"cluster with replicaOf": func(in *clouddb.Instance) {
			in.Shards, in.OSSCluster, in.ReplicaOf = 2, true, []clouddb.RedisEndpoint{{Addr: "203.0.113.1:6379"}}
		},
		"version": func(in *clouddb.Instance) { in.RedisVersion = "6.2" },
	} {
		in := base
		change(&in)
		if err := d.Ensure(ctx, in); !errors.Is(err, kubernetes.ErrNotSupported) {
			t.Errorf("%s: Ensure = %v, want ErrNotSupported", name, err)
		}
	}
	if got := labelled(t, ctx, base.DatabaseID); len(got) != 0 {
		t.Fatalf("objects made for refused instances: %v", got)
	}
	// A source inside the cluster is refused before anything is made, too.
	in := base
	in.ReplicaOf = []clouddb.RedisEndpoint{{Addr: net.JoinHostPort(nodeIP, "10250")}}
	if err := d.Ensure(ctx, in); !errors.Is(err, kubernetes.ErrSourceForbidden) {
		t.Errorf("replicaOf the kubelet: Ensure = %v, want ErrSourceForbidden", err)
	}
	if got := labelled(t, ctx, base.DatabaseID); len(got) != 0 {
		t.Fatalf("objects made for a refused source: %v", got)
	}
}

// TestRunAsUser: with Config.RunAsUser the server runs as that user and reads its config
// through the volumes' group; when it cannot run (here: the test cluster's hostPath
// volumes ignore fsGroup, so 999 cannot write a persistent database's data), Ensure and
// Running say why in redis's own words (the container's last log lines).
func TestRunAsUser(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 3*time.Minute)
	d, err := kubernetes.New(kubernetes.Config{
		Client: cluster.client, Namespace: cluster.ns, Images: map[string]string{redisVersion: redisImage},
		DefaultVersion: redisVersion, ImagePullPolicy: corev1.PullNever, StorageClass: storageClass,
		StartTimeout: 60 * time.Second, NodeAddress: nodeIP, RunAsUser: ptr(int64(999)),
	})
	if err != nil {
		t.Fatal(err)
	}
	in := instance(t, 105, "none")
	t.Cleanup(func() { _ = d.Remove(context.Background(), in.DatabaseID) })
	ensureRunning(t, ctx, d, in)
	sc := pod(t, ctx, in.DatabaseID).Spec.Containers[0].SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 999 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Fatalf("the container's security context is %+v, want user 999", sc)
	}
	c := connect(t, d, in, "", in.Password)
	reachable(t, ctx, c)
	if err = c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	p := instance(t, 106, "aof-every-1-second")
	t.Cleanup(func() { _ = d.Remove(context.Background(), p.DatabaseID) })
	err = d.Ensure(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("Ensure of a database whose data directory the user cannot write = %v, want redis's reason", err)
	}
	up, err := d.Running(ctx, p)
	if up || err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("Running = %v, %v; want false and redis's reason", up, err)
	}
}
