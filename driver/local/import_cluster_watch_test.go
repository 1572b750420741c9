package local_test

import (
	"github.com/stretchr/testify/require"
	"io"
	"os"
	"testing"
	"time"
)

// TestLoadCluster_PrimaryDiesDuringSplit: a shard's primary that dies while the data
// trickles in ends the import at once (the reconciler, which waits for no import, must
// bring the shard back: here, fail over to its replica), rather than leave the shard
// down until the source is done.
func TestLoadCluster_PrimaryDiesDuringSplit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.clustered(t, 1, 2, false, "none")
	clusterWrite(t, clusterClient(t, src), "new:", 200)
	data, err := os.ReadFile(backupParts(t, b, src)[0])
	require.NoError(t, err)

	dst := b.clustered(t, 2, 2, true, "none")
	dc := clusterClient(t, dst)
	clusterWrite(t, dc, "old:", 100)
	requireReplicasAcked(t, dc)
	pr, pw := io.Pipe()
	defer pw.Close()
	errc := make(chan error, 1)
	go func() { errc <- b.driver.LoadStream(ctx, dst, pr) }()
	_, err = pw.Write(data[:len(data)/2])
	require.NoError(t, err)
	killAndWait(t, nodePid(t, b.dir+"/2/node2"))
	select {
	case err := <-errc:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the import went on for 5 s with a shard's primary dead")
	}
	require.Eventually(t, func() bool { return b.driver.Ensure(ctx, dst) == nil }, 10*time.Second, 100*time.Millisecond)
	clusterRead(t, clusterClient(t, dst), "old:", 100)
}

// TestLoadCluster_StopDuringStalledSplit: Stop ends an import being split at once, even
// when the source has stopped sending (README: "whatever the source's speed"), and the
// data stays.
func TestLoadCluster_StopDuringStalledSplit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.clustered(t, 1, 2, false, "none")
	clusterWrite(t, clusterClient(t, src), "new:", 200)
	data, err := os.ReadFile(backupParts(t, b, src)[0])
	require.NoError(t, err)

	dst := b.clustered(t, 2, 2, false, "snapshot-every-1-hour")
	clusterWrite(t, clusterClient(t, dst), "old:", 100)
	pr, pw := io.Pipe()
	defer pw.Close()
	errc := make(chan error, 1)
	go func() { errc <- b.driver.LoadStream(ctx, dst, pr) }()
	_, err = pw.Write(data[:len(data)/2])
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // the split waits for the rest
	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- b.driver.Stop(ctx, dst.DatabaseID) }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
		t.Logf("Stop took %s", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("Stop waited 5 s for an import whose source is stalled")
	}
	select {
	case err := <-errc:
		require.Error(t, err)
		t.Logf("the import: %v", err)
	case <-time.After(time.Second):
		t.Fatal("the import did not end")
	}
	require.NoError(t, b.driver.Ensure(ctx, dst))
	clusterRead(t, clusterClient(t, dst), "old:", 100)
}
