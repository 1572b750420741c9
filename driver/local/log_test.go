package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/driver/local"
)

// slowClient is a tenant's client that waits long enough for a script to end.
func slowClient(t *testing.T, port int, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:            fmt.Sprintf("127.0.0.1:%d", port),
		Password:        password,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		DialTimeout:     2 * time.Second,
		ReadTimeout:     2 * time.Minute,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// logSizes returns the sizes of a database's redis.log and redis.log.1 (0 if missing).
func logSizes(dir string) (cur, old int64) {
	if st, err := os.Stat(filepath.Join(dir, "redis.log")); err == nil {
		cur = st.Size()
	}
	if st, err := os.Stat(filepath.Join(dir, "redis.log.1")); err == nil {
		old = st.Size()
	}
	return cur, old
}

// dirSize is the total size of the regular files in dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// TestLog_LuaFloodIsCapped: a tenant's script that writes 120 MB to the server log with
// redis.log leaves at most the cap on disk, and the server goes on answering. (Not
// parallel: it raises the rate at which clouddb reads server logs, so that the flood
// takes seconds rather than minutes.)
func TestLog_LuaFloodIsCapped(t *testing.T) {
	old := local.SetLogRate(256 << 20)
	t.Cleanup(func() { local.SetLogRate(old) })
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 60, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	dir := filepath.Join(b.dir, "60")
	eventuallyT(t, 5*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return strings.Contains(string(data), "Ready to accept connections")
	})

	c := slowClient(t, in.Port, in.Password)
	start := time.Now()
	err := c.Eval(ctx, "local s=string.rep('x',1e6) for i=1,120 do redis.log(redis.LOG_WARNING,s) end return 1", nil).Err()
	require.NoError(t, err)
	t.Logf("120 MB of redis.log from a script in %s", time.Since(start))
	require.NoError(t, c.Eval(ctx, "redis.log(redis.LOG_WARNING,'flood-over') return 1", nil).Err())
	eventuallyT(t, 30*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return strings.Contains(string(data), "flood-over")
	})

	cur, prev := logSizes(dir)
	t.Logf("redis.log %d bytes, redis.log.1 %d bytes, directory %d bytes", cur, prev, dirSize(t, dir))
	const capBytes = 4<<20 + 32<<10
	require.LessOrEqual(t, cur, int64(capBytes))
	require.LessOrEqual(t, prev, int64(capBytes))
	require.Less(t, dirSize(t, dir), int64(3*capBytes), "nothing else in the directory grew")
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "still", "here", 0).Err())
	requireRunning(t, b.driver, in, true)
}

// TestLog_FloodIsSlowedDown: past a burst, clouddb reads a server's log at a bounded
// rate (1 MiB/s), so a script that floods it waits on its own writes instead of making
// clouddb and the disk keep up.
func TestLog_FloodIsSlowedDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 61, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	c := slowClient(t, in.Port, in.Password)
	start := time.Now()
	require.NoError(t, c.Eval(ctx, "local s=string.rep('x',1e5) for i=1,40 do redis.log(redis.LOG_WARNING,s) end return 1", nil).Err())
	elapsed := time.Since(start)
	t.Logf("4 MB of redis.log from a script in %s", elapsed)
	// 4 MB less the 1 MiB burst and the pipe's 64 KiB at 1 MiB/s: about 2.8 s.
	require.Greater(t, elapsed, 2*time.Second)
	require.NoError(t, client(t, in.Port, in.Password).Ping(ctx).Err())
}

// TestLog_ServerOutlivesItsLogReader: a server whose clouddb died writes its log into a
// pipe nobody reads: it loses those lines but not its life (redis ignores SIGPIPE), the
// next clouddb adopts it, and its log is kept again from its next restart.
func TestLog_ServerOutlivesItsLogReader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 70, "snapshot-every-1-hour")
	dir := filepath.Join(b.dir, "70")

	p := startedByCrashedClouddb(t, b, in)

	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Eval(ctx, "for i=1,1000 do redis.log(redis.LOG_WARNING,'orphan line '..i) end return 1", nil).Err())
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	// A background save forks a child that logs too.
	require.NoError(t, admin(t, dir, in.Port).BgSave(ctx).Err())
	eventuallyT(t, 10*time.Second, func() bool {
		info := admin(t, dir, in.Port).Info(ctx, "persistence").Val()
		return strings.Contains(info, "rdb_bgsave_in_progress:0") && strings.Contains(info, "rdb_last_bgsave_status:ok")
	})
	require.NoError(t, c.Ping(ctx).Err(), "the server must outlive its log reader")

	requireRunning(t, b.driver, in, true)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, p, pid(t, b.driver, 70), "adopted")
	data, err := os.ReadFile(filepath.Join(dir, "redis.log"))
	require.NoError(t, err)
	require.NotContains(t, string(data), "orphan line", "its reader was gone")

	require.NoError(t, b.driver.Stop(ctx, 70))
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, "v", client(t, in.Port, in.Password).Get(ctx, "k").Val())
	require.NoError(t, client(t, in.Port, in.Password).Eval(ctx, "redis.log(redis.LOG_WARNING,'kept again') return 1", nil).Err())
	eventuallyT(t, 5*time.Second, func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return strings.Contains(string(data), "kept again")
	})
}
