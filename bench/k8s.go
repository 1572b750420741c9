package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// The test cluster's environment (scripts/k8s-test-cluster.sh up prints it; its run
// exports it to the command it runs).
const (
	envK8sKubeconfig = "CLOUDDB_K8S_KUBECONFIG"
	envK8sImage      = "CLOUDDB_K8S_REDIS_IMAGE"
	envK8sNodeIP     = "CLOUDDB_K8S_NODE_IP"
	envK8sStorage    = "CLOUDDB_K8S_STORAGE_CLASS"
	envK8sContainerd = "CLOUDDB_K8S_CONTAINERD"
)

// k8sResult is the Kubernetes section: the kubernetes driver's create-to-ready against a
// bare pod of the same image, and the node-side CPU of the readiness probes.
type k8sResult struct {
	// Skipped says why nothing was measured (no cluster); the rest is empty then.
	Skipped string
	Image   string
	Server  string // the API server's version
	Reps    int
	// Rows are the single-node and the replicated database.
	Rows []k8sCreateRow
	// Bare is a bare pod's create → Ready → PING on its pod IP, sorted.
	Bare []time.Duration
	// BareReady is create → Ready alone, sorted.
	BareReady []time.Duration
	// Probe is the probes' CPU; ProbeSkipped says why it was not measured when nil.
	Probe        *k8sProbeResult
	ProbeSkipped string
}

// k8sCreateRow is one kind of database's create-to-ready.
type k8sCreateRow struct {
	Name string
	Pods int
	// Ready is from Ensure's call until a client's PING through the public endpoint
	// answered, sorted; Ensure until Ensure returned.
	Ready, Ensure []time.Duration
	// Ratios are the per-repetition Ready / the bare pod of the same repetition.
	Ratios []float64
}

// goalK8sCreate bounds a single-node database's create-to-ready over a bare pod's.
const goalK8sCreate = 2.0

// MedianRatio is the median of the per-pair ratios.
func (r *k8sCreateRow) MedianRatio() float64 { return median(r.Ratios) }

// P99Ratio compares the p99s (with a few repetitions: the slowest).
func (r *k8sCreateRow) P99Ratio(bare []time.Duration) float64 {
	return float64(quantile(r.Ready, 0.99)) / float64(quantile(bare, 0.99))
}

// k8sProbeResult compares the node's CPU (kubelet, containerd and the pods' shims, with
// the processes they reaped: runc and the probes' commands) with M idle databases and
// with M bare pods without probes, in alternating windows.
type k8sProbeResult struct {
	M      int
	Window time.Duration
	// DB and Bare are the node's CPU in each window, as a share of one core.
	DB, Bare []float64
	// Ratios are the per-pair DB / Bare.
	Ratios []float64
	// Probes counts the readiness probes the kubelet ran in each database window (its
	// prober_probe_total), and ProbeTime their summed duration
	// (prober_probe_duration_seconds); both 0 when its metrics were unreadable or none
	// moved.
	Probes, ProbeTime []float64
}

// ExtraCPU is the median CPU the databases' windows took over the bare pods', as a share
// of one core.
func (p *k8sProbeResult) ExtraCPU() float64 { return median(p.DB) - median(p.Bare) }

// PerProbe is the node's extra CPU time per readiness probe, or 0 when the kubelet's
// count is unknown.
func (p *k8sProbeResult) PerProbe() time.Duration {
	n := median(p.Probes)
	if !(n > 0) {
		return 0
	}
	return time.Duration(p.ExtraCPU() * p.Window.Seconds() / n * float64(time.Second))
}

// MeanProbe is the mean duration of a readiness probe as the kubelet timed it.
func (p *k8sProbeResult) MeanProbe() time.Duration {
	var n, s float64
	for i := range p.Probes {
		if p.Probes[i] > 0 {
			n += p.Probes[i]
			s += p.ProbeTime[i]
		}
	}
	if n == 0 {
		return 0
	}
	return time.Duration(s / n * float64(time.Second))
}

// k8sProbePeriod is the readiness probe's period (driver/kubernetes/probe.go).
const k8sProbePeriod = 5 * time.Second

// k8sBench is one run of the section on a cluster.
type k8sBench struct {
	cfg    Config
	c      k8s.Interface
	d      *kubernetes.Driver
	ns     string
	image  string
	nodeIP string
	nextID int
	port   int
}

// k8s measures the section on the cluster of the environment; without one, it runs the
// section on a cluster the script of Config.K8sCluster brings up for it alone, or says
// why it skips.
func (h *harness) k8s(ctx context.Context) (*k8sResult, error) {
	if os.Getenv(envK8sKubeconfig) != "" {
		return measureK8s(ctx, h.cfg)
	}
	if h.cfg.K8sCluster == "" {
		return &k8sResult{Skipped: "not run: no Kubernetes cluster (" + envK8sKubeconfig + " is unset and no -k8s-cluster script; " +
			"`make bench` runs it as root once scripts/k8s-test-cluster.sh build has built Kubernetes)"}, nil
	}
	return h.k8sUnderScript(ctx)
}

// k8sUnderScript runs this executable with -k8s-json under `K8sCluster run --`: the
// cluster is up for this section only (not while the others measure), and torn down
// after whatever happens. A SIGTERM to the script's process group, on cancellation, lets
// it tear the cluster down.
func (h *harness) k8sUnderScript(ctx context.Context) (*k8sResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	out := filepath.Join(h.dir, "k8s.json")
	c := h.cfg
	cmd := exec.CommandContext(ctx, c.K8sCluster, "run", "--", self, "-k8s-json", out,
		"-k8s-reps", strconv.Itoa(c.K8sReps), "-k8s-idle", strconv.Itoa(c.K8sIdle),
		"-k8s-window", c.K8sWindow.String(), "-k8s-probe-reps", strconv.Itoa(c.K8sProbeReps))
	cmd.Stdout, cmd.Stderr = c.Log, c.Log
	if c.Log == nil {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 3 * time.Minute
	c.logf("k8s: %s run -- (this harness) -k8s-json …", c.K8sCluster)
	if err = cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s run: %w", c.K8sCluster, err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	var res k8sResult
	if err = json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", out, err)
	}
	return &res, nil
}

// runK8sJSON is the process k8sUnderScript starts: the section alone, its result written
// as JSON to path.
func runK8sJSON(ctx context.Context, cfg Config, path string) error {
	res, err := measureK8s(ctx, cfg)
	if err != nil {
		return err
	}
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// measureK8s runs the section on the cluster the environment names, in a namespace of
// its own, deleted after.
func measureK8s(ctx context.Context, cfg Config) (res *k8sResult, err error) {
	kubeconfig, image, nodeIP := os.Getenv(envK8sKubeconfig), os.Getenv(envK8sImage), os.Getenv(envK8sNodeIP)
	if kubeconfig == "" || image == "" || nodeIP == "" {
		return &k8sResult{Skipped: fmt.Sprintf("not run: %s, %s and %s must all be set", envK8sKubeconfig, envK8sImage, envK8sNodeIP)}, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 100, 200
	c, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	res = &k8sResult{Image: image, Reps: cfg.K8sReps}
	if v, verr := c.Discovery().ServerVersion(); verr == nil {
		res.Server = v.GitVersion
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	ns, err := c.CoreV1().Namespaces().Create(wctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clouddb-bench-"}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a namespace: %w", err)
	}
	defer func() {
		// What is left (after a failure) goes with the namespace.
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.CoreV1().Namespaces().Delete(dctx, ns.Name, metav1.DeleteOptions{})
	}()
	if err = pollUntil(wctx, 30*time.Second, 100*time.Millisecond, func() bool {
		_, gerr := c.CoreV1().ServiceAccounts(ns.Name).Get(wctx, "default", metav1.GetOptions{})
		return gerr == nil
	}); err != nil {
		return nil, fmt.Errorf("namespace %s has no default service account: %w", ns.Name, err)
	}
	version := "7.0"
	if i := strings.LastIndexByte(image, ':'); i >= 0 {
		if f := strings.Split(image[i+1:], "."); len(f) >= 2 {
			version = f[0] + "." + f[1]
		}
	}
	d, err := kubernetes.New(kubernetes.Config{
		Client:          c,
		Namespace:       ns.Name,
		Images:          map[string]string{version: image},
		DefaultVersion:  version,
		ImagePullPolicy: corev1.PullNever,
		StorageClass:    os.Getenv(envK8sStorage),
		StartTimeout:    90 * time.Second,
		NodeAddress:     nodeIP,
	})
	if err != nil {
		return nil, err
	}
	// NodePorts near the top of the range: the driver's tests use 30000-31999.
	b := &k8sBench{cfg: cfg, c: c, d: d, ns: ns.Name, image: image, nodeIP: nodeIP, nextID: 9000, port: 32300}
	if err := b.createToReady(wctx, res); err != nil {
		return nil, err
	}
	if err := b.probeCost(wctx, res); err != nil {
		var skip errProbeSkipped
		if !errors.As(err, &skip) {
			return nil, err
		}
		res.ProbeSkipped = skip.Error()
		cfg.logf("k8s: probe cost: %v", err)
	}
	return res, nil
}

// errProbeSkipped: the probe-cost measurement cannot run here (not an error of clouddb's).
type errProbeSkipped struct{ why string }

func (e errProbeSkipped) Error() string { return e.why }

// createToReady alternates a single-node database, a replicated one and a bare pod,
// rotating which goes first, each removed (and waited for until gone) before the next.
func (b *k8sBench) createToReady(ctx context.Context, res *k8sResult) error {
	res.Rows = []k8sCreateRow{{Name: "single node", Pods: 1}, {Name: "replicated (`replication: true`)", Pods: 2}}
	for i := range b.cfg.K8sReps {
		var bare time.Duration
		ready := make([]time.Duration, len(res.Rows))
		steps := []func() error{
			func() error {
				r, e, err := b.database(ctx, false)
				ready[0] = r
				res.Rows[0].Ensure = append(res.Rows[0].Ensure, e)
				return err
			},
			func() error {
				r, e, err := b.database(ctx, true)
				ready[1] = r
				res.Rows[1].Ensure = append(res.Rows[1].Ensure, e)
				return err
			},
			func() error {
				r, toReady, err := b.barePod(ctx, "bare-"+strconv.Itoa(i))
				bare = r
				res.BareReady = append(res.BareReady, toReady)
				return err
			},
		}
		for j := range steps {
			if err := steps[(i+j)%len(steps)](); err != nil {
				return err
			}
		}
		res.Bare = append(res.Bare, bare)
		for k := range res.Rows {
			res.Rows[k].Ready = append(res.Rows[k].Ready, ready[k])
			res.Rows[k].Ratios = append(res.Rows[k].Ratios, float64(ready[k])/float64(bare))
		}
		b.cfg.logf("k8s: rep %d: single %s, replicated %s, bare pod %s", i+1, ready[0].Round(time.Millisecond), ready[1].Round(time.Millisecond), bare.Round(time.Millisecond))
	}
	slices.Sort(res.Bare)
	slices.Sort(res.BareReady)
	for k := range res.Rows {
		slices.Sort(res.Rows[k].Ready)
		slices.Sort(res.Rows[k].Ensure)
	}
	return nil
}

// newInstance is a new database: 100 MB, no persistence.
func (b *k8sBench) newInstance(replicated bool) (clouddb.Instance, error) {
	pw, err := randomHex(12)
	if err != nil {
		return clouddb.Instance{}, err
	}
	b.nextID++
	b.port++
	if b.port > 32767 {
		b.port = 32300
	}
	return clouddb.Instance{
		DatabaseID: b.nextID, Port: b.port, Password: pw,
		MaxMemoryBytes: 100 << 20, EvictionPolicy: "volatile-lru", DataPersistence: "none", Shards: 1,
		Replication: replicated,
	}, nil
}

// database creates a database with Ensure and PINGs it through its public endpoint: it
// returns the time until that PONG and until Ensure returned. The database is removed
// before it returns (Remove waits until its objects are gone).
func (b *k8sBench) database(ctx context.Context, replicated bool) (ready, ensure time.Duration, err error) {
	in, err := b.newInstance(replicated)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if rerr := b.d.Remove(context.WithoutCancel(ctx), in.DatabaseID); rerr != nil && err == nil {
			err = fmt.Errorf("removing database %d: %w", in.DatabaseID, rerr)
		}
	}()
	t0 := time.Now()
	if err = b.d.Ensure(ctx, in); err != nil {
		return 0, 0, fmt.Errorf("database %d (replication %v): Ensure: %w", in.DatabaseID, replicated, err)
	}
	ensure = time.Since(t0)
	if err = pingUntil(ctx, b.d.PublicEndpoint(in.Port), in.Password, t0.Add(ensure+30*time.Second)); err != nil {
		return 0, 0, fmt.Errorf("database %d after Ensure: %w", in.DatabaseID, err)
	}
	return time.Since(t0), ensure, nil
}

// pingUntil polls an authenticated PING every 5 ms until PONG or the deadline.
func pingUntil(ctx context.Context, addr, password string, deadline time.Time) error {
	for {
		err := authPing(addr, password, time.Second)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG from %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// barePodSpec is a pod of the image running redis-server alone: the same memory
// request and limit as a database of 100 MB (driver/kubernetes's memoryLimit), no
// probe, no volume, no clouddb object.
func (b *k8sBench) barePodSpec(name, password string) *corev1.Pod {
	mem := resource.NewQuantity(100<<20+50<<20+192<<20, resource.BinarySI)
	res := corev1.ResourceList{corev1.ResourceMemory: *mem}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "clouddb-bench-bare"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "redis", Image: b.image, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"redis-server", "--port", "6379", "--bind", "0.0.0.0", "--requirepass", password, "--save", "", "--appendonly", "no"},
				Ports:     []corev1.ContainerPort{{Name: "redis", ContainerPort: 6379}},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
			}},
			TerminationGracePeriodSeconds: ptrTo(int64(5)),
		},
	}
}

// barePod creates a bare pod and returns the time until it was Ready and answered an
// authenticated PING on its pod IP, and until Ready alone (seen by a watch). It is
// deleted, and waited for until gone, before it returns.
func (b *k8sBench) barePod(ctx context.Context, name string) (ping, ready time.Duration, err error) {
	pw, err := randomHex(12)
	if err != nil {
		return 0, 0, err
	}
	pods := b.c.CoreV1().Pods(b.ns)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	w, err := pods.Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	defer func() {
		if derr := b.deletePods(context.WithoutCancel(ctx), name); derr != nil && err == nil {
			err = derr
		}
	}()
	t0 := time.Now()
	if _, err = pods.Create(wctx, b.barePodSpec(name, pw), metav1.CreateOptions{}); err != nil {
		return 0, 0, fmt.Errorf("creating pod %s: %w", name, err)
	}
	var ip string
	for ip == "" {
		ev, ok := <-w.ResultChan()
		if !ok {
			return 0, 0, fmt.Errorf("pod %s: not Ready within 2m (%v)", name, wctx.Err())
		}
		if p, isPod := ev.Object.(*corev1.Pod); isPod && podIsReady(p) && p.Status.PodIP != "" {
			ip = p.Status.PodIP
		}
	}
	ready = time.Since(t0)
	if err = pingUntil(wctx, net.JoinHostPort(ip, "6379"), pw, t0.Add(ready+30*time.Second)); err != nil {
		return 0, 0, fmt.Errorf("pod %s: %w", name, err)
	}
	return time.Since(t0), ready, nil
}

// deletePods deletes the bare pods of those names and waits until they are gone.
func (b *k8sBench) deletePods(ctx context.Context, names ...string) error {
	pods := b.c.CoreV1().Pods(b.ns)
	for _, n := range names {
		if err := pods.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s: %w", n, err)
		}
	}
	return pollUntil(ctx, 2*time.Minute, 100*time.Millisecond, func() bool {
		for _, n := range names {
			if _, err := pods.Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
}

func podIsReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// probeCost alternates windows with M idle single-node databases (each pod runs the
// readiness probe every 5 s) and with M bare pods (no probe), measuring the node's CPU
// in each; which goes first alternates. Each set is made, settles for one probe period,
// is measured, and is removed before the other is made.
func (b *k8sBench) probeCost(ctx context.Context, res *k8sResult) error {
	procs, err := nodeProcs()
	if err != nil {
		return err
	}
	if len(procs) == 0 {
		return errProbeSkipped{"not measured: the node's kubelet, containerd and shims are not processes of this host"}
	}
	p := &k8sProbeResult{M: b.cfg.K8sIdle, Window: b.cfg.K8sWindow}
	node, err := b.nodeName(ctx)
	if err != nil {
		return err
	}
	for i := range b.cfg.K8sProbeReps {
		var db, bare float64
		dbWindow := func() error {
			var probes, probeTime float64
			var err error
			db, probes, probeTime, err = b.databaseWindow(ctx, node)
			p.Probes, p.ProbeTime = append(p.Probes, probes), append(p.ProbeTime, probeTime)
			return err
		}
		bareWindow := func() error {
			var err error
			bare, err = b.bareWindow(ctx, i)
			return err
		}
		first, second := dbWindow, bareWindow
		if i%2 == 1 {
			first, second = bareWindow, dbWindow
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		p.DB, p.Bare = append(p.DB, db), append(p.Bare, bare)
		p.Ratios = append(p.Ratios, db/bare)
		b.cfg.logf("k8s: probe window %d: %d databases %.1f%% of a core (%.0f probes), %d bare pods %.1f%%",
			i+1, p.M, 100*db, p.Probes[i], p.M, 100*bare)
	}
	res.Probe = p
	return nil
}

// databaseWindow makes M databases, measures the node's CPU over a window, and removes
// them. It returns the CPU share and the readiness probes the kubelet counted (with
// their summed duration) in the namespace meanwhile (NaN when unreadable).
func (b *k8sBench) databaseWindow(ctx context.Context, node string) (cpu, probes, probeTime float64, err error) {
	var ids []int
	defer func() {
		for _, id := range ids {
			if rerr := b.d.Remove(context.WithoutCancel(ctx), id); rerr != nil && err == nil {
				err = fmt.Errorf("removing database %d: %w", id, rerr)
			}
		}
	}()
	errs := make(chan error, b.cfg.K8sIdle)
	for range b.cfg.K8sIdle {
		in, ierr := b.newInstance(false)
		if ierr != nil {
			return 0, 0, 0, ierr
		}
		ids = append(ids, in.DatabaseID)
		go func() { errs <- b.d.Ensure(ctx, in) }()
	}
	for range b.cfg.K8sIdle {
		if e := <-errs; e != nil && err == nil {
			err = fmt.Errorf("a database's Ensure: %w", e)
		}
	}
	if err != nil {
		return 0, 0, 0, err
	}
	var m0, m1 probeMetrics
	cpu, err = b.window(ctx, func() { m0 = b.probeMetrics(ctx, node) }, func() { m1 = b.probeMetrics(ctx, node) })
	probes, probeTime = m1.count-m0.count, m1.seconds-m0.seconds
	if !(probes > 0) {
		// No counter moved (or none was read): none counted (0, not NaN: the result
		// travels as JSON from the run on the cluster).
		probes, probeTime = 0, 0
	}
	return cpu, probes, probeTime, err
}

// bareWindow makes M bare pods, measures the node's CPU over a window, and deletes them.
func (b *k8sBench) bareWindow(ctx context.Context, rep int) (cpu float64, err error) {
	var names []string
	defer func() {
		if derr := b.deletePods(context.WithoutCancel(ctx), names...); derr != nil && err == nil {
			err = derr
		}
	}()
	for j := range b.cfg.K8sIdle {
		pw, err := randomHex(12)
		if err != nil {
			return 0, err
		}
		name := fmt.Sprintf("idle-%d-%d", rep, j)
		if _, err := b.c.CoreV1().Pods(b.ns).Create(ctx, b.barePodSpec(name, pw), metav1.CreateOptions{}); err != nil {
			return 0, fmt.Errorf("creating pod %s: %w", name, err)
		}
		names = append(names, name)
	}
	if err := pollUntil(ctx, 2*time.Minute, 100*time.Millisecond, func() bool {
		for _, n := range names {
			if p, err := b.c.CoreV1().Pods(b.ns).Get(ctx, n, metav1.GetOptions{}); err != nil || !podIsReady(p) {
				return false
			}
		}
		return true
	}); err != nil {
		return 0, fmt.Errorf("bare pods not Ready: %w", err)
	}
	return b.window(ctx, func() {}, func() {})
}

// window lets the pods settle for one probe period, then measures the node processes'
// CPU over Config.K8sWindow, as a share of one core; before and after run just outside
// it.
func (b *k8sBench) window(ctx context.Context, before, after func()) (float64, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(k8sProbePeriod):
	}
	before()
	procs0, err := nodeProcs()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(b.cfg.K8sWindow):
	}
	procs1, err := nodeProcs()
	if err != nil {
		return 0, err
	}
	elapsed := time.Since(t0)
	after()
	var used time.Duration
	for pid, c1 := range procs1 {
		if c0, ok := procs0[pid]; ok {
			used += c1 - c0
		}
	}
	return used.Seconds() / elapsed.Seconds(), nil
}

// nodeProcs is the CPU time so far (their own and their reaped children's) of the test
// cluster's kubelet, containerd and containerd shims, by pid: the processes whose command
// line names the cluster's state directory (where its kubeconfig is).
func nodeProcs() (map[int]time.Duration, error) {
	state := filepath.Dir(os.Getenv(envK8sKubeconfig))
	if ctrd := os.Getenv(envK8sContainerd); ctrd != "" {
		state = filepath.Dir(filepath.Dir(ctrd))
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]time.Duration{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		switch strings.TrimSpace(string(comm)) {
		case "kubelet", "containerd", "containerd-shim":
		default:
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(state+"/")) {
			continue
		}
		if c, err := cpuTimeWithChildren(pid); err == nil {
			out[pid] = c
		}
	}
	return out, nil
}

// nodeName is the cluster's (first) node.
func (b *k8sBench) nodeName(ctx context.Context) (string, error) {
	nodes, err := b.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	if len(nodes.Items) == 0 {
		return "", errors.New("the cluster has no node")
	}
	return nodes.Items[0].Name, nil
}

// probeMetrics are the kubelet's readiness-probe counters of the namespace.
type probeMetrics struct{ count, seconds float64 }

// probeMetrics reads the kubelet's probe metrics (its /metrics/probes) through the API
// server; NaN when they are unreadable.
func (b *k8sBench) probeMetrics(ctx context.Context, node string) probeMetrics {
	data, err := b.c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + node + "/proxy/metrics/probes").DoRaw(ctx)
	if err != nil {
		b.cfg.logf("k8s: the kubelet's metrics: %v", err)
		return probeMetrics{math.NaN(), math.NaN()}
	}
	m := probeMetrics{math.NaN(), math.NaN()}
	ns := `namespace="` + b.ns + `"`
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, `probe_type="Readiness"`) || !strings.Contains(line, ns) {
			continue
		}
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		_, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			continue
		}
		add := func(dst *float64) {
			if math.IsNaN(*dst) {
				*dst = 0
			}
			*dst += v
		}
		switch name {
		case "prober_probe_total":
			add(&m.count)
		case "prober_probe_duration_seconds_sum":
			add(&m.seconds)
		}
	}
	if math.IsNaN(m.count) {
		m.count = 0 // no probe yet in this namespace
	}
	if math.IsNaN(m.seconds) {
		m.seconds = 0
	}
	return m
}

// pollUntil calls ok every interval until it holds, for at most timeout.
func pollUntil(ctx context.Context, timeout, interval time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func ptrTo[T any](v T) *T { return &v }

// k8sGoal is the Goals table's row of the section.
func (r *report) k8sGoal(p func(string, ...any)) {
	k := r.K8s
	switch {
	case k == nil:
		p("| kubernetes | %s | no |", r.missing("k8s"))
	case k.Skipped != "":
		p("| kubernetes: a single-node database's create-to-ready ≤ %.1f× a bare pod's (median) | %s | not measured |", goalK8sCreate, k.Skipped)
	default:
		row := k.Rows[0]
		p("| kubernetes: a single-node database's create-to-ready (Ensure, then PING through its NodePort) ≤ %.1f× a bare pod's create-to-Ready-and-PING (median) | %.2f× (%s against %s) | %s |",
			goalK8sCreate, row.MedianRatio(), fmtDur(medianDur(row.Ready)), fmtDur(medianDur(k.Bare)), yesNo(row.MedianRatio() <= goalK8sCreate))
	}
}

// k8sSection writes the section.
func (r *report) k8sSection(p func(string, ...any)) {
	k := r.K8s
	if k == nil {
		p("%s.", r.missing("k8s"))
		return
	}
	if k.Skipped != "" {
		p("%s.", strings.TrimSuffix(upperFirst(k.Skipped), "."))
		return
	}
	server := k.Server
	if server == "" {
		server = "unknown version"
	}
	p("On a real single-host Kubernetes (%s: the test cluster of `scripts/k8s-test-cluster.sh`, which `make bench` brings up "+
		"for this section alone when run as root with its Kubernetes built; etcd, the control plane, a kubelet on containerd and runc with a CNI "+
		"bridge, kube-proxy in iptables mode, all on this machine), image `%s` (the host's redis-server and redis-cli).", server, k.Image)
	p("")
	p("**Create-to-ready.** Each of %d repetitions runs, one after another and rotating which goes first: a single-node database "+
		"and a replicated one (`replication: true`, two pods), 100 MB without persistence, created by `kubernetes.Driver.Ensure` "+
		"(in the harness process, in a namespace of its own), timed from the call until a new connection's authenticated PING "+
		"through the database's public endpoint (its NodePort on the node's address) answers PONG (Ensure returns once the pods "+
		"are Ready and that endpoint reaches the primary; the driver polls pods every 250 ms); and the baseline, a bare pod of "+
		"the same image running `redis-server` (a password, no persistence, the same memory request and limit; no probe, no volume, "+
		"no Service, Secret or StatefulSet), timed from its create until a watch sees its Ready condition true and an authenticated "+
		"PING on its pod IP answers (polled every 5 ms). Each is removed, and waited for until gone (`Remove`; the pod deleted), "+
		"before the next starts. A database's pod is Ready at its first readiness probe (an exec), which the kubelet runs once "+
		"its startup probe (TCP, every 1 s) passed, at its next sync of the pod, and that waits for its next relist of the "+
		"containers (every 1 s): about 1 s after the container runs; the bare pod, having no probe, is Ready once its container "+
		"runs. kube-proxy then routes the NodePort to the Ready pod, at most about one sync a second. Ratios are medians of the "+
		"per-repetition ratios; p99 ratios compare the p99s (with %d repetitions, the slowest).", k.Reps, k.Reps)
	p("")
	p("| database | pods | ratio, median (goal ≤ %.1f, single node) | ratio, p99 | create-to-ready median / p99 | of which Ensure, median | bare pod median / p99 | met |", goalK8sCreate)
	p("|---|---:|---:|---:|---:|---:|---:|---|")
	for i, row := range k.Rows {
		met := "no goal"
		if i == 0 {
			met = yesNo(row.MedianRatio() <= goalK8sCreate)
		}
		p("| %s | %d | **%.2f** | %.2f | %s / %s | %s | %s / %s | %s |", row.Name, row.Pods, row.MedianRatio(), row.P99Ratio(k.Bare),
			fmtDur(medianDur(row.Ready)), fmtDur(quantile(row.Ready, 0.99)), fmtDur(medianDur(row.Ensure)),
			fmtDur(medianDur(k.Bare)), fmtDur(quantile(k.Bare, 0.99)), met)
	}
	p("")
	p("The bare pod's create → Ready alone: median %s, p99 %s.", fmtDur(medianDur(k.BareReady)), fmtDur(quantile(k.BareReady, 0.99)))
	p("")
	pr := k.Probe
	if pr == nil {
		p("**Readiness probe cost.** %s.", strings.TrimSuffix(upperFirst(k.ProbeSkipped), "."))
		return
	}
	p("**Readiness probe cost.** %d pairs of windows of %s, alternating which goes first: %d idle single-node databases "+
		"(each pod runs the exec readiness probe every %s: `redis-cli` started in the container, the readiness script's `EVAL` "+
		"over a Unix socket) against %d idle bare pods (no probe); each set is made, left one probe period, measured, then removed "+
		"before the other. The figure is the CPU time of the node's side of a probe, the kubelet, containerd and every "+
		"containerd shim with the children they reaped (runc, and the probe's `redis-cli`), from `/proc/PID/stat`, as a share of "+
		"one core. Not counted: the server's own work for the `EVAL`, in the pod, and the API server's. Not only the probes differ: "+
		"the databases' pods also have volumes the kubelet keeps (their Secret, two emptyDirs), the bare pods none.",
		len(pr.DB), fmtDur(pr.Window), pr.M, fmtDur(k8sProbePeriod), pr.M)
	p("")
	p("| figure | ratio (databases / bare pods) | %d databases | %d bare pods | difference |", pr.M, pr.M)
	p("|---|---:|---:|---:|---:|")
	p("| node CPU (kubelet + containerd + shims), median | **%.2f** | %.1f%% of a core | %.1f%% of a core | %+.1f%% of a core |",
		median(pr.Ratios), 100*median(pr.DB), 100*median(pr.Bare), 100*pr.ExtraCPU())
	p("")
	expected := float64(pr.M) * pr.Window.Seconds() / k8sProbePeriod.Seconds()
	if per := pr.PerProbe(); per > 0 {
		p("Readiness probes the kubelet ran per window (its `prober_probe_total`): median %.0f (%d pods × %s / %s = %.0f). "+
			"Node CPU per probe, the median difference over the median count: %s; mean probe duration as the kubelet times it "+
			"(`prober_probe_duration_seconds`): %s.", median(pr.Probes), pr.M, fmtDur(pr.Window), fmtDur(k8sProbePeriod), expected,
			fmtDur(per), fmtDur(pr.MeanProbe()))
	} else {
		p("The kubelet's probe metrics were not readable; at one probe per pod every %s, a window holds about %.0f probes: "+
			"node CPU per probe about %s.", fmtDur(k8sProbePeriod), expected, fmtDur(time.Duration(pr.ExtraCPU()*pr.Window.Seconds()/expected*float64(time.Second))))
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
