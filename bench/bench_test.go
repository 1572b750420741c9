package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The harness starts its own executable as the bare server of the read path.
	if serveBareFromEnv() {
		return
	}
	os.Exit(m.Run())
}

// TestQuick runs the whole harness in its tiny size, so that `make test` keeps it building
// and working: every section must be there with positive, finite figures, and no process
// it started may be left running.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clouddb and redis-server processes")
	}
	cfg := QuickConfig()
	cfg.Out = filepath.Join(t.TempDir(), "BENCHMARKS.md")
	cfg.PortBase = 13000 + (os.Getpid()%15)*200
	cfg.Log = testWriter{t}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	rep, err := measure(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}

	if len(rep.Read) != 2*len(cfg.Clients) {
		t.Fatalf("read path: %d rows, want %d", len(rep.Read), 2*len(cfg.Clients))
	}
	for _, r := range rep.Read {
		for name, v := range map[string]float64{
			"clouddb req/s": r.Real.RPS, "bare req/s": r.Bare.RPS, "throughput ratio": r.RPSRatio, "p99 ratio": r.P99Ratio,
			"clouddb p50": float64(r.Real.P50), "clouddb p99": float64(r.Real.P99), "bare p50": float64(r.Bare.P50), "bare p99": float64(r.Bare.P99),
		} {
			positive(t, r.Endpoint+" "+name, v)
		}
		if r.Real.P99 < r.Real.P50 || r.Bare.P99 < r.Bare.P50 {
			t.Errorf("%s: p99 below p50", r.Endpoint)
		}
	}

	p := rep.Provision
	if p == nil || len(p.Real) != cfg.Creates || len(p.Bare) != cfg.Creates {
		t.Fatalf("provisioning: %+v, want %d creates and bare spawns", p, cfg.Creates)
	}
	positive(t, "create-to-active median", float64(quantile(p.Real, 0.5)))
	positive(t, "bare spawn-to-PONG median", float64(quantile(p.Bare, 0.5)))
	positive(t, "provisioning median ratio", p.MedianRatio())
	positive(t, "provisioning p99 ratio", p.P99Ratio())

	e := rep.Engine
	if e == nil || e.SQLite == nil || e.SQLite.Tasks != cfg.Accounts*cfg.TasksPerAccount {
		t.Fatalf("task engine on SQLite: %+v", e)
	}
	if e.Postgres == nil || e.Postgres.Tasks != cfg.PGAccounts*cfg.PGTasksPerAccount || e.PGServer == "" {
		t.Fatalf("task engine on PostgreSQL: %+v", e)
	}
	for store, row := range map[string]*engineRow{"SQLite": e.SQLite, "PostgreSQL": e.Postgres} {
		positive(t, store+" tasks/s", row.TasksPerSec)
		positive(t, store+" commits/s", row.CommitsPerSec)
		positive(t, store+" engine ratio", row.Ratio)
	}

	if len(rep.Scale) != len(cfg.ScaleNs) {
		t.Fatalf("scale: %d rows, want %d", len(rep.Scale), len(cfg.ScaleNs))
	}
	for _, s := range rep.Scale {
		for name, v := range map[string]float64{
			"RSS": float64(s.RSS), "PSS": float64(s.PSS), "GET /subscriptions p50": float64(s.SubsListP50),
			"database page p50": float64(s.DBPageP50), "all databases": float64(s.DBAll),
			"SIGTERM stop": float64(s.TermStop), "SIGTERM restart API": float64(s.TermAPI), "SIGTERM restart all": float64(s.TermAll),
			"SIGKILL restart API": float64(s.KillAPI), "SIGKILL restart all": float64(s.KillAll), "PING of all": float64(s.PingAll),
		} {
			positive(t, "scale: "+name, v)
		}
		if s.KillNewPids != 0 || s.KillLostPids != 0 {
			t.Errorf("scale N=%d: after SIGKILL %d redis-servers were started anew and %d lost; want them adopted", s.N, s.KillNewPids, s.KillLostPids)
		}
	}

	im := rep.Import
	if im == nil || len(im.Server) != cfg.Reps || len(im.Wall) != cfg.Reps || len(im.Bare) != cfg.Reps ||
		len(im.BareSanitize) != cfg.Reps || len(im.Phases) != cfg.Reps || len(im.Cluster) != cfg.Reps || im.ClusterShards != 2 {
		t.Fatalf("import: %+v, want %d imports and bare loads of each kind", im, cfg.Reps)
	}
	for name, v := range map[string]float64{
		"RDB file bytes": float64(im.FileBytes), "keys": float64(im.Keys), "used_memory": float64(im.UsedMemory),
		"clouddb import MB/s": im.mbps(medianDur(im.Server)), "client-observed import MB/s": im.mbps(medianDur(im.Wall)),
		"bare load MB/s": im.mbps(medianDur(im.Bare)), "bare sanitized load MB/s": im.mbps(medianDur(im.BareSanitize)),
		"cluster import": float64(medianDur(im.Cluster)),
		"import ratio":   im.ServerRatio(), "client-observed import ratio": im.WallRatio(), "sanitize ratio": im.SanitizeRatio(),
		"finish phase": float64(im.medianPhase(func(p importPhases) time.Duration { return p.Finish })),
		"load phase":   float64(im.medianPhase(func(p importPhases) time.Duration { return p.Load })),
	} {
		positive(t, "import: "+name, v)
	}
	if im.FileBytes < int64(cfg.ImportMB)*1e6*98/100 {
		t.Errorf("import: the RDB file has %d bytes, want about %d MB", im.FileBytes, cfg.ImportMB)
	}

	f := rep.Failover
	if f == nil || len(f.Real) != cfg.Reps || len(f.Bare) != cfg.Reps || len(f.Ratios) != cfg.Reps || len(f.Lost) != cfg.Reps || f.Keys != cfg.FailoverKeys {
		t.Fatalf("failover: %+v, want %d failovers and bare restarts after %d writes", f, cfg.Reps, cfg.FailoverKeys)
	}
	positive(t, "failover median", float64(medianDur(f.Real)))
	positive(t, "bare restart median", float64(medianDur(f.Bare)))
	positive(t, "failover ratio", f.MedianRatio())
	if f.TotalLost() != 0 {
		t.Errorf("failover: %v acknowledged writes lost (per failover), want none", f.Lost)
	}

	if k := rep.K8s; k == nil {
		t.Error("k8s: no result")
	} else if os.Getenv(envK8sKubeconfig) == "" && !strings.Contains(k.Skipped, envK8sKubeconfig) {
		t.Errorf("k8s without a cluster: skipped %q, want the reason", k.Skipped)
	}

	data, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	for _, want := range []string{
		"# clouddb benchmarks", "Machine: ", "redis-server ", "## Goals",
		"## 1. Read path", "## 2. Provisioning", "## 3. Task engine", "| SQLite (", "| PostgreSQL (", "PostgreSQL server: ", "## 4. Scale",
		"## 5. Import throughput", "MB/s", "sanitize-dump-payload", "## 6. Failover", "## 7. Kubernetes", "Acknowledged writes lost: 0 of ",
		"| task engine on SQLite: ≥ 0.4× the raw commit rate |", "| task engine on PostgreSQL: ", "| scale: clouddb RSS ≤ 100.0 MiB with ",
		"| scale: restart after kill -9 adopts ", "| import: throughput ≥ 0.8× ",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	for _, bad := range []string{"NaN", "+Inf", "## Failures", "not measured (failed"} {
		if strings.Contains(md, bad) {
			t.Errorf("the report contains %q:\n%s", bad, md)
		}
	}
}

func positive(t *testing.T, name string, v float64) {
	t.Helper()
	if !(v > 0) || math.IsInf(v, 0) {
		t.Errorf("%s = %v, want a positive finite number", name, v)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestK8sReport renders the k8s section from made-up figures, as a cluster would give them.
func TestK8sReport(t *testing.T) {
	ms := func(ds ...int) []time.Duration {
		out := make([]time.Duration, len(ds))
		for i, d := range ds {
			out[i] = time.Duration(d) * time.Millisecond
		}
		return out
	}
	k := &k8sResult{Image: "localhost/clouddb-redis:7.0.15", Server: "v1.33.13", Reps: 3,
		Bare: ms(1000, 1100, 1200), BareReady: ms(990, 1090, 1190),
		Rows: []k8sCreateRow{
			{Name: "single node", Pods: 1, Ready: ms(2500, 2600, 2700), Ensure: ms(2490, 2590, 2690), Ratios: []float64{2.5, 2.4, 2.2}},
			{Name: "replicated", Pods: 2, Ready: ms(4000, 4100, 4200), Ensure: ms(3990, 4090, 4190), Ratios: []float64{4, 3.7, 3.5}},
		},
		Probe: &k8sProbeResult{M: 4, Window: 15 * time.Second, DB: []float64{0.10, 0.12}, Bare: []float64{0.05, 0.06},
			Ratios: []float64{2, 2}, Probes: []float64{12, 12}, ProbeTime: []float64{0.6, 0.6}},
	}
	cfg := QuickConfig()
	cfg.Sections = []string{"k8s"}
	md := (&report{Config: cfg, K8s: k}).markdown()
	for _, want := range []string{
		"| kubernetes: a single-node database's create-to-ready (Ensure, then PING through its NodePort) ≤ 2.0× a bare pod's create-to-Ready-and-PING (median) | 2.40× (2.60 s against 1.10 s) | **no** |",
		"| single node | 1 | **2.40** | 2.25 | 2.60 s / 2.70 s | 2.59 s | 1.10 s / 1.20 s | **no** |",
		"| replicated | 2 | **3.70** |",
		"| node CPU (kubelet + containerd + shims), median | **2.00** | 11.0% of a core | 5.5% of a core | +5.5% of a core |",
		"median 12 (4 pods × 15.00 s / 5.00 s = 12)", "Node CPU per probe, the median difference over the median count: 68.7 ms",
		"(`prober_probe_duration_seconds`): 50.0 ms",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "NaN") {
		t.Errorf("the report contains NaN:\n%s", md)
	}
	// None counted (the kubelet's metrics unreadable).
	k.Probe.Probes, k.Probe.ProbeTime = []float64{0, 0}, []float64{0, 0}
	if md := (&report{Config: cfg, K8s: k}).markdown(); !strings.Contains(md, "not readable; at one probe per pod every 5.00 s, a window holds about 12 probes: node CPU per probe about 68.7 ms") {
		t.Errorf("without the kubelet's metrics:\n%s", md)
	}
}

// TestScaleGoals checks the scale goals' verdicts on made-up rows, one goal missed each.
func TestScaleGoals(t *testing.T) {
	small := scaleRow{N: 10, RSS: 30 << 20, SubsListP50: 100 * time.Microsecond, DBPageP50: 100 * time.Microsecond,
		TermAll: 100 * time.Millisecond, KillAll: 40 * time.Millisecond}
	mid := small
	mid.N, mid.TermAll = 500, 1900*time.Millisecond
	big := small
	big.N, big.RSS, big.KillAll, big.IdleCPU = 1000, 90<<20, 450*time.Millisecond, 0.05
	big.SubsListP50, big.DBPageP50 = 190*time.Microsecond, 150*time.Microsecond
	verdicts := func(rows ...scaleRow) string {
		var out []string
		for _, g := range scaleGoals(rows) {
			out = append(out, strings.Trim(g.met, "*"))
		}
		return strings.Join(out, " ")
	}
	if got, want := verdicts(small, mid, big), "yes measured yes yes yes"; got != want {
		t.Errorf("all goals met: verdicts %q, want %q", got, want)
	}
	fat := big
	fat.RSS = 101 << 20
	slow := mid
	slow.TermAll = 2100 * time.Millisecond
	lateAdopt := big
	lateAdopt.KillAll = 600 * time.Millisecond
	dup := big
	dup.KillNewPids = 1
	steep := big
	steep.DBPageP50 = 201 * time.Microsecond
	for name, c := range map[string]struct {
		rows []scaleRow
		want string
	}{
		"RSS":          {[]scaleRow{small, mid, fat}, "no measured yes yes yes"},
		"SIGTERM":      {[]scaleRow{small, slow, big}, "yes measured yes no yes"},
		"no 500 row":   {[]scaleRow{small, big}, "yes measured yes no yes"},
		"adoption":     {[]scaleRow{small, mid, lateAdopt}, "yes measured no yes yes"},
		"started anew": {[]scaleRow{small, mid, dup}, "yes measured no yes yes"},
		"flat":         {[]scaleRow{small, mid, steep}, "yes measured yes yes no"},
	} {
		if got := verdicts(c.rows...); got != c.want {
			t.Errorf("%s: verdicts %q, want %q", name, got, c.want)
		}
	}
}
