package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// The rules of the API's default rules.
const (
	fullAccess = "+@all  ~*"
	readWrite  = "+@all -@dangerous ~*"
	readOnly   = "+@read ~*"
)

// userClient logs in as a named user.
func userClient(t *testing.T, port int, user, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:            fmt.Sprintf("127.0.0.1:%d", port),
		Username:        user,
		Password:        password,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		DialTimeout:     2 * time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// authErr is the answer to AUTH user password on a new connection.
func authErr(t *testing.T, ctx context.Context, port int, user, password string) error {
	t.Helper()
	return client(t, port, "").Do(ctx, "auth", user, password).Err()
}

// noPlainPasswords checks that no file of the database's directory holds any of the
// passwords.
func noPlainPasswords(t *testing.T, dir string, passwords ...string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Type()&os.ModeSocket != 0 {
			return err
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, p := range passwords {
			require.NotContains(t, string(data), p, "%s holds a plain password", path)
		}
		return nil
	}))
}

// TestUsers_RulesLimitThem: the named users log in with their passwords and get what
// their rule gives, less the server's administration; MULTI/EXEC always work; the default
// user is as before.
func TestUsers_RulesLimitThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 90, "none")
	in.Users = []clouddb.DatabaseUser{
		{Name: "fa", Password: "Full.Acc3ss", Rule: fullAccess},
		{Name: "ro", Password: "Read.0nly", Rule: readOnly},
		{Name: "rw", Password: "Read.Wr1te", Rule: readWrite},
		{Name: "news", Password: "N3ws.only", Rule: "+@all ~* resetchannels &news"},
	}
	require.NoError(t, b.driver.Ensure(ctx, in))
	dir := filepath.Join(b.dir, "90")
	ac := admin(t, dir, in.Port)
	require.ElementsMatch(t, []string{"default", "clouddb-internal", "fa", "news", "ro", "rw"}, aclUsers(t, ctx, ac))
	requireRunning(t, b.driver, in, true)

	fa := userClient(t, in.Port, "fa", "Full.Acc3ss")
	require.NoError(t, fa.Set(ctx, "k", "v", 0).Err())
	require.Equal(t, "fa", fa.Do(ctx, "acl", "whoami").Val())
	for _, words := range [][]string{
		{"config", "set", "maxmemory", "0"}, {"shutdown", "nosave"}, {"acl", "setuser", "x", "on", ">x", "+@all"},
		{"acl", "deluser", "ro"}, {"debug", "sleep", "0"}, {"monitor"}, {"replicaof", "127.0.0.1", "1"},
		{"migrate", "127.0.0.1", "1", "k", "0", "1000"}, {"restore-asking", "k", "0", "x"}, {"script", "debug", "yes"},
		{"module", "list"}, {"save"}, {"client", "kill", "user", "default"}, {"config", "get", "maxmemory"},
		// The @admin reads the default user keeps are not given back to a named user.
		{"role"}, {"lastsave"}, {"client", "list"}, {"slowlog", "get"}, {"latency", "latest"},
	} {
		err := fa.Do(ctx, doArgs(words)...).Err()
		require.Error(t, err, "%q must be refused", words)
		require.True(t, strings.HasPrefix(err.Error(), "NOPERM") || strings.Contains(err.Error(), "command not allowed"), "%q: %v", words, err)
	}
	// Whatever answers first, the ACL refuses every command the README says a tenant may
	// not run to the broadest rule too.
	for _, words := range refusedExamples(t) {
		dry, err := ac.Do(ctx, append([]any{"acl", "dryrun", "fa"}, doArgs(words)...)...).Text()
		require.NoError(t, err, "%q", words)
		require.Contains(t, dry, "no permissions", "%q", words)
	}

	ro := userClient(t, in.Port, "ro", "Read.0nly")
	require.Equal(t, "v", ro.Get(ctx, "k").Val())
	require.ErrorContains(t, ro.Set(ctx, "k", "w", 0).Err(), "NOPERM")
	require.ErrorContains(t, ro.Del(ctx, "k").Err(), "NOPERM")
	// Transactions work for a read-only user; what they queue is still checked.
	cmds, err := ro.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "k")
		p.Exists(ctx, "k")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "v", cmds[0].(*redis.StringCmd).Val())
	cmds, err = ro.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "k", "w", 0)
		return nil
	})
	require.ErrorContains(t, err, "EXECABORT")
	require.ErrorContains(t, cmds[0].Err(), "NOPERM")
	require.NotContains(t, fmt.Sprint(ro.Do(ctx, "discard").Err()), "NOPERM", "DISCARD is allowed")
	require.Equal(t, "v", ro.Get(ctx, "k").Val())
	// Pub/sub channels are open, as on Redis Cloud.
	require.NoError(t, fa.Publish(ctx, "news", "m").Err())

	rw := userClient(t, in.Port, "rw", "Read.Wr1te")
	require.NoError(t, rw.Set(ctx, "k2", "v", 0).Err())
	require.ErrorContains(t, rw.Do(ctx, "flushall").Err(), "NOPERM")
	require.ErrorContains(t, rw.Do(ctx, "keys", "*").Err(), "NOPERM")

	// A rule that resets the channels wins over clouddb's allchannels.
	news := userClient(t, in.Port, "news", "N3ws.only")
	require.NoError(t, news.Publish(ctx, "news", "m").Err())
	require.ErrorContains(t, news.Publish(ctx, "sports", "m").Err(), "NOPERM")

	// Wrong passwords and the other users' passwords are refused.
	require.ErrorContains(t, authErr(t, ctx, in.Port, "ro", "Full.Acc3ss"), "WRONGPASS")
	require.ErrorContains(t, authErr(t, ctx, in.Port, "fa", ""), "WRONGPASS")

	// The default user is as before.
	c := client(t, in.Port, in.Password)
	require.NoError(t, c.Set(ctx, "d", "v", 0).Err())
	require.ErrorContains(t, c.ConfigGet(ctx, "maxmemory").Err(), "NOPERM")
	require.NoError(t, c.Do(ctx, "client", "list").Err())

	conf, err := os.ReadFile(filepath.Join(dir, "redis.conf"))
	require.NoError(t, err)
	require.Contains(t, string(conf), `user "ro" "reset" "on" "#`)
	noPlainPasswords(t, dir, "Full.Acc3ss", "Read.0nly", "Read.Wr1te", "N3ws.only")
}

// TestUsers_LiveChanges: a changed password or rule is applied to the running server
// (same run_id); the old password's connections are closed, a connection keeps working
// under a new rule; a user no longer wanted is deleted and its connections closed, while
// the default user's clients stay.
func TestUsers_LiveChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 91, "none")
	in.Users = []clouddb.DatabaseUser{
		{Name: "alice", Password: "Alice.pw1", Rule: readOnly},
		{Name: "bob", Password: "Bob.pw1", Rule: readOnly},
	}
	require.NoError(t, b.driver.Ensure(ctx, in))
	ac := admin(t, filepath.Join(b.dir, "91"), in.Port)
	run := runID(t, ctx, ac)
	defaultConn, _ := rawConn(t, in.Port, "", in.Password, "ping")

	// bob's rule widens: his open connection may write at once.
	bob := userClient(t, in.Port, "bob", "Bob.pw1")
	require.ErrorContains(t, bob.Set(ctx, "k", "v", 0).Err(), "NOPERM")
	bobConn, _ := rawConn(t, in.Port, "bob", "Bob.pw1", "ping")
	// alice's password changes: her connections of before are closed.
	aliceConn, _ := rawConn(t, in.Port, "alice", "Alice.pw1", "ping")
	in.Users = []clouddb.DatabaseUser{
		{Name: "alice", Password: "Alice.pw2", Rule: readOnly},
		{Name: "bob", Password: "Bob.pw1", Rule: readWrite},
	}
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, run, runID(t, ctx, ac), "applied live, not restarted")
	require.NoError(t, bob.Set(ctx, "k", "v", 0).Err(), "the new rule holds for an open connection")
	require.False(t, closedWithin(bobConn, 300*time.Millisecond), "a rule change keeps the user's connections")
	require.True(t, closedWithin(aliceConn, 5*time.Second), "the old password's connection is closed")
	require.ErrorContains(t, authErr(t, ctx, in.Port, "alice", "Alice.pw1"), "WRONGPASS")
	require.NoError(t, authErr(t, ctx, in.Port, "alice", "Alice.pw2"))
	requireRunning(t, b.driver, in, true)

	// bob goes: deleted, his connection closed; the tenant's default connection stays.
	in.Users = in.Users[:1]
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, run, runID(t, ctx, ac))
	require.ElementsMatch(t, []string{"default", "clouddb-internal", "alice"}, aclUsers(t, ctx, ac))
	require.True(t, closedWithin(bobConn, 5*time.Second), "the deleted user's connection is closed")
	require.Error(t, bob.Get(ctx, "k").Err())
	require.ErrorContains(t, authErr(t, ctx, in.Port, "bob", "Bob.pw1"), "WRONGPASS")
	require.False(t, closedWithin(defaultConn, 300*time.Millisecond), "removing clouddb's own user is no reason to cut the tenant")
	requireRunning(t, b.driver, in, true)

	// A clouddb that restarted knows the users it made from the config file.
	in.Users = nil
	d2 := mustDriver(t, b.dir)
	require.NoError(t, d2.Ensure(ctx, in))
	require.ElementsMatch(t, []string{"default", "clouddb-internal"}, aclUsers(t, ctx, ac))
	require.False(t, closedWithin(defaultConn, 300*time.Millisecond))
	requireRunning(t, d2, in, true)
}

// TestUsers_SurviveRestart: the users are in redis.conf (as hashes): a server killed and
// started again, and a new clouddb adopting it, keep them; no file holds a password.
func TestUsers_SurviveRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 92, "aof-every-write")
	in.Users = []clouddb.DatabaseUser{{Name: "app", Password: "App.pass9", Rule: readWrite}}
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, userClient(t, in.Port, "app", "App.pass9").Set(ctx, "k", "v", 0).Err())
	p := pid(t, b.driver, 92)
	require.NoError(t, syscall.Kill(p, syscall.SIGKILL))
	eventuallyT(t, 5*time.Second, func() bool { return processGone(p) })

	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NotEqual(t, p, pid(t, b.driver, 92))
	app := userClient(t, in.Port, "app", "App.pass9")
	require.Equal(t, "v", app.Get(ctx, "k").Val())
	requireRunning(t, b.driver, in, true)

	// A new clouddb adopts the server with its users.
	d2 := mustDriver(t, b.dir)
	requireRunning(t, d2, in, true)
	require.NoError(t, d2.Ensure(ctx, in))
	require.Equal(t, pid(t, b.driver, 92), pid(t, d2, 92))
	require.Equal(t, "v", app.Get(ctx, "k").Val())

	// And a server started from its file by itself has them too.
	require.NoError(t, d2.Stop(ctx, 92))
	require.NoError(t, d2.Ensure(ctx, in))
	require.Equal(t, "v", userClient(t, in.Port, "app", "App.pass9").Get(ctx, "k").Val())
	noPlainPasswords(t, filepath.Join(b.dir, "92"), "App.pass9")
}

// TestUsers_DriftIsPutBack: a named user deleted, given another password or other rules
// behind clouddb's back, or a stranger user, makes Running false; Ensure puts it back
// live.
func TestUsers_DriftIsPutBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 93, "none")
	in.Users = []clouddb.DatabaseUser{{Name: "ro", Password: "Read.0nly", Rule: readOnly}}
	require.NoError(t, b.driver.Ensure(ctx, in))
	p := pid(t, b.driver, 93)
	ac := admin(t, filepath.Join(b.dir, "93"), in.Port)
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())

	for _, tc := range []struct {
		name   string
		tamper []any
		fresh  bool // also noticed by a new clouddb, which never defined the user
	}{
		{"deleted", []any{"acl", "deluser", "ro"}, true},
		{"another password", []any{"acl", "setuser", "ro", "resetpass", ">Other.pw1"}, true},
		{"a second password", []any{"acl", "setuser", "ro", ">Other.pw1"}, true},
		{"nopass", []any{"acl", "setuser", "ro", "nopass"}, true},
		{"off", []any{"acl", "setuser", "ro", "off"}, true},
		{"wider rules", []any{"acl", "setuser", "ro", "+@all"}, false},
		{"stranger", []any{"acl", "setuser", "mallory", "on", ">Mall.0ry", "+@all", "~*"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A driver that defined the users and has not checked the server since.
			d := mustDriver(t, b.dir)
			require.NoError(t, d.Ensure(ctx, in))
			require.NoError(t, ac.Do(ctx, tc.tamper...).Err())
			if tc.fresh {
				requireRunning(t, mustDriver(t, b.dir), in, false, "a new clouddb notices")
			}
			requireRunning(t, d, in, false, "drift must be noticed")
			require.NoError(t, d.Ensure(ctx, in))
			require.Equal(t, p, pid(t, d, 93), "put back live, not restarted")
			requireRunning(t, d, in, true)
			require.ElementsMatch(t, []string{"default", "clouddb-internal", "ro"}, aclUsers(t, ctx, ac))
			ro := userClient(t, in.Port, "ro", "Read.0nly")
			require.Equal(t, "v", ro.Get(ctx, "k").Val())
			require.ErrorContains(t, ro.Set(ctx, "k", "v", 0).Err(), "NOPERM")
			require.ErrorContains(t, authErr(t, ctx, in.Port, "ro", "Other.pw1"), "WRONGPASS")
		})
	}
}

// TestUsers_DefaultUserOff: with the default user off its password is refused (its open
// connections closed) while the named users work; on again, it works again.
func TestUsers_DefaultUserOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 94, "aof-every-write")
	in.Users = []clouddb.DatabaseUser{{Name: "app", Password: "App.pass9", Rule: fullAccess}}
	require.NoError(t, b.driver.Ensure(ctx, in))
	defaultConn, _ := rawConn(t, in.Port, "", in.Password, "ping")
	ac := admin(t, filepath.Join(b.dir, "94"), in.Port)
	run := runID(t, ctx, ac)

	in.DefaultUserOff = true
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, run, runID(t, ctx, ac), "applied live")
	require.ErrorContains(t, client(t, in.Port, in.Password).Ping(ctx).Err(), "WRONGPASS")
	require.True(t, closedWithin(defaultConn, 5*time.Second), "the default user's connections are closed")
	app := userClient(t, in.Port, "app", "App.pass9")
	require.NoError(t, app.Set(ctx, "k", "v", 0).Err())
	requireRunning(t, b.driver, in, true)
	requireRunning(t, mustDriver(t, b.dir), in, true)

	// Off in the file too: a restart keeps it off.
	require.NoError(t, b.driver.Stop(ctx, 94))
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.ErrorContains(t, client(t, in.Port, in.Password).Ping(ctx).Err(), "WRONGPASS")
	require.Equal(t, "v", app.Get(ctx, "k").Val())

	// Turned on behind clouddb's back: drift.
	ac = admin(t, filepath.Join(b.dir, "94"), in.Port)
	require.NoError(t, ac.Do(ctx, "acl", "setuser", "default", "on").Err())
	requireRunning(t, mustDriver(t, b.dir), in, false)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.ErrorContains(t, client(t, in.Port, in.Password).Ping(ctx).Err(), "WRONGPASS")

	in.DefaultUserOff = false
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Ping(ctx).Err())
	requireRunning(t, b.driver, in, true)
}

// TestUsers_Refused: Ensure refuses users a server must not get, naming no password.
func TestUsers_Refused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 95, "none")
	for _, users := range [][]clouddb.DatabaseUser{
		{{Name: "default", Password: "Secret.pw1", Rule: readOnly}},
		{{Name: "clouddb-internal", Password: "Secret.pw1", Rule: readOnly}},
		// Reserved whatever the case, as the API reserves them (clouddb.ValidateACLUserName).
		{{Name: "Default", Password: "Secret.pw1", Rule: readOnly}},
		{{Name: "CloudDB-Mine", Password: "Secret.pw1", Rule: readOnly}},
		{{Name: strings.Repeat("a", clouddb.MaxACLNameLength+1), Password: "Secret.pw1", Rule: readOnly}},
		{{Name: "a b", Password: "Secret.pw1", Rule: readOnly}},
		{{Name: "a", Password: "Secret.pw1", Rule: readOnly}, {Name: "a", Password: "Secret.pw1", Rule: readOnly}},
		{{Name: "a", Password: "", Rule: readOnly}},
		{{Name: "a", Password: "Secret.pw1", Rule: "on nopass +@all"}},
		{{Name: "a", Password: "Secret.pw1", Rule: "(+get ~*)"}},
	} {
		in.Users = users
		err := b.driver.Ensure(ctx, in)
		require.Error(t, err, "%v", users[0].Name)
		require.NotContains(t, err.Error(), "Secret.pw1")
		require.Error(t, b.driver.SetUsers(ctx, in), "%v", users[0].Name)
	}
	_, err := os.Stat(filepath.Join(b.dir, "95"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was made")
}

// TestUsers_ReadOnlyWhileReplicating: on a database that replicates from sources, a
// named user is denied every write whatever its rule (Full-Access included) and still
// reads; replicaOf turned off gives it its writes back live, turned on takes them again,
// and a restart from the config file keeps them denied.
func TestUsers_ReadOnlyWhileReplicating(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 96, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.NoError(t, client(t, src.Port, src.Password).Set(ctx, "from-src", "v", 0).Err())
	in := b.instance(t, 97, "aof-every-write")
	in.Users = []clouddb.DatabaseUser{{Name: "fa", Password: "Full.Acc3ss", Rule: fullAccess}}
	in.ReplicaOf = []clouddb.RedisEndpoint{srcEndpoint(src.Port, src.Password)}
	require.NoError(t, b.driver.Ensure(ctx, in))
	fa := userClient(t, in.Port, "fa", "Full.Acc3ss")
	eventuallyT(t, 10*time.Second, func() bool { return fa.Get(ctx, "from-src").Val() == "v" })
	require.ErrorContains(t, fa.Set(ctx, "k", "v", 0).Err(), "NOPERM")
	require.ErrorContains(t, fa.Del(ctx, "from-src").Err(), "NOPERM")
	require.ErrorContains(t, fa.Eval(ctx, "return redis.call('set', 'k', 'v')", nil).Err(), "can't run this command")
	requireRunning(t, b.driver, in, true)
	requireRunning(t, mustDriver(t, b.dir), in, true)

	ac := admin(t, filepath.Join(b.dir, "97"), in.Port)
	run := runID(t, ctx, ac)
	off := in
	off.ReplicaOf = nil
	requireRunning(t, b.driver, off, false, "the users are read-only: not as wanted without replicaOf")
	require.NoError(t, b.driver.Ensure(ctx, off))
	require.Equal(t, run, runID(t, ctx, ac), "applied live")
	require.NoError(t, fa.Set(ctx, "k", "v", 0).Err(), "the same connection writes again")
	requireRunning(t, b.driver, off, true)

	require.NoError(t, b.driver.Ensure(ctx, in))
	require.ErrorContains(t, fa.Set(ctx, "k", "w", 0).Err(), "NOPERM", "and no more once it replicates again")
	require.NoError(t, b.driver.Stop(ctx, 97))
	require.NoError(t, b.driver.Ensure(ctx, in))
	fa = userClient(t, in.Port, "fa", "Full.Acc3ss")
	require.ErrorContains(t, fa.Set(ctx, "k", "w", 0).Err(), "NOPERM", "read-only in the config file too")
	require.NoError(t, fa.Get(ctx, "from-src").Err())
}

// TestCheckACLRules: rules are verified on a real server, as users get them; a refusal
// names the rule by its text and the word refused, once each, and a batch is refused for
// its first rule refused.
func TestCheckACLRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	var _ clouddb.ACLChecker = b.driver
	good := []string{readOnly, readWrite, fullAccess, "+@all -@dangerous ~* resetchannels &news", "+get %R~cache:* -@write"}
	require.NoError(t, b.driver.CheckACLRules(ctx, good))
	require.NoError(t, b.driver.CheckACLRules(ctx, nil))
	for rule, word := range map[string]string{
		"+nosuchcommand ~*":    "+nosuchcommand",
		"+@nosuchcategory":     "+@nosuchcategory",
		"+get -config|nosuch":  "-config|nosuch",
		"+@read ~* +nosuch|x":  "+nosuch|x",
		"+@read ~* -@nonsense": "-@nonsense",
	} {
		for range 2 { // the second answer comes from memory, the same
			err := b.driver.CheckACLRules(ctx, append(slices.Clone(good), rule))
			require.Error(t, err, rule)
			e := clouddb.AsError(err)
			require.NotNil(t, e, "a refusal is the API's error: %v", err)
			require.Equal(t, clouddb.ErrTypeACLRulePatternInvalid, e.Type)
			require.Equal(t, "redis-acl-wrong-acl-rule-pattern", e.AdditionalInfo)
			require.Equal(t, fmt.Sprintf("Invalid ACL redis rule %q: Redis refuses %q: Unknown command or category name in ACL", rule, word), e.Description)
			text, reason, ok := clouddb.ACLRuleRefusal(err)
			require.True(t, ok)
			require.Equal(t, rule, text)
			require.Equal(t, fmt.Sprintf("Redis refuses %q: Unknown command or category name in ACL", word), reason)
		}
	}
	// The first rule refused, in the order given.
	_, _, ok := clouddb.ACLRuleRefusal(nil)
	require.False(t, ok)
	text, _, _ := clouddb.ACLRuleRefusal(b.driver.CheckACLRules(ctx, []string{readOnly, "+nosuch2 ~*", "+nosuch1 ~*"}))
	require.Equal(t, "+nosuch2 ~*", text)
	// What no server is asked about: refused by the syntax, named the same way.
	for _, rule := range []string{"on >pw +@all", "(+get ~*)"} {
		text, reason, ok := clouddb.ACLRuleRefusal(b.driver.CheckACLRules(ctx, []string{readOnly, rule}))
		require.True(t, ok, rule)
		require.Equal(t, rule, text)
		require.Contains(t, reason, "commands must start with a + or - sign")
	}

	// Each distinct rule costs one server: the memory answers at once.
	start := time.Now()
	for range 100 {
		require.NoError(t, b.driver.CheckACLRules(ctx, good))
	}
	require.Less(t, time.Since(start), time.Second)

	// A cancelled context does not hang.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, b.driver.CheckACLRules(cctx, []string{"+get ~never-checked"}))
}
