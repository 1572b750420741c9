package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"clouddb"
	"clouddb/cloudapi/client"
)

// The bootstrap key pair of every clouddb the harness starts.
const (
	benchKey    = "bench-key"
	benchSecret = "bench-secret-0123456789abcdef"
)

// harness is one run: its configuration, temporary directory and processes.
type harness struct {
	cfg    Config
	dir    string
	bin    string
	reaper *reaper
}

// Run measures everything the configuration asks for and writes the report. A section
// that fails is reported as failed and the others still run; Run then returns the
// failures. Every process it started is gone when it returns.
func Run(ctx context.Context, cfg Config) error {
	_, err := measure(ctx, cfg)
	return err
}

// measure is Run, returning what it measured as well.
func measure(ctx context.Context, cfg Config) (rep *report, err error) {
	if err = cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "clouddb-bench-")
	if err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, dir: dir, reaper: &reaper{}}
	defer func() {
		h.reaper.killAll()
		if cfg.Keep {
			cfg.logf("kept %s", dir)
			return
		}
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = rerr
		}
	}()

	rep = &report{Config: cfg, Started: time.Now(), Machine: describeMachine(ctx), Rev: sourceRev(cfg.Rev)}
	cfg.logf("machine: %s", rep.Machine)
	h.bin = cfg.Bin
	if h.bin == "" {
		cfg.logf("building clouddb")
		if h.bin, err = buildClouddb(ctx, dir); err != nil {
			return rep, err
		}
	}

	var errs []error
	section := func(name string, fn func() error) {
		if ctx.Err() != nil {
			return
		}
		cfg.logf("%s: start", name)
		t0 := time.Now()
		if err := fn(); err != nil {
			err = fmt.Errorf("%s: %w", name, err)
			cfg.logf("%v", err)
			rep.Failures = append(rep.Failures, err.Error())
			errs = append(errs, err)
		}
		cfg.logf("%s: done in %s", name, time.Since(t0).Round(time.Millisecond))
	}
	if cfg.runs("read") || cfg.runs("provision") {
		section("read path and provisioning", func() error { return h.readAndProvision(ctx, rep) })
	}
	if cfg.runs("engine") {
		section("task engine", func() error {
			var err error
			rep.Engine, err = h.engine(ctx)
			return err
		})
	}
	if cfg.runs("scale") {
		section("scale", func() error {
			var err error
			rep.Scale, err = h.scale(ctx)
			return err
		})
	}
	if cfg.runs("import") {
		section("import throughput", func() error {
			var err error
			rep.Import, err = h.importThroughput(ctx)
			return err
		})
	}
	if cfg.runs("failover") {
		section("failover", func() error {
			var err error
			rep.Failover, err = h.failover(ctx)
			return err
		})
	}
	if cfg.runs("k8s") {
		section("k8s", func() error {
			var err error
			rep.K8s, err = h.k8s(ctx)
			return err
		})
	}
	if cfg.Profile != "" && cfg.runs("read") {
		section("read-path profile", func() error { return h.profileReadPath(ctx, rep) })
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	rep.Finished = time.Now()
	if err := os.WriteFile(cfg.Out, []byte(rep.markdown()), 0o644); err != nil {
		return rep, err
	}
	cfg.logf("wrote %s", cfg.Out)
	return rep, errors.Join(errs...)
}

// instance is a running clouddb with a client of its API.
type instance struct {
	*clouddbProc
	dataDir, ports, logPath string
	c                       *client.Client
}

// startInstance starts clouddb on a fresh data directory named name, with the port range
// [low, low+size).
func (h *harness) startInstance(ctx context.Context, name string, low, size int) (*instance, error) {
	in := &instance{
		dataDir: filepath.Join(h.dir, name),
		ports:   fmt.Sprintf("%d-%d", low, low+size-1),
		logPath: filepath.Join(h.dir, name+".log"),
	}
	if err := os.MkdirAll(in.dataDir, 0o700); err != nil {
		return nil, err
	}
	h.reaper.own(in.dataDir)
	return in, h.restart(ctx, in)
}

// restart starts (again) the clouddb of in, on its data directory and port range.
func (h *harness) restart(ctx context.Context, in *instance) error {
	p, err := h.reaper.startClouddb(ctx, h.bin, in.dataDir, in.ports, in.logPath)
	if err != nil {
		return err
	}
	in.clouddbProc = p
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	in.c = client.New(p.url, benchKey, benchSecret, client.WithPollInterval(10*time.Millisecond), client.WithHTTPClient(hc))
	return nil
}

// shutdown stops the clouddb of in with SIGTERM (it stops its database servers too).
func (in *instance) shutdown() error {
	if in.clouddbProc == nil || in.exited() {
		return nil
	}
	return in.stop(syscall.SIGTERM, 2*time.Minute)
}

// createSubscription creates a subscription whose creation plan is quantity databases of
// sizeGB named prefix, prefix-2, …; it waits until the task is processed and returns the
// subscription id.
func createSubscription(ctx context.Context, c *client.Client, name, prefix string, quantity int, sizeGB float64) (int, error) {
	pms, err := c.ListPaymentMethods(ctx)
	if err != nil {
		return 0, err
	}
	if len(pms) == 0 {
		return 0, errors.New("the account has no payment method")
	}
	t, err := c.CreateSubscription(ctx, client.CreateSubscription{
		Name:            client.Ptr(name),
		PaymentMethodID: client.Ptr(pms[0].ID),
		CloudProviders: []client.CreateCloudProvider{{
			Provider:       client.Ptr("AWS"),
			CloudAccountID: client.Ptr(1),
			Regions: []client.CreateRegion{{
				Region:     client.Ptr("us-east-1"),
				Networking: &client.CreateNetworking{DeploymentCIDR: client.Ptr("10.0.0.0/24")},
			}},
		}},
		Databases: []client.CreateSubscriptionDatabase{{
			Name:            client.Ptr(prefix),
			MemoryLimitInGB: client.Ptr(sizeGB),
			Quantity:        client.Ptr(quantity),
		}},
	})
	if err != nil {
		return 0, err
	}
	done, err := c.WaitForTask(ctx, t.ID)
	if err != nil {
		return 0, err
	}
	return done.ResourceID(), nil
}

// readAndProvision runs the read-path and provisioning benchmarks on one clouddb.
func (h *harness) readAndProvision(ctx context.Context, rep *report) error {
	in, err := h.startInstance(ctx, "api", h.cfg.PortBase, h.cfg.Creates+50)
	if err != nil {
		return err
	}
	defer func() { _ = in.shutdown() }() // for the error paths; a no-op once stopped below
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	readSub, err := createSubscription(wctx, in.c, "read", "read", 1, clouddb.MinDatabaseSizeGB)
	if err != nil {
		return err
	}
	if _, err = in.c.WaitForSubscriptionStatus(wctx, readSub, client.SubscriptionActive); err != nil {
		return err
	}
	tasks, err := in.c.ListTasks(wctx)
	if err != nil {
		return err
	}
	if len(tasks) == 0 {
		return errors.New("no task to read")
	}
	targets := []readTarget{
		{Name: "GET /v1/subscriptions/{id}", Path: "/v1/subscriptions/" + strconv.Itoa(readSub)},
		{Name: "GET /v1/tasks/{id}", Path: "/v1/tasks/" + tasks[0].ID},
	}
	var errs []error
	if h.cfg.runs("read") {
		if rep.Read, err = h.readPath(ctx, in, targets); err != nil {
			errs = append(errs, fmt.Errorf("read path: %w", err))
		}
	}
	if h.cfg.runs("provision") {
		if rep.Provision, err = h.provision(ctx, in); err != nil {
			errs = append(errs, fmt.Errorf("provisioning: %w", err))
		}
	}
	if err := in.shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("stop clouddb: %w", err))
	}
	return errors.Join(errs...)
}
