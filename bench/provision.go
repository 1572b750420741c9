package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"clouddb"
	"clouddb/cloudapi/client"
)

// provisionResult compares create-database-to-active (server side: from the task's
// received timestamp to the database's activatedOn) with a bare redis-server
// spawn-to-PONG, measured alternately.
type provisionResult struct {
	Creates int
	// Server-side create-to-active, sorted.
	Real []time.Duration
	// Client-observed: from sending the POST until the database read active, sorted.
	Wall []time.Duration
	// Bare spawn-to-PONG, sorted.
	Bare []time.Duration
}

// goalProvision is the bound on create-to-active over bare spawn-to-PONG.
const goalProvision = 1.5

// MedianRatio and P99Ratio compare clouddb with the bare spawn.
func (p *provisionResult) MedianRatio() float64 {
	return float64(quantile(p.Real, 0.5)) / float64(quantile(p.Bare, 0.5))
}

// P99Ratio compares the p99s.
func (p *provisionResult) P99Ratio() float64 {
	return float64(quantile(p.Real, 0.99)) / float64(quantile(p.Bare, 0.99))
}

// provision creates databases one at a time in one active subscription, each time waiting
// until it is active, and alternates with bare redis-server spawns. The subscription is
// created with capacity for all of them (its seed database is made that large, then
// shrunk: a subscription keeps its capacity), so no create resizes it and every create
// finds it active.
func (h *harness) provision(ctx context.Context, in *instance) (*provisionResult, error) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	const size = clouddb.MinDatabaseSizeGB
	subID, err := createSubscription(wctx, in.c, "provisioning", "seed", 1, float64(h.cfg.Creates+1)*size)
	if err != nil {
		return nil, err
	}
	if _, err = in.c.WaitForSubscriptionStatus(wctx, subID, client.SubscriptionActive); err != nil {
		return nil, err
	}
	if err = shrinkSeed(wctx, in.c, subID, size); err != nil {
		return nil, err
	}
	res := &provisionResult{Creates: h.cfg.Creates}
	for i := range h.cfg.Creates {
		create := func() error {
			real, wall, err := createToActive(wctx, in.c, subID, i, size)
			if err != nil {
				return err
			}
			res.Real, res.Wall = append(res.Real, real), append(res.Wall, wall)
			return nil
		}
		bare := func() error {
			d, err := h.bareSpawn(wctx, i)
			if err != nil {
				return fmt.Errorf("bare redis-server: %w", err)
			}
			res.Bare = append(res.Bare, d)
			return nil
		}
		first, second := create, bare
		if i%2 == 1 {
			first, second = bare, create
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
	}
	slices.Sort(res.Real)
	slices.Sort(res.Wall)
	slices.Sort(res.Bare)
	h.cfg.logf("provisioning: create-to-active p50 %s p99 %s (client-observed p50 %s); bare spawn-to-PONG p50 %s p99 %s",
		quantile(res.Real, 0.5), quantile(res.Real, 0.99), quantile(res.Wall, 0.5), quantile(res.Bare, 0.5), quantile(res.Bare, 0.99))
	return res, nil
}

// shrinkSeed brings the subscription's one database down to sizeGB, leaving the
// subscription the capacity it was created with.
func shrinkSeed(ctx context.Context, c *client.Client, subID int, sizeGB float64) error {
	dbs, err := c.AllDatabases(ctx, subID)
	if err != nil {
		return err
	}
	if len(dbs) != 1 {
		return fmt.Errorf("subscription %d: want its seed database alone, found %d databases", subID, len(dbs))
	}
	t, err := c.UpdateDatabase(ctx, subID, dbs[0].ID, client.UpdateDatabase{MemoryLimitInGB: client.Ptr(sizeGB)})
	if err != nil {
		return err
	}
	if _, err = c.WaitForTask(ctx, t.ID); err != nil {
		return err
	}
	_, err = c.WaitForDatabaseStatus(ctx, subID, dbs[0].ID, client.DatabaseActive)
	return err
}

// createToActive creates database i and waits until it is active. It returns the
// server-side time (task received → activatedOn) and the client-observed time.
func createToActive(ctx context.Context, c *client.Client, subID, i int, sizeGB float64) (server, wall time.Duration, err error) {
	t0 := time.Now()
	t, err := c.CreateDatabase(ctx, subID, client.CreateDatabase{
		Name:            client.Ptr("p-" + strconv.Itoa(i)),
		MemoryLimitInGB: client.Ptr(sizeGB),
		Password:        client.Ptr("bench-password-" + strconv.Itoa(i)),
	})
	if err != nil {
		return 0, 0, err
	}
	done, err := c.WaitForTask(ctx, t.ID)
	if err != nil {
		return 0, 0, err
	}
	db, err := c.WaitForDatabaseStatus(ctx, subID, done.ResourceID(), client.DatabaseActive)
	if err != nil {
		return 0, 0, err
	}
	wall = time.Since(t0)
	if db.ActivatedOn == nil {
		return 0, 0, fmt.Errorf("database %d is active without activatedOn", db.ID)
	}
	server = db.ActivatedOn.Sub(t.Timestamp)
	if server <= 0 {
		// Both are at millisecond precision; never report a zero or negative time.
		server = time.Millisecond
	}
	return server, wall, nil
}

// bareSpawnPoll is how often the bare spawn polls PING.
const bareSpawnPoll = time.Millisecond

// bareSpawn execs redis-server with a minimal config (loopback, a password, no
// persistence) on a free port, polls an authenticated PING until PONG, and returns the
// time from exec to PONG. The server is killed before it returns.
func (h *harness) bareSpawn(ctx context.Context, i int) (time.Duration, error) {
	dir := filepath.Join(h.dir, "bare-redis", strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	const password = "bare-password"
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode yes\nrequirepass %s\nsave \"\"\nappendonly no\ndir %s\nlogfile \"\"\n",
		port, password, dir)
	confPath := filepath.Join(dir, "redis.conf")
	if err = os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return 0, err
	}
	cmd := exec.Command("redis-server", confPath)
	cmd.Dir = dir
	t0 := time.Now()
	p, err := h.reaper.start(cmd)
	if err != nil {
		return 0, err
	}
	defer p.kill()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		if authPing(addr, password, time.Second) == nil {
			return time.Since(t0), nil
		}
		if p.exited() {
			return 0, fmt.Errorf("redis-server exited: %v", p.err)
		}
		if time.Since(t0) > 10*time.Second {
			return 0, errors.New("no PONG within 10s")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(bareSpawnPoll):
		}
	}
}

// freePort returns a loopback port that nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
