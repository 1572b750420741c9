package local_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

func srcEndpoint(port int, password string) clouddb.RedisEndpoint {
	return clouddb.RedisEndpoint{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Password: password}
}

// refusedExamples reads the examples of the README's "What a tenant may do on its
// database" table: the commands a tenant must be refused.
func refusedExamples(t *testing.T) [][]string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(readme), "### What a tenant may do on its database\n")
	require.True(t, ok, "README has no section on what a tenant may do")
	sec, _, _ = strings.Cut(sec, "\n### ")
	cell := regexp.MustCompile("^\\|[^|]*\\| `([^`]+)` \\|")
	var out [][]string
	for _, line := range strings.Split(sec, "\n") {
		if m := cell.FindStringSubmatch(line); m != nil {
			out = append(out, strings.Fields(m[1]))
		}
	}
	require.Greater(t, len(out), 30, "the README's table of refused commands")
	return out
}

func doArgs(words []string) []any {
	args := make([]any, len(words))
	for i, w := range words {
		args[i] = w
	}
	return args
}

// TestTenantRefusedAdminCommands: every command of the README's list, sent with the
// tenant's password, answers NOPERM, and none of them had an effect.
func TestTenantRefusedAdminCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 40, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 40)
	ac := admin(t, filepath.Join(b.dir, "40"), in.Port)
	before, err := ac.ConfigGet(ctx, "*").Result()
	require.NoError(t, err)
	lastSave := ac.LastSave(ctx).Val()

	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	for _, words := range refusedExamples(t) {
		derr := c.Do(ctx, doArgs(words)...).Err()
		require.Error(t, derr, "%q must be refused", words)
		t.Logf("%q: %v", words, derr)
		// DEBUG and MODULE are also off in redis' own configuration, which answers first.
		refused := strings.HasPrefix(derr.Error(), "NOPERM") ||
			(slices.Contains([]string{"DEBUG", "MODULE"}, words[0]) && strings.Contains(derr.Error(), "command not allowed"))
		require.True(t, refused, "%q: %v", words, derr)
		// And the ACL refuses it, whatever answers first.
		dry, dryErr := ac.Do(ctx, append([]any{"acl", "dryrun", "default"}, doArgs(words)...)...).Text()
		require.NoError(t, dryErr, "%q", words)
		require.Contains(t, dry, "no permissions", "%q", words)
	}

	// Nothing happened: same process, same settings, same users, no save, still a primary.
	require.Equal(t, p, pid(t, b.driver, 40))
	after, err := ac.ConfigGet(ctx, "*").Result()
	require.NoError(t, err)
	for _, name := range []string{"maxmemory", "maxmemory-policy", "port", "bind", "appendonly", "save", "dir", "dbfilename", "replicaof"} {
		require.Equal(t, before[name], after[name], name)
	}
	require.Equal(t, strconv.Itoa(64*mb), after["maxmemory"])
	users, err := ac.Do(ctx, "acl", "users").StringSlice()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"default", "clouddb-internal"}, users)
	require.Equal(t, lastSave, ac.LastSave(ctx).Val())
	role, err := ac.Do(ctx, "role").Slice()
	require.NoError(t, err)
	require.Equal(t, "master", role[0])
	require.Empty(t, ac.Do(ctx, "module", "list").Val())
	require.Equal(t, "v", c.Get(ctx, "k").Val())
}

// TestTenantDataCommands: the data-plane commands keep working with the tenant's password.
func TestTenantDataCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 41, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	cl := client(t, in.Port, in.Password)
	// One connection, so that SELECT and CLIENT SETNAME hold for what follows.
	c := cl.Conn()
	t.Cleanup(func() { c.Close() })

	dump := ""
	for _, words := range [][]string{
		{"set", "s", "1"}, {"get", "s"}, {"incr", "s"}, {"append", "s", "x"}, {"getrange", "s", "0", "1"},
		{"hset", "h", "f", "v"}, {"hgetall", "h"}, {"lpush", "l", "a", "b"}, {"lrange", "l", "0", "-1"},
		{"sadd", "st", "a"}, {"smembers", "st"}, {"zadd", "z", "1", "a"}, {"zrange", "z", "0", "-1"},
		{"xadd", "x", "*", "f", "v"}, {"xrange", "x", "-", "+"}, {"pfadd", "hll", "a"}, {"pfcount", "hll"},
		{"setbit", "bits", "7", "1"}, {"geoadd", "g", "13.36", "38.11", "p"},
		{"publish", "ch", "m"}, {"pubsub", "channels"},
		{"eval", "return redis.call('set', KEYS[1], ARGV[1])", "1", "lua", "ok"},
		{"function", "load", "REPLACE", "#!lua name=lib\nredis.register_function('f', function() return 1 end)"},
		{"fcall", "f", "0"}, {"script", "load", "return 1"},
		{"scan", "0"}, {"keys", "*"}, {"sort", "l", "alpha"}, {"info"}, {"info", "memory"}, {"dbsize"},
		{"expire", "s", "100"}, {"ttl", "s"}, {"persist", "s"}, {"object", "encoding", "s"}, {"memory", "usage", "s"},
		{"type", "s"}, {"exists", "s"}, {"rename", "s", "s2"}, {"del", "s2"},
		{"client", "setname", "app"}, {"client", "getname"}, {"client", "id"}, {"client", "info"}, {"client", "list"},
		{"acl", "whoami"}, {"acl", "cat"}, {"role"}, {"wait", "0", "0"}, {"lastsave"}, {"slowlog", "get"},
		{"latency", "latest"}, {"command", "count"}, {"time"}, {"echo", "x"}, {"ping"},
		{"swapdb", "0", "1"}, {"swapdb", "0", "1"}, {"select", "1"}, {"set", "in1", "x"}, {"select", "0"},
		{"flushdb"}, {"flushall"},
	} {
		v, err := c.Do(ctx, doArgs(words)...).Result()
		require.NoError(t, err, "%q", words)
		if words[0] == "client" && words[1] == "getname" {
			require.Equal(t, "app", v)
		}
	}
	// Transactions and DUMP/RESTORE.
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "t", "1", 0)
		p.Incr(ctx, "t")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "2", c.Get(ctx, "t").Val())
	dump, err = c.Dump(ctx, "t").Result()
	require.NoError(t, err)
	require.NoError(t, c.Restore(ctx, "t2", 0, dump).Err())
	require.Equal(t, "2", c.Get(ctx, "t2").Val())
	// Subscribing works too.
	sub := cl.Subscribe(ctx, "news")
	defer sub.Close()
	_, err = sub.Receive(ctx)
	require.NoError(t, err)
}

// TestTenantReadOnlyReplica: a database that replicates from sources refuses the tenant's
// writes as well as the admin commands, and still serves reads.
func TestTenantReadOnlyReplica(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 42, "none")
	dst := b.instance(t, 43, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.NoError(t, client(t, src.Port, src.Password).Set(ctx, "from-src", "v", 0).Err())
	dst.ReplicaOf = append(dst.ReplicaOf, srcEndpoint(src.Port, src.Password))
	require.NoError(t, b.driver.Ensure(ctx, dst))
	c := client(t, dst.Port, dst.Password)
	eventuallyT(t, 10*time.Second, func() bool { return c.Get(ctx, "from-src").Val() == "v" })
	require.ErrorContains(t, c.Set(ctx, "k", "v", 0).Err(), "NOPERM")
	require.ErrorContains(t, c.Do(ctx, "flushall").Err(), "NOPERM")
	require.ErrorContains(t, c.ConfigSet(ctx, "maxmemory", "0").Err(), "NOPERM")
	require.ErrorContains(t, c.Do(ctx, "replicaof", "no", "one").Err(), "NOPERM")
	require.NoError(t, c.Do(ctx, "dbsize").Err())
}

// TestRunning_DriftIsPutBack: settings and the default user's rules changed behind
// clouddb's back make Running false, and Ensure puts them back without a restart.
func TestRunning_DriftIsPutBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 44, "none")
	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 44)
	requireRunning(t, b.driver, in, true)

	for _, tamper := range [][]any{
		{"config", "set", "maxmemory", "0"},
		{"config", "set", "maxmemory-policy", "noeviction"},
		{"config", "set", "appendonly", "yes"},
		{"config", "set", "save", "1 1"},
		{"config", "set", "bind", "127.0.0.1 127.0.0.2"},
		{"acl", "setuser", "default", "+@all"},
		{"acl", "setuser", "default", ">another-password"},
	} {
		t.Run(fmt.Sprint(tamper...), func(t *testing.T) {
			// A fresh driver, so that no recent deep check vouches for the server.
			d := mustDriver(t, b.dir)
			require.NoError(t, d.Ensure(ctx, in))
			requireRunning(t, d, in, true)

			ac := admin(t, filepath.Join(b.dir, "44"), in.Port)
			require.NoError(t, ac.Do(ctx, tamper...).Err())
			d2 := mustDriver(t, b.dir)
			requireRunning(t, d2, in, false, "drift must be noticed")
			require.NoError(t, d2.Ensure(ctx, in))
			require.Equal(t, p, pid(t, d2, 44), "put back live, not restarted")
			requireRunning(t, d2, in, true)

			cfg, err := ac.ConfigGet(ctx, "*").Result()
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(64*mb), cfg["maxmemory"])
			require.Equal(t, "volatile-lru", cfg["maxmemory-policy"])
			require.Equal(t, "no", cfg["appendonly"])
			require.Equal(t, "", cfg["save"])
			require.Equal(t, "127.0.0.1", cfg["bind"])
			c := client(t, in.Port, in.Password)
			require.ErrorContains(t, c.ConfigGet(ctx, "maxmemory").Err(), "NOPERM")
			require.ErrorContains(t, client(t, in.Port, "another-password").Ping(ctx).Err(), "WRONGPASS")
		})
	}
}

// TestEnsure_OldStyleServerBroughtInLine: a server that an earlier clouddb started with
// requirepass (its default user may do anything) is adopted, not restarted, and its
// default user restricted.
func TestEnsure_OldStyleServerBroughtInLine(t *testing.T) {
	t.Parallel()
	for i, withInternal := range []bool{true, false} {
		t.Run(fmt.Sprintf("internal user %v", withInternal), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := ctxT(t)
			id := 45 + i
			in := b.instance(t, id, "none")
			dir := filepath.Join(b.dir, strconv.Itoa(id))
			require.NoError(t, os.MkdirAll(dir, 0o700))
			real, err := filepath.EvalSymlinks(dir)
			require.NoError(t, err)
			conf := fmt.Sprintf("port %d\nbind \"127.0.0.1\"\nprotected-mode \"yes\"\nrequirepass %q\n", in.Port, in.Password)
			if withInternal {
				conf += "user \"clouddb-internal\" \"on\" \">old-internal-secret\" \"~*\" \"&*\" \"+@all\"\n"
			}
			conf += fmt.Sprintf("maxmemory 1000000\nmaxmemory-policy \"noeviction\"\nappendonly \"no\"\nappendfsync \"everysec\"\nsave \"\"\ndir %q\npidfile %q\nlogfile %q\n",
				real, filepath.Join(real, "redis.pid"), filepath.Join(real, "redis.log"))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(conf), 0o600))
			cmd := exec.Command("redis-server", filepath.Join(real, "redis.conf"))
			cmd.Dir = real
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			require.NoError(t, cmd.Start())
			go func() { _ = cmd.Wait() }()
			old := client(t, in.Port, in.Password)
			eventuallyT(t, 10*time.Second, func() bool { return old.Ping(ctx).Err() == nil && pidFileWritten(dir) })
			require.NoError(t, old.Set(ctx, "k", "kept", 0).Err())
			require.NoError(t, old.ConfigGet(ctx, "maxmemory").Err(), "the old default user may administer")

			require.NoError(t, b.driver.Ensure(ctx, in))
			require.Equal(t, cmd.Process.Pid, pid(t, b.driver, id), "adopted, not restarted")
			c := client(t, in.Port, in.Password)
			require.Equal(t, "kept", c.Get(ctx, "k").Val())
			require.ErrorContains(t, c.ConfigGet(ctx, "maxmemory").Err(), "NOPERM")
			require.ErrorContains(t, c.Do(ctx, "acl", "setuser", "x").Err(), "NOPERM")
			cfg, err := admin(t, dir, in.Port).ConfigGet(ctx, "*").Result()
			require.NoError(t, err)
			require.Equal(t, strconv.Itoa(64*mb), cfg["maxmemory"])
			data, err := os.ReadFile(filepath.Join(dir, "redis.conf"))
			require.NoError(t, err)
			require.NotContains(t, string(data), "requirepass")
			require.Contains(t, string(data), `user "default" "reset" "on"`)
			requireRunning(t, b.driver, in, true)
		})
	}
}

func pidFileWritten(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "redis.pid"))
	return err == nil && strings.TrimSpace(string(data)) != ""
}

// TestEnsure_ServerOffItsPortIsMovedBack: a server of ours that listens elsewhere than its
// configured port (as after a tenant's CONFIG SET port, when tenants could) is drift, and
// is put back on its port live (the driver reaches it through its unix socket), with its
// data, instead of failing "does not answer".
func TestEnsure_ServerOffItsPortIsMovedBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 47, "aof-every-write")
	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 47)
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "kept", 0).Err())
	ac := admin(t, filepath.Join(b.dir, "47"), in.Port)
	moved := freePort(t)
	require.NoError(t, ac.ConfigSet(ctx, "port", strconv.Itoa(moved)).Err())
	eventuallyT(t, 5*time.Second, func() bool {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(in.Port)), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})

	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, p, pid(t, b.driver, 47))
	require.Equal(t, "kept", client(t, in.Port, in.Password).Get(ctx, "k").Val())
	requireRunning(t, b.driver, in, true)
}

// TestCopyFrom_OwnDatabaseAsInternalUser: a source that is another database of this
// driver, named with its tenant's password, is read although that user may not run the
// replication commands; a wrong password is still refused.
func TestCopyFrom_OwnDatabaseAsInternalUser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 48, "none")
	dst := b.instance(t, 49, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.NoError(t, b.driver.Ensure(ctx, dst))
	sc := client(t, src.Port, src.Password)
	require.NoError(t, sc.Set(ctx, "k", "v", 0).Err())
	require.ErrorContains(t, sc.Do(ctx, "psync", "?", "-1").Err(), "NOPERM")
	require.NoError(t, b.driver.CopyFrom(ctx, dst, srcEndpoint(src.Port, src.Password)))
	require.Equal(t, "v", client(t, dst.Port, dst.Password).Get(ctx, "k").Val())
	err := b.driver.CopyFrom(ctx, dst, srcEndpoint(src.Port, "wrong"))
	require.Error(t, err)
	require.True(t, slices.ContainsFunc([]string{"WRONGPASS", "password"}, func(s string) bool { return strings.Contains(err.Error(), s) }), err.Error())

	// Its default user turned off, the password logs in nowhere: clouddb's own user does
	// not read the database for its holder either.
	src.DefaultUserOff = true
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.Error(t, b.driver.CopyFrom(ctx, dst, srcEndpoint(src.Port, src.Password)))
}
