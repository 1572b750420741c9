package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
	"clouddb/internal/syncbuf"
	"clouddb/reconcile"
)

// readOnlyRuleID is the default rule Read-Only ("+@read ~*").
const readOnlyRuleID = 3

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// aclWorld is an account with a subscription and its databases, run by the real local
// driver.
type aclWorld struct {
	account, sub int
	dbs          []*clouddb.Database
}

// createAccount stores an account, an active subscription and n pending databases.
func createAccount(t *testing.T, store clouddb.Store, name string, n int) aclWorld {
	t.Helper()
	ctx := t.Context()
	var w aclWorld
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: name, Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		s := &clouddb.Subscription{AccountID: a.ID, Name: name + "-s", Status: clouddb.SubscriptionActive}
		require.NoError(t, tx.CreateSubscription(ctx, s))
		w.account, w.sub = a.ID, s.ID
		for i := range n {
			w.dbs = append(w.dbs, newDatabase(t, ctx, tx, a.ID, s.ID, fmt.Sprintf("%s-d%d", name, i)))
		}
		return nil
	}))
	return w
}

func newDatabase(t *testing.T, ctx context.Context, tx clouddb.Tx, account, sub int, name string) *clouddb.Database {
	t.Helper()
	d := &clouddb.Database{AccountID: account, SubscriptionID: sub, Port: freePort(t), Password: "Tenant.pw-" + name,
		Status: clouddb.DatabasePending, Generation: 1,
		Spec: clouddb.DatabaseSpec{Name: name, MemoryLimitInGB: 0.1, DataPersistence: "aof-every-write"}}
	require.NoError(t, tx.CreateDatabase(ctx, d))
	return d
}

// authAs answers AUTH user password on a new connection to the database.
func authAs(t *testing.T, d *clouddb.Database, user, password string) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.Port), Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer c.Close()
	return c.Do(t.Context(), "auth", user, password).Err()
}

// setAs tries SET as the user.
func setAs(t *testing.T, d *clouddb.Database, user, password string) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", d.Port), Username: user, Password: password,
		Protocol: 2, DisableIdentity: true, MaxRetries: -1, DialTimeout: 2 * time.Second})
	defer c.Close()
	return c.Set(t.Context(), "k", "v", 0).Err()
}

func userRow(t *testing.T, store clouddb.Store, id int) (*clouddb.ACLUser, error) {
	t.Helper()
	var u *clouddb.ACLUser
	err := store.View(t.Context(), func(tx clouddb.Tx) error {
		var err error
		u, err = tx.ACLUser(t.Context(), 0, id)
		return err
	})
	return u, err
}

func roleRow(t *testing.T, store clouddb.Store, id int) *clouddb.ACLRole {
	t.Helper()
	var r *clouddb.ACLRole
	require.NoError(t, store.View(t.Context(), func(tx clouddb.Tx) error {
		var err error
		r, err = tx.ACLRole(t.Context(), 0, id)
		return err
	}))
	return r
}

func ruleRow(t *testing.T, store clouddb.Store, id int) *clouddb.ACLRule {
	t.Helper()
	var r *clouddb.ACLRule
	require.NoError(t, store.View(t.Context(), func(tx clouddb.Tx) error {
		var err error
		r, err = tx.ACLRule(t.Context(), 0, id)
		return err
	}))
	return r
}

func allActive(t *testing.T, store clouddb.Store, dbs ...*clouddb.Database) bool {
	for _, d := range dbs {
		if databaseOf(t, store, d.ID).Status != clouddb.DatabaseActive {
			return false
		}
	}
	return true
}

// TestACLUsersOnServers: a user whose role binds Read-Only to one database is a user of
// that database's server only (not of the account's other database, nor of another
// account's), limited by the rule; its rows go pending -> active only once the servers
// have it; a role changed to name another database moves the user there; a new database
// the role names gets the user when it becomes active, and keeps it through a restart of
// its server and of clouddb; a deleted user's row goes once no server has it.
func TestACLUsersOnServers(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install -y redis-server")
	}
	store := openStore(t)
	dir := t.TempDir()
	logs := &syncbuf.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	newDriver := func() *local.Driver {
		drv, err := local.New(local.Config{Dir: filepath.Join(dir, "databases"), Host: "127.0.0.1", Logger: logger})
		require.NoError(t, err)
		return drv
	}
	drv := newDriver()
	t.Cleanup(func() {
		for _, id := range mustInstances(t, drv) {
			_ = drv.Remove(context.Background(), id)
		}
	})
	// run runs a reconciler, as a clouddb process would, until stop or the test's end.
	run := func(drv clouddb.Driver) (*reconcile.Reconciler, func()) {
		ctx, cancel := context.WithCancel(t.Context())
		r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 20 * time.Millisecond, Logger: logger}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := r.Run(ctx); err != nil {
				t.Errorf("reconciler: %v", err)
			}
		}()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stop)
		return r, stop
	}
	r, stop := run(drv)

	a := createAccount(t, store, "a", 2)
	b := createAccount(t, store, "b", 1)
	d1, d2, other := a.dbs[0], a.dbs[1], b.dbs[0]
	poll(t, func() bool { return allActive(t, store, d1, d2, other) }, 30*time.Second)

	// A rule of the account, a role binding Read-Only to d1, a user holding it; and in
	// account b a role and a user that name a's database d1, which b cannot reach.
	var rule *clouddb.ACLRule
	var role, bRole *clouddb.ACLRole
	var user, bUser *clouddb.ACLUser
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		rule = &clouddb.ACLRule{AccountID: a.account, Name: "writer", ACL: "+@write ~*", Status: clouddb.ACLPending}
		require.NoError(t, tx.CreateACLRule(t.Context(), rule))
		role = &clouddb.ACLRole{AccountID: a.account, Name: "readers", Status: clouddb.ACLPending, Rules: []clouddb.ACLRoleRule{
			{RuleID: readOnlyRuleID, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: a.sub, DatabaseID: d1.ID}}},
		}}
		require.NoError(t, tx.CreateACLRole(t.Context(), role))
		user = &clouddb.ACLUser{AccountID: a.account, Name: "alice", RoleID: role.ID, Password: "Alice.pw1", Status: clouddb.ACLPending}
		require.NoError(t, tx.CreateACLUser(t.Context(), user))
		bRole = &clouddb.ACLRole{AccountID: b.account, Name: "intruders", Status: clouddb.ACLPending, Rules: []clouddb.ACLRoleRule{
			{RuleID: readOnlyRuleID, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: a.sub, DatabaseID: d1.ID}}},
		}}
		require.NoError(t, tx.CreateACLRole(t.Context(), bRole))
		bUser = &clouddb.ACLUser{AccountID: b.account, Name: "mallory", RoleID: bRole.ID, Password: "Mall.0ry1", Status: clouddb.ACLPending}
		require.NoError(t, tx.CreateACLUser(t.Context(), bUser))
		return nil
	}))
	r.Notify()

	// Active only once the server has the user: at the moment the status says so, the
	// user logs in.
	poll(t, func() bool {
		u, err := userRow(t, store, user.ID)
		require.NoError(t, err)
		if u.Status == clouddb.ACLPending {
			return false
		}
		require.Equal(t, clouddb.ACLActive, u.Status)
		require.NoError(t, authAs(t, d1, "alice", "Alice.pw1"), "active means the server has the user")
		return true
	}, 30*time.Second)
	poll(t, func() bool {
		return roleRow(t, store, role.ID).Status == clouddb.ACLActive && ruleRow(t, store, rule.ID).Status == clouddb.ACLActive
	}, 10*time.Second)
	require.ErrorContains(t, setAs(t, d1, "alice", "Alice.pw1"), "NOPERM", "limited by Read-Only")
	require.ErrorContains(t, authAs(t, d2, "alice", "Alice.pw1"), "WRONGPASS", "not a user of a database its role does not name")
	require.ErrorContains(t, authAs(t, other, "alice", "Alice.pw1"), "WRONGPASS", "not a user of another account's database")
	// b's user and role settle (b has nothing to wait for) but never reach a's database.
	poll(t, func() bool {
		u, err := userRow(t, store, bUser.ID)
		require.NoError(t, err)
		return u.Status == clouddb.ACLActive && roleRow(t, store, bRole.ID).Status == clouddb.ACLActive
	}, 10*time.Second)
	require.ErrorContains(t, authAs(t, d1, "mallory", "Mall.0ry1"), "WRONGPASS")
	require.ErrorContains(t, authAs(t, other, "mallory", "Mall.0ry1"), "WRONGPASS")

	// The role now binds the account's own rule to d2 and to a new database: pending
	// until every server it concerns has the change: d2 and the new database have the
	// user, d1 no longer.
	var d3 *clouddb.Database
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		d3 = newDatabase(t, t.Context(), tx, a.account, a.sub, "a-d3")
		role.Rules = []clouddb.ACLRoleRule{{RuleID: rule.ID, Databases: []clouddb.ACLRoleDatabaseRef{
			{SubscriptionID: a.sub, DatabaseID: d2.ID}, {SubscriptionID: a.sub, DatabaseID: d3.ID},
		}}}
		role.Status = clouddb.ACLPending
		role.Generation++
		return tx.UpdateACLRole(t.Context(), role)
	}))
	r.Notify()
	poll(t, func() bool {
		if roleRow(t, store, role.ID).Status == clouddb.ACLPending {
			return false
		}
		require.NoError(t, authAs(t, d2, "alice", "Alice.pw1"))
		require.ErrorContains(t, authAs(t, d1, "alice", "Alice.pw1"), "WRONGPASS")
		require.NoError(t, authAs(t, d3, "alice", "Alice.pw1"))
		return true
	}, 30*time.Second)
	require.Equal(t, clouddb.ACLActive, roleRow(t, store, role.ID).Status)
	require.NoError(t, setAs(t, d2, "alice", "Alice.pw1"), "the account's rule +@write")
	poll(t, func() bool { return allActive(t, store, d3) }, 30*time.Second)
	require.NoError(t, authAs(t, d3, "alice", "Alice.pw1"))

	// A server that dies comes back with its users; so does a new clouddb.
	p, err := drv.Pid(d3.ID)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(p, syscall.SIGKILL))
	poll(t, func() bool {
		q, err := drv.Pid(d3.ID)
		return err == nil && q != p && authAs(t, d3, "alice", "Alice.pw1") == nil
	}, 30*time.Second)
	stop()
	r, _ = run(newDriver())

	// Deleted: the row goes once no server has the user.
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		user.Status = clouddb.ACLDeleting
		return tx.UpdateACLUser(t.Context(), user)
	}))
	r.Notify()
	poll(t, func() bool {
		_, err := userRow(t, store, user.ID)
		if err == nil {
			return false
		}
		require.True(t, errors.Is(err, clouddb.ErrNotFound), err)
		for _, d := range []*clouddb.Database{d2, d3} {
			require.ErrorContains(t, authAs(t, d, "alice", "Alice.pw1"), "WRONGPASS", "gone means no server has the user")
		}
		return true
	}, 30*time.Second)

	// The account's log tells, without the password.
	var entries []*clouddb.LogEntry
	require.NoError(t, store.View(t.Context(), func(tx clouddb.Tx) error {
		var err error
		entries, err = tx.LogEntries(t.Context(), clouddb.LogFilter{AccountID: a.account})
		return err
	}))
	var text strings.Builder
	for _, e := range entries {
		fmt.Fprintln(&text, e.Description)
	}
	require.Contains(t, text.String(), `ACL user "alice"`)
	require.Contains(t, text.String(), "deleted")
	require.NotContains(t, text.String(), "Alice.pw1")
	require.NotContains(t, logs.String(), "Alice.pw1")
}

// poll waits until cond holds, calling it from the test's goroutine (so that it may use
// require) every few milliseconds.
func poll(t *testing.T, cond func() bool, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustInstances(t *testing.T, d *local.Driver) []int {
	ids, err := d.Instances(context.Background())
	require.NoError(t, err)
	return ids
}

// gate is a recorder that keeps the instances it was given and, while held, fails to set
// up one database's server as one that is still loading its data (it stays active).
type gate struct {
	*recorder
	id   int
	held atomic.Bool
	mu   sync.Mutex
	last map[int]clouddb.Instance
}

func (g *gate) Ensure(ctx context.Context, in clouddb.Instance) error {
	if in.DatabaseID == g.id && g.held.Load() {
		return fmt.Errorf("database %d: %w", in.DatabaseID, clouddb.ErrServerStarting)
	}
	g.mu.Lock()
	g.last[in.DatabaseID] = in
	g.mu.Unlock()
	return g.recorder.Ensure(ctx, in)
}

func (g *gate) users(id int) []clouddb.DatabaseUser {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last[id].Users
}

// TestACLStatusWaitsForActiveDatabases: a pending user stays pending while an active
// database it concerns does not run the instance with it, and becomes active once it
// does; with a driver that cannot set users outside Ensure (no clouddb.UserSetter), a
// database in error does not hold it back. The users a database gets are sorted by name,
// with their rule's text.
func TestACLStatusWaitsForActiveDatabases(t *testing.T) {
	store := openStore(t)
	a := createAccount(t, store, "a", 2)
	d1, d2 := a.dbs[0], a.dbs[1]
	drv := &gate{recorder: newRecorder(), id: d2.ID, last: map[int]clouddb.Instance{}}
	r := &reconcile.Reconciler{Store: store, Driver: drv, Interval: 10 * time.Millisecond}
	runReconciler(t, r)
	poll(t, func() bool { return allActive(t, store, d1, d2) }, 10*time.Second)

	drv.held.Store(true)
	var role *clouddb.ACLRole
	var zed, amy *clouddb.ACLUser
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		role = &clouddb.ACLRole{AccountID: a.account, Name: "r", Status: clouddb.ACLPending, Rules: []clouddb.ACLRoleRule{
			{RuleID: readOnlyRuleID, Databases: []clouddb.ACLRoleDatabaseRef{{SubscriptionID: a.sub, DatabaseID: d1.ID}, {SubscriptionID: a.sub, DatabaseID: d2.ID}}},
		}}
		require.NoError(t, tx.CreateACLRole(t.Context(), role))
		zed = &clouddb.ACLUser{AccountID: a.account, Name: "zed", RoleID: role.ID, Password: "Zed.pass1", Status: clouddb.ACLPending}
		require.NoError(t, tx.CreateACLUser(t.Context(), zed))
		amy = &clouddb.ACLUser{AccountID: a.account, Name: "amy", RoleID: role.ID, Password: "Amy.pass1", Status: clouddb.ACLPending}
		return tx.CreateACLUser(t.Context(), amy)
	}))
	want := []clouddb.DatabaseUser{{Name: "amy", Password: "Amy.pass1", Rule: "+@read ~*"}, {Name: "zed", Password: "Zed.pass1", Rule: "+@read ~*"}}
	poll(t, func() bool { return len(drv.users(d1.ID)) == 2 }, 10*time.Second)
	require.Equal(t, want, drv.users(d1.ID))
	time.Sleep(300 * time.Millisecond) // many passes
	for _, u := range []*clouddb.ACLUser{zed, amy} {
		row, err := userRow(t, store, u.ID)
		require.NoError(t, err)
		require.Equal(t, clouddb.ACLPending, row.Status, "d2 does not have it yet")
	}
	require.Equal(t, clouddb.ACLPending, roleRow(t, store, role.ID).Status)
	require.Equal(t, clouddb.DatabaseActive, databaseOf(t, store, d2.ID).Status)

	drv.held.Store(false)
	poll(t, func() bool {
		row, err := userRow(t, store, zed.ID)
		require.NoError(t, err)
		return row.Status == clouddb.ACLActive && roleRow(t, store, role.ID).Status == clouddb.ACLActive
	}, 10*time.Second)
	require.Equal(t, want, drv.users(d2.ID))

	// A change while d2 is in error: d2 does not hold it back (this driver has no
	// SetUsers; see TestACLRevokedOnServersInError for one that has).
	drv.held.Store(true)
	require.NoError(t, store.Update(t.Context(), func(tx clouddb.Tx) error {
		d := databaseOf(t, store, d2.ID)
		if _, err := tx.SetDatabaseStatus(t.Context(), d.ID, d.Generation, clouddb.DatabaseError, "broken"); err != nil {
			return err
		}
		amy.Password = "Amy.pass2"
		amy.Status = clouddb.ACLPending
		amy.Generation++
		return tx.UpdateACLUser(t.Context(), amy)
	}))
	poll(t, func() bool {
		row, err := userRow(t, store, amy.ID)
		require.NoError(t, err)
		return row.Status == clouddb.ACLActive
	}, 10*time.Second)
	require.Equal(t, "Amy.pass2", drv.users(d1.ID)[0].Password)
	require.Equal(t, "Amy.pass1", drv.users(d2.ID)[0].Password, "d2, in error, was left alone")
}
