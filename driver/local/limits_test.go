package local_test

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestLimits_SetAndPutBack: a database's server runs with client buffer limits scaled to
// its memory limit and with RESTORE payloads checked; a change to any of them is noticed
// by Running and put back live by Ensure.
func TestLimits_SetAndPutBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 63, "none")
	in.MaxMemoryBytes = 512 * mb
	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 63)
	ac := admin(t, filepath.Join(b.dir, "63"), in.Port)
	check := func() {
		t.Helper()
		cfg, err := ac.ConfigGet(ctx, "*").Result()
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(128*mb), cfg["maxmemory-clients"], "a quarter of maxmemory")
		require.True(t, strings.HasPrefix(cfg["client-output-buffer-limit"], fmt.Sprintf("normal %d %d 60 ", 128*mb, 32*mb)),
			cfg["client-output-buffer-limit"])
		require.Equal(t, strconv.Itoa(512*mb), cfg["client-query-buffer-limit"])
		require.Equal(t, "clients", cfg["sanitize-dump-payload"])
		require.Equal(t, "", cfg["logfile"], "the log goes to clouddb")
	}
	check()

	for _, tamper := range [][]any{
		{"config", "set", "maxmemory-clients", "0"},
		{"config", "set", "client-output-buffer-limit", "normal 0 0 0"},
		{"config", "set", "client-query-buffer-limit", "1gb"},
		{"config", "set", "sanitize-dump-payload", "no"},
	} {
		require.NoError(t, ac.Do(ctx, tamper...).Err())
		d := mustDriver(t, b.dir) // no recent deep check vouches for the server
		requireRunning(t, d, in, false, "drift must be noticed: %v", tamper)
		require.NoError(t, d.Ensure(ctx, in))
		require.Equal(t, p, pid(t, d, 63), "put back live, not restarted")
		requireRunning(t, d, in, true)
		check()
	}
	// A tenant cannot lift them (CLIENT NO-EVICT is clouddb's).
	c := client(t, in.Port, in.Password)
	require.ErrorContains(t, c.Do(ctx, "client", "no-evict", "on").Err(), "NOPERM")
}

// usedMemory reads INFO memory's used_memory and mem_clients_normal.
func usedMemory(t *testing.T, c *redis.Client) (used, clients int64) {
	t.Helper()
	info, err := c.Info(ctxT(t), "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			used, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "mem_clients_normal:"); ok {
			clients, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return used, clients
}

// TestLimits_SlowReaderIsDisconnected: a tenant's client that pipelines 300 GETs of a
// 1 MB value and reads none of the replies is disconnected once its buffers pass the
// database's client memory limit, instead of growing the server 300 MB past its 64 MB
// memory limit; values of several megabytes still go both ways.
func TestLimits_SlowReaderIsDisconnected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 64, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	c := client(t, in.Port, in.Password)
	ac := admin(t, filepath.Join(b.dir, "64"), in.Port)
	for _, size := range []int{1 * mb, 8 * mb, 16 * mb} {
		v := strings.Repeat("v", size)
		require.NoError(t, c.Set(ctx, "big", v, 0).Err())
		got, err := c.Get(ctx, "big").Result()
		require.NoError(t, err)
		require.Equal(t, size, len(got))
	}
	require.NoError(t, c.Set(ctx, "big", strings.Repeat("v", mb), 0).Err())

	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", in.Port))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	r := bufio.NewReader(conn)
	fmt.Fprintf(conn, "AUTH %s\r\nCLIENT ID\r\n", in.Password)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", line)
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	id := strings.TrimSpace(strings.TrimPrefix(line, ":"))
	go func() {
		_, _ = conn.Write([]byte(strings.Repeat("GET big\r\n", 300)))
	}()

	var peakUsed, peakClients int64
	gone := false
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		used, clients := usedMemory(t, ac)
		peakUsed, peakClients = max(peakUsed, used), max(peakClients, clients)
		list, err := ac.Do(ctx, "client", "list", "id", id).Text()
		require.NoError(t, err)
		if strings.TrimSpace(list) == "" {
			gone = true
			break
		}
	}
	t.Logf("peak used_memory %d, peak mem_clients_normal %d", peakUsed, peakClients)
	require.True(t, gone, "the slow reader must be disconnected (peak used_memory %d)", peakUsed)
	// The clients' limit is 64 MiB; the data ~1 MB.
	require.Less(t, peakClients, int64(80*mb))
	require.Less(t, peakUsed, int64(96*mb))
	require.NoError(t, c.Ping(ctx).Err())
	require.Equal(t, mb, len(c.Get(ctx, "big").Val()))
}

// backupLoadCopy backs src up and loads the backup into a new database, copies src live
// into another, and has check look at both.
func backupLoadCopy(t *testing.T, b *testBundle, src clouddb.Instance, firstID int, check func(clouddb.Instance)) {
	t.Helper()
	ctx := ctxT(t)
	file := filepath.Join(t.TempDir(), "backup.rdb")
	f, err := os.Create(file)
	require.NoError(t, err)
	_, err = b.driver.Snapshot(ctx, src, 0, f)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	loaded := b.instance(t, firstID, "none")
	loaded.MaxMemoryBytes = src.MaxMemoryBytes
	require.NoError(t, b.driver.Ensure(ctx, loaded))
	require.NoError(t, b.driver.Load(ctx, loaded, []string{file}))
	check(loaded)

	copied := b.instance(t, firstID+1, "none")
	copied.MaxMemoryBytes = src.MaxMemoryBytes
	require.NoError(t, b.driver.Ensure(ctx, copied))
	ep := clouddb.RedisEndpoint{Addr: fmt.Sprintf("127.0.0.1:%d", src.Port), Password: src.Password}
	require.NoError(t, b.driver.CopyFrom(ctx, copied, ep))
	check(copied)
}

// TestLimits_FullDatabaseCopies: a 64 MB database filled to near its limit is backed up,
// loaded and copied whole.
func TestLimits_FullDatabaseCopies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 65, "none")
	src.EvictionPolicy = "noeviction"
	require.NoError(t, b.driver.Ensure(ctx, src))
	fill(t, src.Port, src.Password, 5000, 10_000) // ~55 MB in memory
	used, _ := usedMemory(t, client(t, src.Port, src.Password))
	t.Logf("source used_memory %d of %d", used, src.MaxMemoryBytes)
	require.Greater(t, used, src.MaxMemoryBytes*3/4)
	backupLoadCopy(t, b, src, 66, func(in clouddb.Instance) {
		require.Equal(t, int64(5005), client(t, in.Port, in.Password).DBSize(ctx).Val())
	})
}

// TestLimits_BigKeysStillCopy: clouddb's own connections are not cut by the client
// limits: a 256 MB database holding a 72 MB list, larger than the 64 MiB its tenant may
// send or receive in one command, is backed up, loaded and copied whole.
func TestLimits_BigKeysStillCopy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 68, "none")
	src.MaxMemoryBytes = 256 * mb
	require.NoError(t, b.driver.Ensure(ctx, src))
	c := client(t, src.Port, src.Password)
	elem := make([]byte, mb)
	for range 72 {
		_, _ = rand.Read(elem)
		require.NoError(t, c.RPush(ctx, "list", elem).Err())
	}
	fill(t, src.Port, src.Password, 100, 1000)
	backupLoadCopy(t, b, src, 69, func(in clouddb.Instance) {
		dc := client(t, in.Port, in.Password)
		require.Equal(t, int64(72), dc.LLen(ctx, "list").Val())
		require.Equal(t, int64(106), dc.DBSize(ctx).Val())
		require.Equal(t, mb, len(dc.LIndex(ctx, "list", 71).Val()))
	})
}
