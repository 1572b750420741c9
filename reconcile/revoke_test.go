package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
	"clouddb/internal/syncbuf"
	"clouddb/reconcile"
)

// gatedSetter is the real driver whose SetUsers waits while the gate is closed, so that a
// test sees what the API says while a server in error still has the old users.
type gatedSetter struct {
	*local.Driver
	open chan struct{} // closed: SetUsers goes through
}

func (g *gatedSetter) SetUsers(ctx context.Context, in clouddb.Instance) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Driver.SetUsers(ctx, in)
}

// setStatus sets a database's status behind the reconciler's back, as a failed Ensure
// does: the server keeps running.
func setStatus(t *testing.T, store clouddb.Store, id int, status clouddb.DatabaseStatus) {
	t.Helper()
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		d, err := tx.Database(t.Context(), 0, id)
		if err != nil {
			return err
		}
		set, err := tx.SetDatabaseStatus(t.Context(), d.ID, d.Generation, status, "broken on purpose")
		require.True(t, set)
		return err
	}))
}

// updateUser stores a change of a user, pending at its next generation (as the task
// does), or its deletion.
func updateUser(t *testing.T, store clouddb.Store, u *clouddb.ACLUser, status clouddb.ACLStatus) {
	t.Helper()
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		u.Status = status
		u.Generation++
		return tx.UpdateACLUser(t.Context(), u)
	}))
}

// connAs opens a connection authenticated as the user, to see it closed.
func connAs(t *testing.T, d *clouddb.Database, user, password string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", d.Port), 2*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "AUTH %s %s\r\n", user, password)
	require.NoError(t, err)
	buf := make([]byte, 64)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(2*time.Second)))
	n, err := conn.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", string(buf[:n]))
	return conn
}

// closedWithin reports whether the server closes conn within d.
func closedWithin(conn net.Conn, d time.Duration) bool {
	if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return true
	}
	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// TestACLRevokedOnServersInError: a database in error whose server still runs (a failed
// Ensure leaves it so) is not supervised, yet a user's password change, a user's
// deletion and a role's loss of the database reach its server: the old credential is
// refused there, its connections closed, and the API says the change is done only once
// it is (while the server cannot be given the users, the row stays pending and the old
// password still works there: the API does not lie). A server in error that is stopped
// is not started: its config file gets the users.
func TestACLRevokedOnServersInError(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install -y redis-server")
	}
	store := openStore(t)
	logs := &syncbuf.Buffer{}
	dataDir := filepath.Join(t.TempDir(), "databases")
	drv, err := local.New(local.Config{Dir: dataDir, Host: "127.0.0.1",
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, id := range mustInstances(t, drv) {
			_ = drv.Remove(context.Background(), id)
		}
	})
	g := &gatedSetter{Driver: drv, open: make(chan struct{})}
	r := &reconcile.Reconciler{Store: store, Driver: g, Interval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	runReconciler(t, r)

	a := createAccount(t, store, "a", 2)
	d1, d2 := a.dbs[0], a.dbs[1]
	poll(t, func() bool { return allActive(t, store, d1, d2) }, 30*time.Second)
	var role *clouddb.ACLRole
	var alice, bob *clouddb.ACLUser
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		role = &clouddb.ACLRole{AccountID: a.account, Name: "readers", Status: clouddb.ACLPending, Rules: []clouddb.ACLRoleRule{
			{RuleID: readOnlyRuleID, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: a.sub, DatabaseID: d1.ID}, {SubscriptionID: a.sub, DatabaseID: d2.ID}}},
		}}
		require.NoError(t, tx.CreateACLRole(t.Context(), role))
		alice = &clouddb.ACLUser{AccountID: a.account, Name: "alice", RoleID: role.ID, Password: "Alice.pw1", Status: clouddb.ACLPending, Generation: 1}
		require.NoError(t, tx.CreateACLUser(t.Context(), alice))
		bob = &clouddb.ACLUser{AccountID: a.account, Name: "bob", RoleID: role.ID, Password: "Bob.pw1", Status: clouddb.ACLPending, Generation: 1}
		return tx.CreateACLUser(t.Context(), bob)
	}))
	r.Notify()
	userActive := func(u *clouddb.ACLUser) bool {
		row, rerr := userRow(t, store, u.ID)
		require.NoError(t, rerr)
		return row.Status == clouddb.ACLActive
	}
	poll(t, func() bool { return userActive(alice) && userActive(bob) }, 30*time.Second)
	for _, d := range []*clouddb.Database{d1, d2} {
		require.NoError(t, authAs(t, d, "alice", "Alice.pw1"))
		require.NoError(t, authAs(t, d, "bob", "Bob.pw1"))
	}

	// d2 fails; its server runs on. alice's password changes.
	pid, err := drv.Pid(d2.ID)
	require.NoError(t, err)
	setStatus(t, store, d2.ID, clouddb.DatabaseError)
	old := connAs(t, d2, "alice", "Alice.pw1")
	alice.Password = "Alice.pw2"
	updateUser(t, store, alice, clouddb.ACLPending)
	r.Notify()
	// While d2's server cannot be given the users, the change is not reported done.
	poll(t, func() bool { return authAs(t, d1, "alice", "Alice.pw2") == nil }, 30*time.Second)
	time.Sleep(300 * time.Millisecond) // many passes
	row, err := userRow(t, store, alice.ID)
	require.NoError(t, err)
	require.Equal(t, clouddb.ACLPending, row.Status, "d2's server still lets the old password in")
	require.NoError(t, authAs(t, d2, "alice", "Alice.pw1"))

	close(g.open)
	poll(t, func() bool {
		if !userActive(alice) {
			return false
		}
		require.ErrorContains(t, authAs(t, d2, "alice", "Alice.pw1"), "WRONGPASS", "active means no server lets the old password in")
		return true
	}, 30*time.Second)
	require.NoError(t, authAs(t, d2, "alice", "Alice.pw2"))
	require.True(t, closedWithin(old, 5*time.Second), "the old password's connection is closed")
	require.Equal(t, clouddb.DatabaseError, databaseOf(t, store, d2.ID).Status, "the status is left alone")
	now, err := drv.Pid(d2.ID)
	require.NoError(t, err)
	require.Equal(t, pid, now, "the server was neither restarted nor stopped")

	// alice is deleted: 404 only once d2's server refuses her.
	updateUser(t, store, alice, clouddb.ACLDeleting)
	r.Notify()
	poll(t, func() bool {
		if _, rerr := userRow(t, store, alice.ID); !errors.Is(rerr, clouddb.ErrNotFound) {
			require.NoError(t, rerr)
			return false
		}
		for _, d := range []*clouddb.Database{d1, d2} {
			require.ErrorContains(t, authAs(t, d, "alice", "Alice.pw2"), "WRONGPASS", "gone means no server has the user")
		}
		return true
	}, 30*time.Second)

	// The role loses d2: bob goes from d2's server before the role and bob are active.
	bobConn := connAs(t, d2, "bob", "Bob.pw1")
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		role.Rules = []clouddb.ACLRoleRule{{RuleID: readOnlyRuleID, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: a.sub, DatabaseID: d1.ID}}}}
		role.Status = clouddb.ACLPending
		role.Generation++
		if uerr := tx.UpdateACLRole(t.Context(), role); uerr != nil {
			return uerr
		}
		bob.Status = clouddb.ACLPending
		bob.Generation++
		return tx.UpdateACLUser(t.Context(), bob)
	}))
	r.Notify()
	poll(t, func() bool {
		if roleRow(t, store, role.ID).Status == clouddb.ACLPending || !userActive(bob) {
			return false
		}
		require.ErrorContains(t, authAs(t, d2, "bob", "Bob.pw1"), "WRONGPASS", "removed from a database its role left")
		return true
	}, 30*time.Second)
	require.True(t, closedWithin(bobConn, 5*time.Second))
	require.NoError(t, authAs(t, d1, "bob", "Bob.pw1"))

	// d2's server stops (still in error): a change settles without starting it, and its
	// config file has it for the start that the PUT bringing d2 back makes.
	require.NoError(t, drv.Stop(t.Context(), d2.ID))
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		role.Rules = []clouddb.ACLRoleRule{{RuleID: readOnlyRuleID, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: a.sub, DatabaseID: d1.ID}, {SubscriptionID: a.sub, DatabaseID: d2.ID}}}}
		role.Status = clouddb.ACLPending
		role.Generation++
		if uerr := tx.UpdateACLRole(t.Context(), role); uerr != nil {
			return uerr
		}
		bob.Password = "Bob.pw2"
		bob.Status = clouddb.ACLPending
		bob.Generation++
		return tx.UpdateACLUser(t.Context(), bob)
	}))
	r.Notify()
	poll(t, func() bool { return userActive(bob) && roleRow(t, store, role.ID).Status == clouddb.ACLActive }, 30*time.Second)
	_, err = drv.Pid(d2.ID)
	require.ErrorIs(t, err, os.ErrNotExist, "a stopped server in error is not started")
	conf, err := os.ReadFile(filepath.Join(dataDir, fmt.Sprint(d2.ID), "redis.conf"))
	require.NoError(t, err)
	require.Contains(t, string(conf), `user "bob" "reset" "on" "#`)
	setStatus(t, store, d2.ID, clouddb.DatabaseChangePending)
	r.Notify()
	poll(t, func() bool { return allActive(t, store, d2) }, 30*time.Second)
	require.NoError(t, authAs(t, d2, "bob", "Bob.pw2"))
	require.ErrorContains(t, authAs(t, d2, "bob", "Bob.pw1"), "WRONGPASS")
	require.NotContains(t, logs.String(), "Bob.pw")
	require.NotContains(t, logs.String(), "Alice.pw")
}
