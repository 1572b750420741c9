package drivertest

import (
	"fmt"
	"io"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// testEnsureThenPing: Running is false before Ensure and true after it; the database
// answers the tenant's password at its endpoint, and refuses a wrong one and none.
func testEnsureThenPing(t *testing.T, h Harness) {
	e := setup(t, h)
	in := e.instance(t, 101)
	e.requireRunning(t, in, false, "a database never ensured")

	e.ensure(t, in)
	e.requireRunning(t, in, true)
	c := e.client(t, in)
	pong, err := c.Ping(e.ctx).Result()
	require.NoError(t, err)
	require.Equal(t, "PONG", pong)
	require.NoError(t, c.Set(e.ctx, "k", "v", 0).Err())
	require.Equal(t, "v", c.Get(e.ctx, "k").Val())

	requireRefused(t, e.clientAs(t, in, "", "wrong").Ping(e.ctx).Err(), "a wrong password")
	err = e.clientAs(t, in, "", "").Get(e.ctx, "k").Err()
	require.Error(t, err, "no password must be refused")
	require.Contains(t, err.Error(), "NOAUTH")

	// Running PINGs with the instance's password: another one is not what was asked.
	wrong := in
	wrong.Password = "not-" + in.Password
	e.requireRunning(t, wrong, false, "Running with another password")
}

// testEnsureIdempotent: Ensure of a database that runs as asked adopts its server, with
// its data, again and again.
func testEnsureIdempotent(t *testing.T, h Harness) {
	e := setup(t, h)
	in := e.instance(t, 201)
	e.ensure(t, in)
	c := e.client(t, in)
	// Without persistence, the key is kept only if the server is never restarted.
	require.NoError(t, c.Set(e.ctx, "k", "v", 0).Err())
	run := runID(t, e.ctx, c)

	for range 3 {
		e.ensure(t, in)
	}
	require.Equal(t, run, runID(t, e.ctx, c), "Ensure of a running database must not restart it")
	require.Equal(t, "v", c.Get(e.ctx, "k").Val())
	e.requireRunning(t, in, true)
	ids, err := e.d.Instances(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []int{201}, ids, "one database, listed once")
}

// testEnsureLiveChange: a changed memory limit, eviction policy and password apply to the
// live server with its data kept (no persistence: a restart would lose it).
func testEnsureLiveChange(t *testing.T, h Harness) {
	e := setup(t, h)
	in := e.instance(t, 301)
	in.EvictionPolicy = "volatile-lru"
	e.ensure(t, in)
	c := e.client(t, in)
	setKeys(t, e.ctx, c, "k", 100)
	require.Equal(t, strconv.FormatInt(in.MaxMemoryBytes, 10), info(t, e.ctx, c, "memory", "maxmemory"))
	require.Equal(t, "volatile-lru", info(t, e.ctx, c, "memory", "maxmemory_policy"))

	up := in
	up.MaxMemoryBytes = 2 * in.MaxMemoryBytes
	up.EvictionPolicy = "allkeys-lfu"
	up.Password = "changed-" + in.Password
	e.requireRunning(t, up, false, "the server does not run as asked yet")
	e.ensure(t, up)
	e.requireRunning(t, up, true)

	nc := e.client(t, up)
	require.Equal(t, strconv.FormatInt(up.MaxMemoryBytes, 10), info(t, e.ctx, nc, "memory", "maxmemory"))
	require.Equal(t, "allkeys-lfu", info(t, e.ctx, nc, "memory", "maxmemory_policy"))
	requireKeys(t, e.ctx, nc, "k", 100)
	n, err := nc.DBSize(e.ctx).Result()
	require.NoError(t, err)
	require.EqualValues(t, 100, n)
	requireRefused(t, e.client(t, in).Ping(e.ctx).Err(), "the old password")
}

// testAdoptAfterRestart: a new driver, as after a restart of clouddb, sees the database
// run, lists it, and adopts its server, data and all, changes applied live included.
func testAdoptAfterRestart(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("Harness.Reopen is nil: adoption by a new driver is not tested")
	}
	e := setup(t, h)
	in := e.instance(t, 351)
	e.ensure(t, in)
	c := e.client(t, in)
	setKeys(t, e.ctx, c, "k", 100)
	run := runID(t, e.ctx, c)

	d2 := h.Reopen(t, e.d)
	running, err := d2.Running(e.ctx, in)
	require.NoError(t, err)
	require.True(t, running, "the new driver sees the server run")
	ids, err := d2.Instances(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []int{in.DatabaseID}, ids)
	require.NoError(t, d2.Ensure(e.ctx, in))
	require.Equal(t, run, runID(t, e.ctx, c), "adopted, not restarted")

	in.Password = "changed-" + in.Password
	in.MaxMemoryBytes *= 2
	require.NoError(t, d2.Ensure(e.ctx, in))
	c = e.client(t, in)
	require.Equal(t, run, runID(t, e.ctx, c), "changed live by the new driver")
	require.Equal(t, strconv.FormatInt(in.MaxMemoryBytes, 10), info(t, e.ctx, c, "memory", "maxmemory"))
	requireKeys(t, e.ctx, c, "k", 100)
}

// testTenantRestrictions: the tenant's password opens the data plane, not the server's
// administration; what it was refused left the server as it was.
func testTenantRestrictions(t *testing.T, h Harness) {
	e := setup(t, h)
	in := e.instance(t, 401)
	e.ensure(t, in)
	c := e.client(t, in)
	require.NoError(t, c.Set(e.ctx, "k", "v", 0).Err())
	run := runID(t, e.ctx, c)

	for _, words := range [][]string{
		{"config", "set", "maxmemory", "0"},
		{"config", "get", "maxmemory"},
		{"config", "rewrite"},
		{"debug", "sleep", "0"},
		{"shutdown", "nosave"},
		{"replicaof", "127.0.0.1", "1"},
		{"slaveof", "127.0.0.1", "1"},
		{"module", "list"},
		{"module", "load", "/nonexistent.so"},
		{"acl", "setuser", "intruder", "on", ">x", "+@all", "~*"},
		{"acl", "list"},
		{"save"},
		{"bgsave"},
		{"bgrewriteaof"},
		{"failover"},
		{"client", "kill", "user", "default"},
		{"migrate", "127.0.0.1", "1", "k", "0", "1000"},
	} {
		args := make([]any, len(words))
		for i, w := range words {
			args[i] = w
		}
		requireNoPerm(t, c.Do(e.ctx, args...).Err(), fmt.Sprintf("%q", words))
	}
	require.Equal(t, run, runID(t, e.ctx, c), "the server was not shut down or restarted")
	require.Equal(t, "v", c.Get(e.ctx, "k").Val())
	require.Equal(t, strconv.FormatInt(in.MaxMemoryBytes, 10), info(t, e.ctx, c, "memory", "maxmemory"))
	require.Equal(t, "master", info(t, e.ctx, c, "replication", "role"))
	e.requireRunning(t, in, true)
}

// testStopWithoutPersistence: Stop stops the server (Running false, and Stop again is a
// no-op); the database is still the driver's; without persistence it starts again empty,
// as documented.
func testStopWithoutPersistence(t *testing.T, h Harness) {
	e := setup(t, h)
	in := e.instance(t, 501)
	in.DataPersistence = "none"
	e.ensure(t, in)
	require.NoError(t, e.client(t, in).Set(e.ctx, "k", "v", 0).Err())

	require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID))
	e.requireRunning(t, in, false, "after Stop")
	require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID), "stopping a stopped database is a no-op")
	_, err := e.d.Snapshot(e.ctx, in, 0, io.Discard)
	require.Error(t, err, "a snapshot of a stopped database has no live data to take")
	ids, err := e.d.Instances(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []int{in.DatabaseID}, ids, "a stopped database is still listed")

	e.ensure(t, in)
	e.requireRunning(t, in, true)
	require.ErrorIs(t, e.client(t, in).Get(e.ctx, "k").Err(), redis.Nil, "nothing was persisted")
}

// testStopKeepsPersistedData: with persistence, the data is kept over Stop and Ensure,
// persistence turned on live included.
func testStopKeepsPersistedData(t *testing.T, h Harness) {
	need(t, "Persistence", h.Persistence)
	for i, persistence := range []string{"aof-every-1-second", "aof-every-write", "snapshot-every-1-hour", "turned on live"} {
		t.Run(persistence, func(t *testing.T) {
			if h.Parallel {
				t.Parallel() // a driver and a database ID each, as the cases
			}
			if persistence == "turned on live" {
				need(t, "PersistenceChange", h.PersistenceChange)
			}
			e := setup(t, h)
			in := e.instance(t, 601+i)
			in.DataPersistence = persistence
			if persistence == "turned on live" {
				in.DataPersistence = "none"
			}
			e.ensure(t, in)
			c := e.client(t, in)
			setKeys(t, e.ctx, c, "k", 100)
			if persistence == "turned on live" {
				in.DataPersistence = "aof-every-1-second"
				e.ensure(t, in)
				requireKeys(t, e.ctx, c, "k", 100)
			}

			require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID))
			e.requireRunning(t, in, false, "after Stop")
			e.ensure(t, in)
			e.requireRunning(t, in, true)
			c = e.client(t, in)
			requireKeys(t, e.ctx, c, "k", 100)
			n, err := c.DBSize(e.ctx).Result()
			require.NoError(t, err)
			require.EqualValues(t, 100, n)
		})
	}
}

// testRemove: Remove deletes the servers and their data: the database is no longer
// listed, and Ensured again it starts empty, even with persistence; Remove and Stop of a
// removed database are no-ops.
func testRemove(t *testing.T, h Harness) {
	e := setup(t, h)
	in := e.instance(t, 701)
	if h.Persistence {
		// Data the driver would otherwise keep.
		in.DataPersistence = "aof-every-write"
	}
	e.ensure(t, in)
	require.NoError(t, e.client(t, in).Set(e.ctx, "k", "v", 0).Err())

	require.NoError(t, e.d.Remove(e.ctx, in.DatabaseID))
	e.requireRunning(t, in, false, "after Remove")
	ids, err := e.d.Instances(e.ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "a removed database is not listed")
	require.NoError(t, e.d.Remove(e.ctx, in.DatabaseID), "removing twice is a no-op")
	require.NoError(t, e.d.Stop(e.ctx, in.DatabaseID), "stopping a removed database is a no-op")

	e.ensure(t, in)
	c := e.client(t, in)
	require.ErrorIs(t, c.Get(e.ctx, "k").Err(), redis.Nil, "the data was removed")
	n, err := c.DBSize(e.ctx).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// testInstances: Instances lists every database the driver holds, running or stopped,
// and none it removed.
func testInstances(t *testing.T, h Harness) {
	e := setup(t, h)
	ids, err := e.d.Instances(e.ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "a new driver holds nothing")

	var ins []clouddb.Instance
	for _, id := range []int{801, 802, 803} {
		in := e.instance(t, id)
		e.ensure(t, in)
		ins = append(ins, in)
	}
	requireInstances(t, e, 801, 802, 803)
	require.NoError(t, e.d.Stop(e.ctx, 802))
	requireInstances(t, e, 801, 802, 803)
	require.NoError(t, e.d.Remove(e.ctx, 803))
	requireInstances(t, e, 801, 802)
	e.requireRunning(t, ins[0], true, "the others are left alone")
}

func requireInstances(t *testing.T, e *env, want ...int) {
	t.Helper()
	ids, err := e.d.Instances(e.ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, want, ids)
}
