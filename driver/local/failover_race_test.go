package local_test

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/driver/local"
)

// A primary killed while an Ensure is under way, after that Ensure's failover check
// found it running (or promoted it), must still fail over to the synced replica: neither
// be started again on its own files (empty, without persistence, and the replica then
// empties itself syncing from it), nor be left down with an error, which the reconciler
// does not retry. Both happened under load when a kill came right after a failover,
// while the Ensure that made it still adopted the promoted primary. A hook kills the
// primary at the exact point instead, twice in a row: node 0's server, then the
// promoted node 1's, right after its new replica synced.
func TestReplication_PrimaryKilledDuringEnsure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		point string
	}{
		// Before ensureServer looks at the primary: it finds no server.
		{"before the primary", local.HookBeforePrimary},
		// While adopt talks to it: reconfiguring it fails.
		{"while adopting the primary", local.HookAdopting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			// The pid to kill at the point, once; 0 when done. The hook runs inside
			// Ensure, on the test's goroutine.
			target := 0
			b.driver.SetTestHook(func(point string, id, pid int) {
				p := target
				if point != tc.point || id != 1 || p == 0 || pid != 0 && pid != p {
					return
				}
				target = 0
				killAndWait(t, p)
			})
			in := b.replicated(t, 1, "none")
			c := client(t, in.Port, in.Password)
			for round := range 2 {
				p, r := nodes(t, b.driver, 1)
				writeAcked(t, c, "k", 100)

				target = p
				require.NoError(t, b.driver.Ensure(ctxT(t), in), "round %d", round)
				require.Zero(t, target, "round %d: the hook killed the primary", round)

				p2, r2 := nodes(t, b.driver, 1)
				require.Equal(t, r, p2, "round %d: the synced replica serves", round)
				require.NotEqual(t, p, r2, "round %d: a new replica", round)
				requireData(t, c, 100, round)
				// A write the new replica acknowledges: it synced, so Running holds.
				writeAcked(t, c, "after"+strconv.Itoa(round)+":", 1)
				requireRunning(t, b.driver, in, true)
			}
		})
	}
}

// The replica an Ensure promoted is killed while the same Ensure adopts it as the
// primary, once the new replica it started in the dead primary's directory has synced
// (as the failover benchmark does: it waits for the replica, writes, and kills): that
// new replica takes over, with every acknowledged write.
func TestReplication_PromotedKilledDuringSameEnsure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// As above: the hook runs on the test's goroutine.
	var target int
	var c *redis.Client
	b.driver.SetTestHook(func(point string, id, pid int) {
		p := target
		if point != local.HookAdopting || id != 1 || p == 0 || pid != p {
			return
		}
		target = 0
		// The replica started in the dead primary's directory acknowledges them.
		writeAcked(t, c, "more", 50)
		killAndWait(t, p)
	})
	in := b.replicated(t, 1, "none")
	c = client(t, in.Port, in.Password)
	p, r := nodes(t, b.driver, 1)
	writeAcked(t, c, "k", 100)

	killAndWait(t, p)
	target = r
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	require.Zero(t, target, "the hook killed the promoted replica")

	p2, r2 := nodes(t, b.driver, 1)
	require.NotContains(t, []int{p, r}, p2, "the replica started by the first failover serves")
	require.NotContains(t, []int{p, r, p2}, r2, "a new replica")
	requireKeys(t, c, "more", 50)
	requireData(t, c, 100, 50)
	writeAcked(t, c, "after", 1)
	requireRunning(t, b.driver, in, true)
}

// requireData requires keys k0 to k<n-1> and extra keys besides.
func requireData(t *testing.T, c *redis.Client, n, extra int) {
	t.Helper()
	requireKeys(t, c, "k", n)
	size, err := c.DBSize(ctxT(t)).Result()
	require.NoError(t, err)
	require.EqualValues(t, n+extra, size)
}
