package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"clouddb"
	"clouddb/cloudapi/client"
)

// scaleRow is what the scale benchmark measures with N active databases. Durations are
// medians over the repetitions.
type scaleRow struct {
	N             int
	Subscriptions int
	// RSS is the clouddb process's VmRSS; PSS the summed Pss of its redis-servers.
	RSS, PSS int64
	// IdleCPU is the CPU clouddb uses with nothing to do (a fraction of one core).
	IdleCPU float64
	// SubsList is GET /v1/subscriptions (p50 and p99 of ListReps requests).
	SubsListP50, SubsListP99 time.Duration
	// DBPage is one GET …/databases?limit=100&offset=0 of the largest subscription (p50).
	DBPageP50 time.Duration
	// DBAll is the time to list every database of the account, one page of 100 after
	// another (median).
	DBAll time.Duration
	// Restart after SIGTERM: the clean stop, then from exec until the API answers and
	// until every database answers an authenticated PING.
	TermStop, TermAPI, TermAll time.Duration
	// Restart after SIGKILL of clouddb (the servers keep running and are adopted).
	KillAPI, KillAll time.Duration
	// PingAll is the baseline of KillAll: the harness's PING of every database (32 at
	// once, as after a restart) while clouddb runs undisturbed, just before the kill.
	PingAll time.Duration
	// Adoption check after each SIGKILL restart: redis-servers that were not there
	// before (duplicates or restarts) and servers missing, summed over the restarts.
	KillNewPids, KillLostPids int
}

// scale grows one clouddb to each size of ScaleNs in turn and measures it there.
func (h *harness) scale(ctx context.Context) ([]scaleRow, error) {
	ctx, cancel := context.WithTimeout(ctx, 45*time.Minute)
	defer cancel()
	low := h.cfg.PortBase + h.cfg.Creates + 100
	in, err := h.startInstance(ctx, "scale", low, h.cfg.maxScale()+50)
	if err != nil {
		return nil, err
	}
	defer func() { _ = in.shutdown() }() // for the error paths; a no-op once stopped on return
	var rows []scaleRow
	have, subs := 0, 0
	for _, n := range h.cfg.ScaleNs {
		t0 := time.Now()
		added, err := grow(ctx, in.c, have, n, subs)
		if err != nil {
			return rows, fmt.Errorf("grow to %d databases: %w", n, err)
		}
		have, subs = n, subs+added
		h.cfg.logf("scale: %d databases active in %d subscriptions (grown in %s)", n, subs, time.Since(t0).Round(time.Millisecond))
		row, err := h.measureScale(ctx, in, n)
		if err != nil {
			return rows, fmt.Errorf("with %d databases: %w", n, err)
		}
		row.Subscriptions = subs
		h.cfg.logf("scale N=%d: RSS %s, idle CPU %.0f%%, redis PSS %s, GET /subscriptions p50 %s, all databases %s, SIGTERM restart %s (API %s), SIGKILL restart %s (API %s), new/lost pids %d/%d",
			n, mib(row.RSS), 100*row.IdleCPU, mib(row.PSS), row.SubsListP50, row.DBAll, row.TermAll, row.TermAPI, row.KillAll, row.KillAPI, row.KillNewPids, row.KillLostPids)
		rows = append(rows, row)
	}
	return rows, in.shutdown()
}

// maxPlanQuantity is the largest creation-plan quantity the API takes.
const maxPlanQuantity = 100

// grow creates subscriptions of up to 100 tiny databases until the account has want
// databases, at most three at a time (the limit of non-active subscriptions), each batch
// waited for until active. It returns how many subscriptions it created.
func grow(ctx context.Context, c *client.Client, have, want, subs int) (int, error) {
	added := 0
	for have < want {
		var batch []int
		for len(batch) < 3 && have < want {
			q := min(maxPlanQuantity, want-have)
			k := subs + added + 1
			id, err := createSubscription(ctx, c, "scale-"+strconv.Itoa(k), "s"+strconv.Itoa(k), q, clouddb.MinDatabaseSizeGB)
			if err != nil {
				return added, err
			}
			batch = append(batch, id)
			added++
			have += q
		}
		for _, id := range batch {
			if _, err := c.WaitForSubscriptionStatus(ctx, id, client.SubscriptionActive); err != nil {
				return added, err
			}
		}
	}
	return added, nil
}

// inventory lists every database of the account: its endpoint and password, and the
// paths of the list pages, the fullest first.
func inventory(ctx context.Context, c *client.Client) ([]endpoint, []string, error) {
	list, err := c.ListSubscriptions(ctx)
	if err != nil {
		return nil, nil, err
	}
	var eps []endpoint
	var pages []string
	fullest := 0
	for _, s := range list.Subscriptions {
		for offset := 0; ; offset += maxPlanQuantity {
			page, err := c.ListDatabases(ctx, s.ID, maxPlanQuantity, offset)
			if err != nil {
				return nil, nil, err
			}
			if len(page.Subscription) != 1 {
				return nil, nil, fmt.Errorf("database list of subscription %d has %d entries", s.ID, len(page.Subscription))
			}
			dbs := page.Subscription[0].Databases
			pages = append(pages, fmt.Sprintf("/v1/subscriptions/%d/databases?limit=%d&offset=%d", s.ID, maxPlanQuantity, offset))
			if len(dbs) > fullest {
				fullest = len(dbs)
				last := len(pages) - 1
				pages[0], pages[last] = pages[last], pages[0]
			}
			for _, d := range dbs {
				if d.Status != client.DatabaseActive {
					return nil, nil, fmt.Errorf("database %d is %s", d.ID, d.Status)
				}
				if d.Security == nil || d.Security.Password == "" {
					return nil, nil, fmt.Errorf("database %d shows no password", d.ID)
				}
				eps = append(eps, endpoint{addr: d.PublicEndpoint, password: d.Security.Password})
			}
			if len(dbs) < maxPlanQuantity {
				break
			}
		}
	}
	return eps, pages, nil
}

func (h *harness) measureScale(ctx context.Context, in *instance, n int) (scaleRow, error) {
	row := scaleRow{N: n}
	eps, pages, err := inventory(ctx, in.c)
	if err != nil {
		return row, err
	}
	if len(eps) != n {
		return row, fmt.Errorf("the API lists %d databases, want %d", len(eps), n)
	}
	dbRoot := filepath.Join(in.dataDir, "databases")

	// Memory and idle CPU, once the reconciler has been through a few passes.
	cpu0, err := cpuTime(in.pid())
	if err != nil {
		return row, err
	}
	t0 := time.Now()
	time.Sleep(h.cfg.Settle)
	cpu1, err := cpuTime(in.pid())
	if err != nil {
		return row, err
	}
	row.IdleCPU = float64(cpu1-cpu0) / float64(time.Since(t0))
	var rss []float64
	for range 5 {
		v, rssErr := vmRSS(in.pid())
		if rssErr != nil {
			return row, rssErr
		}
		rss = append(rss, float64(v))
		time.Sleep(200 * time.Millisecond)
	}
	row.RSS = int64(median(rss))
	pids, err := redisPids(dbRoot)
	if err != nil {
		return row, err
	}
	if len(pids) != n {
		return row, fmt.Errorf("%d redis-server processes run, want %d", len(pids), n)
	}
	for _, pid := range pids {
		v, pssErr := pss(pid)
		if pssErr != nil {
			return row, pssErr
		}
		row.PSS += v
	}

	// List latency.
	host := in.host()
	subsLat, err := timeRequests(ctx, host, getRequest(host, "/v1/subscriptions"), h.cfg.ListReps)
	if err != nil {
		return row, err
	}
	row.SubsListP50, row.SubsListP99 = quantile(subsLat, 0.5), quantile(subsLat, 0.99)
	pageLat, err := timeRequests(ctx, host, getRequest(host, pages[0]), h.cfg.ListReps)
	if err != nil {
		return row, err
	}
	row.DBPageP50 = quantile(pageLat, 0.5)
	var reqs [][]byte
	for _, p := range pages {
		reqs = append(reqs, getRequest(host, p))
	}
	all, err := timeSequence(ctx, host, reqs, h.cfg.ListReps)
	if err != nil {
		return row, err
	}
	row.DBAll = quantile(all, 0.5)

	// Restarts, alternating a clean stop and a crash.
	var termStop, termAPI, termAll, killAPI, killAll, pingAll []time.Duration
	for range h.cfg.RestartReps {
		stop, api, everything, err := h.restartAfter(ctx, in, syscall.SIGTERM, eps, dbRoot, &row)
		if err != nil {
			return row, fmt.Errorf("restart after SIGTERM: %w", err)
		}
		termStop, termAPI, termAll = append(termStop, stop), append(termAPI, api), append(termAll, everything)
		t0 := time.Now()
		last, err := waitAllPing(ctx, eps, 10*time.Millisecond, t0.Add(time.Minute))
		if err != nil {
			return row, fmt.Errorf("PING every database: %w", err)
		}
		pingAll = append(pingAll, last.Sub(t0))
		_, api, everything, err = h.restartAfter(ctx, in, syscall.SIGKILL, eps, dbRoot, &row)
		if err != nil {
			return row, fmt.Errorf("restart after SIGKILL: %w", err)
		}
		killAPI, killAll = append(killAPI, api), append(killAll, everything)
	}
	row.TermStop, row.TermAPI, row.TermAll = medianDur(termStop), medianDur(termAPI), medianDur(termAll)
	row.KillAPI, row.KillAll, row.PingAll = medianDur(killAPI), medianDur(killAll), medianDur(pingAll)
	return row, nil
}

// restartAfter stops clouddb with sig and starts it again. It returns how long the stop
// took, and the time from exec until the API answered and until every database answered
// an authenticated PING. After SIGTERM no server may be left running; after SIGKILL every
// server must be adopted: the same processes, none started twice.
func (h *harness) restartAfter(ctx context.Context, in *instance, sig syscall.Signal, eps []endpoint, dbRoot string, row *scaleRow) (stop, api, all time.Duration, err error) {
	before, err := redisPids(dbRoot)
	if err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	if err = in.stop(sig, 3*time.Minute); err != nil {
		return 0, 0, 0, err
	}
	stop = time.Since(t0)
	left, err := redisPids(dbRoot)
	if err != nil {
		return 0, 0, 0, err
	}
	switch {
	case sig == syscall.SIGTERM && len(left) != 0:
		return 0, 0, 0, fmt.Errorf("%d redis-server processes still run after clouddb stopped", len(left))
	case sig == syscall.SIGKILL && len(left) != len(eps):
		return 0, 0, 0, fmt.Errorf("%d redis-server processes run after clouddb was killed, want %d", len(left), len(eps))
	}

	t1 := time.Now()
	if err = h.restart(ctx, in); err != nil {
		return 0, 0, 0, err
	}
	deadline := t1.Add(5 * time.Minute)
	for {
		body, capErr := capture(ctx, in.url+"/subscriptions")
		if capErr == nil && len(body) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("the API did not answer within 5 minutes: %v", capErr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	api = time.Since(t1)
	last, err := waitAllPing(ctx, eps, 10*time.Millisecond, deadline)
	if err != nil {
		return 0, 0, 0, err
	}
	all = last.Sub(t1)

	if sig == syscall.SIGKILL {
		// Give the reconciler more than one pass to start anything it wrongly would.
		time.Sleep(h.cfg.AdoptWait)
		after, err := redisPids(dbRoot)
		if err != nil {
			return 0, 0, 0, err
		}
		for _, p := range after {
			if !slices.Contains(before, p) {
				row.KillNewPids++
			}
		}
		for _, p := range before {
			if !slices.Contains(after, p) {
				row.KillLostPids++
			}
		}
	}
	return stop, api, all, nil
}

// growth is how a figure grows per 10× databases between two sizes: (b/a)^(1/log10(nb/na)).
func growth(a, b float64, na, nb int) float64 {
	if a <= 0 || b <= 0 || na <= 0 || nb <= na {
		return math.NaN()
	}
	return math.Pow(b/a, 1/math.Log10(float64(nb)/float64(na)))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// The scale goals: at the largest size clouddb's RSS stays under goalScaleRSS and a
// clouddb killed with SIGKILL has adopted every running server within goalScaleAdopt; a
// restart after SIGTERM brings goalScaleTermN databases back within goalScaleTerm; the
// paged lists stay flat in N: their p50 at the largest size at most goalScaleFlat times
// the smallest size's (a list of every database grows with N by nature and has no goal).
const (
	goalScaleRSS   = 100 << 20
	goalScaleAdopt = 500 * time.Millisecond
	goalScaleTermN = 500
	goalScaleTerm  = 2 * time.Second
	goalScaleFlat  = 2.0
)

// scaleGoal is one line of the goals table.
type scaleGoal struct{ goal, result, met string }

// scaleGoals checks the scale rows against the goals.
func scaleGoals(rows []scaleRow) []scaleGoal {
	first, last := rows[0], rows[len(rows)-1]
	var out []scaleGoal
	out = append(out, scaleGoal{
		fmt.Sprintf("scale: clouddb RSS ≤ %s with %d databases", mib(goalScaleRSS), last.N),
		mib(last.RSS), yesNo(last.RSS <= goalScaleRSS),
	})
	out = append(out, scaleGoal{
		fmt.Sprintf("scale: idle CPU with %d databases (measured)", last.N),
		fmt.Sprintf("%.1f%% of one core", 100*last.IdleCPU), "measured",
	})
	out = append(out, scaleGoal{
		fmt.Sprintf("scale: restart after kill -9 adopts %d databases (all PING) ≤ %s", last.N, fmtDur(goalScaleAdopt)),
		fmt.Sprintf("%s (of which the harness's own PING of every database takes %s undisturbed), %d new / %d lost pids",
			fmtDur(last.KillAll), fmtDur(last.PingAll), last.KillNewPids, last.KillLostPids),
		yesNo(last.KillAll <= goalScaleAdopt && last.KillNewPids == 0 && last.KillLostPids == 0),
	})
	term := scaleGoal{fmt.Sprintf("scale: restart after SIGTERM brings %d databases back (all PING) ≤ %s", goalScaleTermN, fmtDur(goalScaleTerm)),
		"not measured at that size", "no"}
	for _, r := range rows {
		if r.N == goalScaleTermN {
			term.result, term.met = fmtDur(r.TermAll), yesNo(r.TermAll <= goalScaleTerm)
		}
	}
	out = append(out, term)
	if len(rows) > 1 {
		subs := float64(last.SubsListP50) / float64(first.SubsListP50)
		page := float64(last.DBPageP50) / float64(first.DBPageP50)
		out = append(out, scaleGoal{
			fmt.Sprintf("scale: paged lists flat in N: p50 at %d databases ≤ %.0f× at %d (GET /v1/subscriptions, GET …/databases?limit=100)", last.N, goalScaleFlat, first.N),
			fmt.Sprintf("%.2f× / %.2f×", subs, page), yesNo(subs <= goalScaleFlat && page <= goalScaleFlat),
		})
	}
	return out
}
