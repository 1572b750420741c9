package local_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestSetUsers_Running: SetUsers gives a running server the instance's named users live
// (same run_id): a changed password's old connections are closed and the old password
// refused, a user no longer wanted is deleted with its connections; the config file
// lists the users as they are now. Nothing else changes: the default user's password
// and connections, the settings, a user clouddb did not make.
func TestSetUsers_Running(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 110, "none")
	in.Users = []clouddb.DatabaseUser{
		{Name: "alice", Password: "Alice.pw1", Rule: readOnly},
		{Name: "bob", Password: "Bob.pw1", Rule: readOnly},
	}
	require.NoError(t, b.driver.Ensure(ctx, in))
	dir := filepath.Join(b.dir, "110")
	ac := admin(t, dir, in.Port)
	run := runID(t, ctx, ac)
	require.NoError(t, ac.Do(ctx, "acl", "setuser", "stranger", "on", ">Strange.pw1", "+get", "~*").Err())
	defaultConn, _ := rawConn(t, in.Port, "", in.Password, "ping")
	aliceConn, _ := rawConn(t, in.Port, "alice", "Alice.pw1", "ping")
	bobConn, _ := rawConn(t, in.Port, "bob", "Bob.pw1", "ping")

	changed := in
	changed.Password = "Another.tenant.pw"
	changed.MaxMemoryBytes = 2 * in.MaxMemoryBytes
	changed.Users = []clouddb.DatabaseUser{{Name: "alice", Password: "Alice.pw2", Rule: readWrite}}
	require.NoError(t, b.driver.SetUsers(ctx, changed))
	require.Equal(t, run, runID(t, ctx, ac), "applied live, not restarted")
	require.ErrorContains(t, authErr(t, ctx, in.Port, "alice", "Alice.pw1"), "WRONGPASS")
	require.NoError(t, userClient(t, in.Port, "alice", "Alice.pw2").Set(ctx, "k", "v", 0).Err(), "the new rule")
	require.True(t, closedWithin(aliceConn, 5*time.Second), "the old password's connection is closed")
	require.ErrorContains(t, authErr(t, ctx, in.Port, "bob", "Bob.pw1"), "WRONGPASS")
	require.True(t, closedWithin(bobConn, 5*time.Second), "the deleted user's connection is closed")
	require.ElementsMatch(t, []string{"default", "clouddb-internal", "alice", "stranger"}, aclUsers(t, ctx, ac),
		"a user clouddb did not make is Ensure's to remove")

	// Nothing else changed.
	require.False(t, closedWithin(defaultConn, 300*time.Millisecond))
	require.NoError(t, client(t, in.Port, in.Password).Ping(ctx).Err(), "the default user's password is Ensure's to change")
	require.ErrorContains(t, client(t, in.Port, changed.Password).Ping(ctx).Err(), "WRONGPASS")
	require.Equal(t, strconv.FormatInt(in.MaxMemoryBytes, 10), ac.ConfigGet(ctx, "maxmemory").Val()["maxmemory"])

	conf, err := os.ReadFile(filepath.Join(dir, "redis.conf"))
	require.NoError(t, err)
	require.Contains(t, string(conf), `user "alice" "reset" "on" "#`)
	require.NotContains(t, string(conf), `"bob"`)
	require.NotContains(t, string(conf), changed.Password)
	noPlainPasswords(t, dir, "Alice.pw1", "Alice.pw2", "Bob.pw1")

	// Once the other settings are the instance's again, Ensure finds it as wanted but
	// for the stranger, whom it removes.
	in.Users = changed.Users
	requireRunning(t, b.driver, in, false)
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.ElementsMatch(t, []string{"default", "clouddb-internal", "alice"}, aclUsers(t, ctx, ac))
	require.Equal(t, run, runID(t, ctx, ac))
	requireRunning(t, b.driver, in, true)

	// A new clouddb knows the users SetUsers made from the config file.
	in.Users = nil
	require.NoError(t, mustDriver(t, b.dir).SetUsers(ctx, in))
	require.ElementsMatch(t, []string{"default", "clouddb-internal"}, aclUsers(t, ctx, ac))
	requireRunning(t, b.driver, in, true)
}

// TestSetUsers_NotRunning: SetUsers starts no server: a stopped one gets the users in its
// config file (the next Ensure defines them anyway), one never started gets nothing.
func TestSetUsers_NotRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 111, "aof-every-write")
	in.Users = []clouddb.DatabaseUser{{Name: "alice", Password: "Alice.pw1", Rule: readOnly}}
	require.NoError(t, b.driver.Ensure(ctx, in))
	require.NoError(t, client(t, in.Port, in.Password).Set(ctx, "k", "v", 0).Err())
	require.NoError(t, b.driver.Stop(ctx, 111))

	in.Users = []clouddb.DatabaseUser{{Name: "carol", Password: "Carol.pw1", Rule: readOnly}}
	require.NoError(t, b.driver.SetUsers(ctx, in))
	_, err := b.driver.Pid(111)
	require.ErrorIs(t, err, os.ErrNotExist, "not started")
	requireRunning(t, b.driver, in, false)
	conf, err := os.ReadFile(filepath.Join(b.dir, "111", "redis.conf"))
	require.NoError(t, err)
	require.Contains(t, string(conf), `user "carol" "reset" "on" "#`)
	require.NotContains(t, string(conf), `"alice"`)

	require.NoError(t, b.driver.Ensure(ctx, in))
	require.Equal(t, "v", userClient(t, in.Port, "carol", "Carol.pw1").Get(ctx, "k").Val())
	require.ErrorContains(t, authErr(t, ctx, in.Port, "alice", "Alice.pw1"), "WRONGPASS")

	never := b.instance(t, 112, "none")
	never.Users = in.Users
	require.NoError(t, b.driver.SetUsers(ctx, never))
	_, err = os.Stat(filepath.Join(b.dir, "112"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing is made for a database never started")
}

// TestSetUsers_ReadOnlyAsTheServerRuns: on a server that replicates, the users SetUsers
// gives are read-only, whatever their rule.
func TestSetUsers_ReadOnlyAsTheServerRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	src := b.instance(t, 113, "none")
	require.NoError(t, b.driver.Ensure(ctx, src))
	require.NoError(t, client(t, src.Port, src.Password).Set(ctx, "from-src", "v", 0).Err())
	in := b.instance(t, 114, "none")
	in.ReplicaOf = []clouddb.RedisEndpoint{srcEndpoint(src.Port, src.Password)}
	require.NoError(t, b.driver.Ensure(ctx, in))
	in.Users = []clouddb.DatabaseUser{{Name: "fa", Password: "Full.Acc3ss", Rule: fullAccess}}
	require.NoError(t, b.driver.SetUsers(ctx, in))
	fa := userClient(t, in.Port, "fa", "Full.Acc3ss")
	eventuallyT(t, 10*time.Second, func() bool { return fa.Get(ctx, "from-src").Val() == "v" })
	require.ErrorContains(t, fa.Set(ctx, "k", "v", 0).Err(), "NOPERM")
	requireRunning(t, b.driver, in, true)
}
