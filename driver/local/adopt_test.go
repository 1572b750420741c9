package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// plainServer starts a bare redis-server on a free loopback port, with no password and
// no persistence: the "master" a tenant could once point its database at with REPLICAOF.
func plainServer(t *testing.T) int {
	t.Helper()
	port := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	cmd.Dir = dir
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	c := client(t, port, "")
	eventuallyT(t, 10*time.Second, func() bool { return c.Ping(context.Background()).Err() == nil })
	return port
}

// oldStyleServer starts, outside of clouddb, the database's server as an earlier clouddb
// did: requirepass, so that its default user may do anything, and clouddb's internal user
// with the secret "old-internal-secret".
func oldStyleServer(t *testing.T, b *testBundle, in clouddb.Instance) (dir string, pid int) {
	t.Helper()
	dir = filepath.Join(b.dir, strconv.Itoa(in.DatabaseID))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	conf := fmt.Sprintf("port %d\nbind \"127.0.0.1\"\nprotected-mode \"yes\"\nrequirepass %q\n", in.Port, in.Password) +
		"user \"clouddb-internal\" \"on\" \">old-internal-secret\" \"~*\" \"&*\" \"+@all\"\n" +
		fmt.Sprintf("maxmemory 1000000\nmaxmemory-policy \"noeviction\"\nappendonly \"no\"\nappendfsync \"everysec\"\nsave \"\"\ndir %q\npidfile %q\nlogfile %q\n",
			real, filepath.Join(real, "redis.pid"), filepath.Join(real, "redis.log"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(conf), 0o600))
	cmd := exec.Command("redis-server", filepath.Join(real, "redis.conf"))
	cmd.Dir = real
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait() }()
	c := client(t, in.Port, in.Password)
	eventuallyT(t, 10*time.Second, func() bool { return c.Ping(context.Background()).Err() == nil && pidFileWritten(dir) })
	return dir, cmd.Process.Pid
}

// resp encodes a command as a RESP array.
func resp(words ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(words))
	for _, w := range words {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(w), w)
	}
	return []byte(b.String())
}

// rawConn opens a connection, logs in as user (the default user when empty) and sends
// cmd, if any, returning the first line of its answer: for the connections (MONITOR,
// PSYNC) that go-redis's clients do not keep as they are.
func rawConn(t *testing.T, port int, user, password string, cmd ...string) (net.Conn, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	auth := []string{"auth", password}
	if user != "" {
		auth = []string{"auth", user, password}
	}
	_, err = conn.Write(resp(auth...))
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", line)
	if len(cmd) > 0 {
		_, err = conn.Write(resp(cmd...))
		require.NoError(t, err)
		line, err = r.ReadString('\n')
		require.NoError(t, err)
	}
	require.NoError(t, conn.SetDeadline(time.Time{}))
	return conn, strings.TrimSpace(line)
}

// closedWithin reports whether the server closes conn within d (whatever it sends first).
func closedWithin(conn net.Conn, d time.Duration) bool {
	if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return true
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := conn.Read(buf); err != nil {
			return !errors.Is(err, os.ErrDeadlineExceeded)
		}
	}
}

func role(t *testing.T, ctx context.Context, c *redis.Client) string {
	t.Helper()
	v, err := c.Do(ctx, "role").Slice()
	require.NoError(t, err)
	return fmt.Sprint(v[0])
}

func aclUsers(t *testing.T, ctx context.Context, c *redis.Client) []string {
	t.Helper()
	users, err := c.Do(ctx, "acl", "users").StringSlice()
	require.NoError(t, err)
	return users
}

// TestEnsure_OldStyleServerLosesWhatTheTenantSetUp: on a server of an earlier clouddb,
// whose default user could administer it, the tenant made a user of its own, made the
// server a replica of another one, keeps a MONITOR and a replica connection, and gave
// clouddb's internal user a password of its own. Adoption deletes the user, ends the
// replication and closes those connections; the data stays and the tenant can still use
// its database.
func TestEnsure_OldStyleServerLosesWhatTheTenantSetUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 61, "none")
	dir, serverPid := oldStyleServer(t, b, in)
	master := plainServer(t)
	require.NoError(t, client(t, master, "").Set(ctx, "from-master", "v", 0).Err())

	old := client(t, in.Port, in.Password)
	require.NoError(t, old.Do(ctx, "acl", "setuser", "x", "on", ">x-password", "~*", "&*", "+@all").Err())
	require.NoError(t, old.Do(ctx, "acl", "setuser", "clouddb-internal", ">tenant-internal").Err())
	require.NoError(t, old.Do(ctx, "replicaof", "127.0.0.1", strconv.Itoa(master)).Err())
	eventuallyT(t, 10*time.Second, func() bool {
		info := old.Info(ctx, "replication").Val()
		return strings.Contains(info, "master_link_status:up") && old.Get(ctx, "from-master").Val() == "v"
	})
	xConn, _ := rawConn(t, in.Port, "x", "x-password", "ping")
	internalConn, _ := rawConn(t, in.Port, "clouddb-internal", "tenant-internal", "ping")
	monitor, line := rawConn(t, in.Port, "", in.Password, "monitor")
	require.Equal(t, "+OK", line)
	require.NoError(t, old.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err())
	replica, line := rawConn(t, in.Port, "", in.Password, "psync", "?", "-1")
	require.True(t, strings.HasPrefix(line, "+FULLRESYNC"), line)

	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, serverPid, pid(t, b.driver, 61), "adopted, not restarted")

	ac := admin(t, dir, in.Port)
	require.ElementsMatch(t, []string{"default", "clouddb-internal"}, aclUsers(t, ctx, ac))
	require.ErrorContains(t, client(t, in.Port, "").Do(ctx, "auth", "x", "x-password").Err(), "WRONGPASS")
	require.ErrorContains(t, client(t, in.Port, "").Do(ctx, "auth", "clouddb-internal", "tenant-internal").Err(), "WRONGPASS")
	require.Equal(t, "master", role(t, ctx, ac))
	require.True(t, closedWithin(xConn, 5*time.Second), "user x's connection is closed")
	require.True(t, closedWithin(internalConn, 5*time.Second), "the tenant's connection as the internal user is closed")
	require.True(t, closedWithin(monitor, 5*time.Second), "the MONITOR connection is closed")
	require.True(t, closedWithin(replica, 5*time.Second), "the replica connection is closed")

	c := client(t, in.Port, in.Password)
	require.Equal(t, "v", c.Get(ctx, "from-master").Val(), "the data stays")
	require.NoError(t, c.Set(ctx, "k", "mine", 0).Err(), "the tenant writes to a master")
	require.Equal(t, "mine", c.Get(ctx, "k").Val())
	require.ErrorContains(t, c.Do(ctx, "monitor").Err(), "NOPERM")
	requireRunning(t, b.driver, in, true)
}

// TestEnsure_HealthyServerKeepsItsClients: adopting a server that is as clouddb left it,
// by a new clouddb or by a change through the API (replicaOf on and off again), does not
// disconnect its tenant; a scratch user left over by a crash, which nobody can log in
// as, is deleted quietly.
func TestEnsure_HealthyServerKeepsItsClients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 62, "none")
	in := b.instance(t, 63, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.NoError(t, b.driver.Ensure(ctx, in))
	dir := filepath.Join(b.dir, "63")
	ac := admin(t, dir, in.Port)
	require.NoError(t, ac.Do(ctx, "acl", "setuser", "clouddb-scratch", "reset", "on", "~*", "&*", "+@all", "-@admin").Err())

	tenant := client(t, in.Port, in.Password).Conn()
	t.Cleanup(func() { tenant.Close() })
	id, err := tenant.ClientID(ctx).Result()
	require.NoError(t, err)
	sub := client(t, in.Port, in.Password).Subscribe(ctx, "news")
	t.Cleanup(func() { sub.Close() })
	_, err = sub.Receive(ctx)
	require.NoError(t, err)
	stillConnected := func(step string) {
		t.Helper()
		got, cerr := tenant.ClientID(ctx).Result()
		require.NoError(t, cerr, step)
		require.Equal(t, id, got, step)
		clients := ac.ClientList(ctx).Val()
		require.Contains(t, clients, "sub=1", step+": the subscriber is still connected")
	}

	d2 := mustDriver(t, b.dir)
	require.NoError(t, d2.Ensure(ctx, in))
	stillConnected("adoption by a new driver")
	require.ElementsMatch(t, []string{"default", "clouddb-internal"}, aclUsers(t, ctx, ac), "the scratch user is gone")

	in.ReplicaOf = []clouddb.RedisEndpoint{srcEndpoint(src.Port, src.Password)}
	require.NoError(t, b.driver.Ensure(ctx, in))
	stillConnected("replicaOf on")
	in.ReplicaOf = nil
	require.NoError(t, b.driver.Ensure(ctx, in))
	stillConnected("replicaOf off")
	requireRunning(t, b.driver, in, true)
}

// TestRunning_ForeignUsersAndReplicationAreDrift: a user clouddb did not make, a scratch
// user someone can log in as, and a REPLICAOF link, made behind clouddb's back, make
// Running false, and Ensure undoes them without a restart. A scratch user nobody can log
// in as is not drift.
func TestRunning_ForeignUsersAndReplicationAreDrift(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 64, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 64)
	dir := filepath.Join(b.dir, "64")
	master := plainServer(t)

	for _, tc := range []struct {
		name   string
		tamper []any
		login  []string // a user and password the tamper lets in
	}{
		{"extra user", []any{"acl", "setuser", "extra", "on", ">pw", "~*", "&*", "+@all"}, []string{"extra", "pw"}},
		{"scratch user with a password", []any{"acl", "setuser", "clouddb-scratch", "on", ">pw", "+@all"}, []string{"clouddb-scratch", "pw"}},
		{"scratch user without a password", []any{"acl", "setuser", "clouddb-scratch", "reset", "on", "+@all"}, nil},
		{"replicaof", []any{"replicaof", "127.0.0.1", strconv.Itoa(master)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ac := admin(t, dir, in.Port)
			require.NoError(t, ac.Do(ctx, tc.tamper...).Err())
			var conn net.Conn
			if tc.login != nil {
				conn, _ = rawConn(t, in.Port, tc.login[0], tc.login[1], "ping")
			}
			// A fresh driver, so that no recent deep check vouches for the server.
			d := mustDriver(t, b.dir)
			running, err := d.Running(ctx, in)
			require.NoError(t, err)
			if tc.name == "scratch user without a password" {
				require.True(t, running, "nobody can log in as it")
				require.NoError(t, d.Ensure(ctx, in))
				require.ElementsMatch(t, []string{"default", "clouddb-internal"}, aclUsers(t, ctx, ac))
				return
			}
			require.False(t, running, "drift must be noticed")
			require.NoError(t, d.Ensure(ctx, in))
			require.Equal(t, p, pid(t, d, 64), "put back live, not restarted")
			require.ElementsMatch(t, []string{"default", "clouddb-internal"}, aclUsers(t, ctx, ac))
			require.Equal(t, "master", role(t, ctx, ac))
			if conn != nil {
				require.True(t, closedWithin(conn, 5*time.Second), "the connection of the deleted user is closed")
				require.ErrorContains(t, client(t, in.Port, "").Do(ctx, "auth", tc.login[0], tc.login[1]).Err(), "WRONGPASS")
			}
			requireRunning(t, d, in, true)
			c := client(t, in.Port, in.Password)
			require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
		})
	}
}

// TestEnsure_FullDatabaseBroughtInLine: a server whose used memory is over its maxmemory
// refuses to queue any command in a transaction (MULTI); what clouddb did not set up is
// removed all the same.
func TestEnsure_FullDatabaseBroughtInLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 65, "none")
	in.MaxMemoryBytes = 1 << 20 // below what an empty server uses: always over
	require.NoError(t, b.driver.Ensure(ctx, in))
	ac := admin(t, filepath.Join(b.dir, "65"), in.Port)
	require.ErrorContains(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err(), "OOM", "the server is over its maxmemory")
	require.NoError(t, ac.Do(ctx, "acl", "setuser", "extra", "on", ">pw", "~*", "&*", "+@all").Err())

	d := mustDriver(t, b.dir)
	require.NoError(t, d.Ensure(ctx, in))
	require.ElementsMatch(t, []string{"default", "clouddb-internal"}, aclUsers(t, ctx, ac))
}

// TestEnsure_CancelledAdoptionLeavesServerAlone: an adoption given up by its caller (a
// shutdown) while the server is slow to answer says nothing about the server: it is not
// restarted, let alone killed.
func TestEnsure_CancelledAdoptionLeavesServerAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 68, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 68)
	require.NoError(t, syscall.Kill(p, syscall.SIGSTOP)) // answers nothing for now
	defer func() { _ = syscall.Kill(p, syscall.SIGCONT) }()

	d := mustDriver(t, b.dir) // a new clouddb, adopting
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.Error(t, d.Ensure(short, in))
	require.NoError(t, syscall.Kill(p, syscall.SIGCONT))
	time.Sleep(200 * time.Millisecond) // a SIGTERM or SIGKILL sent meanwhile would land now
	require.NoError(t, syscall.Kill(p, 0), "the server was killed")
	require.NoError(t, d.Ensure(ctx, in))
	require.Equal(t, p, pid(t, d, 68), "adopted, not restarted")
}
