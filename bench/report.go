package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report is everything a run measured.
type report struct {
	Config            Config
	Started, Finished time.Time
	Machine           string
	Rev               string
	Read              []readRow
	Provision         *provisionResult
	Engine            *engineResult
	Scale             []scaleRow
	Import            *importResult
	Failover          *failoverResult
	K8s               *k8sResult
	Profile           string // what the read-path profile found, if one was taken
	Failures          []string
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	c := r.Config
	p("# clouddb benchmarks")
	p("")
	p("Machine: %s.", r.Machine)
	p("")
	command := "go run ./bench -out BENCHMARKS.md"
	if c.K8sCluster != "" {
		command += " -k8s-cluster " + c.K8sCluster
	}
	p("Written by `make bench` (`%s`) on %s in %s, source %s.",
		command, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Finished.Sub(r.Started).Round(time.Second), r.Rev)
	p("Sizes: %d repetitions; read-path runs of %s after %s of warm-up at %s concurrent keep-alive clients; "+
		"%d database creates; %d accounts × %d tasks (on PostgreSQL %d × %d); scale at %s active databases with %d restarts of each kind; "+
		"imports of a %d MB RDB file; %d failovers after %d acknowledged writes each; on Kubernetes %d create-to-ready repetitions "+
		"and %d pairs of %s probe-cost windows with %d idle databases.",
		c.Reps, c.Duration, c.Warmup, joinInts(c.Clients), c.Creates, c.Accounts, c.TasksPerAccount, c.PGAccounts, c.PGTasksPerAccount, joinInts(c.ScaleNs), c.RestartReps, c.ImportMB,
		c.Reps, c.FailoverKeys, c.K8sReps, c.K8sProbeReps, c.K8sWindow, c.K8sIdle)
	p("")
	p("Every figure is a **ratio to a baseline measured in the same run**, with the absolute numbers beside it. " +
		"The machine is shared and noisy, so measured and baseline runs are interleaved (and which one goes first " +
		"alternates), absolute figures are medians over the repetitions, and ratios are medians of the per-pair ratios.")
	p("")

	p("## Goals")
	p("")
	p("| goal | result | met |")
	p("|---|---|---|")
	if len(r.Read) > 0 {
		minRPS, maxP99 := math.Inf(1), 0.0
		for _, row := range r.Read {
			minRPS, maxP99 = math.Min(minRPS, row.RPSRatio), math.Max(maxP99, row.P99Ratio)
		}
		p("| read path: throughput ≥ %.1f× bare net/http, every endpoint and client level | worst %.2f× | %s |", goalReadRPS, minRPS, yesNo(minRPS >= goalReadRPS))
		p("| read path: p99 ≤ %.1f× bare net/http, every endpoint and client level | worst %.2f× | %s |", goalReadP99, maxP99, yesNo(maxP99 <= goalReadP99))
	} else {
		p("| read path | %s | no |", r.missing("read"))
	}
	if pr := r.Provision; pr != nil {
		p("| provisioning: create-to-active ≤ %.1f× bare redis-server spawn-to-PONG (median, p99) | %.1f× / %.1f× | %s |",
			goalProvision, pr.MedianRatio(), pr.P99Ratio(), yesNo(pr.MedianRatio() <= goalProvision && pr.P99Ratio() <= goalProvision))
	} else {
		p("| provisioning | %s | no |", r.missing("provision"))
	}
	if e := r.Engine; e != nil && (e.SQLite != nil || e.Postgres != nil) {
		for _, row := range []struct {
			name string
			r    *engineRow
		}{{"SQLite", e.SQLite}, {"PostgreSQL", e.Postgres}} {
			if row.r == nil {
				p("| task engine on %s: ≥ %.1f× the raw commit rate | not measured | no |", row.name, goalEngine)
				continue
			}
			p("| task engine on %s: ≥ %.1f× the raw commit rate | %.2f× | %s |", row.name, goalEngine, row.r.Ratio, yesNo(row.r.Ratio >= goalEngine))
		}
	} else {
		p("| task engine | %s | no |", r.missing("engine"))
	}
	if len(r.Scale) > 0 {
		for _, g := range scaleGoals(r.Scale) {
			p("| %s | %s | %s |", g.goal, g.result, g.met)
		}
	} else {
		p("| scale | %s | no |", r.missing("scale"))
	}
	if im := r.Import; im != nil {
		p("| import: throughput ≥ %.1f× a bare redis-server loading the same RDB (server-side) | %.2f× | %s |",
			goalImport, 1/im.ServerRatio(), yesNo(1/im.ServerRatio() >= goalImport))
	} else {
		p("| import | %s | no |", r.missing("import"))
	}
	if f := r.Failover; f != nil {
		p("| failover: kill -9 of the primary → a write answered on the same endpoint ≤ %s, 0 acknowledged writes lost | max %s (median %s, %.1f× a bare restart); %d lost | %s |",
			fmtDur(goalFailover), fmtDur(f.Max()), fmtDur(medianDur(f.Real)), f.MedianRatio(), f.TotalLost(), yesNo(f.Met()))
	} else {
		p("| failover | %s | no |", r.missing("failover"))
	}
	r.k8sGoal(p)
	p("")

	p("## 1. Read path")
	p("")
	p("clouddb (`clouddb serve`, a separate process) against a bare `net/http` handler in a separate process " +
		"that answers the same bytes (captured from clouddb first) with the same Content-Type. " +
		"The load generator runs in the harness process: each client is one keep-alive HTTP/1.1 connection " +
		"sending the same authenticated GET, one request at a time. clouddb runs with its per-key rate limit " +
		"set to 2^30 requests a minute, so the limiter's bookkeeping stays in the path but never refuses.")
	p("")
	if len(r.Read) == 0 {
		p("%s.", r.missing("read"))
	}
	p("| endpoint | clients | throughput ratio (goal ≥ %.1f) | p99 ratio (goal ≤ %.1f) | clouddb req/s | bare req/s | clouddb p50 / p99 | bare p50 / p99 | met |", goalReadRPS, goalReadP99)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, row := range r.Read {
		p("| `%s` (%d B) | %d | **%.2f** | **%.2f** | %.0f | %.0f | %s / %s | %s / %s | %s |",
			row.Endpoint, row.BodyBytes, row.Clients, row.RPSRatio, row.P99Ratio, row.Real.RPS, row.Bare.RPS,
			fmtDur(row.Real.P50), fmtDur(row.Real.P99), fmtDur(row.Bare.P50), fmtDur(row.Bare.P99), yesNo(row.Met()))
	}
	p("")

	p("## 2. Provisioning")
	p("")
	if pr := r.Provision; pr != nil {
		p("%d database creates (0.1 GB, no persistence) one after another in one active subscription sized so that "+
			"no create resizes it; each waited for until active. clouddb's figure is server-side: from the task's "+
			"received timestamp to the database's `activatedOn` (both at millisecond precision). The baseline execs "+
			"`redis-server` with a minimal config (loopback, a password, no persistence) on a free port and polls an "+
			"authenticated PING every %s until PONG; one bare spawn alternates with each create.", pr.Creates, bareSpawnPoll)
		p("")
		p("| figure | ratio (goal ≤ %.1f) | clouddb create-to-active | bare spawn-to-PONG | met |", goalProvision)
		p("|---|---:|---:|---:|---|")
		p("| median | **%.1f** | %s | %s | %s |", pr.MedianRatio(), fmtDur(quantile(pr.Real, 0.5)), fmtDur(quantile(pr.Bare, 0.5)), yesNo(pr.MedianRatio() <= goalProvision))
		p("| p99 | **%.1f** | %s | %s | %s |", pr.P99Ratio(), fmtDur(quantile(pr.Real, 0.99)), fmtDur(quantile(pr.Bare, 0.99)), yesNo(pr.P99Ratio() <= goalProvision))
		p("")
		p("Seen from the client (POST until the database reads active, polling every 10 ms): median %s, p99 %s.",
			fmtDur(quantile(pr.Wall, 0.5)), fmtDur(quantile(pr.Wall, 0.99)))
	} else {
		p("%s.", r.missing("provision"))
	}
	p("")

	p("## 3. Task engine")
	p("")
	if e := r.Engine; e != nil && (e.SQLite != nil || e.Postgres != nil) {
		p("In-process, on each store: a new store, accounts with cheap tasks each (cloud-account creates, "+
			"submitted round-robin) written directly into it, then `task.Engine{Store, Ports}` with its "+
			"default %d workers runs until every task is final (all must complete). The baseline, on the same database "+
			"engine, commits one insert of a task-sized row per transaction on one connection: for SQLite on a new file "+
			"with the store writer's settings (modernc.org/sqlite, WAL, synchronous=NORMAL, BEGIN IMMEDIATE), for "+
			"PostgreSQL in a new database of the same server with pgx.", e.Workers)
		p("")
		p("| store | figure | ratio | clouddb task engine | raw commits |")
		p("|---|---|---:|---:|---:|")
		if row := e.SQLite; row != nil {
			p("| SQLite (`sqlite.Open`, new file) | %d accounts × %d = %d tasks through the processing phase | **%s** | %.0f tasks/s | %.0f commits/s |",
				row.Accounts, row.TasksPerAccount, row.Tasks, fmtRatio(row.Ratio), row.TasksPerSec, row.CommitsPerSec)
		} else {
			p("| SQLite | not measured (failed, see Failures) | | | |")
		}
		if row := e.Postgres; row != nil {
			p("| PostgreSQL (`postgres.Open`, new database) | %d accounts × %d = %d tasks through the processing phase | **%s** | %.0f tasks/s | %.0f commits/s |",
				row.Accounts, row.TasksPerAccount, row.Tasks, fmtRatio(row.Ratio), row.TasksPerSec, row.CommitsPerSec)
		} else {
			p("| PostgreSQL | not measured (failed, see Failures) | | | |")
		}
		p("")
		if e.PGServer != "" {
			p("PostgreSQL server: %s. The store runs without a cipher, as the SQLite one does here.", e.PGServer)
			p("")
		}
		p("The engine claims and processes tasks in one write transaction, several tasks per transaction (up to " +
			"32, or 20 ms), each handler under a savepoint so that a failing one is undone alone and its task's " +
			"error commits with the others; data jobs (imports, backups) keep the claim-then-complete path with a " +
			"lease. On SQLite every transaction goes through the single writer connection; on PostgreSQL it takes " +
			"the store's advisory write lock (writes are serialised, across replicas too) and sends a change " +
			"notification.")
	} else {
		p("%s.", r.missing("engine"))
	}
	p("")

	p("## 4. Scale")
	p("")
	if len(r.Scale) > 0 {
		p("One `clouddb serve` grown through the API to each size: subscriptions whose creation plan has up to 100 " +
			"databases of 0.1 GB (no persistence), at most three non-active at once. RSS is the clouddb process's " +
			"VmRSS, its idle CPU the share of one core it used (`/proc/PID/stat`) while the harness waited before reading memory; PSS the summed Pss (`/proc/PID/smaps_rollup`) of its redis-server processes. List latencies " +
			"are sequential requests on one keep-alive connection. Restart times run from the exec of the new " +
			"`clouddb serve` until the API answers an authenticated GET, and until every database answers an " +
			"authenticated PING; after SIGTERM clouddb has stopped every server and must start them again, after " +
			"SIGKILL the servers keep running and must be adopted (checked with `pgrep -x redis-server`: the " +
			"same pids before and after, none started twice). The harness PINGs every database 32 at once; its baseline, " +
			"the same PINGs while clouddb runs undisturbed just before the kill, is beside the SIGKILL figures.")
		p("")
		p("| databases | subscriptions | clouddb RSS | clouddb idle CPU | redis-server PSS (per database) | GET /v1/subscriptions p50 / p99 | GET …/databases?limit=100 p50 | list every database | SIGTERM: stop, then restart to API / all PING | SIGKILL: restart to API / all PING (PING of all, undisturbed) | SIGKILL: new / lost pids |")
		p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, s := range r.Scale {
			p("| %d | %d | %s | %.1f%% | %s (%s) | %s / %s | %s | %s | %s, then %s / **%s** | %s / **%s** (%s) | %d / %d |",
				s.N, s.Subscriptions, mib(s.RSS), 100*s.IdleCPU, mib(s.PSS), mib(s.PSS/int64(s.N)), fmtDur(s.SubsListP50), fmtDur(s.SubsListP99),
				fmtDur(s.DBPageP50), fmtDur(s.DBAll), fmtDur(s.TermStop), fmtDur(s.TermAPI), fmtDur(s.TermAll),
				fmtDur(s.KillAPI), fmtDur(s.KillAll), fmtDur(s.PingAll), s.KillNewPids, s.KillLostPids)
		}
		p("")
		if len(r.Scale) > 1 {
			p("Growth per 10× databases, between consecutive sizes ((b/a)^(1/log10(Nb/Na)); 10 means linear, 1 flat):")
			p("")
			head := "| figure |"
			sep := "|---|"
			for i := 1; i < len(r.Scale); i++ {
				head += fmt.Sprintf(" %d → %d |", r.Scale[i-1].N, r.Scale[i].N)
				sep += "---:|"
			}
			p("%s", head)
			p("%s", sep)
			figures := []struct {
				name string
				get  func(scaleRow) float64
			}{
				{"clouddb RSS", func(s scaleRow) float64 { return float64(s.RSS) }},
				{"clouddb idle CPU", func(s scaleRow) float64 { return s.IdleCPU }},
				{"redis-server PSS, summed", func(s scaleRow) float64 { return float64(s.PSS) }},
				{"GET /v1/subscriptions p50", func(s scaleRow) float64 { return float64(s.SubsListP50) }},
				{"GET …/databases?limit=100 p50", func(s scaleRow) float64 { return float64(s.DBPageP50) }},
				{"list every database", func(s scaleRow) float64 { return float64(s.DBAll) }},
				{"restart after SIGTERM, all PING", func(s scaleRow) float64 { return float64(s.TermAll) }},
				{"restart after SIGKILL, all PING", func(s scaleRow) float64 { return float64(s.KillAll) }},
			}
			for _, f := range figures {
				line := "| " + f.name + " |"
				for i := 1; i < len(r.Scale); i++ {
					a, z := r.Scale[i-1], r.Scale[i]
					if g := growth(f.get(a), f.get(z), a.N, z.N); math.IsNaN(g) {
						line += " n/a |"
					} else {
						line += fmt.Sprintf(" %.1f× |", g)
					}
				}
				p("%s", line)
			}
		} else {
			p("Growth with N needs at least two sizes (this run had one).")
		}
	} else {
		p("%s.", r.missing("scale"))
	}
	p("")

	p("## 5. Import throughput")
	p("")
	if im := r.Import; im != nil {
		r.importSection(p, im)
	} else {
		p("%s.", r.missing("import"))
	}
	p("")
	p("## 6. Failover")
	p("")
	if f := r.Failover; f != nil {
		r.failoverSection(p, f)
	} else {
		p("%s.", r.missing("failover"))
	}
	p("")
	p("## 7. Kubernetes")
	p("")
	r.k8sSection(p)
	p("")
	if r.Profile != "" {
		p("## Read-path profile")
		p("")
		p("%s", r.Profile)
		p("")
	}
	if len(r.Failures) > 0 {
		p("## Failures")
		p("")
		for _, f := range r.Failures {
			p("- %s", strings.ReplaceAll(f, "\n", " "))
		}
		p("")
	}
	return b.String()
}

// missing says why a section has no figures.
func (r *report) missing(section string) string {
	if !r.Config.runs(section) {
		return "not run (-sections " + strings.Join(r.Config.Sections, ",") + ")"
	}
	return "not measured (failed, see Failures)"
}

// fmtRatio prints a ratio with two decimals, or two significant digits below 0.1.
func fmtRatio(r float64) string {
	if r < 0.1 {
		return fmt.Sprintf("%.2g", r)
	}
	return fmt.Sprintf("%.2f", r)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// fmtDur prints a duration with three significant digits in a fitting unit.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func medianDur(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

var redisVersionRe = regexp.MustCompile(`v=(\S+).*malloc=(\S+)`)

// describeMachine is the report's line about the machine.
func describeMachine(ctx context.Context) string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
				cpu = strings.TrimSpace(value)
				break
			}
		}
	}
	mem := "unknown memory"
	if v, err := procField("/proc/meminfo", "MemTotal:"); err == nil {
		mem = fmt.Sprintf("%.1f GiB memory", float64(v)/(1<<30))
	}
	redis := "redis-server not found"
	if out, err := exec.CommandContext(ctx, "redis-server", "--version").Output(); err == nil {
		if m := redisVersionRe.FindSubmatch(out); m != nil {
			redis = fmt.Sprintf("redis-server %s (%s)", m[1], m[2])
		} else {
			redis = strings.TrimSpace(string(out))
		}
	}
	return fmt.Sprintf("%s, %d cores, %s, %s %s/%s, %s", cpu, runtime.NumCPU(), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, redis)
}

// sourceRev names the measured source: the given name, else $CLOUDDB_BENCH_REV, else
// git's HEAD.
func sourceRev(given string) string {
	if given == "" {
		given = os.Getenv("CLOUDDB_BENCH_REV")
	}
	if given != "" {
		return given
	}
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := "`" + strings.TrimSpace(string(out)) + "`"
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		rev += " with uncommitted changes"
	}
	return rev
}

// importSection writes the import-throughput section.
func (r *report) importSection(p func(string, ...any), im *importResult) {
	mb := float64(im.FileBytes) / 1e6
	p("`POST /v1/subscriptions/{s}/databases/{d}/import` with sourceType `http` of one RDB file of %.1f MB "+
		"(MB = 10^6 bytes; %d keys; used_memory %s once loaded) into a %.1f GB database (no persistence) of an active "+
		"subscription, %d times, each import replacing the previous one's data. The file is made by filling a bare "+
		"`redis-server` with a mixed dataset (JSON strings, a third of them with a TTL, counters, small hashes, lists, "+
		"integer and word sets, sorted sets, streams with consumer groups, and every 2,000 records a large hash, list, set "+
		"and sorted set) and `SAVE`; the harness serves it with `net/http` on loopback. clouddb's figure is server-side: "+
		"from the import task's received timestamp to its processing-completed timestamp (millisecond precision). "+
		"The baseline execs `redis-server` with `dbfilename` pointing at a fresh copy of the file (copied before the clock "+
		"starts) and polls an authenticated PING every %s until PONG with `loading:0` in INFO; it runs with the default "+
		"`sanitize-dump-payload no`, and once more with `yes` as clouddb's loading server does. The import and the two "+
		"loads alternate, the first of the three rotating each repetition; every run checks the key count. clouddb "+
		"downloads the file, starts the database's next `redis-server` on it beside the one serving (sanitize-dump-payload "+
		"yes, its memory watched as it loads), and once it has loaded the file within the memory limit, stops the old "+
		"server and has the new one take over the endpoint's port. The same file is also imported, alternating with "+
		"the others, into an OSS Cluster database of two shards in the same subscription: clouddb splits the file by hash "+
		"slot as it downloads, a throwaway server loads and checks each shard's part, then each shard's primary reloads "+
		"its part in place (DEBUG RELOAD).",
		mb, im.Keys, mib(im.UsedMemory), im.MemoryLimitGB, len(im.Server), bareLoadPoll)
	p("")
	p("| figure | throughput ratio (bare load time / import time; goal ≥ %.1f) | clouddb import | bare redis-server load |", goalImport)
	p("|---|---:|---:|---:|")
	srv, wall, bare, san := medianDur(im.Server), medianDur(im.Wall), medianDur(im.Bare), medianDur(im.BareSanitize)
	p("| server-side: task received → completed | **%.2f** | %.1f MB/s (%s) | %.1f MB/s (%s) |",
		1/im.ServerRatio(), im.mbps(srv), fmtDur(srv), im.mbps(bare), fmtDur(bare))
	p("| client-observed: POST sent → task read completed (polling every 10 ms) | **%.2f** | %.1f MB/s (%s) | %.1f MB/s (%s) |",
		1/im.WallRatio(), im.mbps(wall), fmtDur(wall), im.mbps(bare), fmtDur(bare))
	p("| server-side, against the bare load with `sanitize-dump-payload yes` | %.2f | %.1f MB/s (%s) | %.1f MB/s (%s) |",
		1/ratio(im.Server, im.BareSanitize), im.mbps(srv), fmtDur(srv), im.mbps(san), fmtDur(san))
	if len(im.Cluster) > 0 {
		cl := medianDur(im.Cluster)
		p("| into an OSS Cluster database of %d shards (split by slot, each shard reloaded), server-side | %.2f | %.1f MB/s (%s) | %.1f MB/s (%s) |",
			im.ClusterShards, 1/ratio(im.Cluster, im.Bare), im.mbps(cl), fmtDur(cl), im.mbps(bare), fmtDur(bare))
	}
	p("")
	p("With `sanitize-dump-payload yes` the bare load takes %.2f× as long (%.1f MB/s, %s).", im.SanitizeRatio(), im.mbps(san), fmtDur(san))
	p("")
	p("Where an import's time goes, seen from outside clouddb (medians; the harness polls the database's endpoint every " +
		"2 ms for a sentinel key it sets before each import and for DBSIZE, and records when its HTTP server is asked for " +
		"the file and has sent it):")
	p("")
	p("| phase | from → to | median | share of the median import |")
	p("|---|---|---:|---:|")
	phases := []struct {
		name, span string
		get        func(importPhases) time.Duration
	}{
		{"queue", "task received → GET of the file", func(x importPhases) time.Duration { return x.Queue }},
		{"download", "GET → last byte sent", func(x importPhases) time.Duration { return x.Download }},
		{"load", "last byte → the endpoint answers with every key (the new server loaded the file, sanitizing, and took over)", func(x importPhases) time.Duration { return x.Load }},
		{"finish", "every key → task completed (persistence and users set, the old node's files removed, status committed)", func(x importPhases) time.Duration { return x.Finish }},
	}
	for _, ph := range phases {
		d := im.medianPhase(ph.get)
		p("| %s | %s | %s | %.0f%% |", ph.name, ph.span, fmtDur(d), 100*float64(d)/float64(srv))
	}
	p("")
	p("CPU time during an import (medians, `/proc/PID/stat`): clouddb %s (the download, the status writes), the "+
		"redis-server that loaded the file %s (sampled every 10 ms until the import's end).",
		fmtDur(im.medianPhase(func(x importPhases) time.Duration { return x.CPUClouddb })),
		fmtDur(im.medianPhase(func(x importPhases) time.Duration { return x.CPULoader })))
}

// failoverSection writes the failover section.
func (r *report) failoverSection(p func(string, ...any), f *failoverResult) {
	p("One database (0.1 GB, `replication: true`, `dataPersistence: none`, so that only its replica keeps the data) "+
		"created through the API of a `clouddb serve`. Each repetition waits until its replica is in sync, writes %d keys, "+
		"each acknowledged by the replica (`SET` then `WAIT 1 2000`, which must answer 1), reads the primary's pid "+
		"(`INFO server` on the endpoint) and kills it with SIGKILL; the clock runs from the kill until a server other than "+
		"the killed one answers `SET` on the database's public endpoint (a new connection with AUTH, SET and INFO server "+
		"every %s). Then every acknowledged key of the repetition is read back. The baseline, alternating with each "+
		"failover, kills a bare `redis-server` (minimal config, no persistence) with SIGKILL, waits for it to be reaped, "+
		"execs it again on the same port and polls the same way: the restart a supervisor without a replica does, "+
		"which comes back empty.", f.Keys, failoverPoll)
	p("")
	p("| figure | ratio (failover / bare restart) | clouddb failover | bare restart | met (goal ≤ %s) |", fmtDur(goalFailover))
	p("|---|---:|---:|---:|---|")
	p("| median | **%.2f** (median of the per-pair ratios) | %s | %s | %s |", f.MedianRatio(), fmtDur(medianDur(f.Real)), fmtDur(medianDur(f.Bare)), yesNo(medianDur(f.Real) <= goalFailover))
	p("| max | %.2f | %s | %s | %s |", float64(f.Max())/float64(f.Bare[len(f.Bare)-1]), fmtDur(f.Max()), fmtDur(f.Bare[len(f.Bare)-1]), yesNo(f.Max() <= goalFailover))
	p("")
	p("Acknowledged writes lost: %d of %d (%s per failover; goal 0): %s.", f.TotalLost(), f.Keys*len(f.Lost), joinInts(f.Lost), yesNo(f.TotalLost() == 0))
}
