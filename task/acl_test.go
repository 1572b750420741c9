package task

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/driver/local"
	"clouddb/sqlite"
)

// fakeChecker is a driver that verifies ACL rules only: it refuses a batch with the
// error of its first text in refuse and records what it was asked. The embedded Driver
// is nil: the ACL commands call nothing else.
type fakeChecker struct {
	clouddb.Driver
	mu      sync.Mutex
	refuse  map[string]error
	checked []string
	batches int
}

func (f *fakeChecker) CheckACLRules(_ context.Context, rules []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked = append(f.checked, rules...)
	f.batches++
	for _, r := range rules {
		if err := f.refuse[r]; err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeChecker) batchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.batches
}

func (f *fakeChecker) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.checked...)
}

// aclFixture is a store with one account, an active subscription and two databases, and
// an engine whose driver is d.
type aclFixture struct {
	t        *testing.T
	ctx      context.Context
	store    *sqlite.DB
	e        *Engine
	account  int
	sub      int
	db1, db2 int
}

func newACLFixture(t *testing.T, d clouddb.Driver) *aclFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	f := &aclFixture{t: t, ctx: ctx, store: store}
	require.NoError(t, store.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		if err := tx.CreateAccount(ctx, a); err != nil {
			return err
		}
		sub := &clouddb.Subscription{AccountID: a.ID, Name: "s", Status: clouddb.SubscriptionActive, CapacityGB: 10}
		if err := tx.CreateSubscription(ctx, sub); err != nil {
			return err
		}
		f.account, f.sub = a.ID, sub.ID
		for i, id := range []*int{&f.db1, &f.db2} {
			db := &clouddb.Database{AccountID: a.ID, SubscriptionID: sub.ID, Status: clouddb.DatabaseActive, Port: 43000 + i,
				Spec: clouddb.DatabaseSpec{Name: []string{"one", "two"}[i], DatasetSizeInGB: 1}}
			if err := tx.CreateDatabase(ctx, db); err != nil {
				return err
			}
			*id = db.ID
		}
		return nil
	}))
	f.e = &Engine{Store: store, Driver: d}
	f.e.init()
	return f
}

// run submits a command with the payload and processes it; it returns the ended task.
func (f *aclFixture) run(command string, payload any) *clouddb.Task {
	f.t.Helper()
	b, err := json.Marshal(payload)
	require.NoError(f.t, err)
	tk := &clouddb.Task{AccountID: f.account, CommandType: command, Payload: b}
	require.NoError(f.t, f.e.Submit(f.ctx, tk))
	did, err := f.e.ProcessNext(f.ctx)
	require.NoError(f.t, err)
	require.True(f.t, did)
	var got *clouddb.Task
	require.NoError(f.t, f.store.View(f.ctx, func(tx clouddb.Tx) error {
		got, err = tx.Task(f.ctx, f.account, tk.ID)
		return err
	}))
	require.True(f.t, got.Status.Final(), "%s is %s", command, got.Status)
	return got
}

// ok runs a command that must complete and returns its resource id.
func (f *aclFixture) ok(command string, payload any) int {
	f.t.Helper()
	tk := f.run(command, payload)
	require.Equal(f.t, clouddb.TaskCompleted, tk.Status, "%s: %+v", command, tk.Error)
	require.NotZero(f.t, tk.ResourceID)
	return tk.ResourceID
}

// fail runs a command that must fail and returns its error.
func (f *aclFixture) fail(command string, payload any) *clouddb.TaskError {
	f.t.Helper()
	tk := f.run(command, payload)
	require.Equal(f.t, clouddb.TaskFailed, tk.Status, command)
	require.NotNil(f.t, tk.Error)
	return tk.Error
}

func (f *aclFixture) on(db int) map[string]any {
	return map[string]any{"subscriptionId": f.sub, "databaseId": db}
}

func assoc(rule string, dbs ...map[string]any) map[string]any {
	return map[string]any{"ruleName": rule, "databases": dbs}
}

func (f *aclFixture) rule(id int) *clouddb.ACLRule {
	f.t.Helper()
	var r *clouddb.ACLRule
	require.NoError(f.t, f.store.View(f.ctx, func(tx clouddb.Tx) error {
		var err error
		r, err = tx.ACLRule(f.ctx, f.account, id)
		return err
	}))
	return r
}

func (f *aclFixture) role(id int) *clouddb.ACLRole {
	f.t.Helper()
	var r *clouddb.ACLRole
	require.NoError(f.t, f.store.View(f.ctx, func(tx clouddb.Tx) error {
		var err error
		r, err = tx.ACLRole(f.ctx, f.account, id)
		return err
	}))
	return r
}

func (f *aclFixture) user(id int) *clouddb.ACLUser {
	f.t.Helper()
	var u *clouddb.ACLUser
	require.NoError(f.t, f.store.View(f.ctx, func(tx clouddb.Tx) error {
		var err error
		u, err = tx.ACLUser(f.ctx, f.account, id)
		return err
	}))
	return u
}

// settle does what the reconciler does once the servers have everything: every pending
// rule, role and user of the account becomes active at the generation it has.
func (f *aclFixture) settle() {
	f.t.Helper()
	require.NoError(f.t, f.store.Update(f.ctx, func(tx clouddb.Tx) error {
		rules, err := tx.ACLRules(f.ctx, f.account)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if r.Status == clouddb.ACLPending {
				if _, err = tx.SetACLRuleStatus(f.ctx, r.ID, r.Generation, clouddb.ACLActive); err != nil {
					return err
				}
			}
		}
		roles, err := tx.ACLRoles(f.ctx, f.account)
		if err != nil {
			return err
		}
		for _, r := range roles {
			if r.Status == clouddb.ACLPending {
				if _, err = tx.SetACLRoleStatus(f.ctx, r.ID, r.Generation, clouddb.ACLActive); err != nil {
					return err
				}
			}
		}
		users, err := tx.ACLUsers(f.ctx, f.account)
		if err != nil {
			return err
		}
		for _, u := range users {
			if u.Status == clouddb.ACLPending {
				if _, err = tx.SetACLUserStatus(f.ctx, u.ID, u.Generation, clouddb.ACLActive); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// state is an entity's status and generation.
type state struct {
	Status     clouddb.ACLStatus
	Generation int
}

const badRule = "+@read +nosuchcommand ~*"

// TestACLRulesVerifiedOnAssignment: a role create or update, and an update of a rule
// that roles use, verify the rules with the driver's checker (the default ones aside),
// and fail with the pattern error and the server's reason when it refuses one; nothing
// is written then. A rule nobody uses is only checked for syntax.
func TestACLRulesVerifiedOnAssignment(t *testing.T) {
	checker := &fakeChecker{refuse: map[string]error{badRule: clouddb.ACLRuleRefused(badRule, `Redis refuses "+nosuchcommand": Unknown command or category name in ACL`)}}
	f := newACLFixture(t, checker)
	good := f.ok(clouddb.CommandACLRuleCreate, map[string]any{"name": "good", "redisRule": "+@read ~*"})
	bad := f.ok(clouddb.CommandACLRuleCreate, map[string]any{"name": "bad", "redisRule": badRule})
	require.Empty(t, checker.calls(), "creating a rule checks its syntax only")

	e := f.fail(clouddb.CommandACLRoleCreate, map[string]any{"name": "r", "redisRules": []any{assoc("Read-Only", f.on(f.db2)), assoc("bad", f.on(f.db1))}})
	require.Equal(t, clouddb.ErrTypeACLRulePatternInvalid, e.Type)
	require.Equal(t, "400 BAD_REQUEST", e.Status)
	require.Equal(t, `Invalid ACL redis rule "bad": Redis refuses "+nosuchcommand": Unknown command or category name in ACL`, e.Description)
	require.Equal(t, "redis-acl-wrong-acl-rule-pattern", e.AdditionalInfo)
	require.Equal(t, []string{badRule}, checker.calls(), "the default rule is not checked")
	var roles []*clouddb.ACLRole
	require.NoError(t, f.store.View(f.ctx, func(tx clouddb.Tx) error {
		var err error
		roles, err = tx.ACLRoles(f.ctx, f.account)
		return err
	}))
	require.Empty(t, roles)

	role := f.ok(clouddb.CommandACLRoleCreate, map[string]any{"name": "r", "redisRules": []any{assoc("good", f.on(f.db1)), assoc("Read-Only", f.on(f.db2))}})
	require.Equal(t, []string{badRule, "+@read ~*"}, checker.calls())
	require.Equal(t, 2, checker.batchCount(), "one batch per task")

	// Several rules are checked in one batch; the refusal names the rule refused by its
	// name, whatever rule of the account has the same text.
	f.ok(clouddb.CommandACLRuleCreate, map[string]any{"name": "good2", "redisRule": "+@hash ~h:*"})
	f.ok(clouddb.CommandACLRuleCreate, map[string]any{"name": "bad-again", "redisRule": badRule})
	e = f.fail(clouddb.CommandACLRoleCreate, map[string]any{"name": "r3", "redisRules": []any{
		assoc("good2", f.on(f.db1)), assoc("bad-again", f.on(f.db2)),
	}})
	require.Equal(t, `Invalid ACL redis rule "bad-again": Redis refuses "+nosuchcommand": Unknown command or category name in ACL`, e.Description)
	require.Equal(t, []string{badRule, "+@read ~*", "+@hash ~h:*", badRule}, checker.calls())
	require.Equal(t, 3, checker.batchCount())
	before := f.role(role)

	e = f.fail(clouddb.CommandACLRoleUpdate, map[string]any{"id": role, "name": "r2", "redisRules": []any{assoc("bad", f.on(f.db1))}})
	require.Equal(t, clouddb.ErrTypeACLRulePatternInvalid, e.Type)
	require.Equal(t, before, f.role(role), "a refused update writes nothing")

	// The rule is used by the role: its new text is checked.
	e = f.fail(clouddb.CommandACLRuleUpdate, map[string]any{"id": good, "redisRule": badRule})
	require.Equal(t, clouddb.ErrTypeACLRulePatternInvalid, e.Type)
	require.Equal(t, "+@read ~*", f.rule(good).ACL)
	n := len(checker.calls())
	// Nobody uses it: it is not.
	require.Equal(t, bad, f.ok(clouddb.CommandACLRuleUpdate, map[string]any{"id": bad, "redisRule": "+@read +alsonothing ~*"}))
	require.Len(t, checker.calls(), n)

	// A failure of the checker itself is not blamed on the rule: the task fails as an
	// internal error, which says nothing of the cause.
	checker.refuse["+@write ~*"] = errors.New("start redis-server: no such file")
	e = f.fail(clouddb.CommandACLRuleUpdate, map[string]any{"id": good, "redisRule": "+@write ~*"})
	require.Equal(t, clouddb.ErrTypeGeneral, e.Type)
	require.NotContains(t, e.Description, "redis-server")
	require.Empty(t, e.AdditionalInfo)
}

// TestACLRuleRefusedByRedis: with the real driver, a rule redis refuses fails the task
// with the API's error, which names the rule (by its name) and the server's reason once.
func TestACLRuleRefusedByRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: apt-get install -y redis-server")
	}
	drv, err := local.New(local.Config{Dir: t.TempDir()})
	require.NoError(t, err)
	f := newACLFixture(t, drv)
	f.ok(clouddb.CommandACLRuleCreate, map[string]any{"name": "bad", "redisRule": badRule})
	e := f.fail(clouddb.CommandACLRoleCreate, map[string]any{"name": "r", "redisRules": []any{assoc("bad", f.on(f.db1))}})
	require.Equal(t, clouddb.ErrTypeACLRulePatternInvalid, e.Type)
	require.Equal(t, `Invalid ACL redis rule "bad": Redis refuses "+nosuchcommand": Unknown command or category name in ACL`, e.Description)
	require.Equal(t, "redis-acl-wrong-acl-rule-pattern", e.AdditionalInfo)
}

// TestACLWithoutChecker: a driver that cannot verify rules (or none) leaves them to the
// syntax check.
func TestACLWithoutChecker(t *testing.T) {
	f := newACLFixture(t, nil)
	f.ok(clouddb.CommandACLRuleCreate, map[string]any{"name": "bad", "redisRule": badRule})
	role := f.ok(clouddb.CommandACLRoleCreate, map[string]any{"name": "r", "redisRules": []any{assoc("bad", f.on(f.db1))}})
	require.Equal(t, state{clouddb.ACLPending, 1}, state{f.role(role).Status, f.role(role).Generation})
}

// TestACLStatusGenerations: which entity each command makes pending, each time at its
// next generation, so that the reconciler settles only what it applied.
func TestACLStatusGenerations(t *testing.T) {
	f := newACLFixture(t, &fakeChecker{})
	rule := f.ok(clouddb.CommandACLRuleCreate, map[string]any{"name": "rule", "redisRule": "+@read ~*"})
	roleA := f.ok(clouddb.CommandACLRoleCreate, map[string]any{"name": "a", "redisRules": []any{assoc("rule", f.on(f.db1))}})
	roleB := f.ok(clouddb.CommandACLRoleCreate, map[string]any{"name": "b", "redisRules": []any{assoc("Read-Only", f.on(f.db1)), assoc("Read-Write", f.on(f.db2))}})
	const pw = "Str0ng.password"
	u1 := f.ok(clouddb.CommandACLUserCreate, map[string]any{"name": "u1", "role": "a", "password": pw})
	u2 := f.ok(clouddb.CommandACLUserCreate, map[string]any{"name": "u2", "role": "b", "password": pw})
	gone := f.ok(clouddb.CommandACLUserCreate, map[string]any{"name": "gone", "role": "a", "password": pw})
	for _, s := range []state{{f.rule(rule).Status, f.rule(rule).Generation}, {f.role(roleA).Status, f.role(roleA).Generation},
		{f.user(u1).Status, f.user(u1).Generation}} {
		require.Equal(t, state{clouddb.ACLPending, 1}, s, "a create is pending at generation 1")
	}
	require.Equal(t, gone, f.ok(clouddb.CommandACLUserDelete, map[string]any{"id": gone}))
	require.Equal(t, state{clouddb.ACLDeleting, 2}, state{f.user(gone).Status, f.user(gone).Generation})
	require.Equal(t, pw, f.user(u1).Password)
	f.settle()

	type all struct{ rule, roleA, roleB, u1, u2, gone state }
	now := func() all {
		st := func(s clouddb.ACLStatus, g int) state { return state{s, g} }
		return all{st(f.rule(rule).Status, f.rule(rule).Generation), st(f.role(roleA).Status, f.role(roleA).Generation),
			st(f.role(roleB).Status, f.role(roleB).Generation), st(f.user(u1).Status, f.user(u1).Generation),
			st(f.user(u2).Status, f.user(u2).Generation), st(f.user(gone).Status, f.user(gone).Generation)}
	}
	want := all{state{clouddb.ACLActive, 1}, state{clouddb.ACLActive, 1}, state{clouddb.ACLActive, 1},
		state{clouddb.ACLActive, 1}, state{clouddb.ACLActive, 1}, state{clouddb.ACLDeleting, 2}}
	require.Equal(t, want, now())

	// A rename of the rule changes no server.
	f.ok(clouddb.CommandACLRuleUpdate, map[string]any{"id": rule, "name": "rule-2", "redisRule": "+@read ~*"})
	want.rule = state{clouddb.ACLPending, 2}
	require.Equal(t, want, now())
	f.settle()

	// A new text changes the access of role a's users.
	f.ok(clouddb.CommandACLRuleUpdate, map[string]any{"id": rule, "redisRule": "+@read ~k:*"})
	want.rule, want.roleA, want.u1 = state{clouddb.ACLPending, 3}, state{clouddb.ACLPending, 2}, state{clouddb.ACLPending, 2}
	require.Equal(t, want, now())
	f.settle()
	want.rule, want.roleA, want.u1 = state{clouddb.ACLActive, 3}, state{clouddb.ACLActive, 2}, state{clouddb.ACLActive, 2}

	// A role update that names the same associations in another order changes no access.
	f.ok(clouddb.CommandACLRoleUpdate, map[string]any{"id": roleB, "name": "b-2", "redisRules": []any{assoc("Read-Write", f.on(f.db2)), assoc("Read-Only", f.on(f.db1))}})
	want.roleB = state{clouddb.ACLPending, 2}
	require.Equal(t, want, now())
	f.settle()
	want.roleB = state{clouddb.ACLActive, 2}

	// Other associations change the access of its users.
	f.ok(clouddb.CommandACLRoleUpdate, map[string]any{"id": roleB, "redisRules": []any{assoc("Read-Write", f.on(f.db1))}})
	want.roleB, want.u2 = state{clouddb.ACLPending, 3}, state{clouddb.ACLPending, 2}
	require.Equal(t, want, now())
	require.Equal(t, "b-2", f.role(roleB).Name)
	f.settle()
	want.roleB, want.u2 = state{clouddb.ACLActive, 3}, state{clouddb.ACLActive, 2}

	// A user update makes only the user pending; its new password is kept.
	f.ok(clouddb.CommandACLUserUpdate, map[string]any{"id": u1, "role": "b-2", "password": "N3w.password"})
	want.u1 = state{clouddb.ACLPending, 3}
	require.Equal(t, want, now())
	require.Equal(t, "N3w.password", f.user(u1).Password)
	require.Equal(t, roleB, f.user(u1).RoleID)
	f.ok(clouddb.CommandACLUserUpdate, map[string]any{"id": u1, "role": "a"})
	require.Equal(t, "N3w.password", f.user(u1).Password, "an update without a password keeps it")
}
