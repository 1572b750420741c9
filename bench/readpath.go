package main

import (
	"context"
	"fmt"
	"time"
)

// readTarget is an endpoint of the read path.
type readTarget struct {
	Name string
	Path string
}

// readRow is one endpoint at one concurrency: medians over the repetitions of clouddb and
// of the bare handler, and the medians of the per-pair ratios.
type readRow struct {
	Endpoint   string
	Clients    int
	BodyBytes  int
	Real, Bare loadResult
	RPSRatio   float64 // clouddb/bare requests per second; goal ≥ 0.9
	P99Ratio   float64 // clouddb/bare p99; goal ≤ 1.2
}

// Goals of the read path.
const (
	goalReadRPS = 0.9
	goalReadP99 = 1.2
)

// Met reports whether the row meets both goals.
func (r readRow) Met() bool { return r.RPSRatio >= goalReadRPS && r.P99Ratio <= goalReadP99 }

// readPath loads each target of clouddb and a bare handler that serves the same bytes,
// alternating which goes first in each repetition.
func (h *harness) readPath(ctx context.Context, in *instance, targets []readTarget) ([]readRow, error) {
	var rows []readRow
	for _, tg := range targets {
		body, err := capture(ctx, "http://"+in.host()+tg.Path)
		if err != nil {
			return rows, err
		}
		bare, bareAddr, err := h.reaper.startBare(ctx, h.dir, body)
		if err != nil {
			return rows, err
		}
		realReq := getRequest(in.host(), tg.Path)
		bareReq := getRequest(bareAddr, tg.Path)
		for _, n := range h.cfg.Clients {
			var reals, bares []loadResult
			var rpsRatios, p99Ratios []float64
			for rep := range h.cfg.Reps {
				var r, b loadResult
				runReal := func() (err error) {
					r, err = runLoad(ctx, in.host(), realReq, len(body), n, h.cfg.Warmup, h.cfg.Duration)
					return err
				}
				runBare := func() (err error) {
					b, err = runLoad(ctx, bareAddr, bareReq, len(body), n, h.cfg.Warmup, h.cfg.Duration)
					return err
				}
				first, second := runReal, runBare
				if rep%2 == 1 {
					first, second = runBare, runReal
				}
				if err := first(); err != nil {
					bare.kill()
					return rows, fmt.Errorf("%s with %d clients: %w", tg.Name, n, err)
				}
				if err := second(); err != nil {
					bare.kill()
					return rows, fmt.Errorf("%s with %d clients: %w", tg.Name, n, err)
				}
				reals, bares = append(reals, r), append(bares, b)
				rpsRatios = append(rpsRatios, r.RPS/b.RPS)
				p99Ratios = append(p99Ratios, float64(r.P99)/float64(b.P99))
			}
			row := readRow{
				Endpoint: tg.Name, Clients: n, BodyBytes: len(body),
				Real: medianLoad(reals), Bare: medianLoad(bares),
				RPSRatio: median(rpsRatios), P99Ratio: median(p99Ratios),
			}
			h.cfg.logf("read %s c=%d: clouddb %.0f req/s p50 %s p99 %s; bare %.0f req/s p50 %s p99 %s; ratios %.2f / %.2f",
				tg.Name, n, row.Real.RPS, row.Real.P50, row.Real.P99, row.Bare.RPS, row.Bare.P50, row.Bare.P99, row.RPSRatio, row.P99Ratio)
			rows = append(rows, row)
		}
		bare.kill()
	}
	return rows, nil
}

// medianLoad is the per-field median of several runs.
func medianLoad(rs []loadResult) loadResult {
	var rps []float64
	var p50, p99 []time.Duration
	n := 0
	for _, r := range rs {
		rps = append(rps, r.RPS)
		p50 = append(p50, r.P50)
		p99 = append(p99, r.P99)
		n += r.Requests
	}
	return loadResult{Requests: n, RPS: median(rps), P50: medianDur(p50), P99: medianDur(p99)}
}
