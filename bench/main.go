// Command bench is clouddb's benchmark harness: `make bench` runs it and it writes
// BENCHMARKS.md. Every figure is a ratio to a baseline measured in the same run,
// interleaved with the measured runs (the machine is shared and noisy), as the median of
// several repetitions, with the absolute numbers beside it.
//
// It measures the read path of the API against a bare net/http handler serving the same
// bytes, create-database-to-active against a bare redis-server spawn-to-PONG, the task
// engine on SQLite and on PostgreSQL against the raw commit rate of the same store, how
// memory, list latency and restart time grow with the number of databases, and import
// throughput against a bare redis-server loading the same RDB file at start, and the
// failover of a replicated database (kill -9 of its primary until its endpoint takes a
// write again, with no acknowledged write lost) against a bare redis-server restarted on
// its port after a kill -9; and on a real Kubernetes (the test cluster of
// scripts/k8s-test-cluster.sh), the kubernetes driver's create-to-ready against a bare
// pod's start-to-Ready, and the node-side CPU of the pods' readiness probes against bare
// pods without one. Every process
// it starts is killed before it returns, on failure too (a PostgreSQL cluster it starts
// is stopped), and it only ever uses loopback addresses, unless -pg names a server.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"clouddb/internal/pgtest"
)

// Config sizes a run.
type Config struct {
	// Out is the report file.
	Out string
	// Bin is a prebuilt clouddb binary; empty builds one from this module.
	Bin string
	// Reps is how many times each interleaved measurement/baseline pair runs.
	Reps int
	// Clients are the concurrency levels of the read path.
	Clients []int
	// Duration and Warmup are the length of one read-path run and its unrecorded start.
	Duration, Warmup time.Duration
	// Creates is the number of database creates of the provisioning benchmark.
	Creates int
	// Accounts and TasksPerAccount size the task-engine benchmark.
	Accounts, TasksPerAccount int
	// PGAccounts and PGTasksPerAccount size the task-engine benchmark on PostgreSQL.
	PGAccounts, PGTasksPerAccount int
	// PG is a postgres:// URL of the server for the PostgreSQL row of the task-engine
	// benchmark, whose role may create databases; empty uses TEST_DATABASE_URL, else a
	// throwaway cluster the harness starts (initdb and pg_ctl, on loopback).
	PG string
	// ScaleNs are the database counts of the scale benchmark, ascending.
	ScaleNs []int
	// RestartReps is how many restarts of each kind run at every scale size.
	RestartReps int
	// ListReps is how many list requests are timed at every scale size.
	ListReps int
	// Settle is how long the scale benchmark lets clouddb run before it reads memory.
	Settle time.Duration
	// AdoptWait is how long after a SIGKILL restart the scale benchmark waits (more than
	// one reconciler pass) before it checks that no server was started twice.
	AdoptWait time.Duration
	// ImportMB is the size the import benchmark's RDB file is grown to, in MB (10^6
	// bytes).
	ImportMB int
	// FailoverKeys is how many writes acknowledged by the replica (WAIT 1) go before each
	// kill of the failover benchmark (it runs Reps failovers).
	FailoverKeys int
	// K8sReps is how many times the k8s section's create-to-ready trio (a single-node
	// database, a replicated one, a bare pod) runs.
	K8sReps int
	// K8sIdle is how many idle databases (and bare pods) the probe-cost windows hold;
	// K8sWindow is the length of one window and K8sProbeReps the number of window pairs.
	K8sIdle      int
	K8sWindow    time.Duration
	K8sProbeReps int
	// K8sCluster, when set and no cluster is in the environment (CLOUDDB_K8S_KUBECONFIG),
	// is scripts/k8s-test-cluster.sh: the k8s section runs under its `run`, on a cluster
	// up for that section only.
	K8sCluster string
	// PortBase is the first port of the ranges handed to clouddb for its databases.
	PortBase int
	// Sections are the benchmarks to run: read, provision, engine, scale, import,
	// failover, k8s (all when empty).
	Sections []string
	// Profile, when set, is a directory where the read path is profiled in-process.
	Profile string
	// Rev names the source revision in the report; empty asks git.
	Rev string
	// Keep leaves the temporary directory in place (the processes are killed anyway).
	Keep bool
	// Log receives progress lines.
	Log io.Writer
}

// DefaultConfig is the full run of `make bench`.
func DefaultConfig() Config {
	return Config{
		Out:               "BENCHMARKS.md",
		Reps:              5,
		Clients:           []int{1, 8, 64},
		Duration:          2 * time.Second,
		Warmup:            300 * time.Millisecond,
		Creates:           50,
		Accounts:          1000,
		TasksPerAccount:   10,
		PGAccounts:        1000,
		PGTasksPerAccount: 10,
		ScaleNs:           []int{10, 100, 500, 1000},
		RestartReps:       3,
		ListReps:          30,
		Settle:            2 * time.Second,
		AdoptWait:         2500 * time.Millisecond,
		ImportMB:          128,
		FailoverKeys:      1000,
		K8sReps:           5,
		K8sIdle:           5,
		K8sWindow:         20 * time.Second,
		K8sProbeReps:      3,
		PortBase:          16000,
		Log:               os.Stderr,
	}
}

// QuickConfig is the tiny smoke size: a few seconds.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Reps = 2
	c.Clients = []int{8}
	c.Duration = 250 * time.Millisecond
	c.Warmup = 50 * time.Millisecond
	c.Creates = 5
	c.Accounts = 10
	c.TasksPerAccount = 10
	c.PGAccounts = 10
	c.PGTasksPerAccount = 10
	c.ScaleNs = []int{5}
	c.RestartReps = 1
	c.ListReps = 10
	c.Settle = 200 * time.Millisecond
	c.AdoptWait = 1200 * time.Millisecond
	c.ImportMB = 4
	c.FailoverKeys = 100
	c.K8sReps = 2
	c.K8sIdle = 2
	c.K8sWindow = 6 * time.Second
	c.K8sProbeReps = 2
	return c
}

func main() {
	if serveBareFromEnv() {
		return
	}
	cfg, k8sJSON, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := Run
	if k8sJSON != "" {
		run = func(ctx context.Context, cfg Config) error { return runK8sJSON(ctx, cfg, k8sJSON) }
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line; k8sJSON is -k8s-json, set in the process that
// Config.K8sCluster's script runs.
func parseFlags(args []string) (cfg Config, k8sJSON string, err error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "tiny smoke run (a few seconds); other flags override its sizes")
	d := DefaultConfig()
	out := fs.String("out", d.Out, "report file")
	bin := fs.String("bin", "", "prebuilt clouddb binary (default: build ./cmd/clouddb)")
	reps := fs.Int("reps", 0, "repetitions of each interleaved measurement and baseline")
	clients := fs.String("clients", "", "read-path concurrency levels, comma-separated")
	dur := fs.Duration("duration", 0, "length of one read-path run")
	creates := fs.Int("creates", 0, "database creates of the provisioning benchmark")
	accounts := fs.Int("accounts", 0, "accounts of the task-engine benchmark")
	perAccount := fs.Int("tasks-per-account", 0, "tasks per account of the task-engine benchmark")
	pgURL := fs.String("pg", "", "postgres:// URL of a server for the task engine on PostgreSQL, whose role may create databases (default: $"+pgtest.EnvURL+", else a throwaway cluster)")
	pgAccounts := fs.Int("pg-accounts", 0, "accounts of the task-engine benchmark on PostgreSQL")
	pgPerAccount := fs.Int("pg-tasks-per-account", 0, "tasks per account of the task-engine benchmark on PostgreSQL")
	scale := fs.String("scale", "", "database counts of the scale benchmark, comma-separated")
	restarts := fs.Int("restart-reps", 0, "restarts of each kind per scale size")
	importMB := fs.Int("import-mb", 0, "size of the import benchmark's RDB file, in MB")
	failoverKeys := fs.Int("failover-keys", 0, "writes acknowledged by the replica before each kill of the failover benchmark")
	portBase := fs.Int("port-base", 0, "first port of the database port ranges")
	k8sReps := fs.Int("k8s-reps", 0, "repetitions of the k8s section's create-to-ready")
	k8sIdle := fs.Int("k8s-idle", 0, "idle databases (and bare pods) of the k8s section's probe-cost windows")
	k8sWindow := fs.Duration("k8s-window", 0, "length of one probe-cost window")
	k8sProbeReps := fs.Int("k8s-probe-reps", 0, "pairs of probe-cost windows")
	k8sCluster := fs.String("k8s-cluster", "", "scripts/k8s-test-cluster.sh: without "+envK8sKubeconfig+", run the k8s section on a cluster it brings up for it alone (root)")
	k8sOut := fs.String("k8s-json", "", "run the k8s section alone and write its result as JSON to this file (how -k8s-cluster runs it)")
	sections := fs.String("sections", "", "benchmarks to run, comma-separated: read, provision, engine, scale, import, failover, k8s (default all)")
	profile := fs.String("profile", "", "directory for CPU profiles of the read path (in-process)")
	rev := fs.String("rev", "", "source revision named in the report (default: git)")
	keep := fs.Bool("keep", false, "keep the temporary directory")
	if err = fs.Parse(args); err != nil {
		return Config{}, "", err
	}
	if fs.NArg() > 0 {
		return Config{}, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c := d
	if *quick {
		c = QuickConfig()
	}
	c.Out, c.Bin, c.Profile, c.Rev, c.Keep, c.PG = *out, *bin, *profile, *rev, *keep, *pgURL
	setInt := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setInt(&c.Reps, *reps)
	setInt(&c.Creates, *creates)
	setInt(&c.Accounts, *accounts)
	setInt(&c.TasksPerAccount, *perAccount)
	setInt(&c.PGAccounts, *pgAccounts)
	setInt(&c.PGTasksPerAccount, *pgPerAccount)
	setInt(&c.RestartReps, *restarts)
	setInt(&c.ImportMB, *importMB)
	setInt(&c.FailoverKeys, *failoverKeys)
	setInt(&c.PortBase, *portBase)
	setInt(&c.K8sReps, *k8sReps)
	setInt(&c.K8sIdle, *k8sIdle)
	setInt(&c.K8sProbeReps, *k8sProbeReps)
	c.K8sCluster = *k8sCluster
	if *dur > 0 {
		c.Duration = *dur
	}
	if *k8sWindow > 0 {
		c.K8sWindow = *k8sWindow
	}
	if *sections != "" {
		c.Sections = strings.Split(*sections, ",")
	}
	if *clients != "" {
		if c.Clients, err = intList(*clients); err != nil {
			return Config{}, "", fmt.Errorf("-clients: %w", err)
		}
	}
	if *scale != "" {
		if c.ScaleNs, err = intList(*scale); err != nil {
			return Config{}, "", fmt.Errorf("-scale: %w", err)
		}
	}
	return c, *k8sOut, c.validate()
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (c *Config) validate() error {
	switch {
	case c.Reps < 1, c.Creates < 1, c.Accounts < 1, c.TasksPerAccount < 1, c.PGAccounts < 1, c.PGTasksPerAccount < 1, c.RestartReps < 1, c.ListReps < 1, c.ImportMB < 1, c.FailoverKeys < 1,
		c.K8sReps < 1, c.K8sIdle < 1, c.K8sWindow <= 0, c.K8sProbeReps < 1:
		return fmt.Errorf("sizes must be positive")
	case len(c.Clients) == 0 || len(c.ScaleNs) == 0:
		return fmt.Errorf("need at least one client level and one scale size")
	case c.PortBase < 1024 || c.PortBase+c.maxScale()+c.Creates+200 > 65535:
		return fmt.Errorf("port base %d leaves no room for the databases", c.PortBase)
	}
	for _, s := range c.Sections {
		if !slices.Contains(allSections, s) {
			return fmt.Errorf("unknown section %q: want one of %v", s, allSections)
		}
	}
	for i := 1; i < len(c.ScaleNs); i++ {
		if c.ScaleNs[i] <= c.ScaleNs[i-1] {
			return fmt.Errorf("scale sizes must ascend")
		}
	}
	return nil
}

// allSections are the benchmarks, by name.
var allSections = []string{"read", "provision", "engine", "scale", "import", "failover", "k8s"}

// runs reports whether the configuration asks for a section.
func (c *Config) runs(section string) bool {
	return len(c.Sections) == 0 || slices.Contains(c.Sections, section)
}

func (c *Config) maxScale() int {
	m := 0
	for _, n := range c.ScaleNs {
		m = max(m, n)
	}
	return m
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}
