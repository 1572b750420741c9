package main

import (
	"context"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
	"clouddb/internal/pgtest"
	"clouddb/postgres"
)

// TestPostgresStore: the README walk-through with --store postgres://: a subscription
// with a database that a Redis client reaches, and everything still there after a restart.
func TestPostgresStore(t *testing.T) {
	t.Parallel()
	dir, pg, key := t.TempDir(), pgtest.URL(t), clouddb.NewKey()
	s := startService(t, dir, options{store: pg, key: key})
	ctx := testContext(t)
	require.Eventually(t, s.m.Leading, 15*time.Second, 20*time.Millisecond, "a lone replica takes the workers' lock")
	sub, db := s.activeSubscription(ctx, "pg", 0.1)
	require.NoError(t, redisOf(t, db).Set(ctx, "k", "v", 0).Err())
	s.stop()

	s = startService(t, dir, options{store: pg, key: key})
	got, err := s.c.WaitForDatabaseStatus(ctx, sub, db.ID, "active")
	require.NoError(t, err)
	require.Equal(t, db.PublicEndpoint, got.PublicEndpoint)
	require.Eventually(t, func() bool { return redisOf(t, got).Ping(ctx).Err() == nil }, 10*time.Second, 50*time.Millisecond)
}

// TestPostgresReplicas: replicas that share a Postgres store and a data dir. Every replica
// serves the API and sees the others' writes at once; one at a time runs the workers and
// the databases. When the store connections break, the next holder of the lock adopts
// the running servers (same pids, no duplicates); a standby that stops leaves the databases
// alone; a leader that stops gracefully hands over, and the next one brings the databases
// back with their data.
func TestPostgresReplicas(t *testing.T) {
	t.Parallel()
	dir, pg, key := t.TempDir(), pgtest.URL(t), clouddb.NewKey()
	ctx := testContext(t)
	o := options{store: pg, key: key}
	a := startService(t, dir, o)
	require.Eventually(t, a.m.Leading, 15*time.Second, 20*time.Millisecond)
	b := startService(t, dir, o)
	require.Never(t, b.m.Leading, 300*time.Millisecond, 20*time.Millisecond, "one replica runs the workers")

	// Requests to the standby: its tasks are processed by the leader, woken through the
	// store, and its read cache follows the leader's writes.
	submitted := time.Now()
	sub, _ := b.activeSubscription(ctx, "replicas", 0.2)
	db := b.addDatabase(ctx, sub, client.CreateDatabase{Name: client.Ptr("kept"), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-kept"), DataPersistence: client.Ptr("aof-every-write")})
	t.Logf("two creates through the standby took %s", time.Since(submitted).Round(time.Millisecond))
	r := redisOf(t, db)
	require.NoError(t, r.Set(ctx, "k", "v1", 0).Err())
	pid, err := a.m.Driver.Pid(db.ID)
	require.NoError(t, err)

	// Every store connection breaks (a Postgres restart, a network cut): the leader stops
	// working at once; whichever replica takes the lock next adopts the server as it
	// runs.
	killBackends(t, pg)
	// Past the loss window the old holder knows it lost the lock; from then on a
	// replica that leads holds it.
	time.Sleep(a.m.Store.(*postgres.DB).LossWindow())
	var holder, standby *service
	require.Eventually(t, func() bool {
		require.False(t, a.m.Leading() && b.m.Leading(), "two replicas run the workers at once")
		switch {
		case a.m.Leading():
			holder, standby = a, b
		case b.m.Leading():
			holder, standby = b, a
		default:
			return false
		}
		p, pidErr := holder.m.Driver.Pid(db.ID)
		return pidErr == nil && p == pid
	}, 15*time.Second, 20*time.Millisecond, "a replica leads again and adopts the running server, not starting it again")
	dbs, err := b.c.AllDatabases(ctx, sub)
	require.NoError(t, err)
	require.Len(t, serversIn(dir), len(dbs), "one server per database: none started twice")
	require.Equal(t, "v1", r.Get(ctx, "k").Val())

	// The standby stops: the databases keep running.
	standby.stop()
	require.NoError(t, r.Ping(ctx).Err())
	p, err := holder.m.Driver.Pid(db.ID)
	require.NoError(t, err)
	require.Equal(t, pid, p, "a standby that stops leaves the servers alone")
	require.NoError(t, r.Set(ctx, "k", "v2", 0).Err())

	// A graceful stop of the leader hands over to the next replica, which brings the
	// databases back with their data.
	c := startService(t, dir, o)
	require.Never(t, c.m.Leading, 300*time.Millisecond, 20*time.Millisecond)
	holder.stop()
	require.Eventually(t, c.m.Leading, 15*time.Second, 20*time.Millisecond, "the standby takes over")
	require.Eventually(t, func() bool { return r.Get(ctx, "k").Val() == "v2" }, 15*time.Second, 50*time.Millisecond, "the data is back")
	more := c.addDatabase(ctx, sub, client.CreateDatabase{Name: client.Ptr("after"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-after")})
	require.NoError(t, redisOf(t, more).Ping(ctx).Err())
}

// killBackends ends every connection to the test database, as a Postgres restart would.
func killBackends(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n))
	require.Positive(t, n)
}

// TestAdminPostgres: `clouddb admin --store postgres://…` works on the shared store while
// a replica serves it, with the key from CLOUDDB_ENCRYPTION_KEY; without the key it says
// what is missing.
func TestAdminPostgres(t *testing.T) {
	dir, pg, key := t.TempDir(), pgtest.URL(t), clouddb.NewKey()
	s := startService(t, dir, options{store: pg, key: key})
	ctx := testContext(t)
	admin := func(args ...string) (string, error) {
		var out, errOut strings.Builder
		err := run(ctx, append([]string{"admin"}, append(args, "--data-dir", t.TempDir(), "--store", pg)...), &out, &errOut)
		return out.String(), err
	}

	t.Setenv(envKey, "") // restored when the test ends
	os.Unsetenv(envKey)
	_, err := admin("accounts", "create", "--name", "nokey")
	require.ErrorContains(t, err, "a shared store needs the same encryption key")
	t.Setenv(envKey, " ")
	_, err = admin("accounts", "create", "--name", "emptykey")
	require.ErrorContains(t, err, "is set but empty")

	t.Setenv(envKey, key)
	out, err := admin("accounts", "create", "--name", "team-pg", "--plan", "flexible")
	require.NoError(t, err)
	var id int
	_, err = fmt.Sscanf(out, "account %d created", &id)
	require.NoError(t, err, out)
	out, err = admin("keys", "create", "--account", fmt.Sprint(id))
	require.NoError(t, err)
	m := regexp.MustCompile(`x-api-key: (\S+)\nx-api-secret-key: (\S+)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	acct, err := client.New("http://"+s.m.Addr+"/v1", m[1], m[2], client.WithHTTPClient(cloudAPIClient(t))).GetAccount(ctx)
	require.NoError(t, err, "the serving replica authenticates a key made by admin")
	require.Equal(t, id, acct.ID)
}

// TestPostgresOutage: while the store's database takes no connections, writes answer 503
// SERVICE_UNAVAILABLE with a JSON error and the service keeps running; once it is back,
// the replica takes the workers' lock again and work goes on.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	dir, pg, key := t.TempDir(), pgtest.URL(t), clouddb.NewKey()
	s := startService(t, dir, options{store: pg, key: key})
	ctx := testContext(t)
	require.Eventually(t, s.m.Leading, 10*time.Second, 20*time.Millisecond)
	pm := s.paymentMethod(ctx)

	setConnections(t, pg, false)
	_, err := s.c.CreateSubscription(ctx, subscriptionBody(pm, "during", planDB("during-db", 0.1)))
	var cerr *client.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, 503, cerr.StatusCode)
	require.Equal(t, "SERVICE_UNAVAILABLE", cerr.Type)
	require.Eventually(t, func() bool { return !s.m.Leading() }, 10*time.Second, 20*time.Millisecond,
		"the replica stops working when its lock's connection is gone")

	setConnections(t, pg, true)
	require.Eventually(t, s.m.Leading, 20*time.Second, 50*time.Millisecond, "it takes the lock again")
	_, db := s.activeSubscription(ctx, "after", 0.1)
	require.NoError(t, redisOf(t, db).Ping(ctx).Err())
}

// setConnections lets the database named by url take connections or not; switching them
// off also ends the open ones, as a server restart would.
func setConnections(t *testing.T, url string, allow bool) {
	t.Helper()
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s ALLOW_CONNECTIONS %t`, pgx.Identifier{name}.Sanitize(), allow))
	require.NoError(t, err)
	if !allow {
		_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name)
		require.NoError(t, err)
	}
}

// TestPostgresKeyMismatch: a replica given another encryption key than the one the shared
// store's secrets are sealed with refuses to start, even before any secret is stored.
func TestPostgresKeyMismatch(t *testing.T) {
	t.Parallel()
	dir, pg := t.TempDir(), pgtest.URL(t)
	startService(t, dir, options{store: pg, key: clouddb.NewKey()})
	m := NewMain(io.Discard, io.Discard)
	m.Config = Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", BrowserListen: "", AdvertiseHost: "127.0.0.1", DBPorts: portRange(),
		TaskLease: time.Second, LogLevel: "info", Store: pg, EncryptionKey: clouddb.NewKey()}
	require.NoError(t, m.Config.Validate())
	err := m.Run(testContext(t))
	require.ErrorContains(t, err, "the encryption key does not open the secrets in the store")
}
