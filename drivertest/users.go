package drivertest

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// The rules of the API's default ACL rules.
const (
	fullAccess = "+@all ~*"
	readWrite  = "+@all -@dangerous ~*"
	readOnly   = "+@read ~*"
)

// testUsers: the instance's users log in with their passwords and get what their rule
// gives, less the server's administration; a changed password replaces the old one; a
// user no longer in the instance is gone; the default user is as before.
func testUsers(t *testing.T, h Harness) {
	e := setup(t, h)
	in := e.instance(t, 1501)
	in.Users = []clouddb.DatabaseUser{
		{Name: "fa", Password: "Full.Acc3ss", Rule: fullAccess},
		{Name: "ro", Password: "Read.0nly", Rule: readOnly},
	}
	e.ensure(t, in)
	e.requireRunning(t, in, true)

	fa := e.clientAs(t, in, "fa", "Full.Acc3ss")
	require.NoError(t, fa.Set(e.ctx, "k", "v", 0).Err())
	require.Equal(t, "fa", fa.Do(e.ctx, "acl", "whoami").Val())
	requireNoPerm(t, fa.Do(e.ctx, "config", "set", "maxmemory", "0").Err(), "no rule gives a user CONFIG")
	requireNoPerm(t, fa.Do(e.ctx, "shutdown", "nosave").Err(), "no rule gives a user SHUTDOWN")
	requireNoPerm(t, fa.Do(e.ctx, "acl", "setuser", "fa", "on", ">x").Err(), "no rule gives a user ACL SETUSER")
	requireRefused(t, e.clientAs(t, in, "fa", "Read.0nly").Ping(e.ctx).Err(), "another user's password")

	ro := e.clientAs(t, in, "ro", "Read.0nly")
	require.Equal(t, "v", ro.Get(e.ctx, "k").Val())
	requireNoPerm(t, ro.Set(e.ctx, "k", "w", 0).Err(), "a read-only user writes")
	require.Equal(t, "v", e.client(t, in).Get(e.ctx, "k").Val(), "the default user is as before")

	in.Users = []clouddb.DatabaseUser{
		{Name: "fa", Password: "Full.Acc3ss.2", Rule: fullAccess},
		{Name: "rw", Password: "Read.Wr1te", Rule: readWrite},
	}
	e.requireRunning(t, in, false, "the users are not as asked yet")
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	requireRefused(t, e.clientAs(t, in, "fa", "Full.Acc3ss").Ping(e.ctx).Err(), "the old password")
	require.Equal(t, "v", e.clientAs(t, in, "fa", "Full.Acc3ss.2").Get(e.ctx, "k").Val())
	requireRefused(t, e.clientAs(t, in, "ro", "Read.0nly").Ping(e.ctx).Err(), "a user dropped")
	rw := e.clientAs(t, in, "rw", "Read.Wr1te")
	require.NoError(t, rw.Set(e.ctx, "k2", "v2", 0).Err())
	requireNoPerm(t, rw.Do(e.ctx, "flushall").Err(), "the rule denies @dangerous")
	require.Equal(t, "v", e.client(t, in).Get(e.ctx, "k").Val())
}

// testDefaultUserOff: with the default user off only the named users log in, and the
// driver still sees the database run; on again, the tenant's password works again.
func testDefaultUserOff(t *testing.T, h Harness) {
	e := setup(t, h)
	in := e.instance(t, 1601)
	in.DefaultUserOff = true
	in.Users = []clouddb.DatabaseUser{{Name: "fa", Password: "Full.Acc3ss", Rule: fullAccess}}
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	requireRefused(t, e.client(t, in).Ping(e.ctx).Err(), "the default user is off")
	fa := e.clientAs(t, in, "fa", "Full.Acc3ss")
	require.NoError(t, fa.Set(e.ctx, "k", "v", 0).Err())

	in.DefaultUserOff = false
	e.requireRunning(t, in, false, "the default user is not as asked yet")
	e.ensure(t, in)
	e.requireRunning(t, in, true)
	require.Equal(t, "v", e.client(t, in).Get(e.ctx, "k").Val())
	require.Equal(t, "v", fa.Get(e.ctx, "k").Val())
}

// testSetUsers: a UserSetter gives a running server the instance's users and changes
// nothing else; it starts no stopped server, and what it set holds at the next start.
func testSetUsers(t *testing.T, h Harness) {
	e := setup(t, h)
	us, ok := e.d.(clouddb.UserSetter)
	if !ok {
		t.Skip("the driver is not a clouddb.UserSetter")
	}
	in := e.instance(t, 1701)
	in.Users = []clouddb.DatabaseUser{
		{Name: "alice", Password: "Alice.pw1", Rule: readOnly},
		{Name: "bob", Password: "Bob.pw1", Rule: readOnly},
	}
	e.ensure(t, in)
	c := e.client(t, in)
	require.NoError(t, c.Set(e.ctx, "k", "v", 0).Err())
	run := runID(t, e.ctx, c)

	changed := in
	changed.Password = "changed-" + in.Password
	changed.MaxMemoryBytes = 2 * in.MaxMemoryBytes
	changed.Users = []clouddb.DatabaseUser{{Name: "alice", Password: "Alice.pw2", Rule: readWrite}}
	require.NoError(t, us.SetUsers(e.ctx, changed))
	require.Equal(t, run, runID(t, e.ctx, c), "applied to the running server")
	requireRefused(t, e.clientAs(t, in, "alice", "Alice.pw1").Ping(e.ctx).Err(), "the old password")
	require.NoError(t, e.clientAs(t, in, "alice", "Alice.pw2").Set(e.ctx, "k2", "v2", 0).Err(), "the new rule")
	requireRefused(t, e.clientAs(t, in, "bob", "Bob.pw1").Ping(e.ctx).Err(), "a user dropped")
	// Nothing else: the default user's password and the memory limit are Ensure's.
	require.Equal(t, "v", c.Get(e.ctx, "k").Val())
	requireRefused(t, e.client(t, changed).Ping(e.ctx).Err(), "the default user's new password")
	require.Equal(t, strconv.FormatInt(in.MaxMemoryBytes, 10), info(t, e.ctx, c, "memory", "maxmemory"))

	if !h.Persistence {
		return
	}
	in.DataPersistence = "aof-every-write"
	in.Users = changed.Users
	e.ensure(t, in)
	require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID))
	in.Users = []clouddb.DatabaseUser{{Name: "carol", Password: "Carol.pw1", Rule: readOnly}}
	require.NoError(t, us.SetUsers(e.ctx, in))
	e.requireRunning(t, in, false, "SetUsers starts no server")
	e.ensure(t, in)
	require.Equal(t, "v", e.clientAs(t, in, "carol", "Carol.pw1").Get(e.ctx, "k").Val())
	requireRefused(t, e.clientAs(t, in, "alice", "Alice.pw2").Ping(e.ctx).Err(), "a user dropped while stopped")

	never := e.instance(t, 1702)
	never.Users = in.Users
	require.NoError(t, us.SetUsers(e.ctx, never), "nothing runs: no error")
	e.requireRunning(t, never, false)
}

// testCheckACLRules: an ACLChecker accepts rules every version it offers knows, and
// refuses a batch by its first rule a version refuses, as the API reports it.
func testCheckACLRules(t *testing.T, h Harness) {
	e := setup(t, h)
	ac, ok := e.d.(clouddb.ACLChecker)
	if !ok {
		t.Skip("the driver is not a clouddb.ACLChecker")
	}
	good := []string{fullAccess, readWrite, readOnly, "+get ~a:*", "+@hash ~h:* resetchannels &news"}
	require.NoError(t, ac.CheckACLRules(e.ctx, good))
	rule, reason, ok := clouddb.ACLRuleRefusal(ac.CheckACLRules(e.ctx, append(good, "+nosuchcommand ~*", "-@nonsense")))
	require.True(t, ok, "a refusal made by clouddb.ACLRuleRefused")
	require.Equal(t, "+nosuchcommand ~*", rule, "the first rule refused")
	require.Contains(t, reason, "nosuchcommand")
}
