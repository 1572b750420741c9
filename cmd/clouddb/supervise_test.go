package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
	"clouddb/driver/local"
)

// TestSupervisorRestartsDeadServer: a redis-server killed while clouddb runs is back on
// its port within 2 seconds with the data its persistence keeps, and the event is in
// GET /logs.
func TestSupervisorRestartsDeadServer(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "sup", 0.1)
	dbID := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("victim"), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-victim"), DataPersistence: client.Ptr("aof-every-write")})
	db, err := s.c.WaitForDatabaseStatus(ctx, subID, dbID, "active")
	require.NoError(t, err)
	r := redisOf(t, db)
	require.NoError(t, r.Set(ctx, "survives", "yes", 0).Err())

	pid, err := s.m.Driver.Pid(dbID)
	require.NoError(t, err)
	killed := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	eventually(t, 2*time.Second, "the server answers again within 2s", func() bool {
		newPid, err := s.m.Driver.Pid(dbID)
		return err == nil && newPid != pid && r.Ping(ctx).Err() == nil
	})
	t.Logf("back after %s", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, "yes", r.Get(ctx, "survives").Val(), "AOF data is kept")
	eventually(t, 5*time.Second, "the restart is in the system log", func() bool {
		logs, err := s.c.Logs(ctx, client.LogQuery{})
		require.NoError(t, err)
		for _, e := range logs {
			if e.ResourceID == dbID && strings.Contains(e.Description, "has been brought back") {
				return true
			}
		}
		return false
	})
}

// TestOrphanServerRemoved: a server and data that no database row wants (a crash between
// a row's deletion and its server's removal leaves such) are removed. The stray server is
// made before clouddb starts, as a crash leaves it: made while clouddb runs, a sweep could
// remove it half-configured.
func TestOrphanServerRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := testContext(t)
	stray, err := local.New(local.Config{Dir: filepath.Join(dir, "databases"), Host: "127.0.0.1"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	require.NoError(t, stray.Ensure(ctx, clouddb.Instance{DatabaseID: 4242, Port: port, Password: "orphan", MaxMemoryBytes: 1 << 20,
		EvictionPolicy: "noeviction", DataPersistence: "none"}), "the stray server answered")
	require.True(t, listening(port))

	startService(t, dir, options{})
	eventually(t, 10*time.Second, "orphan removed", func() bool {
		_, err := os.Stat(filepath.Join(dir, "databases", "4242"))
		return os.IsNotExist(err) && !listening(port)
	})
}

// TestPortRules: a port of the range another program holds is skipped; when the range is
// used up, a create fails its task with the cause and the service keeps answering.
func TestPortRules(t *testing.T) {
	t.Parallel()
	ports := portRange()
	low, _, err := parsePorts(ports)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", low)) // another program
	require.NoError(t, err)
	defer ln.Close()

	s := startService(t, t.TempDir(), options{ports: fmt.Sprintf("%d-%d", low, low+2)})
	ctx := testContext(t)
	subID, db := s.activeSubscription(ctx, "ports", 0.1)
	require.Equal(t, low+1, portOf(t, db.PublicEndpoint), "the held port is skipped")
	second := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("two"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})
	got, err := s.c.GetDatabase(ctx, subID, second)
	require.NoError(t, err)
	require.Equal(t, low+2, portOf(t, got.PublicEndpoint))

	task, err := s.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("three"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, task.ID)
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "NO_FREE_PORT", cerr.Type)
	require.Contains(t, cerr.Description, strconv.Itoa(low))
	_, err = s.c.GetSubscription(ctx, subID)
	require.NoError(t, err, "the service keeps answering")
}

func parsePorts(s string) (int, int, error) {
	var l, h int
	_, err := fmt.Sscanf(s, "%d-%d", &l, &h)
	return l, h, err
}

// TestMemoryBudget: the databases' memory limits together must fit --db-memory: a create
// or a size increase past it fails its task with the cause and changes nothing, and a
// delete makes room again.
func TestMemoryBudget(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{dbMemory: "256MiB"})
	ctx := testContext(t)
	subID, first := s.activeSubscription(ctx, "mem", 0.1) // 102.4 MiB
	second := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("second"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})

	requireNoMemory := func(tk *client.Task, err error) {
		t.Helper()
		require.NoError(t, err)
		_, err = s.c.WaitForTask(ctx, tk.ID)
		var cerr *client.Error
		require.ErrorAs(t, err, &cerr)
		require.Equal(t, "INSUFFICIENT_MEMORY", cerr.Type)
		// Each server counts its maxmemory and its own 12 MiB: 2 × 114.4 MiB are taken.
		require.Equal(t, "database: this host keeps 0.25 GB of memory for databases (--db-memory), 0.223 GB of it is taken, and this database needs 0.112 GB", cerr.Description)
	}
	requireNoMemory(s.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("third"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")}))
	dbs, err := s.c.AllDatabases(ctx, subID)
	require.NoError(t, err)
	require.Len(t, dbs, 2, "the refused create made nothing")

	tk, err := s.c.UpdateDatabase(ctx, subID, first.ID, client.UpdateDatabase{MemoryLimitInGB: client.Ptr(0.2)})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "INSUFFICIENT_MEMORY", cerr.Type)
	got, err := s.c.GetDatabase(ctx, subID, first.ID)
	require.NoError(t, err)
	require.Equal(t, 0.1, got.MemoryLimitInGB, "the refused update changed nothing")

	// The same for datasetSizeInGb, the size the real clients send.
	tk, err = s.c.UpdateDatabase(ctx, subID, first.ID, client.UpdateDatabase{DatasetSizeInGB: client.Ptr(0.2)})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "INSUFFICIENT_MEMORY", cerr.Type)
	// And for the databases of a subscription's creation plan: nothing of it is made.
	before, err := s.c.ListSubscriptions(ctx)
	require.NoError(t, err)
	tk, err = s.c.CreateSubscription(ctx, subscriptionBody(s.paymentMethod(ctx), "too-big", planDB("too-big-db", 0.1)))
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "INSUFFICIENT_MEMORY", cerr.Type)
	after, err := s.c.ListSubscriptions(ctx)
	require.NoError(t, err)
	require.Equal(t, len(before.Subscriptions), len(after.Subscriptions), "the refused subscription was not made")

	tk, err = s.c.DeleteDatabase(ctx, subID, second.ID)
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("third"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw")})
}

// TestSecondServiceRefused: a second clouddb on the same SQLite data dir refuses to start
// (its caches would not see the first one's writes, and two supervisors would start
// servers twice); once the first has stopped, it starts and brings the databases back.
func TestSecondServiceRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := startService(t, dir, options{})
	ctx := testContext(t)
	sub, db := a.activeSubscription(ctx, "alone", 0.1)

	m := NewMain(io.Discard, io.Discard)
	m.Config = a.m.Config
	err := m.Run(ctx)
	require.ErrorContains(t, err, "another clouddb serves "+dir)
	require.NoError(t, redisOf(t, db).Ping(ctx).Err(), "the first one's databases are untouched")

	a.stop()
	b := startService(t, dir, options{})
	got, err := b.c.GetDatabase(ctx, sub, db.ID)
	require.NoError(t, err)
	r := redisOf(t, got)
	eventually(t, 15*time.Second, "the database is back", func() bool { return r.Ping(ctx).Err() == nil })
}
