package local_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
)

// fill writes n string keys of size bytes each, plus one of every other type.
func fill(t *testing.T, port int, password string, n, size int) {
	t.Helper()
	ctx := ctxT(t)
	c := client(t, port, password)
	p := c.Pipeline()
	val := strings.Repeat("v", size)
	for i := range n {
		p.Set(ctx, fmt.Sprintf("k%d", i), val, 0)
	}
	p.HSet(ctx, "h", "f", "v")
	p.RPush(ctx, "l", "a", "b")
	p.SAdd(ctx, "s", "x")
	p.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "m"})
	p.Set(ctx, "ttl", "x", time.Hour)
	_, err := p.Exec(ctx)
	require.NoError(t, err)
}

// TestSnapshotThenLoad: a snapshot of one database loaded into another holds every key;
// loading replaces what was there.
func TestSnapshotThenLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 1, "none")
	dst := b.instance(t, 2, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.NoError(t, b.driver.Ensure(ctx, dst))
	fill(t, src.Port, src.Password, 200, 100)
	require.NoError(t, client(t, dst.Port, dst.Password).Set(ctx, "old", "gone", 0).Err())

	file := filepath.Join(t.TempDir(), "backup.rdb")
	f, err := os.Create(file)
	require.NoError(t, err)
	n, err := b.driver.Snapshot(ctx, src, 0, f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Positive(t, n)

	require.NoError(t, b.driver.Load(ctx, dst, []string{file}))
	c := client(t, dst.Port, dst.Password)
	require.Equal(t, int64(205), c.DBSize(ctx).Val())
	require.Zero(t, c.Exists(ctx, "old").Val(), "an import replaces the data")
	require.Equal(t, float64(1.5), c.ZScore(ctx, "z", "m").Val())
	require.Greater(t, c.TTL(ctx, "ttl").Val(), 50*time.Minute)
}

// TestLoadRefusesBadData: a corrupt file and data beyond the memory limit are refused and
// the database keeps its data.
func TestLoadRefusesBadData(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 1, "none")
	src.MaxMemoryBytes = 256 * mb
	dst := b.instance(t, 2, "none")
	dst.MaxMemoryBytes = 2 * mb
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.NoError(t, b.driver.Ensure(ctx, dst))
	require.NoError(t, client(t, dst.Port, dst.Password).Set(ctx, "keep", "me", 0).Err())

	corrupt := filepath.Join(t.TempDir(), "corrupt.rdb")
	require.NoError(t, os.WriteFile(corrupt, []byte("REDIS0009 this is not a real dump"), 0o600))
	err := b.driver.Load(ctx, dst, []string{corrupt})
	require.ErrorIs(t, err, clouddb.ErrDataCorrupt)

	fill(t, src.Port, src.Password, 2000, 4096) // ~8 MB, over the 2 MB limit
	big := filepath.Join(t.TempDir(), "big.rdb")
	f, err := os.Create(big)
	require.NoError(t, err)
	_, err = b.driver.Snapshot(ctx, src, 0, f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	err = b.driver.Load(ctx, dst, []string{big})
	require.ErrorIs(t, err, clouddb.ErrDataTooLarge)

	c := client(t, dst.Port, dst.Password)
	require.Equal(t, "me", c.Get(ctx, "keep").Val(), "the data is left as it was")
	require.Equal(t, int64(1), c.DBSize(ctx).Val())
}

// TestCopyFrom copies a live server's keys through the source dialer.
func TestCopyFrom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 1, "none")
	dst := b.instance(t, 2, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.NoError(t, b.driver.Ensure(ctx, dst))
	fill(t, src.Port, src.Password, 50, 10)
	ep := clouddb.RedisEndpoint{Addr: fmt.Sprintf("127.0.0.1:%d", src.Port), Password: src.Password}
	require.NoError(t, b.driver.CopyFrom(ctx, dst, ep))
	require.Equal(t, int64(55), client(t, dst.Port, dst.Password).DBSize(ctx).Val())

	ep.Password = "wrong"
	require.Error(t, b.driver.CopyFrom(ctx, dst, ep))

	// A driver whose source dialer refuses the address does not connect.
	refused := errors.New("address refused by policy")
	guarded, err := local.New(local.Config{Dir: b.dir, Host: "127.0.0.1",
		DialSource: func(context.Context, string, string) (net.Conn, error) { return nil, refused }})
	require.NoError(t, err)
	ep.Password = src.Password
	require.ErrorIs(t, guarded.CopyFrom(ctx, dst, ep), refused)
}

// TestReplicaOf: with sources, clients cannot write and the sources' writes arrive; with
// none again, the database is writable and follows no one.
func TestReplicaOf(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src1 := b.instance(t, 1, "none")
	src2 := b.instance(t, 2, "none")
	dst := b.instance(t, 3, "aof-every-1-second")
	for _, in := range []clouddb.Instance{src1, src2, dst} {
		require.NoError(t, b.driver.Ensure(ctx, in))
	}
	s1, s2, c := client(t, src1.Port, src1.Password), client(t, src2.Port, src2.Password), client(t, dst.Port, dst.Password)
	require.NoError(t, s1.Set(ctx, "from1", "a", 0).Err())
	require.NoError(t, s2.Set(ctx, "from2", "b", 0).Err())

	dst.ReplicaOf = []clouddb.RedisEndpoint{
		{Addr: fmt.Sprintf("127.0.0.1:%d", src1.Port), Password: src1.Password},
		{Addr: fmt.Sprintf("127.0.0.1:%d", src2.Port), Password: src2.Password},
	}
	require.NoError(t, b.driver.Ensure(ctx, dst))
	require.ErrorContains(t, c.Set(ctx, "mine", "x", 0).Err(), "NOPERM", "clients cannot write a replica")
	eventuallyT(t, 5*time.Second, func() bool { return c.Get(ctx, "from1").Val() == "a" && c.Get(ctx, "from2").Val() == "b" })

	require.NoError(t, s1.Set(ctx, "later", "1", 0).Err())
	start := time.Now()
	eventuallyT(t, time.Second, func() bool { return c.Get(ctx, "later").Val() == "1" })
	t.Logf("a source's write arrived in %s", time.Since(start))
	status := b.driver.ReplicaStatus(dst.DatabaseID)
	require.Len(t, status, 2)

	// Remove one source: its changes stop arriving.
	dst.ReplicaOf = dst.ReplicaOf[1:]
	require.NoError(t, b.driver.Ensure(ctx, dst))
	require.NoError(t, s1.Set(ctx, "after-removal", "1", 0).Err())
	require.NoError(t, s2.Set(ctx, "still", "2", 0).Err())
	eventuallyT(t, time.Second, func() bool { return c.Get(ctx, "still").Val() == "2" })
	require.Zero(t, c.Exists(ctx, "after-removal").Val())

	dst.ReplicaOf = nil
	require.NoError(t, b.driver.Ensure(ctx, dst))
	require.NoError(t, c.Set(ctx, "mine", "x", 0).Err(), "writable again")
	require.Nil(t, b.driver.ReplicaStatus(dst.DatabaseID))
}

func eventuallyT(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEnsure_AdoptsAfterCrashBetweenPasswordChanges: a crash between two password changes
// can leave the server with a password that neither its config file nor the instance
// has; the server is still adopted (never restarted, which would lose unpersisted data)
// and given the instance's password.
func TestEnsure_AdoptsAfterCrashBetweenPasswordChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 1, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	before := pid(t, b.driver, 1)
	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "unpersisted", "v", 0).Err())
	// The server took a second password; the config file was never rewritten.
	ac := admin(t, filepath.Join(b.dir, "1"), in.Port)
	require.NoError(t, ac.Do(ctx, "acl", "setuser", "default", "resetpass", ">second-password").Err())

	in.Password = "third-password" // what the store wants now
	require.NoError(t, mustDriver(t, b.dir).Ensure(ctx, in), "a new driver, as after a restart of clouddb")
	require.Equal(t, before, pid(t, b.driver, 1), "adopted, not restarted")
	nc := client(t, in.Port, "third-password")
	require.Equal(t, "v", nc.Get(ctx, "unpersisted").Val())
	require.Error(t, client(t, in.Port, "second-password").Ping(ctx).Err())
}
