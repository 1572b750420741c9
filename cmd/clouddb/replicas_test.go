package main

import (
	"math/rand/v2"
	"testing"
	"time"

	"clouddb"
	"clouddb/internal/pgtest"
)

// TestCrashLoopReplicas: two clouddb replicas share a Postgres store and a data dir under
// a workload sent to either; one of them, leader or standby, is killed with SIGKILL again
// and again and started again. Checked as in TestCrashLoop: every task whose id was
// returned by either replica ends exactly once, the resources match the tasks, and the
// database servers are adopted by each new leader, never started twice.
func TestCrashLoopReplicas(t *testing.T) {
	bin := buildBinary(t)
	key := clouddb.NewKey()
	t.Setenv(envKey, key) // for clouddb admin, run in this process
	seed := envSeed(t, "CRASH_SEED")
	rng := rand.New(rand.NewPCG(seed, 2))
	start := time.Now()

	ports := portBlocks(t, 6)
	a := newHarness(t, bin, ports, "--provisioning-delay", "100ms", "--task-lease", "1s", "--rate-limit", "0", "--log-level", "warn")
	a.useStore(&sharedStore{url: pgtest.URL(t), key: key})
	b := a.replica()
	replicas := []*harness{a, b}
	a.start()
	b.start()
	servers := newServerTracker(t, a.databasesDir())
	accounts := a.accounts(3)

	w := newWorkload(a, accounts, seed, workloadOptions{workersPerAccount: 2, pause: [2]time.Duration{10 * time.Millisecond, 60 * time.Millisecond},
		maxSubscriptions: 4, maxDatabases: 8})
	w.start()

	const iterations = 8
	for i := range iterations {
		d := randDuration(rng, 300*time.Millisecond, 2*time.Second)
		time.Sleep(d)
		victim := rng.IntN(2)
		w.setURL(replicas[1-victim].url) // the workload goes on through the other one
		replicas[victim].kill()
		t.Logf("kill %d: replica %d after %s (%d tasks so far)", i+1, victim, d.Round(time.Millisecond), w.recorded())
		replicas[victim].start()
	}
	time.Sleep(randDuration(rng, 300*time.Millisecond, 2*time.Second))
	w.stop()
	// A last crash of each while tasks may still be queued or in hand.
	b.kill()
	a.kill()
	b.start()
	a.start()
	w.setURL(a.url)

	v := a.verify(w, 90*time.Second)
	servers.check(t)
	// The standby's stop leaves the servers to the leader, whose stop ends them; stopped
	// first, the leader hands them to the standby, whose stop ends them then.
	b.term()
	a.stopAndCheckNoServers()
	t.Logf("replicas: seed %d, %d kills, %d tasks recorded (%d completed, %d failed), %d writes without an answer; %d databases, %d subscriptions at the end; %s in all",
		seed, a.kills+b.kills, len(w.records), v.completed, v.failed, w.ambiguous, v.databases, v.subscriptions, time.Since(start).Round(time.Second))
}

// replica is a second harness on the same data dir and store, with a process of its own.
func (h *harness) replica() *harness {
	return &harness{t: h.t, bin: h.bin, dir: h.dir, env: h.env, args: h.args, store: h.store, key: h.key}
}
