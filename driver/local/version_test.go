package local_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
	"clouddb/internal/redistest"
)

// standInOf is a stand-in for Redis full (see redistest) that runs the real
// redis-server or, when refuse is set, fails as a binary that rejects its config file.
func standInOf(t *testing.T, full string, refuse bool) (bin string, runs *redistest.StandIn) {
	t.Helper()
	run := ""
	if refuse {
		run = fmt.Sprintf("echo '*** FATAL CONFIG FILE ERROR (Redis %s) ***' >&2\nexit 1", full)
	}
	s := redistest.NewStandIn(t, full, run)
	return s.Path, s
}

// standIn is a stand-in for Redis 7.2.4 that runs the real redis-server.
func standIn(t *testing.T) (bin string, runs *redistest.StandIn) {
	t.Helper()
	return standInOf(t, "7.2.4", false)
}

// probed probes the binaries, as clouddb serve does with its --redis-server flags.
func probed(t *testing.T, paths ...string) []local.RedisBinary {
	t.Helper()
	out := make([]local.RedisBinary, 0, len(paths))
	for _, p := range paths {
		b, err := local.ProbeRedisServer(context.Background(), p)
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

// versionedDriver is a driver on dir offering the binaries, the first the default.
func versionedDriver(t *testing.T, dir string, paths ...string) *local.Driver {
	t.Helper()
	d, err := local.New(local.Config{
		Dir:          dir,
		Host:         "127.0.0.1",
		StartTimeout: 10 * time.Second,
		RedisServers: probed(t, paths...),
		Logger:       slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	return d
}

// versionedBundle is a driver offering Redis 7.0 (the real binary, the default) and
// 7.2 (the stand-in).
func versionedBundle(t *testing.T) (b *testBundle, runs *redistest.StandIn) {
	t.Helper()
	bin, runs := standIn(t)
	dir := t.TempDir()
	return &testBundle{dir: dir, driver: versionedDriver(t, dir, "redis-server", bin)}, runs
}

// versionFileOf reads a database's redis.version.
func versionFileOf(t *testing.T, dbDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dbDir, "redis.version"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

func runID(t *testing.T, ctx context.Context, c *redis.Client) string {
	t.Helper()
	info, err := c.Info(ctx, "server").Result()
	require.NoError(t, err)
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	t.Fatal("no run_id in INFO server")
	return ""
}

func TestProbeRedisServer(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	out, err := exec.Command("redis-server", "--version").Output()
	require.NoError(t, err)
	real, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	got, err := local.ProbeRedisServer(ctx, "redis-server")
	require.NoError(t, err)
	require.Contains(t, string(out), "v="+got.Full+" ")
	require.Equal(t, "7.0", got.Version, "the installed redis-server is 7.0")
	require.True(t, strings.HasPrefix(got.Full, "7.0."), got.Full)
	require.Equal(t, real, got.Path, "looked up in PATH once, here")

	bin, runs := standIn(t)
	got, err = local.ProbeRedisServer(ctx, bin)
	require.NoError(t, err)
	require.Equal(t, local.RedisBinary{Path: bin, Version: "7.2", Full: "7.2.4"}, got)
	require.Zero(t, runs.Runs(t), "--version starts no server")

	_, err = local.ProbeRedisServer(ctx, "no-such-redis-server-binary")
	require.ErrorContains(t, err, "not found")
	_, err = local.ProbeRedisServer(ctx, "true")
	require.ErrorContains(t, err, "not a redis-server version")
	_, err = local.ProbeRedisServer(ctx, "false")
	require.ErrorContains(t, err, "false --version")
}

// Redis older than 7.0 lacks what clouddb's ACL rules for tenants use: its binary is
// refused, probed or given.
func TestProbeRedisServer_Minimum(t *testing.T) {
	t.Parallel()
	old, runs := standInOf(t, "6.2.14", false)
	_, err := local.ProbeRedisServer(ctxT(t), old)
	require.EqualError(t, err, old+" is Redis 6.2.14; clouddb needs Redis 7.0 or newer (the ACL rules it gives tenants use -script|debug, %R~ key patterns, selectors off and allchannels)")
	require.Zero(t, runs.Runs(t))
	_, err = local.New(local.Config{Dir: t.TempDir(), RedisServers: []local.RedisBinary{{Path: old, Version: "6.2", Full: "6.2.14"}}})
	require.ErrorContains(t, err, "is Redis 6.2.14; clouddb needs Redis 7.0 or newer")
}

// The binaries given make the versions offered: the first one's is the default, and a
// version has one binary.
func TestNew_RedisServers(t *testing.T) {
	t.Parallel()
	bin, _ := standIn(t)
	real := probed(t, "redis-server")[0]
	d := versionedDriver(t, t.TempDir(), bin, "redis-server")
	require.Equal(t, clouddb.RedisVersions{Default: "7.2", Offered: []string{"7.0", "7.2"}, Full: map[string]string{"7.0": real.Full, "7.2": "7.2.4"}}, d.Versions())
	d = versionedDriver(t, t.TempDir())
	require.Equal(t, clouddb.OneRedisVersion(real.Full), d.Versions(), "none given: redis-server in PATH")

	_, err := local.New(local.Config{Dir: t.TempDir(), RedisServers: []local.RedisBinary{real, {Path: bin, Version: "7.0", Full: "7.0.1"}}})
	require.ErrorContains(t, err, "two binaries of Redis 7.0")
	_, err = local.New(local.Config{Dir: t.TempDir(), RedisServers: []local.RedisBinary{{Path: "no-such-redis-server-binary", Version: "7.0"}}})
	require.ErrorContains(t, err, "the binary of Redis 7.0: redis-server not found")
	_, err = local.New(local.Config{Dir: t.TempDir(), RedisServers: []local.RedisBinary{{Path: bin}}})
	require.ErrorContains(t, err, "is not a probed binary")
}

// A database runs the binary of its version; one without a version runs the default's.
func TestEnsure_VersionChoosesBinary(t *testing.T) {
	t.Parallel()
	b, runs := versionedBundle(t)
	ctx := ctxT(t)

	plain := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctx, plain))
	require.NoError(t, client(t, plain.Port, plain.Password).Ping(ctx).Err())
	require.Zero(t, runs.Runs(t), "no version: the default binary")

	old := b.instance(t, 2, "none")
	old.RedisVersion = "7.0"
	require.NoError(t, b.driver.Ensure(ctx, old))
	require.Zero(t, runs.Runs(t), "7.0: the real binary")

	newer := b.instance(t, 3, "none")
	newer.RedisVersion = "7.2"
	require.NoError(t, b.driver.Ensure(ctx, newer))
	require.NoError(t, client(t, newer.Port, newer.Password).Ping(ctx).Err())
	require.Equal(t, 1, runs.Runs(t), "7.2: the stand-in")

	// Ensured again, it is adopted, not restarted.
	require.NoError(t, b.driver.Ensure(ctx, newer))
	require.Equal(t, 1, runs.Runs(t))
	require.NoError(t, b.driver.Ensure(ctx, plain))
	require.Equal(t, 1, runs.Runs(t))
}

// A stored version that is not offered (free text kept from before clouddb offered
// several) runs the default when nothing ran yet; a database whose data a version that
// is not offered served fails, naming that version and the flag, and starts nothing.
func TestEnsure_VersionNotOffered(t *testing.T) {
	t.Parallel()
	b, runs := versionedBundle(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	in.RedisVersion = "6.2"
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Ping(ctx).Err())
	require.Zero(t, runs.Runs(t), "the default, 7.0")
	require.Equal(t, "7.0", versionFileOf(t, filepath.Join(b.dir, "1")))

	// Its data last served by 7.2, on a clouddb that offers 7.0 alone.
	in.RedisVersion = "7.2"
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, 1, runs.Runs(t))
	require.NoError(t, b.driver.Stop(ctx, 1))
	only70 := versionedDriver(t, b.dir, "redis-server")
	for _, stored := range []string{"7.2", "", "latest"} {
		in.RedisVersion = stored
		err := only70.Ensure(ctx, in)
		require.ErrorContains(t, err, "database 1: its data was last served by Redis 7.2, which is not offered by this clouddb (it has binaries for 7.0): start clouddb with a --redis-server binary of Redis 7.2", stored)
		_, err = only70.Pid(1)
		require.ErrorIs(t, err, os.ErrNotExist, "nothing started")
	}
}

// A database made by a clouddb that kept no version file (its stored redisVersion free
// text, "7.4" or none) keeps the Redis that serves its data, whatever the stored text and
// the order of the binaries: a running server is adopted as it is, its version read from
// the server and recorded; a stopped one starts on the version that wrote its files.
func TestEnsure_LegacyVersionKeepsWhatRuns(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dir := t.TempDir()
	b := &testBundle{dir: dir, driver: versionedDriver(t, dir, "redis-server")}
	live, stopped := b.instance(t, 1, "none"), b.instance(t, 2, "aof-every-1-second")
	for _, in := range []clouddb.Instance{live, stopped} {
		require.NoError(t, b.driver.Ensure(ctx, in))
		require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())
	}
	require.NoError(t, b.driver.Stop(ctx, 2))
	for _, id := range []string{"1", "2"} {
		require.NoError(t, os.Remove(filepath.Join(dir, id, "redis.version")), "as an older clouddb left it")
	}
	livePid := pid(t, b.driver, 1)

	// The new clouddb offers 7.2 first (its default) and 7.0.
	bin, runs := standIn(t)
	b.driver = versionedDriver(t, dir, bin, "redis-server")
	served, err := b.driver.ServedVersion(ctx, live)
	require.NoError(t, err)
	require.Equal(t, "7.0", served, "asked of the running server")
	require.Equal(t, "7.0", versionFileOf(t, filepath.Join(dir, "1")), "and recorded")
	served, err = b.driver.ServedVersion(ctx, stopped)
	require.NoError(t, err)
	require.Equal(t, "7.0", served, "read from the files it wrote")

	for _, stored := range []string{"7.4", "", "latest", "6.0.5"} {
		live.RedisVersion, stopped.RedisVersion = stored, stored
		require.NoError(t, b.driver.Ensure(ctx, live), stored)
		require.Equal(t, livePid, pid(t, b.driver, 1), "adopted, not restarted")
		require.NoError(t, b.driver.Ensure(ctx, stopped), stored)
		require.Zero(t, runs.Runs(t), "%q: neither moved to 7.2", stored)
		for _, in := range []clouddb.Instance{live, stopped} {
			require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
		}
		require.Equal(t, "7.0", versionFileOf(t, filepath.Join(dir, "2")))
	}

	// Once it stores an offered version, an upgrade works from there.
	live.RedisVersion = "7.2"
	require.NoError(t, b.driver.Ensure(ctx, live))
	require.Equal(t, 1, runs.Runs(t))
	require.Equal(t, "v", client(t, live.Port, live.Password).Get(ctx, "k").Val())
	require.Equal(t, "7.2", versionFileOf(t, filepath.Join(dir, "1")))
}

// An upgrade whose new binary does not start (it refuses its config) brings the server
// back on the old binary with its data, whatever its persistence, running or stopped,
// and fails saying so; the version file still names the old version.
func TestEnsure_UpgradeRollsBack(t *testing.T) {
	t.Parallel()
	for i, c := range []struct {
		persistence string
		stopped     bool
	}{{"none", false}, {"aof-every-1-second", false}, {"snapshot-every-1-hour", true}} {
		t.Run(fmt.Sprintf("%s stopped=%v", c.persistence, c.stopped), func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			dir := t.TempDir()
			bad, runs := standInOf(t, "7.2.4", true)
			b := &testBundle{dir: dir, driver: versionedDriver(t, dir, "redis-server", bad)}
			in := b.instance(t, 20+i, c.persistence)
			require.NoError(t, b.driver.Ensure(ctx, in))
			cl := client(t, in.Port, in.Password)
			for j := range 5 {
				require.NoError(t, cl.Set(ctx, fmt.Sprint("key", j), j, 0).Err())
			}
			before := pid(t, b.driver, in.DatabaseID)
			if c.stopped {
				require.NoError(t, b.driver.Stop(ctx, in.DatabaseID))
			}

			in.RedisVersion = "7.2"
			err := b.driver.Ensure(ctx, in)
			require.ErrorContains(t, err, fmt.Sprintf("database %d: upgrade to Redis 7.2 failed: ", in.DatabaseID))
			require.ErrorContains(t, err, "FATAL CONFIG FILE ERROR", "why")
			require.ErrorContains(t, err, "it runs Redis 7.0 again, with its data")
			require.Equal(t, 1, runs.Runs(t), "the new binary was tried once")
			after := pid(t, b.driver, in.DatabaseID)
			require.NotEqual(t, before, after)
			require.True(t, processGone(before))
			cl = client(t, in.Port, in.Password)
			require.Equal(t, int64(5), cl.DBSize(ctx).Val(), "no key lost")
			require.Equal(t, "3", cl.Get(ctx, "key3").Val())
			dbDir := filepath.Join(dir, fmt.Sprint(in.DatabaseID))
			require.Equal(t, "7.0", versionFileOf(t, dbDir))
			_, statErr := os.Stat(filepath.Join(dbDir, "upgrade.pending"))
			require.True(t, os.IsNotExist(statErr), "the saved data is loaded: no mark left")

			// The old version is adopted as it runs.
			in.RedisVersion = "7.0"
			require.NoError(t, b.driver.Ensure(ctx, in))
			require.Equal(t, after, pid(t, b.driver, in.DatabaseID))
		})
	}
}

// The version file names the new version only once its server answers: when the new
// binary does not start and the old one is not offered any more (the operator swapped
// them), the server stays stopped with its data, which a clouddb given the old binary
// again serves on it.
func TestEnsure_UpgradeWithoutOldBinary(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dir := t.TempDir()
	b := &testBundle{dir: dir, driver: versionedDriver(t, dir, "redis-server")}
	in := b.instance(t, 1, "aof-every-1-second")
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())
	require.NoError(t, b.driver.Stop(ctx, 1))

	bad, runs := standInOf(t, "7.2.4", true)
	b.driver = versionedDriver(t, dir, bad)
	err := b.driver.Ensure(ctx, in)
	require.ErrorContains(t, err, "database 1: upgrade to Redis 7.2 failed: ")
	require.ErrorContains(t, err, "the binary of Redis 7.0, which served the data, is not offered: the server stays stopped")
	require.Equal(t, 1, runs.Runs(t))
	require.Equal(t, "7.0", versionFileOf(t, filepath.Join(dir, "1")), "7.2 never served it")

	b.driver = versionedDriver(t, dir, bad, "redis-server")
	require.NoError(t, b.driver.Ensure(ctx, in), "7.0 again, though 7.2 is the default")
	require.Equal(t, 1, runs.Runs(t))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
}

// A replicating database's replicator checks what it loads with the binary of the
// version the database runs: an upgrade restarts it with the new one.
func TestEnsure_UpgradeRestartsReplicator(t *testing.T) {
	t.Parallel()
	b, runs := versionedBundle(t)
	ctx := ctxT(t)
	src, dst := b.instance(t, 1, "none"), b.instance(t, 2, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	s := client(t, src.Port, src.Password)
	require.NoError(t, s.Set(ctx, "a", "1", 0).Err())
	dst.ReplicaOf = []clouddb.RedisEndpoint{{Addr: fmt.Sprintf("127.0.0.1:%d", src.Port), Password: src.Password}}
	require.NoError(t, b.driver.Ensure(ctx, dst))
	c := client(t, dst.Port, dst.Password)
	eventuallyT(t, 10*time.Second, func() bool { return c.Get(ctx, "a").Val() == "1" })
	require.Equal(t, local.BinaryOf(b.driver, "7.0"), local.ReplicaBinary(b.driver, 2))

	dst.RedisVersion = "7.2"
	require.NoError(t, b.driver.Ensure(ctx, dst))
	require.Equal(t, local.BinaryOf(b.driver, "7.2"), local.ReplicaBinary(b.driver, 2))
	// Its first sync loads the source's snapshot into a throwaway 7.2 server.
	eventuallyT(t, 10*time.Second, func() bool { return runs.Runs(t) >= 2 })
	require.NoError(t, s.Set(ctx, "b", "2", 0).Err())
	c = client(t, dst.Port, dst.Password)
	eventuallyT(t, 10*time.Second, func() bool { return c.Get(ctx, "b").Val() == "2" && c.Get(ctx, "a").Val() == "1" })
}

// An upgrade restarts the server on the new version's binary with all its data, exactly
// once (no key lost, none applied twice), whatever its persistence, even none; a
// snapshot older than the data does not come back.
func TestEnsure_UpgradeKeepsData(t *testing.T) {
	t.Parallel()
	for i, persistence := range []string{"none", "aof-every-1-second", "snapshot-every-1-hour"} {
		t.Run(persistence, func(t *testing.T) {
			t.Parallel()
			b, runs := versionedBundle(t)
			ctx := ctxT(t)
			in := b.instance(t, 10+i, persistence)
			require.NoError(t, b.driver.Ensure(ctx, in))
			c := client(t, in.Port, in.Password)
			dbDir := filepath.Join(b.dir, fmt.Sprint(in.DatabaseID))
			adm := admin(t, dbDir, in.Port)

			require.NoError(t, c.Set(ctx, "key", "old", 0).Err())
			// A snapshot of an older state is on disk: the upgrade must not load it.
			require.NoError(t, adm.Save(ctx).Err())
			require.NoError(t, c.Set(ctx, "key", "new", 0).Err())
			for range 5 {
				require.NoError(t, c.Incr(ctx, "counter").Err())
			}
			require.NoError(t, c.RPush(ctx, "list", "a", "b", "c").Err())
			require.NoError(t, c.HSet(ctx, "hash", "f1", "v1", "f2", "v2").Err())
			before := runID(t, ctx, adm)
			pidBefore := pid(t, b.driver, in.DatabaseID)

			in.RedisVersion = "7.2"
			require.NoError(t, b.driver.Ensure(ctx, in))
			require.Equal(t, 1, runs.Runs(t), "the server was started by the 7.2 binary")
			require.True(t, processGone(pidBefore), "the 7.0 server is gone")
			adm = admin(t, dbDir, in.Port)
			require.NotEqual(t, before, runID(t, ctx, adm), "a new server runs")
			c = client(t, in.Port, in.Password)
			require.Equal(t, "new", c.Get(ctx, "key").Val())
			require.Equal(t, "5", c.Get(ctx, "counter").Val(), "no increment lost or applied twice")
			require.Equal(t, []string{"a", "b", "c"}, c.LRange(ctx, "list", 0, -1).Val())
			require.Equal(t, map[string]string{"f1": "v1", "f2": "v2"}, c.HGetAll(ctx, "hash").Val())
			require.Equal(t, int64(4), c.DBSize(ctx).Val())
			_, err := os.Stat(filepath.Join(dbDir, "upgrade.pending"))
			require.True(t, os.IsNotExist(err), "the upgrade mark is gone once the data is loaded")
			cfg, err := adm.ConfigGet(ctx, "appendonly").Result()
			require.NoError(t, err)
			require.Equal(t, map[bool]string{true: "yes", false: "no"}[strings.HasPrefix(persistence, "aof")], cfg["appendonly"], "the persistence stays")

			// Once upgraded, the server is adopted as it is.
			after := runID(t, ctx, adm)
			require.NoError(t, b.driver.Ensure(ctx, in))
			require.Equal(t, after, runID(t, ctx, admin(t, dbDir, in.Port)))
			require.Equal(t, 1, runs.Runs(t))

			// A later restart starts the 7.2 binary again, with what the persistence
			// keeps (nothing for none: the upgrade's RDB is not loaded twice).
			require.NoError(t, b.driver.Stop(ctx, in.DatabaseID))
			require.NoError(t, b.driver.Ensure(ctx, in))
			require.Equal(t, 2, runs.Runs(t))
			c = client(t, in.Port, in.Password)
			if persistence == "none" {
				require.Zero(t, c.DBSize(ctx).Val(), "persistence none keeps nothing over a restart")
			} else {
				require.Equal(t, "5", c.Get(ctx, "counter").Val())
			}
		})
	}
}

// A crash after the old server saved and stopped, before the new one started, loses
// nothing: the next Ensure starts the new binary on the saved data.
func TestEnsure_UpgradeResumesAfterCrash(t *testing.T) {
	t.Parallel()
	b, runs := versionedBundle(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	dbDir := filepath.Join(b.dir, "1")
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())
	// What the upgrade does before it starts the new server: mark, then SHUTDOWN SAVE.
	require.NoError(t, os.WriteFile(filepath.Join(dbDir, "upgrade.pending"), []byte("7.2\n"), 0o600))
	p := pid(t, b.driver, 1)
	require.NoError(t, admin(t, dbDir, in.Port).ShutdownSave(ctx).Err())
	eventuallyT(t, 5*time.Second, func() bool { return processGone(p) })

	in.RedisVersion = "7.2"
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, 1, runs.Runs(t))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
}

// An upgrade of a server that is not running simply starts the new binary.
func TestEnsure_UpgradeOfStoppedServer(t *testing.T) {
	t.Parallel()
	b, runs := versionedBundle(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "aof-every-1-second")
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())
	require.NoError(t, b.driver.Stop(ctx, 1))
	in.RedisVersion = "7.2"
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, 1, runs.Runs(t))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
}

// There is no downgrade: a database whose server last ran 7.2 is refused 7.0, running
// or stopped, and its server is left as it is; naming no version, it keeps 7.2. A new
// database may run an older version than the default.
func TestEnsure_NoDowngrade(t *testing.T) {
	t.Parallel()
	b, runs := versionedBundle(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "aof-every-1-second")
	in.RedisVersion = "7.2"
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())
	p := pid(t, b.driver, 1)

	in.RedisVersion = "7.0"
	err := b.driver.Ensure(ctx, in)
	require.ErrorContains(t, err, "database 1: its data was last served by Redis 7.2, and Redis 7.0 cannot load it: there is no downgrade")
	require.Equal(t, p, pid(t, b.driver, 1), "the server runs on")
	require.NoError(t, b.driver.Stop(ctx, 1))
	require.ErrorContains(t, b.driver.Ensure(ctx, in), "there is no downgrade")
	require.Equal(t, 1, runs.Runs(t))
	in.RedisVersion = ""
	require.NoError(t, b.driver.Ensure(ctx, in), "no version named: it keeps 7.2, not the default 7.0")
	require.Equal(t, 2, runs.Runs(t))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())

	// A driver whose default is 7.2 starts a new database on 7.0.
	bin, runs2 := standIn(t)
	d := versionedDriver(t, t.TempDir(), bin, "redis-server")
	old := clouddb.Instance{DatabaseID: 2, Port: freePort(t), Password: "pw-old", MaxMemoryBytes: 64 * mb, EvictionPolicy: "volatile-lru", DataPersistence: "none", RedisVersion: "7.0"}
	t.Cleanup(func() { require.NoError(t, d.Remove(context.Background(), 2)) })
	require.NoError(t, d.Ensure(ctx, old))
	require.NoError(t, client(t, old.Port, old.Password).Ping(ctx).Err())
	require.Zero(t, runs2.Runs(t))
}

// TestEnsure_UpgradeChecksUsersRules: before a server is stopped for an upgrade, the new
// version verifies the database's ACL users' rules (a server whose config names a command
// it lacks does not start); when it cannot, the upgrade is refused and the server runs on,
// with its data, on its version. The stand-in 7.2 here fails as a binary that refuses the
// rules would: it will not run the throwaway server the rules are checked on (the one
// whose config says always-show-logo), while it runs database servers.
func TestEnsure_UpgradeChecksUsersRules(t *testing.T) {
	t.Parallel()
	bin := redistest.NewStandIn(t, "7.2.4", "if grep -q '^always-show-logo ' \"$1\"; then\n"+
		"\techo '*** FATAL CONFIG FILE ERROR: Unknown command or category name in ACL ***' >&2\n\texit 1\nfi\n"+
		redistest.ExecReal(t)).Path
	b := &testBundle{dir: t.TempDir()}
	b.driver = versionedDriver(t, b.dir, "redis-server", bin)
	ctx := ctxT(t)

	in := b.instance(t, 1, "none")
	in.Users = []clouddb.DatabaseUser{{Name: "app", Password: "App.pa55word", Rule: "+@read ~*"}}
	require.NoError(t, b.driver.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "key", "kept", 0).Err())
	pidBefore := pid(t, b.driver, in.DatabaseID)

	in.RedisVersion = "7.2"
	err := b.driver.Ensure(ctx, in)
	require.ErrorContains(t, err, "upgrade to Redis 7.2 refused")
	require.Equal(t, pidBefore, pid(t, b.driver, in.DatabaseID), "the 7.0 server runs on")
	require.Equal(t, "kept", c.Get(ctx, "key").Val())

	// Without users there is nothing to check: the same stand-in takes the upgrade.
	in.Users = nil
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NotEqual(t, pidBefore, pid(t, b.driver, in.DatabaseID))
	require.Equal(t, "kept", client(t, in.Port, in.Password).Get(ctx, "key").Val())
}

// TestEnsure_AdoptFinishesUpgrade: a server that was still loading the data saved for its
// upgrade when its start gave up, and is adopted later on the new version, drops the
// upgrade mark; left, the mark would make a later start of a database without
// persistence load that old snapshot instead of starting empty.
func TestEnsure_AdoptFinishesUpgrade(t *testing.T) {
	t.Parallel()
	b, _ := versionedBundle(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	dbDir := filepath.Join(b.dir, fmt.Sprint(in.DatabaseID))
	require.Equal(t, "7.0", versionFileOf(t, dbDir))
	mark := filepath.Join(dbDir, "upgrade.pending")
	require.NoError(t, os.WriteFile(mark, []byte("7.0\n"), 0o600)) // as an upgrade to 7.0 leaves it

	require.NoError(t, b.driver.Ensure(ctx, in)) // adopted, answering
	_, err := os.Stat(mark)
	require.True(t, os.IsNotExist(err), "the mark of an upgrade whose server serves is gone")

	// A mark for another version (an upgrade not yet done) stays.
	require.NoError(t, os.WriteFile(mark, []byte("7.2\n"), 0o600))
	require.NoError(t, b.driver.Ensure(ctx, in))
	_, err = os.Stat(mark)
	require.NoError(t, err)
}
