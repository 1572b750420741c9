package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
	"clouddb/driver/local"
	"clouddb/internal/redistest"
)

// standInRedis72 writes a stand-in for a redis-server 7.2 binary and returns its path and
// the file each server it starts appends a line to. Only one Redis version (7.0) can be
// installed on the machines these tests run on, so the second version is played by this
// script: it answers --version as Redis 7.2.4 and otherwise records the run and execs the
// real redis-server with its arguments.
func standInRedis72(t *testing.T) (bin string, runs *redistest.StandIn) {
	t.Helper()
	return standInRedis(t, "7.2.4")
}

// standInRedis is standInRedis72 for another version, given in full.
func standInRedis(t *testing.T, full string) (bin string, runs *redistest.StandIn) {
	t.Helper()
	s := redistest.NewStandIn(t, full, "")
	return s.Path, s
}

// TestUpgradeEndToEnd: a service offering Redis 7.0 (default) and 7.2 upgrades a live
// database (persistence none) from 7.0 to 7.2 through the API: its server is restarted by
// the 7.2 binary with all its data, GET reads 7.2, and an unoffered version and a
// downgrade are refused.
func TestUpgradeEndToEnd(t *testing.T) {
	t.Parallel()
	bin, runs := standInRedis72(t)
	s := startService(t, t.TempDir(), options{redisServers: []string{"redis-server", bin}})
	ctx := testContext(t)

	versions, err := s.c.RedisVersions(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []client.RedisVersion{{Version: "7.0", IsDefault: true}, {Version: "7.2"}}, versions)

	subID, db := s.activeSubscription(ctx, "upg", 0.1)
	require.Equal(t, "7.0", db.RedisVersion)
	require.Equal(t, "none", db.DataPersistence)
	require.Zero(t, runs.Runs(t), "7.0 runs the real binary")
	r := redisOf(t, db)
	require.NoError(t, r.Set(ctx, "greeting", "hello", 0).Err())
	for range 7 {
		require.NoError(t, r.Incr(ctx, "hits").Err())
	}
	require.NoError(t, r.RPush(ctx, "queue", "a", "b").Err())
	admin := internalRedis(t, filepath.Join(s.dir, "databases"), db.ID, db.PublicEndpoint)
	runIDBefore := infoValue(admin.Info(ctx, "server").Val(), "run_id")
	require.NotEmpty(t, runIDBefore)
	pidBefore, err := s.m.Driver.Pid(db.ID)
	require.NoError(t, err)

	targets, err := s.c.AvailableTargetVersions(ctx, subID, db.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"7.2"}, targets)

	tk, err := s.c.UpgradeDatabase(ctx, subID, db.ID, client.Upgrade{TargetRedisVersion: client.Ptr("7.2")})
	require.NoError(t, err)
	require.Equal(t, "databaseUpgradeRequest", tk.CommandType)
	done, err := s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	require.NotNil(t, done.Response)
	require.Nil(t, done.Response.ResourceID)
	got, err := s.c.WaitForDatabaseStatus(ctx, subID, db.ID, "active")
	require.NoError(t, err)
	require.Equal(t, "7.2", got.RedisVersion)
	require.Equal(t, "7.2.4", got.RedisVersionCompliance)
	require.Equal(t, db.PublicEndpoint, got.PublicEndpoint, "same port")
	require.Equal(t, 1, runs.Runs(t), "the server was started by the 7.2 binary, once")
	pidAfter, err := s.m.Driver.Pid(db.ID)
	require.NoError(t, err)
	require.NotEqual(t, pidBefore, pidAfter)
	admin = internalRedis(t, filepath.Join(s.dir, "databases"), db.ID, got.PublicEndpoint)
	runIDAfter := infoValue(admin.Info(ctx, "server").Val(), "run_id")
	require.NotEmpty(t, runIDAfter)
	require.NotEqual(t, runIDBefore, runIDAfter, "a new server runs")

	r = redisOf(t, got)
	require.Equal(t, "hello", r.Get(ctx, "greeting").Val(), "data survives the upgrade, even with persistence none")
	require.Equal(t, "7", r.Get(ctx, "hits").Val(), "no write lost or applied twice")
	require.Equal(t, []string{"a", "b"}, r.LRange(ctx, "queue", 0, -1).Val())
	require.Equal(t, int64(3), r.DBSize(ctx).Val())
	st, err := s.c.GetUpgradeStatus(ctx, subID, db.ID)
	require.NoError(t, err)
	require.Equal(t, client.UpgradeStatus{DatabaseID: db.ID, TargetRedisVersion: "7.2", Progress: 100, UpgradeStatus: "done"}, *st)

	for target, why := range map[string]string{"7.4": `targetRedisVersion "7.4" is not offered`, "7.0": "there is no downgrade"} {
		tk, submitErr := s.c.UpgradeDatabase(ctx, subID, db.ID, client.Upgrade{TargetRedisVersion: client.Ptr(target)})
		require.NoError(t, submitErr)
		_, waitErr := s.c.WaitForTask(ctx, tk.ID)
		var cerr *client.Error
		require.ErrorAs(t, waitErr, &cerr, target)
		require.Equal(t, "DATABASE_UPGRADE_INVALID_REDIS_VERSION", cerr.Type)
		require.Contains(t, cerr.Description, why)
	}
	again, err := s.c.GetDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	require.Equal(t, "7.2", again.RedisVersion)
	require.Equal(t, "active", again.Status)
	require.Equal(t, 1, runs.Runs(t), "a refused upgrade restarts nothing")

	// A database created at 7.2 runs the 7.2 binary from the start.
	newer := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("newer"), MemoryLimitInGB: client.Ptr(0.1), Password: client.Ptr("pw-newer"),
		RedisVersion: client.Ptr("7.2")})
	require.Equal(t, "7.2", newer.RedisVersion)
	require.Equal(t, 2, runs.Runs(t))
	require.NoError(t, redisOf(t, newer).Ping(ctx).Err())
}

// TestRedisServerFlag: --redis-server repeats, has its environment twin, and the start
// fails, naming the flag, on a binary that does not run or does not answer like
// redis-server, and on two binaries of one version.
func TestRedisServerFlag(t *testing.T) {
	bin, _ := standInRedis72(t)
	m := NewMain(os.Stdout, os.Stderr)
	require.NoError(t, m.ParseFlags([]string{"--redis-server", "redis-server", "--redis-server", bin}))
	require.Equal(t, []string{"redis-server", bin}, m.Config.RedisServers)
	t.Setenv("CLOUDDB_REDIS_SERVER", bin)
	m = NewMain(os.Stdout, os.Stderr)
	require.NoError(t, m.ParseFlags(nil))
	require.Equal(t, []string{bin}, m.Config.RedisServers)

	real, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	old, oldRuns := standInRedis(t, "6.2.14")
	t.Cleanup(func() { require.Zero(t, oldRuns.Runs(t), "Redis 6.2 never ran") })
	notRedis := filepath.Join(t.TempDir(), "not-redis")
	require.NoError(t, os.WriteFile(notRedis, []byte("#!/bin/sh\necho hello\n"), 0o755))
	for _, tc := range []struct {
		servers []string
		want    string
	}{
		{[]string{"no-such-redis-server-binary"}, "--redis-server no-such-redis-server-binary: redis-server not found"},
		{[]string{"redis-server", notRedis}, "--redis-server " + notRedis + ": " + notRedis + ` --version answered "hello", not a redis-server version`},
		{[]string{"redis-server", "false"}, "--redis-server false: false --version: exit status 1"},
		{[]string{bin, "redis-server", real}, "--redis-server redis-server and " + real + " are both Redis 7.0: give one binary per major.minor version"},
		{[]string{"redis-server", old}, "--redis-server " + old + ": " + old + " is Redis 6.2.14; clouddb needs Redis 7.0 or newer"},
	} {
		dir := t.TempDir()
		m := NewMain(&strings.Builder{}, &strings.Builder{})
		m.Config.DataDir, m.Config.Listen, m.Config.BrowserListen, m.Config.RedisServers = dir, "127.0.0.1:0", "", tc.servers
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := m.Run(ctx)
		cancel()
		require.ErrorContains(t, err, tc.want)
		_, statErr := os.Stat(filepath.Join(dir, "clouddb.db"))
		require.True(t, os.IsNotExist(statErr), "nothing was opened")
	}
}

// settledVersion waits until the database reads back as active on the version, as it
// does once the service, started, has made its stored version the one that serves it.
func (s *service) settledVersion(ctx context.Context, subID, id int, version string) *client.Database {
	s.t.Helper()
	var got *client.Database
	eventually(s.t, 30*time.Second, fmt.Sprintf("database %d active on Redis %s", id, version), func() bool {
		var err error
		got, err = s.c.GetDatabase(ctx, subID, id)
		require.NoError(s.t, err)
		return got.Status == "active" && got.RedisVersion == version
	})
	return got
}

// editDatabase changes a database's row in the store of a stopped service.
func editDatabase(t *testing.T, c Config, id int, edit func(*clouddb.Database)) *clouddb.Database {
	t.Helper()
	ctx := testContext(t)
	store, _, err := openState(ctx, c, nil)
	require.NoError(t, err)
	defer store.Close()
	var d *clouddb.Database
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		var txErr error
		if d, txErr = tx.Database(ctx, 0, id); txErr != nil {
			return txErr
		}
		edit(d)
		return tx.UpdateDatabase(ctx, d)
	}))
	return d
}

// TestLegacyRedisVersions: databases made by a clouddb that stored redisVersion as free
// text ("7.4", none) and ran the one redis-server it had keep the Redis that serves their
// data when a clouddb offering versions starts on them, whatever it offers and in what
// order: they come up active, read back that version (an offered one), and upgrade from
// there.
func TestLegacyRedisVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ports := portRange()
	databases := filepath.Join(dir, "databases")
	ctx := testContext(t)
	s := startService(t, dir, options{ports: ports})
	subID, first := s.activeSubscription(ctx, "legacy", 0.1)
	stopped := s.addDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("stopped"), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("pw-stopped"), DataPersistence: client.Ptr("aof-every-1-second")})
	require.NoError(t, redisOf(t, stopped).Set(ctx, "k", "kept", 0).Err())
	s.stop()
	cfg := s.m.Config
	// As an older clouddb left it: "7.4" stored though Redis 7.0 ran it, no version file.
	editDatabase(t, cfg, stopped.ID, func(d *clouddb.Database) { d.Spec.RedisVersion = "7.4" })
	require.NoError(t, os.Remove(filepath.Join(databases, strconv.Itoa(stopped.ID), "redis.version")))

	// A host that has Redis 7.0 alone.
	s = startService(t, dir, options{ports: ports, redisServers: []string{"redis-server"}})
	got := s.settledVersion(ctx, subID, stopped.ID, "7.0")
	require.True(t, strings.HasPrefix(got.RedisVersionCompliance, "7.0."), got.RedisVersionCompliance)
	require.Equal(t, "kept", redisOf(t, got).Get(ctx, "k").Val())
	s.stop()

	// A server still running, with no version stored, as an older clouddb left it after
	// a crash.
	row := editDatabase(t, cfg, first.ID, func(d *clouddb.Database) { d.Spec.RedisVersion = "" })
	older, err := local.New(local.Config{Dir: databases, Host: "127.0.0.1"})
	require.NoError(t, err)
	require.NoError(t, older.Ensure(ctx, clouddb.InstanceOf(row)))
	require.NoError(t, os.Remove(filepath.Join(databases, strconv.Itoa(first.ID), "redis.version")))
	livePid, err := older.Pid(first.ID)
	require.NoError(t, err)
	require.NoError(t, redisOf(t, first).Set(ctx, "k", "live", 0).Err())

	// Now 7.2 comes first: the default of new databases, not of these.
	bin, runs := standInRedis72(t)
	s = startService(t, dir, options{ports: ports, redisServers: []string{bin, "redis-server"}})
	for _, id := range []int{first.ID, stopped.ID} {
		s.settledVersion(ctx, subID, id, "7.0")
		targets, terr := s.c.AvailableTargetVersions(ctx, subID, id)
		require.NoError(t, terr)
		require.Equal(t, []string{"7.2"}, targets)
	}
	pidNow, err := s.m.Driver.Pid(first.ID)
	require.NoError(t, err)
	require.Equal(t, livePid, pidNow, "adopted as it runs")
	require.Equal(t, "live", redisOf(t, first).Get(ctx, "k").Val())
	require.Zero(t, runs.Runs(t), "nothing moved to 7.2")

	tk, err := s.c.UpgradeDatabase(ctx, subID, stopped.ID, client.Upgrade{TargetRedisVersion: client.Ptr("7.2")})
	require.NoError(t, err)
	_, err = s.c.WaitForTask(ctx, tk.ID)
	require.NoError(t, err)
	got, err = s.c.WaitForDatabaseStatus(ctx, subID, stopped.ID, "active")
	require.NoError(t, err)
	require.Equal(t, "7.2", got.RedisVersion)
	require.Equal(t, 1, runs.Runs(t))
	require.Equal(t, "kept", redisOf(t, got).Get(ctx, "k").Val())
	st, err := s.c.GetUpgradeStatus(ctx, subID, stopped.ID)
	require.NoError(t, err)
	require.Equal(t, client.UpgradeStatus{DatabaseID: stopped.ID, TargetRedisVersion: "7.2", Progress: 100, UpgradeStatus: "done"}, *st)

	// The reconciler has been over the other one meanwhile: it runs on, as it was.
	got, err = s.c.GetDatabase(ctx, subID, first.ID)
	require.NoError(t, err)
	require.Equal(t, "active", got.Status, got.StatusDetail)
	require.Equal(t, "7.0", got.RedisVersion)
	pidNow, err = s.m.Driver.Pid(first.ID)
	require.NoError(t, err)
	require.Equal(t, livePid, pidNow)
	require.Equal(t, "live", redisOf(t, first).Get(ctx, "k").Val())
}
