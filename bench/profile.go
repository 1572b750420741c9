package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"clouddb"
	"clouddb/cloudapi"
	"clouddb/cloudapi/client"
	"clouddb/sqlite"
	"clouddb/task"
)

// profileClients is the concurrency of the profiled read-path runs.
const profileClients = 64

// profileReadPath serves the API in this process (the store, the task engine and the
// HTTP handler wired as `clouddb serve` wires them, without the reconciler), loads the
// read-path endpoints as the benchmark does, and writes a CPU profile of each run into
// cfg.Profile, with `go tool pprof -top` of it beside. The profile includes the load
// generator (main.runLoad, main.readResponse), which the server-side figures exclude.
func (h *harness) profileReadPath(ctx context.Context, rep *report) error {
	if err := os.MkdirAll(h.cfg.Profile, 0o755); err != nil {
		return err
	}
	dir := filepath.Join(h.dir, "profile")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	db, err := sqlite.Open(filepath.Join(dir, "clouddb.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	if err = seedAccount(ctx, db); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := &task.Engine{Store: db, Ports: &task.Ports{Low: h.cfg.PortBase, High: h.cfg.PortBase + 10, Host: "127.0.0.1"}, Logger: logger}
	api := &cloudapi.Server{Store: db, Tasks: eng, AdvertiseHost: "127.0.0.1", Logger: logger, RateLimit: benchRateLimit}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	// Serve returns http.ErrServerClosed once closed; a server that failed shows as the
	// requests below failing.
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	ectx, stopEngine := context.WithCancel(ctx)
	defer stopEngine()
	// Run returns once ectx ends; an engine that failed shows as the subscription
	// below never being created.
	go func() { _ = eng.Run(ectx) }()

	host := ln.Addr().String()
	c := client.New("http://"+host+"/v1", benchKey, benchSecret, client.WithPollInterval(10*time.Millisecond))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	subID, err := createSubscription(wctx, c, "profile", "profile", 1, clouddb.MinDatabaseSizeGB)
	if err != nil {
		return err
	}
	tasks, err := c.ListTasks(wctx)
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("list tasks: %v (%d tasks)", err, len(tasks))
	}
	targets := []struct{ name, path string }{
		{"subscription", "/v1/subscriptions/" + strconv.Itoa(subID)},
		{"task", "/v1/tasks/" + tasks[0].ID},
	}
	var summary strings.Builder
	for _, tg := range targets {
		body, err := capture(ctx, "http://"+host+tg.path)
		if err != nil {
			return err
		}
		path := filepath.Join(h.cfg.Profile, "readpath-"+tg.name+".pprof")
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		res, lerr := runLoad(ctx, host, getRequest(host, tg.path), len(body), profileClients, h.cfg.Warmup, 4*h.cfg.Duration)
		pprof.StopCPUProfile()
		f.Close()
		if lerr != nil {
			return lerr
		}
		fmt.Fprintf(&summary, "In-process `GET %s` at %d clients: %.0f req/s, p50 %s, p99 %s; profile %s.\n\n",
			tg.path, profileClients, res.RPS, fmtDur(res.P50), fmtDur(res.P99), path)
		self, _ := os.Executable()
		for _, mode := range []string{"-top", "-top -cum"} {
			args := append([]string{"tool", "pprof"}, strings.Fields(mode)...)
			args = append(args, "-nodecount=25", self, path)
			out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
			if err != nil {
				fmt.Fprintf(&summary, "(go tool pprof %s failed: %v)\n\n", mode, err)
				continue
			}
			top := filepath.Join(h.cfg.Profile, "readpath-"+tg.name+strings.ReplaceAll(mode, " ", "")+".txt")
			_ = os.WriteFile(top, out, 0o644)
		}
		h.cfg.logf("profiled %s: %.0f req/s, written to %s", tg.path, res.RPS, path)
	}
	rep.Profile = summary.String()
	return nil
}

// seedAccount creates what `clouddb serve` bootstraps: the internal cloud account, a
// flexible account with a payment method, and the bench key pair.
func seedAccount(ctx context.Context, db clouddb.Store) error {
	return db.Update(ctx, func(tx clouddb.Tx) error {
		if err := tx.CreateCloudAccount(ctx, &clouddb.CloudAccount{ID: clouddb.InternalCloudAccountID, Name: "Redis Internal Resources",
			Provider: "AWS", Status: clouddb.CloudAccountActive, Generation: 1}); err != nil {
			return err
		}
		a := &clouddb.Account{Name: "bench", Plan: clouddb.PlanFlexible}
		if err := tx.CreateAccount(ctx, a); err != nil {
			return err
		}
		if err := tx.CreatePaymentMethod(ctx, &clouddb.PaymentMethod{AccountID: a.ID, Type: "Visa", CreditCardEndsWith: 4242,
			NameOnCard: "bench", ExpirationMonth: 12, ExpirationYear: time.Now().Year() + 5}); err != nil {
			return err
		}
		return tx.CreateAPIKey(ctx, &clouddb.APIKey{AccountID: a.ID, Name: "bench", Key: benchKey,
			SecretDigest: clouddb.DigestSecret(benchSecret), Role: clouddb.RoleOwner})
	})
}
