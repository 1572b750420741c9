package local_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
)

// replicated returns an instance with replication whose servers run.
func (b *testBundle) replicated(t *testing.T, id int, persistence string) clouddb.Instance {
	t.Helper()
	in := b.instance(t, id, persistence)
	in.Replication = true
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	return in
}

// nodes returns the pids of the primary and the replica, failing if either is missing.
func nodes(t *testing.T, d *local.Driver, id int) (int, int) {
	t.Helper()
	p, r := d.NodePids(id)
	require.NotZero(t, p, "primary")
	require.NotZero(t, r, "replica")
	return p, r
}

// writeAcked writes n keys with prefix, each acknowledged by the replica (WAIT 1).
func writeAcked(t *testing.T, c *redis.Client, prefix string, n int) {
	t.Helper()
	ctx := ctxT(t)
	for i := range n {
		require.NoError(t, c.Set(ctx, prefix+strconv.Itoa(i), i, 0).Err())
		if i%50 == 49 || i == n-1 {
			acked, err := c.Wait(ctx, 1, 5*time.Second).Result()
			require.NoError(t, err)
			require.EqualValues(t, 1, acked, "WAIT 1 after key %d", i)
		}
	}
}

func requireKeys(t *testing.T, c *redis.Client, prefix string, n int) {
	t.Helper()
	ctx := ctxT(t)
	for i := range n {
		v, err := c.Get(ctx, prefix+strconv.Itoa(i)).Result()
		require.NoError(t, err, "key %s%d", prefix, i)
		require.Equal(t, strconv.Itoa(i), v)
	}
}

// killAndWait kills the process with SIGKILL and waits until it is gone.
func killAndWait(t *testing.T, p int) {
	t.Helper()
	require.NoError(t, syscall.Kill(p, syscall.SIGKILL))
	require.Eventually(t, func() bool { return processGone(p) }, 5*time.Second, 5*time.Millisecond)
}

func TestReplication_ReplicaFollows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.replicated(t, 1, "none")
	p, r := nodes(t, b.driver, 1)
	require.NotEqual(t, p, r)
	c := client(t, in.Port, in.Password)
	writeAcked(t, c, "k", 10)
	requireRunning(t, b.driver, in, true)

	// The replica listens on no TCP port: the endpoint is the primary's alone.
	info, err := c.Info(ctxT(t), "replication").Result()
	require.NoError(t, err)
	require.Contains(t, info, "connected_slaves:1")

	// Idempotent: another Ensure changes nothing.
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	p2, r2 := nodes(t, b.driver, 1)
	require.Equal(t, []int{p, r}, []int{p2, r2})
}

func TestReplication_FailoverOnTheSameEndpoint(t *testing.T) {
	t.Parallel()
	for _, persistence := range []string{"none", "aof-every-1-second"} {
		t.Run(persistence, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			in := b.replicated(t, 1, persistence)
			p, r := nodes(t, b.driver, 1)
			c := client(t, in.Port, in.Password)
			writeAcked(t, c, "k", 200)

			killAndWait(t, p)
			requireRunning(t, b.driver, in, false)
			start := time.Now()
			require.NoError(t, b.driver.Ensure(ctxT(t), in))
			took := time.Since(start)
			t.Logf("failover took %s", took)
			require.Less(t, took, time.Second)

			// The replica serves the endpoint, with every acknowledged write, and takes writes.
			p2, r2 := nodes(t, b.driver, 1)
			require.Equal(t, r, p2, "the replica is the primary now")
			require.NotEqual(t, p, r2)
			requireKeys(t, c, "k", 200)
			writeAcked(t, c, "after", 20) // a new replica acknowledges
			requireRunning(t, b.driver, in, true)

			// And back: the new primary dies too.
			killAndWait(t, p2)
			require.NoError(t, b.driver.Ensure(ctxT(t), in))
			p3, _ := nodes(t, b.driver, 1)
			require.Equal(t, r2, p3)
			requireKeys(t, c, "k", 200)
			requireKeys(t, c, "after", 20)
		})
	}
}

func TestReplication_ReplicaRestartsAsReplica(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.replicated(t, 1, "none")
	p, r := nodes(t, b.driver, 1)
	c := client(t, in.Port, in.Password)
	writeAcked(t, c, "k", 20)
	killAndWait(t, r)
	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	p2, r2 := nodes(t, b.driver, 1)
	require.Equal(t, p, p2, "the primary stays")
	require.NotEqual(t, r, r2)
	writeAcked(t, c, "more", 5)
	requireKeys(t, c, "k", 20)
}

func TestReplication_BothDownStartsThePrimaryFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.replicated(t, 1, "aof-every-1-second")
	p, r := nodes(t, b.driver, 1)
	c := client(t, in.Port, in.Password)
	writeAcked(t, c, "k", 50)
	// Kill the replica first, then fail over to nothing: the primary's own AOF serves.
	killAndWait(t, r)
	require.NoError(t, c.Do(ctxT(t), "ping").Err())
	time.Sleep(1100 * time.Millisecond) // appendfsync everysec
	killAndWait(t, p)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	nodes(t, b.driver, 1)
	requireKeys(t, c, "k", 50)
	writeAcked(t, c, "x", 1)
}

func TestReplication_ToggleKeepsData(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	c := client(t, in.Port, in.Password)
	for i := range 100 {
		require.NoError(t, c.Set(ctxT(t), fmt.Sprint("k", i), i, 0).Err())
	}
	p := pid(t, b.driver, 1)

	in.Replication = true
	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	p2, r := nodes(t, b.driver, 1)
	require.Equal(t, p, p2, "the primary keeps running")
	acked, err := c.Wait(ctxT(t), 1, 5000).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked)

	// A failover, so that the primary is node 1 when replication is turned off.
	killAndWait(t, p)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	p3, _ := nodes(t, b.driver, 1)
	require.Equal(t, r, p3)

	in.Replication = false
	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	p4, r4 := b.driver.NodePids(1)
	require.Equal(t, r, p4, "the serving node stays")
	require.Zero(t, r4, "no replica")
	requireRunning(t, b.driver, in, true)
	requireKeys(t, c, "k", 100)
	n, err := c.DBSize(ctxT(t)).Result()
	require.NoError(t, err)
	require.EqualValues(t, 100, n)
}

func TestReplication_AdoptedAfterClouddbRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.replicated(t, 1, "none")
	p, r := nodes(t, b.driver, 1)
	c := client(t, in.Port, in.Password)
	writeAcked(t, c, "k", 10)

	exited := make(chan int, 4)
	d2, err := local.New(local.Config{
		Dir:    b.dir,
		Host:   "127.0.0.1",
		Logger: slog.New(slog.NewTextHandler(newTestWriter(t), nil)),
		Exited: func(id int) { exited <- id },
	})
	require.NoError(t, err)
	require.NoError(t, d2.Ensure(ctxT(t), in))
	p2, r2 := nodes(t, d2, 1)
	require.Equal(t, []int{p, r}, []int{p2, r2}, "both adopted, none started twice")
	requireRunning(t, d2, in, true)

	// A failover by the new driver of servers it did not start, told at once.
	require.NoError(t, syscall.Kill(p, syscall.SIGKILL))
	select {
	case id := <-exited:
		require.Equal(t, 1, id)
	case <-time.After(time.Second):
		t.Fatal("the exit of an adopted server was not reported within 1s")
	}
	require.NoError(t, d2.Ensure(ctxT(t), in))
	p3, _ := nodes(t, d2, 1)
	require.Equal(t, r, p3)
	requireKeys(t, c, "k", 10)
}

func TestReplication_StopAndRemove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.replicated(t, 1, "aof-every-1-second")
	p, r := nodes(t, b.driver, 1)
	require.NoError(t, b.driver.Stop(ctxT(t), 1))
	require.True(t, processGone(p))
	require.True(t, processGone(r))
	require.NoError(t, b.driver.Ensure(context.Background(), in))
	p, r = nodes(t, b.driver, 1)
	require.NoError(t, b.driver.Remove(ctxT(t), 1))
	require.True(t, processGone(p))
	require.True(t, processGone(r))
	require.Zero(t, serversIn(t, b.dir))
}

// A primary that adoption stops (here: its port changes) is not started again on its own
// files while its replica holds the data: without persistence that would empty the
// replica too. The replica takes over, on the new port.
func TestReplication_StoppedPrimaryFailsOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.replicated(t, 1, "none")
	p, r := nodes(t, b.driver, 1)
	writeAcked(t, client(t, in.Port, in.Password), "k", 50)

	in.Port = freePort(t)
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	p2, r2 := nodes(t, b.driver, 1)
	require.Equal(t, r, p2, "the replica serves")
	require.True(t, processGone(p))
	require.NotEqual(t, p, r2)
	c := client(t, in.Port, in.Password)
	requireKeys(t, c, "k", 50)
	writeAcked(t, c, "more", 5)
}

// A replicated TLS database: the replica syncs over TLS, presenting clouddb's client
// certificate to a primary that asks for one (mutual TLS), and takes over the TLS port.
// TLS turned off and on again keeps both servers and the data.
func TestReplication_TLS(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ca := newCA(t)
	dir := t.TempDir()
	b := &testBundle{dir: dir, driver: tlsDriver(t, dir, ca)}
	certPEM, pair := clientCert(t, "tenant")
	in := b.instance(t, 1, "none")
	in.Replication = true
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{certPEM}}
	require.NoError(t, b.driver.Ensure(ctx, in))
	p, r := nodes(t, b.driver, 1)
	c := tlsClient(t, in.Port, in.Password, ca.CertificatePEM(), pair)
	writeAcked(t, c, "k", 50)

	killAndWait(t, p)
	require.NoError(t, b.driver.Ensure(ctx, in))
	p2, _ := nodes(t, b.driver, 1)
	require.Equal(t, r, p2)
	// A client reconnects (go-redis cannot tell a dead TLS connection in its pool).
	c = tlsClient(t, in.Port, in.Password, ca.CertificatePEM(), pair)
	requireKeys(t, c, "k", 50)
	writeAcked(t, c, "more", 5)

	in.TLS = nil
	require.NoError(t, b.driver.Ensure(ctx, in))
	p3, r3 := nodes(t, b.driver, 1)
	pc := client(t, in.Port, in.Password)
	requireKeys(t, pc, "k", 50)
	writeAcked(t, pc, "plain", 5)
	in.TLS = &clouddb.InstanceTLS{}
	require.NoError(t, b.driver.Ensure(ctx, in))
	p4, r4 := nodes(t, b.driver, 1)
	require.Equal(t, []int{p3, r3}, []int{p4, r4}, "TLS toggles live on both servers")
	c2 := tlsClient(t, in.Port, in.Password, ca.CertificatePEM())
	requireKeys(t, c2, "plain", 5)
	writeAcked(t, c2, "tls", 5)
	requireRunning(t, b.driver, in, true)
}

// A replica that does not answer when the primary is gone (busy, or hung: here stopped)
// may hold the only copy of the data: it is neither stopped nor replaced, and the primary
// does not start on its own (empty) files; once it answers, it takes over.
func TestReplication_SilentReplicaIsWaitedFor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.replicated(t, 1, "none")
	p, r := nodes(t, b.driver, 1)
	writeAcked(t, client(t, in.Port, in.Password), "k", 50)

	require.NoError(t, syscall.Kill(r, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(r, syscall.SIGCONT) })
	killAndWait(t, p)
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
	defer cancel()
	err := b.driver.Ensure(ctx, in)
	require.ErrorIs(t, err, clouddb.ErrServerStarting)
	p2, r2 := b.driver.NodePids(1)
	require.Zero(t, p2, "no primary started on empty files")
	require.Equal(t, r, r2, "the silent replica is left alone")

	require.NoError(t, syscall.Kill(r, syscall.SIGCONT))
	require.NoError(t, b.driver.Ensure(ctxT(t), in))
	p3, _ := nodes(t, b.driver, 1)
	require.Equal(t, r, p3)
	requireKeys(t, client(t, in.Port, in.Password), "k", 50)
}
