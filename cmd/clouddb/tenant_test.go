package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// internalUserLine finds the password of clouddb's internal user in a redis.conf.
var internalUserLine = regexp.MustCompile(`(?m)^user "clouddb-internal" .*">([^"]+)"`)

// internalSecretIn is the internal user's password in conf, or "" when it holds none.
func internalSecretIn(conf []byte) string {
	if m := internalUserLine.FindSubmatch(conf); m != nil {
		return string(m[1])
	}
	return ""
}

// internalRedis is a client of a database's server logged in as clouddb's internal user,
// whose password is only in the database's redis.conf under databasesDir: what a test
// needs to read (or tamper with) a server's configuration, which tenants may not.
func internalRedis(t *testing.T, databasesDir string, dbID int, endpoint string) *redis.Client {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(databasesDir, strconv.Itoa(dbID), "redis.conf"))
	require.NoError(t, err)
	secret := internalSecretIn(conf)
	require.NotEmpty(t, secret, "no internal user in the redis.conf of database %d", dbID)
	r := redis.NewClient(&redis.Options{Addr: endpoint, Username: "clouddb-internal", Password: secret,
		MaxRetries: -1, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { r.Close() })
	return r
}

// readmeRefused reads the examples of the README's "What a tenant may do on its database"
// table: the commands a tenant must be refused.
func readmeRefused(t *testing.T) [][]any {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(readme), "### What a tenant may do on its database\n")
	require.True(t, ok)
	sec, _, _ = strings.Cut(sec, "\n### ")
	var out [][]any
	for _, m := range regexp.MustCompile("(?m)^\\|[^|]*\\| `([^`]+)` \\|").FindAllStringSubmatch(sec, -1) {
		var args []any
		for _, w := range strings.Fields(m[1]) {
			args = append(args, w)
		}
		out = append(out, args)
	}
	require.Greater(t, len(out), 30)
	return out
}

// TestTenantCannotAdministerItsDatabase: with its password, a database's tenant is refused
// every command of the README's list, while its data commands work; and clouddb puts back
// settings and rules changed behind its back.
func TestTenantCannotAdministerItsDatabase(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, _ := s.activeSubscription(ctx, "tenant", 0.2)
	dbID := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("mine"), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-tenant")})
	db, err := s.c.WaitForDatabaseStatus(ctx, subID, dbID, "active")
	require.NoError(t, err)
	r := redisOf(t, db)
	require.NoError(t, r.Set(ctx, "k", "v", 0).Err())
	for _, args := range readmeRefused(t) {
		derr := r.Do(ctx, args...).Err()
		require.Error(t, derr, "%v must be refused", args)
		msg := derr.Error()
		require.True(t, strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "command not allowed"), "%v: %s", args, msg)
	}
	require.Equal(t, "v", r.Get(ctx, "k").Val(), "data commands work")
	require.NoError(t, r.HSet(ctx, "h", "f", "v").Err())
	require.NoError(t, r.Eval(ctx, "return redis.call('incr', KEYS[1])", []string{"n"}).Err())
	pid, err := s.m.Driver.Pid(dbID)
	require.NoError(t, err)

	// Drift: clouddb puts back the size and the tenant's rules within ~15 s.
	admin := internalRedis(t, filepath.Join(s.dir, "databases"), dbID, db.PublicEndpoint)
	gb := 0.1
	size := admin.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]
	require.Equal(t, strconv.FormatInt(int64(gb*(1<<30)), 10), size)
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())
	require.NoError(t, admin.Do(ctx, "acl", "setuser", "default", "+@all").Err())
	require.NoError(t, r.ConfigGet(ctx, "maxmemory").Err(), "the tampering took")
	eventually(t, 20*time.Second, "maxmemory and the tenant's rules are put back", func() bool {
		got := admin.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]
		cerr := r.ConfigGet(ctx, "maxmemory").Err()
		return got == size && cerr != nil && strings.HasPrefix(cerr.Error(), "NOPERM")
	})
	after, err := s.m.Driver.Pid(dbID)
	require.NoError(t, err)
	require.Equal(t, pid, after, "put back live, without a restart")
	require.Equal(t, "v", r.Get(ctx, "k").Val())
	got, err := s.c.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, "active", got.Status)
}

// victimAndBystander makes a subscription with two active databases: name, which keeps
// its data on disk (every write to its AOF), and a bystander that must stay untouched.
func (s *service) victimAndBystander(ctx context.Context, name string) (int, *client.Database, *client.Database) {
	s.t.Helper()
	subID, _ := s.activeSubscription(ctx, name, 0.2)
	dbID := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr(name), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-" + name), DataPersistence: client.Ptr("aof-every-write")})
	other := s.createDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("bystander"), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-other")})
	db, err := s.c.WaitForDatabaseStatus(ctx, subID, dbID, "active")
	require.NoError(s.t, err)
	odb, err := s.c.WaitForDatabaseStatus(ctx, subID, other, "active")
	require.NoError(s.t, err)
	return subID, db, odb
}

// TestServerOffItsPortRecovers: a server that no longer listens on its port (as after a
// tenant's CONFIG SET port, when tenants could) is put back on it live, with its data
// (clouddb reaches it through its unix socket meanwhile).
func TestServerOffItsPortRecovers(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, db, odb := s.victimAndBystander(ctx, "moved")
	dbID := db.ID
	r := redisOf(t, db)
	require.NoError(t, r.Set(ctx, "k", "kept", 0).Err())
	pid, err := s.m.Driver.Pid(dbID)
	require.NoError(t, err)

	admin := internalRedis(t, filepath.Join(s.dir, "databases"), dbID, db.PublicEndpoint)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	moved := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	require.NoError(t, admin.ConfigSet(ctx, "port", strconv.Itoa(moved)).Err())

	eventually(t, 45*time.Second, "the server is back on its port", func() bool {
		p, perr := s.m.Driver.Pid(dbID)
		return perr == nil && p == pid && r.Get(ctx, "k").Val() == "kept"
	})
	require.NoError(t, redisOf(t, odb).Ping(ctx).Err(), "the other database is untouched")
	got, err := s.c.GetDatabase(ctx, subID, dbID)
	require.NoError(t, err)
	require.Equal(t, "active", got.Status)
}

// TestTakenPortErrorsThenRecovers: another program takes the port of a server that died;
// the database goes to error naming the port in use, clouddb serves everyone else, and
// once the port is free an update brings the database back with its data.
func TestTakenPortErrorsThenRecovers(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	subID, db, odb := s.victimAndBystander(ctx, "taken")
	dbID := db.ID
	require.NoError(t, redisOf(t, db).Set(ctx, "k", "kept", 0).Err())

	// Kill the server and take its port before the supervisor restarts it; should the
	// supervisor win the race, try again with the server it started.
	restarts := func() int {
		logs, lerr := s.c.Logs(ctx, client.LogQuery{})
		require.NoError(t, lerr)
		n := 0
		for _, e := range logs {
			if e.ResourceID == dbID && strings.Contains(e.Description, "has been brought back") {
				n++
			}
		}
		return n
	}
	var ln net.Listener
	for attempt := 0; ln == nil; attempt++ {
		require.Less(t, attempt, 10, "never took the port before the supervisor")
		if attempt > 0 {
			// Lost the race: let the restart finish before killing again.
			eventually(t, 10*time.Second, "the restart is done", func() bool { return restarts() >= attempt })
		}
		pid, perr := s.m.Driver.Pid(dbID)
		require.NoError(t, perr)
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		for deadline := time.Now().Add(2 * time.Second); ln == nil && time.Now().Before(deadline); {
			if l, lerr := net.Listen("tcp", db.PublicEndpoint); lerr == nil {
				ln = l
			}
		}
		t.Logf("attempt %d: port taken: %v", attempt, ln != nil)
	}
	defer ln.Close()

	got, err := s.c.WaitForDatabaseStatus(ctx, subID, dbID, "error")
	require.NoError(t, err)
	require.Contains(t, got.StatusDetail, strconv.Itoa(portOf(t, db.PublicEndpoint)))
	require.Contains(t, got.StatusDetail, "Address already in use")
	require.NoError(t, redisOf(t, odb).Ping(ctx).Err(), "the other database still serves")
	_, err = s.c.GetDatabase(ctx, subID, odb.ID)
	require.NoError(t, err, "the API still serves")

	require.NoError(t, ln.Close())
	task, err := s.c.UpdateDatabase(ctx, subID, dbID, client.UpdateDatabase{DataEvictionPolicy: client.Ptr("allkeys-lru")})
	require.NoError(t, err)
	done, err := s.c.WaitForTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, "processing-completed", done.Status, "%+v", done.Response)
	back, err := s.c.WaitForDatabaseStatus(ctx, subID, dbID, "active")
	require.NoError(t, err)
	require.Equal(t, "kept", redisOf(t, back).Get(ctx, "k").Val())
}
