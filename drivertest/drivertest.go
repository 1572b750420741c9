// Package drivertest is the conformance suite of clouddb.Driver. Every driver runs the
// same Run, so that the local and the Kubernetes drivers keep the contract that the
// Driver interface documents, and the reconciler and the tasks above them can rely on it
// rather than on either driver's ways. What differs between drivers (how to make one,
// how a client reaches a database, how a server crashes, what is not supported yet)
// is the Harness's.
package drivertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// Harness is what the suite needs of a driver.
type Harness struct {
	// New returns a fresh driver that holds no database, and arranges with t.Cleanup for
	// whatever the driver still holds when the test ends to go. Required.
	New func(t *testing.T) clouddb.Driver
	// Instance returns a valid instance of database id for the drivers New returns: an
	// endpoint port nothing else uses, a password, a memory limit of 64 MB or more, no
	// persistence, one shard. The cases set what they test on top. Required.
	Instance func(t *testing.T, id int) clouddb.Instance
	// Addr is the host:port at which a client on this machine reaches the database's
	// endpoint, once Ensure succeeded: 127.0.0.1 and the port for a driver of local
	// processes, a NodePort for one of Kubernetes. Required.
	Addr func(t *testing.T, d clouddb.Driver, in clouddb.Instance) string
	// Kill ends, as a crash would (no shutdown, nothing saved), the server that serves
	// addr: the database's endpoint or a node address its cluster announces. It returns
	// once that server is gone, before anything has started it again. Required with
	// Replication.
	Kill func(t *testing.T, d clouddb.Driver, in clouddb.Instance, addr string)
	// Reopen returns a new driver over what d holds, as clouddb makes after a restart,
	// while d's servers run on. Optional: without it the case of adoption is skipped.
	Reopen func(t *testing.T, d clouddb.Driver) clouddb.Driver
	// Describe says what the harness can see of database id's servers (their processes'
	// or pods' states, recent events), logged when a case fails: the evidence of a
	// failure seen once. Optional.
	Describe func(d clouddb.Driver, id int) string
	// CA is the PEM certificate of the CertificateAuthority whose server certificates the
	// drivers' TLS databases serve. Required with TLS.
	CA []byte
	// Timeout bounds each case, its driver calls and waits together; 0 means one minute.
	Timeout time.Duration
	// Parallel runs the cases in parallel, for a driver whose databases cost little.
	Parallel bool

	// What the driver supports. A case that needs something the driver does not support
	// is skipped with a message naming it, never passed; so is a case of an optional
	// interface (StreamLoader, UserSetter, ACLChecker) the driver does not implement.

	// Persistence: a DataPersistence other than "none" keeps the data over Stop.
	Persistence bool
	// PersistenceChange: a live database's DataPersistence changes between "none" and
	// a persistent one with its data kept.
	PersistenceChange bool
	// Replication: Instance.Replication gives each shard a replica that takes over,
	// on the same endpoint, when its primary dies.
	Replication bool
	// Cluster: Instance.OSSCluster, with several shards.
	Cluster bool
	// TLS: Instance.TLS makes the database serve TLS only.
	TLS bool
	// ReplicaOf: Instance.ReplicaOf makes the database follow live sources.
	ReplicaOf bool
}

// Run runs the suite against the drivers h makes; each case makes its own and uses
// database IDs no other case uses, so that a harness whose drivers share one place (a
// namespace) may run the cases one after another.
func Run(t *testing.T, h Harness) {
	require.NotNil(t, h.New, "Harness.New")
	require.NotNil(t, h.Instance, "Harness.Instance")
	require.NotNil(t, h.Addr, "Harness.Addr")
	if h.Replication {
		require.NotNil(t, h.Kill, "Harness.Kill is required with Replication")
	}
	if h.TLS {
		require.NotEmpty(t, h.CA, "Harness.CA is required with TLS")
	}
	for _, c := range []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"EnsureThenPing", testEnsureThenPing},
		{"EnsureIdempotent", testEnsureIdempotent},
		{"EnsureLiveChange", testEnsureLiveChange},
		{"AdoptAfterRestart", testAdoptAfterRestart},
		{"TenantRestrictions", testTenantRestrictions},
		{"StopWithoutPersistence", testStopWithoutPersistence},
		{"StopKeepsPersistedData", testStopKeepsPersistedData},
		{"Remove", testRemove},
		{"Instances", testInstances},
		{"SnapshotThenLoad", testSnapshotThenLoad},
		{"LoadCorrupt", testLoadCorrupt},
		{"LoadTooLarge", testLoadTooLarge},
		{"LoadStream", testLoadStream},
		{"CopyFrom", testCopyFrom},
		{"ReplicaOf", testReplicaOf},
		{"Users", testUsers},
		{"DefaultUserOff", testDefaultUserOff},
		{"SetUsers", testSetUsers},
		{"CheckACLRules", testCheckACLRules},
		{"Replication", testReplication},
		{"ReplicationToggle", testReplicationToggle},
		{"LoadReplicated", testLoadReplicated},
		{"ReplicationTLS", testReplicationTLS},
		{"ReplicationPersistenceChange", testReplicationPersistenceChange},
		{"Cluster", testCluster},
		{"ClusterUsers", testClusterUsers},
		{"ClusterStopKeepsData", testClusterStopKeepsData},
		{"ClusterFailover", testClusterFailover},
		{"ClusterData", testClusterData},
		{"ClusterReplicationOn", testClusterReplicationOn},
		{"TLS", testTLS},
		{"ClusterTLS", testClusterTLS},
	} {
		t.Run(c.name, func(t *testing.T) {
			if h.Parallel {
				t.Parallel()
			}
			c.run(t, h)
		})
	}
}

// need skips the test unless the driver has the capability.
func need(t *testing.T, capability string, has bool) {
	t.Helper()
	if !has {
		t.Skipf("the driver does not support %s (Harness.%s is false)", capability, capability)
	}
}

func (h Harness) timeout() time.Duration {
	if h.Timeout > 0 {
		return h.Timeout
	}
	return time.Minute
}

// env is one case's driver.
type env struct {
	h   Harness
	d   clouddb.Driver
	ctx context.Context
}

func setup(t *testing.T, h Harness) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout())
	t.Cleanup(cancel)
	return &env{h: h, d: h.New(t), ctx: ctx}
}

// instance is the harness's instance of database id, removed when the test ends (a
// check of Remove too: it must succeed whatever the case left).
func (e *env) instance(t *testing.T, id int) clouddb.Instance {
	t.Helper()
	in := e.h.Instance(t, id)
	require.Equal(t, id, in.DatabaseID, "Harness.Instance")
	t.Cleanup(func() {
		// Not the case's context: it may have run out.
		ctx, cancel := context.WithTimeout(context.Background(), e.h.timeout())
		defer cancel()
		require.NoError(t, e.d.Remove(ctx, id), "Remove at the end of the test")
	})
	// Before the Remove above (cleanups run last first).
	t.Cleanup(func() {
		if t.Failed() && e.h.Describe != nil {
			t.Logf("database %d, as the case failed: %s", id, e.h.Describe(e.d, id))
		}
	})
	return in
}

// ensure runs Ensure, which must succeed.
func (e *env) ensure(t *testing.T, in clouddb.Instance) {
	t.Helper()
	require.NoError(t, e.d.Ensure(e.ctx, in), "Ensure of database %d", in.DatabaseID)
}

// requireRunning checks what Running says of in.
func (e *env) requireRunning(t *testing.T, in clouddb.Instance, want bool, msgAndArgs ...any) {
	t.Helper()
	running, err := e.d.Running(e.ctx, in)
	require.NoError(t, err, "Running")
	require.Equal(t, want, running, msgAndArgs...)
}

// addr is where a client reaches in.
func (e *env) addr(t *testing.T, in clouddb.Instance) string {
	t.Helper()
	a := e.h.Addr(t, e.d, in)
	require.NotEmpty(t, a, "Harness.Addr")
	return a
}

// options are a client's of in, logged in as user (the default user when "") with
// password: no retries, of commands or of dials, so that a refusal is seen as it is, at
// once.
func (e *env) options(t *testing.T, in clouddb.Instance, user, password string) *redis.Options {
	t.Helper()
	return &redis.Options{
		Addr:            e.addr(t, in),
		Username:        user,
		Password:        password,
		Protocol:        2,
		DisableIdentity: true,
		MaxRetries:      -1,
		DialTimeout:     5 * time.Second,
		DialerRetries:   1,
	}
}

func newClient(t *testing.T, o *redis.Options) *redis.Client {
	t.Helper()
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// client is the tenant's client of in: the default user with the instance's password.
func (e *env) client(t *testing.T, in clouddb.Instance) *redis.Client {
	t.Helper()
	return newClient(t, e.options(t, in, "", in.Password))
}

// clientAs logs in as user with password.
func (e *env) clientAs(t *testing.T, in clouddb.Instance, user, password string) *redis.Client {
	t.Helper()
	return newClient(t, e.options(t, in, user, password))
}

// eventually polls cond until it holds, failing the test after the case's timeout.
func (e *env) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(e.h.timeout())
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, e.h.timeout())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// info reads one field of a section of INFO, which a tenant may run.
func info(t *testing.T, ctx context.Context, c *redis.Client, section, field string) string {
	t.Helper()
	text, err := c.Info(ctx, section).Result()
	require.NoError(t, err, "INFO %s", section)
	for _, line := range strings.Split(text, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s", section, field)
	return ""
}

// runID identifies the server process that answers c.
func runID(t *testing.T, ctx context.Context, c *redis.Client) string {
	t.Helper()
	return info(t, ctx, c, "server", "run_id")
}

// setKeys writes n string keys prefix<i> = i.
func setKeys(t *testing.T, ctx context.Context, c *redis.Client, prefix string, n int) {
	t.Helper()
	p := c.Pipeline()
	for i := range n {
		p.Set(ctx, fmt.Sprintf("%s%d", prefix, i), i, 0)
	}
	_, err := p.Exec(ctx)
	require.NoError(t, err)
}

// requireKeys checks the n keys setKeys wrote.
func requireKeys(t *testing.T, ctx context.Context, c redis.Cmdable, prefix string, n int) {
	t.Helper()
	for i := range n {
		v, err := c.Get(ctx, fmt.Sprintf("%s%d", prefix, i)).Result()
		require.NoError(t, err, "key %s%d", prefix, i)
		require.Equal(t, fmt.Sprint(i), v, "key %s%d", prefix, i)
	}
}

// requireRefused checks that err is an authentication refusal (wrong password, or a
// user that is off or gone).
func requireRefused(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.Contains(t, err.Error(), "WRONGPASS", msgAndArgs...)
}

// requireNoPerm checks that err is the ACL's refusal of a command (or, for DEBUG and
// MODULE, the server's own refusal of what no client may run, whichever answers first).
func requireNoPerm(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "command not allowed"), "%s: %v", what, err)
}
