package local_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// scriptMemory reads the memory of the EVAL scripts from the server's INFO.
func scriptMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(ctxT(t), "memory").Result()
	require.NoError(t, err)
	var n int64
	for line := range strings.Lines(info) {
		for _, name := range []string{"used_memory_vm_eval:", "used_memory_scripts_eval:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), name); ok {
				k, perr := strconv.ParseInt(v, 10, 64)
				require.NoError(t, perr)
				n += k
			}
		}
	}
	return n
}

// TestScripts_CacheIsBounded: distinct EVAL scripts stay cached in the server's Lua
// interpreter, whose memory maxmemory does not count; past the bound (64 MiB for this
// 64 MiB database) the periodic check notices and Ensure empties the cache, the data
// kept and scripts still running.
func TestScripts_CacheIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 71, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "k", "kept", 0).Err())
	pad := strings.Repeat("x", 1000)
	for i := 0; i < 40_000; i += 1000 {
		p := c.Pipeline()
		for j := i; j < i+1000; j++ {
			p.Eval(ctx, fmt.Sprintf("return '%s%d'", pad, j), nil)
		}
		_, err := p.Exec(ctx)
		require.NoError(t, err)
	}
	before := scriptMemory(t, c)
	require.Greater(t, before, int64(64<<20), "the test must pass the bound to mean anything")

	d := mustDriver(t, b.dir) // no recent deep check vouches for the server
	requireRunning(t, d, in, false, "a script cache past its bound is drift")
	require.NoError(t, d.Ensure(ctx, in))
	require.Eventually(t, func() bool { return scriptMemory(t, c) < 8<<20 }, 5*time.Second, 100*time.Millisecond, "the cache is emptied (asynchronously)")
	require.Equal(t, "kept", c.Get(ctx, "k").Val())
	require.Equal(t, "ok", c.Eval(ctx, "return 'ok'", nil).Val())
	requireRunning(t, d, in, true)
}
