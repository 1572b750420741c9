package local_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// busyScript runs a tenant's Lua script on in that loops for d (and, with write, writes
// first: such a script cannot be killed), and returns once the server answers BUSY to
// others, with a channel that gets the script's end.
func busyScript(t *testing.T, in clouddb.Instance, d time.Duration, write bool) <-chan error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", in.Port), Password: in.Password,
		Protocol: 2, DisableIdentity: true, ReadTimeout: -1, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	w := ""
	if write {
		w = "redis.call('SET', 'written', '1') "
	}
	script := w + `local s = redis.call('TIME') local start = s[1] * 1000000 + s[2]
while true do local n = redis.call('TIME') if n[1] * 1000000 + n[2] - start > tonumber(ARGV[1]) then break end end return 1`
	done := make(chan error, 1)
	go func() { done <- c.Eval(context.Background(), script, nil, d.Microseconds()).Err() }()
	probe := client(t, in.Port, in.Password)
	require.Eventually(t, func() bool {
		err := probe.Ping(context.Background()).Err()
		return err != nil && err.Error()[:4] == "BUSY"
	}, 10*time.Second, 50*time.Millisecond, "the server answers BUSY while the script runs")
	return done
}

// TestEnsure_BusyServerIsWaitedFor: a server busy with a tenant's long script is left to
// finish it, data and process kept, and Ensure says it is busy (a wait to the
// reconciler, not a failure); once the script ends Ensure applies the change. One that
// stays busy past the driver's bound (a script that wrote cannot be killed) is restarted.
func TestEnsure_BusyServerIsWaitedFor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "kept", "v", 0).Err())
	pid := nodePid(t, b.dir+"/1")

	done := busyScript(t, in, 7*time.Second, false)
	changed := in
	changed.MaxMemoryBytes *= 2
	start := time.Now()
	err := b.driver.Ensure(ctx, changed)
	require.ErrorIs(t, err, clouddb.ErrServerBusy)
	require.ErrorContains(t, err, "busy running a script")
	require.Less(t, time.Since(start), 3*time.Second, "Ensure does not wait out the script")
	require.Equal(t, pid, nodePid(t, b.dir+"/1"), "the busy server was left running")
	require.NoError(t, <-done)
	require.NoError(t, b.driver.Ensure(ctx, changed))
	require.Equal(t, pid, nodePid(t, b.dir+"/1"))
	require.Equal(t, "v", c.Get(ctx, "kept").Val())
	info, err := c.Info(ctx, "memory").Result()
	require.NoError(t, err)
	require.Contains(t, info, fmt.Sprintf("maxmemory:%d\r\n", changed.MaxMemoryBytes))

	// A script that wrote, then loops past the bound: only a restart ends it.
	b.driver.SetMaxBusy(0)
	_ = busyScript(t, in, time.Hour, true)
	require.NoError(t, b.driver.Ensure(ctx, changed))
	require.NotEqual(t, pid, nodePid(t, b.dir+"/1"), "restarted")
	require.NoError(t, client(t, in.Port, in.Password).Ping(ctx).Err())
}
