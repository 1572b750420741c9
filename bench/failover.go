package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"clouddb"
	"clouddb/cloudapi/client"
)

// failoverResult compares the failover of a replicated database (kill -9 of its primary
// until its endpoint answers a write again, served by the promoted replica) with a bare
// redis-server restarted on its port after a kill -9, measured alternately.
type failoverResult struct {
	// Keys is how many writes, each acknowledged by the replica (WAIT 1), go before each
	// kill.
	Keys int
	// Real is kill → a SET answered on the database's endpoint, sorted.
	Real []time.Duration
	// Bare is kill → a SET answered by the bare server started again on its port,
	// sorted.
	Bare []time.Duration
	// Ratios are the per-pair ratios Real/Bare.
	Ratios []float64
	// Lost counts, per failover, the acknowledged writes that were missing after it.
	Lost []int
}

// goalFailover bounds the failover time; no acknowledged write may be lost.
const goalFailover = time.Second

// MedianRatio is the median of the per-pair ratios.
func (f *failoverResult) MedianRatio() float64 { return median(f.Ratios) }

// Max is the slowest failover.
func (f *failoverResult) Max() time.Duration { return f.Real[len(f.Real)-1] }

// TotalLost is the acknowledged writes lost over every failover.
func (f *failoverResult) TotalLost() int {
	n := 0
	for _, l := range f.Lost {
		n += l
	}
	return n
}

// Met reports whether the goal holds: every failover within goalFailover, nothing lost.
func (f *failoverResult) Met() bool { return f.Max() <= goalFailover && f.TotalLost() == 0 }

// failoverPoll is how often the endpoint is probed after a kill.
const failoverPoll = time.Millisecond

// failoverPortLow is the first port of the failover benchmark's clouddb.
func (h *harness) failoverPortLow() int { return h.importPortLow() + 10 }

// failover runs the failover benchmark: one clouddb with one database with replication
// and no persistence (only the replica keeps the data), and one bare redis-server.
func (h *harness) failover(ctx context.Context) (*failoverResult, error) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	in, err := h.startInstance(wctx, "failover", h.failoverPortLow(), 10)
	if err != nil {
		return nil, err
	}
	defer func() { _ = in.shutdown() }() // for the error paths; a no-op once stopped below
	db, err := replicatedDatabase(wctx, in.c)
	if err != nil {
		return nil, err
	}
	ep := endpoint{addr: db.PublicEndpoint, password: db.Security.Password}

	bareDir := filepath.Join(h.dir, "failover-bare")
	if err = os.MkdirAll(bareDir, 0o700); err != nil {
		return nil, err
	}
	bare, bareEP, err := h.startRedis(wctx, bareDir, nil, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("bare redis-server: %w", err)
	}
	defer func() { bare.kill() }()

	res := &failoverResult{Keys: h.cfg.FailoverKeys}
	for i := range h.cfg.Reps {
		var real, base time.Duration
		measured := func() error {
			d, lost, err := failoverOnce(wctx, ep, i, res.Keys)
			if err != nil {
				return fmt.Errorf("failover %d: %w", i+1, err)
			}
			real = d
			res.Real, res.Lost = append(res.Real, d), append(res.Lost, lost)
			return nil
		}
		baseline := func() error {
			d, p, err := h.bareRestart(wctx, bare, bareEP, bareDir)
			bare = p
			if err != nil {
				return fmt.Errorf("bare restart %d: %w", i+1, err)
			}
			base = d
			res.Bare = append(res.Bare, d)
			return nil
		}
		first, second := measured, baseline
		if i%2 == 1 {
			first, second = baseline, measured
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
		res.Ratios = append(res.Ratios, float64(real)/float64(base))
	}
	slices.Sort(res.Real)
	slices.Sort(res.Bare)
	h.cfg.logf("failover: kill -9 of the primary to a write answered, median %s max %s, %d acknowledged writes lost; bare restart median %s max %s",
		medianDur(res.Real), res.Max(), res.TotalLost(), medianDur(res.Bare), res.Bare[len(res.Bare)-1])
	if err := in.shutdown(); err != nil {
		return nil, fmt.Errorf("stop clouddb: %w", err)
	}
	return res, nil
}

// replicatedDatabase creates, in a new subscription, a 0.1 GB database with replication
// and no persistence, and returns it once it is active.
func replicatedDatabase(ctx context.Context, c *client.Client) (*client.Database, error) {
	const size = clouddb.MinDatabaseSizeGB
	subID, err := createSubscription(ctx, c, "failover", "seed", 1, 4*size)
	if err != nil {
		return nil, err
	}
	if _, err = c.WaitForSubscriptionStatus(ctx, subID, client.SubscriptionActive); err != nil {
		return nil, err
	}
	if err = shrinkSeed(ctx, c, subID, size); err != nil {
		return nil, err
	}
	t, err := c.CreateDatabase(ctx, subID, client.CreateDatabase{
		Name:            client.Ptr("replicated"),
		DatasetSizeInGB: client.Ptr(size),
		Password:        client.Ptr("bench-failover-password"),
		DataPersistence: client.Ptr("none"),
		Replication:     client.Ptr(true),
	})
	if err != nil {
		return nil, err
	}
	done, err := c.WaitForTask(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	db, err := c.WaitForDatabaseStatus(ctx, subID, done.ResourceID(), client.DatabaseActive)
	if err != nil {
		return nil, err
	}
	if !db.Replication || db.Security == nil {
		return nil, fmt.Errorf("database %d: replication %v, security %v", db.ID, db.Replication, db.Security)
	}
	return db, nil
}

// failoverOnce waits until the database's replica is in sync, writes keys f<rep>:<i>,
// each acknowledged by the replica (WAIT 1), kills the primary with SIGKILL, and polls the
// endpoint until a server other than the killed one answers a SET. It returns the time
// from the kill to that answer and how many of the acknowledged writes are missing then.
func failoverOnce(ctx context.Context, ep endpoint, rep, keys int) (time.Duration, int, error) {
	if err := waitReplicaOnline(ctx, ep, 30*time.Second); err != nil {
		return 0, 0, err
	}
	c, err := dialRedis(ep.addr, ep.password, 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer c.close()
	key := func(i int) string { return "f" + strconv.Itoa(rep) + ":" + strconv.Itoa(i) }
	for i := range keys {
		c.send("SET", key(i), strconv.Itoa(i))
		c.send("WAIT", "1", "2000")
		_ = c.conn.SetDeadline(time.Now().Add(5 * time.Second))
		if err = c.wr.Flush(); err != nil {
			return 0, 0, err
		}
		if _, err = c.read(); err != nil {
			return 0, 0, fmt.Errorf("SET %s: %w", key(i), err)
		}
		var acked any
		if acked, err = c.read(); err != nil {
			return 0, 0, fmt.Errorf("WAIT 1 after %s: %w", key(i), err)
		}
		if acked != int64(1) {
			return 0, 0, fmt.Errorf("WAIT 1 after %s: %v replicas acknowledged, want 1", key(i), acked)
		}
	}
	pid, err := serverPid(c)
	if err != nil {
		return 0, 0, err
	}
	c.close()

	t0 := time.Now()
	if err = syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, 0, fmt.Errorf("kill -9 the primary (pid %d): %w", pid, err)
	}
	took, err := untilWritable(ctx, ep, pid, t0, 30*time.Second)
	if err != nil {
		return 0, 0, err
	}

	c, err = dialRedis(ep.addr, ep.password, 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer c.close()
	_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	for i := range keys {
		c.send("GET", key(i))
	}
	if err := c.wr.Flush(); err != nil {
		return 0, 0, err
	}
	lost := 0
	for i := range keys {
		v, err := c.read()
		if err != nil {
			return 0, 0, fmt.Errorf("GET %s: %w", key(i), err)
		}
		if v != strconv.Itoa(i) {
			lost++
		}
	}
	return took, lost, nil
}

// serverPid is the process_id INFO server gives.
func serverPid(c *respConn) (int, error) {
	v, err := c.do(5*time.Second, "INFO", "server")
	if err != nil {
		return 0, err
	}
	info, _ := v.(string)
	pid, err := strconv.Atoi(infoField(info, "process_id"))
	if err != nil {
		return 0, fmt.Errorf("INFO server: process_id: %w", err)
	}
	return pid, nil
}

// waitReplicaOnline waits until the server on the endpoint is a primary with one replica
// in sync (INFO replication: connected_slaves:1, slave0 state=online).
func waitReplicaOnline(ctx context.Context, ep endpoint, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last string
	for {
		c, err := dialRedis(ep.addr, ep.password, time.Second)
		if err == nil {
			v, err := c.do(time.Second, "INFO", "replication")
			c.close()
			if info, ok := v.(string); err == nil && ok {
				last = info
				if infoField(info, "role") == "master" && infoField(info, "connected_slaves") == "1" &&
					strings.Contains(infoField(info, "slave0"), "state=online") {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no replica in sync within %s; INFO replication: %q", ep.addr, within, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// untilWritable polls the endpoint every failoverPoll, each time on a new connection, with
// AUTH, SET and INFO server, until a server other than the dead one answers the SET; it
// returns the time from t0.
func untilWritable(ctx context.Context, ep endpoint, dead int, t0 time.Time, within time.Duration) (time.Duration, error) {
	var last error
	for time.Since(t0) < within {
		pid, err := probeSet(ep)
		if err == nil && pid != dead {
			return time.Since(t0), nil
		}
		if err == nil {
			err = fmt.Errorf("answered by the killed pid %d", dead)
		}
		last = err
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(failoverPoll):
		}
	}
	return 0, fmt.Errorf("%s took no write within %s of the kill: %w", ep.addr, within, last)
}

// probeSet connects, authenticates, sends SET and INFO server, and returns the pid of the
// server that answered the SET.
func probeSet(ep endpoint) (int, error) {
	const timeout = 200 * time.Millisecond
	c, err := dialRedis(ep.addr, ep.password, timeout)
	if err != nil {
		return 0, err
	}
	defer c.close()
	if _, err = c.do(timeout, "SET", "failover-probe", "1"); err != nil {
		return 0, err
	}
	v, err := c.do(timeout, "INFO", "server")
	if err != nil {
		return 0, err
	}
	info, _ := v.(string)
	return strconv.Atoi(infoField(info, "process_id"))
}

// bareRestart is the baseline: it kills the bare redis-server p with SIGKILL, starts it
// again on the same port and directory (as a supervisor without a replica would), and
// polls a SET as untilWritable does. It returns the time from the kill to the answer and
// the new process.
func (h *harness) bareRestart(ctx context.Context, p *proc, ep endpoint, dir string) (time.Duration, *proc, error) {
	_, portStr, err := net.SplitHostPort(ep.addr)
	if err != nil {
		return 0, p, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return 0, p, err
	}
	dead := p.pid()
	t0 := time.Now()
	if err = p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, p, err
	}
	if err = p.wait(10 * time.Second); err != nil {
		return 0, p, err
	}
	np, err := h.execRedis(dir, port, ep.password, nil)
	if err != nil {
		return 0, p, err
	}
	took, err := untilWritable(ctx, ep, dead, t0, 30*time.Second)
	if err != nil && np.exited() {
		err = errors.Join(err, fmt.Errorf("redis-server exited: %v", np.err))
	}
	return took, np, err
}
