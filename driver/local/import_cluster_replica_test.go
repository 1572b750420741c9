package local_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoadCluster_PrimaryDiesRightAfter: an import into a replicated cluster that has
// returned is on the replicas too: a shard's primary killed -9 the moment it returns
// fails over to a replica that holds the new data, not the old (a replica disconnected
// for its full resync is promotable, its link having been up).
func TestLoadCluster_PrimaryDiesRightAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.clustered(t, 1, 2, false, "none")
	sc := clusterClient(t, src)
	clusterWrite(t, sc, "new:", 200)
	big := strings.Repeat("b", 256<<10)
	for i := range 80 { // 20 MB: a full sync takes a while
		require.NoError(t, sc.Set(ctx, fmt.Sprintf("big:%d", i), big, 0).Err())
	}
	parts := backupParts(t, b, src)

	dst := b.clustered(t, 2, 2, true, "snapshot-every-1-hour")
	dc := clusterClient(t, dst)
	clusterWrite(t, dc, "old:", 100)
	requireReplicasAcked(t, dc)
	require.NoError(t, b.driver.Load(ctx, dst, parts))
	killAndWait(t, nodePid(t, b.dir+"/2"))
	require.Eventually(t, func() bool { return b.driver.Ensure(ctx, dst) == nil }, 20*time.Second, 100*time.Millisecond)
	dc = clusterClient(t, dst)
	clusterRead(t, dc, "new:", 200)
	require.EqualValues(t, 280, clusterKeys(t, dc, false), "no old key is back")
}
