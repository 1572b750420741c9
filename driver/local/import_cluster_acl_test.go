package local_test

import (
	"clouddb"
	"fmt"
	"github.com/stretchr/testify/require"
	"strconv"
	"strings"
	"testing"
)

// TestLoadCluster_NoTenantDebug: cluster nodes allow DEBUG (enable-debug-command local),
// which clouddb's reload needs; no tenant user gets it on any node, whatever its rule
// (the denials follow the rule), and the cluster discovery commands every named user
// gets administer nothing.
func TestLoadCluster_NoTenantDebug(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	in.OSSCluster, in.Shards, in.Replication, in.MaxMemoryBytes = true, 2, true, 128*mb
	rules := []string{"+@all ~*", "+debug ~*", "+@dangerous ~*", "allcommands allkeys", "+debug|reload ~*",
		"+DEBUG ~*", "+@admin ~*", "+@all +debug +@admin +cluster +config ~*", "+cluster|forget +cluster|reset +cluster|failover ~*"}
	for i, r := range rules {
		require.NoError(t, clouddb.ValidateACLRule(r), r)
		in.Users = append(in.Users, clouddb.DatabaseUser{Name: fmt.Sprintf("u%d", i), Password: fmt.Sprintf("Pass.w0rd%d", i), Rule: r})
	}
	require.NoError(t, b.driver.Ensure(ctx, in))
	ports := map[int]bool{}
	cc := clusterClient(t, in)
	nodes, err := cc.ClusterNodes(ctx).Result()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		addr := strings.Fields(line)[1]
		port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1 : strings.IndexByte(addr, '@')])
		require.NoError(t, err)
		ports[port] = true
	}
	require.Len(t, ports, 4)
	for port := range ports {
		for i := range rules {
			c := userClient(t, port, fmt.Sprintf("u%d", i), fmt.Sprintf("Pass.w0rd%d", i))
			for _, words := range [][]any{{"debug", "sleep", "0"}, {"debug", "reload", "nosave"}, {"debug", "change-repl-id"},
				{"config", "set", "enable-debug-command", "yes"}, {"cluster", "forget", "x"}, {"cluster", "reset"},
				{"cluster", "failover"}, {"cluster", "setslot", "1", "stable"}, {"cluster", "addslots", "1"}, {"cluster", "meet", "127.0.0.1", "1"}} {
				err := c.Do(ctx, words...).Err()
				require.Error(t, err, "user with rule %q on port %d: %v", rules[i], port, words)
				require.True(t, strings.HasPrefix(err.Error(), "NOPERM"), "rule %q: %v: %v", rules[i], words, err)
			}
			require.NoError(t, c.Do(ctx, "cluster", "slots").Err(), "rule %q: CLUSTER SLOTS", rules[i])
		}
	}
}
