package main

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// These tests drive databases with replication through the real service: the API creates
// them and turns replication on and off, the reconciler and the local driver keep their
// two redis-server nodes (node 0 in databases/<id>/, node 1 in databases/<id>/node1/),
// and the tests kill those servers with SIGKILL as a crash would.

// TestReplicationFailover: a database created with replication: true loses its primary
// to kill -9; within a second its public endpoint takes writes again, served by the
// former replica with every write the replica acknowledged (WAIT 1), a new replica
// follows it from the dead node's directory, and the API shows the database active all
// along. With dataPersistence none the data survives only because the replica held it:
// without replication the server would come back empty.
func TestReplicationFailover(t *testing.T) {
	t.Parallel()
	for _, persistence := range []string{"none", "aof-every-1-second"} {
		t.Run(persistence, func(t *testing.T) {
			t.Parallel()
			s := startService(t, t.TempDir(), options{})
			ctx := testContext(t)
			subID, _ := s.activeSubscription(ctx, "failover", 0.1)
			db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("ha"), DatasetSizeInGB: client.Ptr(0.1),
				Password: client.Ptr("pw-ha"), DataPersistence: client.Ptr(persistence), Replication: client.Ptr(true)})
			require.True(t, db.Replication)
			root := filepath.Join(s.dir, "databases")
			r := redisOf(t, db)
			primary, replica := requireReplicated(t, ctx, root, db.ID, r)
			require.Equal(t, primary.pid, servingPid(t, ctx, r), "the endpoint is the primary's")
			require.Zero(t, primary.node, "node 0 is the first primary")

			watch := s.watchStatus(subID, db.ID)
			const keys = 300
			writeAcked(t, ctx, r, "k", keys)

			killed := time.Now()
			require.NoError(t, syscall.Kill(primary.pid, syscall.SIGKILL))
			took := untilWritable(t, db, primary.pid, 5*time.Second)
			t.Logf("kill -9 of the primary (pid %d) to a write answered on %s by the former replica: %s", primary.pid, db.PublicEndpoint, took.Round(time.Microsecond))
			require.Less(t, took, time.Second, "failover on the same endpoint within 1s")
			require.Less(t, time.Since(killed), 10*time.Second)

			require.Equal(t, replica.pid, servingPid(t, ctx, r), "the former replica serves the endpoint")
			require.Equal(t, replica.node, primaryNode(t, root, db.ID), "topology.json names the new primary")
			requireKeys(t, ctx, r, "k", keys)

			// A new replica runs in the dead primary's node and acknowledges writes.
			newPrimary, newReplica := requireReplicated(t, ctx, root, db.ID, r)
			require.Equal(t, replica, newPrimary, "the promoted replica stays the primary")
			require.Equal(t, primary.node, newReplica.node)
			require.NotEqual(t, primary.pid, newReplica.pid)
			writeAcked(t, ctx, r, "after", 20)
			requireKeys(t, ctx, r, "k", keys)
			n, err := r.DBSize(ctx).Result()
			require.NoError(t, err)
			require.EqualValues(t, keys+20+1, n, "the keys written and the failover probe's")

			statuses := watch()
			require.Equal(t, []string{"active"}, slices.Sorted(maps.Keys(statuses)), "the database stays active in the API: %v", statuses)
			got, err := s.c.GetDatabase(ctx, subID, db.ID)
			require.NoError(t, err)
			require.Equal(t, db.PublicEndpoint, got.PublicEndpoint)
			require.True(t, got.Replication)
		})
	}
}

// TestReplicationReplicaKilled: kill -9 of the replica brings a new replica in its node;
// the primary is not touched (same pid) and keeps its data.
func TestReplicationReplicaKilled(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "replica", 0.1)
	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("ha"), DatasetSizeInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-ha"), Replication: client.Ptr(true)})
	root := filepath.Join(s.dir, "databases")
	r := redisOf(t, db)
	primary, replica := requireReplicated(t, ctx, root, db.ID, r)
	watch := s.watchStatus(subID, db.ID)
	writeAcked(t, ctx, r, "k", 100)

	require.NoError(t, syscall.Kill(replica.pid, syscall.SIGKILL))
	eventually(t, 5*time.Second, "a new replica runs in the killed one's node", func() bool {
		pids := nodePids(t, root, db.ID)
		return len(pids[replica.node]) == 1 && pids[replica.node][0] != replica.pid
	})
	p2, r2 := requireReplicated(t, ctx, root, db.ID, r)
	require.Equal(t, primary, p2, "the primary is untouched")
	require.Equal(t, replica.node, r2.node)
	require.NotEqual(t, replica.pid, r2.pid)
	require.Equal(t, primary.pid, servingPid(t, ctx, r))
	writeAcked(t, ctx, r, "more", 10)
	requireKeys(t, ctx, r, "k", 100)

	statuses := watch()
	require.Equal(t, []string{"active"}, slices.Sorted(maps.Keys(statuses)), "the database stays active in the API: %v", statuses)
}

// TestReplicationToggle: replication turned on (PUT replication: true) on a live database
// without persistence starts a replica beside the running server, and turned off again
// removes it; the server that holds the data runs throughout and no key is lost.
func TestReplicationToggle(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "toggle", 0.1)
	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("live"), DatasetSizeInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-live"), DataPersistence: client.Ptr("none")})
	require.False(t, db.Replication, "replication is off unless asked for")
	root := filepath.Join(s.dir, "databases")
	r := redisOf(t, db)
	pids := nodePids(t, root, db.ID)
	require.Len(t, pids, 1, "one node without replication: %v", pids)
	require.Len(t, pids[0], 1)
	server := pids[0][0]
	require.Equal(t, server, servingPid(t, ctx, r))
	const keys = 1000
	pipe := r.Pipeline()
	for i := range keys {
		pipe.Set(ctx, "k"+strconv.Itoa(i), i, 0)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
	acked, err := r.Wait(ctx, 1, 100*time.Millisecond).Result()
	require.NoError(t, err)
	require.Zero(t, acked, "no replica acknowledges before replication is on")

	s.updateDatabase(ctx, subID, db.ID, client.UpdateDatabase{Replication: client.Ptr(true)})
	primary, replica := requireReplicated(t, ctx, root, db.ID, r)
	require.Equal(t, server, primary.pid, "the server with the data keeps running")
	require.Equal(t, 1, replica.node)
	got, err := s.c.GetDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	require.True(t, got.Replication)
	writeAcked(t, ctx, r, "repl", 10)
	requireKeys(t, ctx, r, "k", keys)

	s.updateDatabase(ctx, subID, db.ID, client.UpdateDatabase{Replication: client.Ptr(false)})
	eventually(t, 5*time.Second, "the replica's process is gone", func() bool { return len(nodePids(t, root, db.ID)[1]) == 0 })
	require.False(t, processAlive(replica.pid), "the replica's process (pid %d) is gone", replica.pid)
	require.Equal(t, map[int][]int{0: {server}}, nodePids(t, root, db.ID), "the server with the data keeps running alone")
	_, err = os.Stat(filepath.Join(root, strconv.Itoa(db.ID), replicaNodeDir))
	require.True(t, errors.Is(err, os.ErrNotExist), "the replica's directory is removed: %v", err)
	got, err = s.c.GetDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	require.False(t, got.Replication)
	require.Equal(t, server, servingPid(t, ctx, r))
	requireKeys(t, ctx, r, "k", keys)
	requireKeys(t, ctx, r, "repl", 10)
	n, err := r.DBSize(ctx).Result()
	require.NoError(t, err)
	require.EqualValues(t, keys+10, n)
	acked, err = r.Wait(ctx, 1, 100*time.Millisecond).Result()
	require.NoError(t, err)
	require.Zero(t, acked, "no replica acknowledges after replication is off")
}

// updateDatabase sends a PUT and waits for its task and for the database to be active
// again.
func (s *service) updateDatabase(ctx context.Context, subID, dbID int, body client.UpdateDatabase) {
	s.t.Helper()
	task, err := s.c.UpdateDatabase(ctx, subID, dbID, body)
	require.NoError(s.t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	require.NoError(s.t, err)
	_, err = s.c.WaitForDatabaseStatus(ctx, subID, dbID, "active")
	require.NoError(s.t, err)
}

// watchStatus polls the database's status through the API every 20ms until the returned
// function is called; that returns how many times each status was seen. It fails the
// test if it saw fewer than 5 answers (a watch that saw nothing proves nothing).
func (s *service) watchStatus(subID, dbID int) func() map[string]int {
	t := s.t
	ctx, cancel := context.WithCancel(context.Background())
	seen := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			db, err := s.c.GetDatabase(ctx, subID, dbID)
			mu.Lock()
			switch {
			case err == nil:
				seen[db.Status]++
			case ctx.Err() == nil:
				seen["error: "+err.Error()]++
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	stop := func() map[string]int {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
	t.Cleanup(func() { stop() })
	return func() map[string]int {
		got := stop()
		total := 0
		for _, n := range got {
			total += n
		}
		require.Positive(t, total, "the status watch got no answer")
		return got
	}
}

// writeAcked writes n keys prefix<i> = i, each acknowledged by the replica (WAIT 1)
// before the next is written.
func writeAcked(t *testing.T, ctx context.Context, r *redis.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		var wait *redis.Cmd
		_, err := r.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, prefix+strconv.Itoa(i), i, 0)
			wait = p.Do(ctx, "wait", 1, 2000)
			return nil
		})
		require.NoError(t, err, "SET %s%d", prefix, i)
		acked, err := wait.Int()
		require.NoError(t, err)
		require.Equal(t, 1, acked, "WAIT 1 after %s%d: the replica acknowledges", prefix, i)
	}
}

// requireKeys checks that the n keys writeAcked wrote are there, with their values.
func requireKeys(t *testing.T, ctx context.Context, r *redis.Client, prefix string, n int) {
	t.Helper()
	pipe := r.Pipeline()
	gets := make([]*redis.StringCmd, n)
	for i := range n {
		gets[i] = pipe.Get(ctx, prefix+strconv.Itoa(i))
	}
	_, err := pipe.Exec(ctx)
	missing := 0
	for i, g := range gets {
		if g.Err() != nil || g.Val() != strconv.Itoa(i) {
			missing++
		}
	}
	require.Zero(t, missing, "%d of the %d keys %s<i> lost or changed (first error: %v)", missing, n, prefix, err)
}

// servingPid is the pid of the server that answers on the client's endpoint.
func servingPid(t *testing.T, ctx context.Context, r *redis.Client) int {
	t.Helper()
	info, err := r.Info(ctx, "server").Result()
	require.NoError(t, err)
	pid, err := strconv.Atoi(infoValue(info, "process_id"))
	require.NoError(t, err)
	return pid
}

// untilWritable polls the database's public endpoint with a SET on a fresh connection
// every 2ms until a server other than the dead one answers it (the answer carries the
// answering server's pid); it returns how long that took.
func untilWritable(t *testing.T, db *client.Database, dead int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	r := redis.NewClient(&redis.Options{Addr: db.PublicEndpoint, Password: db.Security.Password, MaxRetries: -1, PoolSize: 1,
		DialTimeout: 100 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	defer r.Close()
	var last error
	for i := 0; time.Since(start) < within; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		var info *redis.StringCmd
		_, err := r.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "failover-probe", i, 0)
			info = p.Info(ctx, "server")
			return nil
		})
		cancel()
		if err == nil && infoValue(info.Val(), "process_id") != strconv.Itoa(dead) {
			return time.Since(start)
		}
		last = err
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("the endpoint %s took no write within %s of the kill: %v", db.PublicEndpoint, within, last)
	return 0
}

// nodeServer is a node's index and the pid of its server.
type nodeServer struct{ node, pid int }

// nodePids lists the redis-server processes of each node of the database, by the
// directory they run in.
func nodePids(t *testing.T, root string, id int) map[int][]int {
	t.Helper()
	procs, err := redisProcesses(root)
	require.NoError(t, err)
	byNode, strays := serversByNode(root, procs)
	require.Empty(t, strays)
	out := map[int][]int{}
	for k, pids := range byNode {
		if k.db == id {
			out[k.node] = pids
		}
	}
	return out
}

// requireReplicated waits (up to 5s) until the database runs as a replicated one: one
// server on each node, the topology file's primary answering on the endpoint with one
// replica online (in sync), and returns the primary and the replica.
func requireReplicated(t *testing.T, ctx context.Context, root string, id int, r *redis.Client) (nodeServer, nodeServer) {
	t.Helper()
	var pids map[int][]int
	var repl string
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids = nodePids(t, root, id)
		info, err := r.Info(ctx, "replication").Result()
		if err == nil {
			repl = info
		}
		if len(pids[0]) == 1 && len(pids[1]) == 1 && infoValue(repl, "connected_slaves") == "1" &&
			strings.Contains(infoValue(repl, "slave0"), "state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("database %d: not replicated within 5s: servers by node %v; INFO replication:\n%s", id, pids, repl)
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, "master", infoValue(repl, "role"))
	p := primaryNode(t, root, id)
	primary := nodeServer{p, pids[p][0]}
	require.Equal(t, primary.pid, servingPid(t, ctx, r), "the topology file's primary serves the endpoint")
	return primary, nodeServer{1 - p, pids[1-p][0]}
}

// processAlive reports whether pid is a live process (not gone, not a zombie).
func processAlive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ..."
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// TestReplicationOffRemovesAnUnfinishedReplicaDir: a crash of clouddb between the making
// of a replica's directory and the writing of its redis.conf (Ensure makes node1/ first)
// leaves an empty node1/ directory. Once the database has no replication, the driver
// removes its replica's node, files and directory; an unfinished one must go too, as the
// crash loop checks (it found this left behind).
func TestReplicationOffRemovesAnUnfinishedReplicaDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ports := portRange()
	s := startService(t, dir, options{ports: ports})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "unfinished", 0.1)
	db := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("single"), DatasetSizeInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-single")})
	s.stop()
	node1 := filepath.Join(dir, "databases", strconv.Itoa(db.ID), replicaNodeDir)
	require.NoError(t, os.Mkdir(node1, 0o700)) // as the crash left it

	s2 := startService(t, dir, options{ports: ports})
	_, err := s2.c.WaitForDatabaseStatus(ctx, subID, db.ID, "active")
	require.NoError(t, err)
	// An update makes the reconciler ensure the database again.
	s2.updateDatabase(ctx, subID, db.ID, client.UpdateDatabase{DatasetSizeInGB: client.Ptr(0.2)})
	eventually(t, 5*time.Second, "the unfinished replica directory of a database without replication is removed", func() bool {
		_, err := os.Stat(node1)
		return errors.Is(err, os.ErrNotExist)
	})
}
