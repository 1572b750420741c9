package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// userOf connects to a database as an ACL user.
func userOf(t *testing.T, db *client.Database, user, password string) *redis.Client {
	t.Helper()
	r := redis.NewClient(&redis.Options{Addr: db.PublicEndpoint, Username: user, Password: password,
		MaxRetries: -1, DialTimeout: 2 * time.Second, PoolSize: 1})
	t.Cleanup(func() { r.Close() })
	return r
}

// refusedLogin reports whether the server refuses the user's credentials (WRONGPASS) on a
// new connection.
func refusedLogin(ctx context.Context, t *testing.T, db *client.Database, user, password string) bool {
	t.Helper()
	err := userOf(t, db, user, password).Ping(ctx).Err()
	return err != nil && strings.Contains(err.Error(), "WRONGPASS")
}

// noPermission reports whether err is the server's ACL refusal of a command or key.
func noPermission(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOPERM")
}

// completed returns a function that waits for the task a client call returned to
// complete, and gives its resource id: completed(ctx)(s.c.CreateUser(...)).
func (s *service) completed(ctx context.Context) func(*client.Task, error) int {
	return func(tk *client.Task, err error) int {
		s.t.Helper()
		require.NoError(s.t, err)
		done, err := s.c.WaitForTask(ctx, tk.ID)
		require.NoError(s.t, err)
		return done.ResourceID()
	}
}

// TestACLUsersOnTheirDatabases: an ACL user logs in, with its own name and password, to
// the databases its role binds a rule to, limited by that rule, and to no other; a role
// change moves its access, a password change replaces its password, a rule change
// narrows it, all on the live servers; it keeps its access across a restart of clouddb
// (and no file of the data dir holds its password in the clear); deleting it removes it
// from the servers.
func TestACLUsersOnTheirDatabases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startService(t, dir, options{})
	ctx := testContext(t)
	sub, db1 := s.activeSubscription(ctx, "acl", 0.1)
	db2 := s.addDatabase(ctx, sub, client.CreateDatabase{Name: client.Ptr("acl-db2"), DatasetSizeInGB: client.Ptr(0.1), Password: client.Ptr("db2-Pass")})
	require.NoError(t, redisOf(t, db1).Set(ctx, "app:greeting", "hello", 0).Err())
	require.NoError(t, redisOf(t, db2).Set(ctx, "app:greeting", "bonjour", 0).Err())

	ruleID := s.completed(ctx)(s.c.CreateRedisRule(ctx, client.CreateRedisRule{Name: client.Ptr("app-keys"), RedisRule: client.Ptr("+@all -@dangerous ~app:*")}))
	_, err := s.c.WaitForRedisRuleStatus(ctx, ruleID, client.ACLActive)
	require.NoError(t, err)
	roleID := s.completed(ctx)(s.c.CreateRole(ctx, client.CreateRole{Name: client.Ptr("reader"), RedisRules: []client.RoleRule{
		{RuleName: "Read-Only", Databases: []client.RoleDatabase{{SubscriptionID: sub, DatabaseID: db1.ID}}},
	}}))
	_, err = s.c.WaitForRoleStatus(ctx, roleID, client.ACLActive)
	require.NoError(t, err)
	const user, pass = "alice", "Alice.pa55word"
	userID := s.completed(ctx)(s.c.CreateUser(ctx, client.CreateUser{Name: client.Ptr(user), Role: client.Ptr("reader"), Password: client.Ptr(pass)}))
	got, err := s.c.WaitForUserStatus(ctx, userID, client.ACLActive)
	require.NoError(t, err)
	require.Equal(t, client.User{ID: userID, Name: user, Role: "reader", Status: client.ACLActive}, *got)

	// Read-Only on db1, nothing on db2.
	a1, a2 := userOf(t, db1, user, pass), userOf(t, db2, user, pass)
	require.Equal(t, "hello", a1.Get(ctx, "app:greeting").Val())
	require.True(t, noPermission(a1.Set(ctx, "app:greeting", "changed", 0).Err()), "Read-Only refuses writes")
	require.True(t, refusedLogin(ctx, t, db2, user, pass), "db2 is not in the role")
	require.True(t, refusedLogin(ctx, t, db1, user, "Wrong.pa55word"), "a wrong password is refused")

	// The role now binds app-keys to db2 only: the access moves, live.
	tk, err := s.c.UpdateRole(ctx, roleID, client.CreateRole{Name: client.Ptr("reader"), RedisRules: []client.RoleRule{
		{RuleName: "app-keys", Databases: []client.RoleDatabase{{SubscriptionID: sub, DatabaseID: db2.ID}}},
	}})
	s.completed(ctx)(tk, err)
	_, err = s.c.WaitForRoleStatus(ctx, roleID, client.ACLActive)
	require.NoError(t, err)
	_, err = s.c.WaitForUserStatus(ctx, userID, client.ACLActive)
	require.NoError(t, err)
	require.True(t, refusedLogin(ctx, t, db1, user, pass), "db1 left the role")
	require.NoError(t, a2.Set(ctx, "app:counter", "1", 0).Err(), "app-keys allows writes to app:*")
	require.True(t, noPermission(a2.Set(ctx, "other", "1", 0).Err()), "app-keys limits the keys")
	require.True(t, noPermission(a2.ConfigSet(ctx, "maxmemory", "0").Err()), "no ACL user administers the server")

	// A restart of clouddb keeps the user; no file of the data dir holds its password.
	s.stop()
	s = startService(t, dir, options{})
	db2, err = s.c.WaitForDatabaseStatus(ctx, sub, db2.ID, "active")
	require.NoError(t, err)
	a2 = userOf(t, db2, user, pass)
	require.NoError(t, a2.Set(ctx, "app:counter", "2", 0).Err(), "the user works on the restarted server")
	require.True(t, refusedLogin(ctx, t, db1, user, pass))
	require.NoError(t, filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err // a directory, or a server's unix socket
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		require.NotContains(t, string(b), pass, "%s holds the user's password", path)
		return nil
	}))

	// A new password replaces the old one on the live server.
	const pass2 = "Alice.n3w-word"
	tk, err = s.c.UpdateUser(ctx, userID, client.UpdateUser{Role: client.Ptr("reader"), Password: client.Ptr(pass2)})
	s.completed(ctx)(tk, err)
	_, err = s.c.WaitForUserStatus(ctx, userID, client.ACLActive)
	require.NoError(t, err)
	require.True(t, refusedLogin(ctx, t, db2, user, pass), "the old password is gone")
	require.Equal(t, "2", userOf(t, db2, user, pass2).Get(ctx, "app:counter").Val())

	// A new text of the rule reaches the live server: app-keys no longer writes.
	tk, err = s.c.UpdateRedisRule(ctx, ruleID, client.CreateRedisRule{Name: client.Ptr("app-keys"), RedisRule: client.Ptr("+@read ~app:*")})
	s.completed(ctx)(tk, err)
	_, err = s.c.WaitForRedisRuleStatus(ctx, ruleID, client.ACLActive)
	require.NoError(t, err)
	_, err = s.c.WaitForUserStatus(ctx, userID, client.ACLActive)
	require.NoError(t, err)
	a2 = userOf(t, db2, user, pass2)
	require.True(t, noPermission(a2.Set(ctx, "app:counter", "3", 0).Err()), "the rule's new text holds")
	require.Equal(t, "2", a2.Get(ctx, "app:counter").Val())

	// Deleted: gone from the API and from the server.
	tk, err = s.c.DeleteUser(ctx, userID)
	s.completed(ctx)(tk, err)
	require.NoError(t, s.c.WaitForUserGone(ctx, userID))
	require.True(t, refusedLogin(ctx, t, db2, user, pass2), "a deleted user cannot log in")
	require.NoError(t, redisOf(t, db2).Ping(ctx).Err(), "the default user is untouched")
}

// TestTerraformACLSequence: the calls the Terraform provider makes over the life of an
// ACL rule, role and user (create in that order, each waited for with its list or GET
// until active, then read; a user update sends role and password; destroy in the
// reverse order, each waited for until the id is absent or 404), against the service.
func TestTerraformACLSequence(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	sub, db := s.activeSubscription(ctx, "tf-acl", 0.1)

	// Rule: POST, wait on the list, read; PUT with the name unchanged, wait, read.
	ruleID := s.completed(ctx)(s.c.CreateRedisRule(ctx, client.CreateRedisRule{Name: client.Ptr("tf-rule"), RedisRule: client.Ptr("+@read  ~cache:*")}))
	rule, err := s.c.WaitForRedisRuleStatus(ctx, ruleID, client.ACLActive)
	require.NoError(t, err)
	require.Equal(t, client.RedisRule{ID: ruleID, Name: "tf-rule", ACL: "+@read  ~cache:*", Status: client.ACLActive}, *rule, "the rule text reads back byte for byte")
	tk, err := s.c.UpdateRedisRule(ctx, ruleID, client.CreateRedisRule{Name: client.Ptr("tf-rule"), RedisRule: client.Ptr("+@read +@write ~cache:*")})
	s.completed(ctx)(tk, err)
	rule, err = s.c.WaitForRedisRuleStatus(ctx, ruleID, client.ACLActive)
	require.NoError(t, err)
	require.Equal(t, "+@read +@write ~cache:*", rule.ACL)

	// Role: POST, waiter, (the provider sleeps 15 s), waiter, read.
	roleID := s.completed(ctx)(s.c.CreateRole(ctx, client.CreateRole{Name: client.Ptr("tf-role"), RedisRules: []client.RoleRule{
		{RuleName: "tf-rule", Databases: []client.RoleDatabase{{SubscriptionID: sub, DatabaseID: db.ID}}},
	}}))
	for range 2 {
		_, err = s.c.WaitForRoleStatus(ctx, roleID, client.ACLActive)
		require.NoError(t, err)
	}
	role, err := s.c.GetRole(ctx, roleID)
	require.NoError(t, err)
	require.Len(t, role.RedisRules, 1)
	require.Equal(t, "tf-rule", role.RedisRules[0].RuleName)
	require.Equal(t, []client.RoleDatabase{{SubscriptionID: sub, DatabaseID: db.ID, DatabaseName: db.Name, Regions: []string{}}}, role.RedisRules[0].Databases)

	// User: POST, waiter on GET /acl/users/{id}, twice, read; update sends role and password.
	userID := s.completed(ctx)(s.c.CreateUser(ctx, client.CreateUser{Name: client.Ptr("tf-user"), Role: client.Ptr("tf-role"), Password: client.Ptr("tf-Pass.1234")}))
	for range 2 {
		_, err = s.c.WaitForUserStatus(ctx, userID, client.ACLActive)
		require.NoError(t, err)
	}
	r := userOf(t, db, "tf-user", "tf-Pass.1234")
	require.NoError(t, r.Set(ctx, "cache:1", "x", 0).Err())
	require.True(t, noPermission(r.Set(ctx, "other", "x", 0).Err()))
	tk, err = s.c.UpdateUser(ctx, userID, client.UpdateUser{Role: client.Ptr("tf-role"), Password: client.Ptr("tf-Pass.1234")})
	s.completed(ctx)(tk, err)
	for range 2 {
		_, err = s.c.WaitForUserStatus(ctx, userID, client.ACLActive)
		require.NoError(t, err)
	}
	require.Equal(t, "x", r.Get(ctx, "cache:1").Val(), "an update with the same password keeps the user working")

	// Destroy: user, role, rule, each waited for until gone.
	tk, err = s.c.DeleteUser(ctx, userID)
	s.completed(ctx)(tk, err)
	require.NoError(t, s.c.WaitForUserGone(ctx, userID))
	_, err = s.c.WaitForRoleStatus(ctx, roleID, client.ACLActive) // the provider's waiter before a role delete
	require.NoError(t, err)
	tk, err = s.c.DeleteRole(ctx, roleID)
	s.completed(ctx)(tk, err)
	eventually(t, 30*time.Second, "the role leaves the list", func() bool {
		_, gerr := s.c.GetRole(ctx, roleID)
		return client.IsNotFound(gerr)
	})
	tk, err = s.c.DeleteRedisRule(ctx, ruleID)
	s.completed(ctx)(tk, err)
	eventually(t, 30*time.Second, "the rule leaves the list", func() bool {
		_, gerr := s.c.GetRedisRule(ctx, ruleID)
		return client.IsNotFound(gerr)
	})
	rules, err := s.c.ListRedisRules(ctx)
	require.NoError(t, err)
	require.Len(t, rules.RedisRules, 3, "the default rules stay")
}
