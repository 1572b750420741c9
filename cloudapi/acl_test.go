package cloudapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/cloudapi/client"
)

// aclFixture is an env whose main account has an active subscription with two databases
// ("db" and "db-2"). There is no reconciler: ACL entities stay pending.
type aclFixture struct {
	*env
	sub, db1, db2 int
}

func newACLFixture(t *testing.T) *aclFixture {
	t.Helper()
	e := newEnv(t)
	sub, db1 := e.activeSubscription("acl", 2)
	page, err := e.main.ListDatabases(testCtx(t), sub, 100, 0)
	require.NoError(t, err)
	require.Len(t, page.Subscription[0].Databases, 2)
	return &aclFixture{env: e, sub: sub, db1: db1, db2: page.Subscription[0].Databases[1].ID}
}

// done waits for a submitted task to complete and returns its resourceId.
func done(t *testing.T, c *client.Client, tk *client.Task, err error) int {
	t.Helper()
	require.NoError(t, err)
	got, err := c.WaitForTask(testCtx(t), tk.ID)
	require.NoError(t, err)
	require.NotNil(t, got.Response, "a completed task has a response")
	return got.ResourceID()
}

// fails waits for a submitted task to fail with the status and type; it returns the
// error's description.
func fails(t *testing.T, c *client.Client, tk *client.Task, err error, status int, typ string) string {
	t.Helper()
	require.NoError(t, err)
	got, err := c.WaitForTask(testCtx(t), tk.ID)
	require.Error(t, err)
	require.Equal(t, client.TaskFailed, got.Status)
	require.NotNil(t, got.Response)
	require.NotNil(t, got.Response.Error)
	require.Equal(t, typ, got.Response.Error.Type, "error: %v", err)
	require.Equal(t, status, got.Response.Error.StatusCode(), "error: %v", err)
	require.NotEmpty(t, got.Response.Error.Description)
	return got.Response.Error.Description
}

// rawJSON sends a raw request with the main key and decodes the answer.
func (f *aclFixture) rawJSON(method, path string, body any, wantStatus int) map[string]any {
	f.t.Helper()
	var b []byte
	if body != nil {
		var err error
		b, err = json.Marshal(body)
		require.NoError(f.t, err)
	}
	r := f.do(method, "/v1"+path, mainKey, mainSecret, b)
	require.Equal(f.t, wantStatus, r.status, "body: %s", r.body)
	var out map[string]any
	require.NoError(f.t, json.Unmarshal(r.body, &out), "body: %s", r.body)
	return out
}

// taskJSON reads a task's raw JSON once it has ended.
func (f *aclFixture) taskJSON(id string) map[string]any {
	f.t.Helper()
	_, _ = f.main.WaitForTask(testCtx(f.t), id)
	return f.rawJSON(http.MethodGet, "/tasks/"+id, nil, http.StatusOK)
}

func createRule(t *testing.T, c *client.Client, name, text string) int {
	t.Helper()
	tk, err := c.CreateRedisRule(testCtx(t), ruleBody(name, text))
	id := done(t, c, tk, err)
	require.NotZero(t, id)
	return id
}

func createRole(t *testing.T, c *client.Client, body client.CreateRole) int {
	t.Helper()
	tk, err := c.CreateRole(testCtx(t), body)
	id := done(t, c, tk, err)
	require.NotZero(t, id)
	return id
}

func createUser(t *testing.T, c *client.Client, name, role string) int {
	t.Helper()
	tk, err := c.CreateUser(testCtx(t), userBody(name, role, userPassword))
	id := done(t, c, tk, err)
	require.NotZero(t, id)
	return id
}

func ruleByID(t *testing.T, c *client.Client, id int) client.RedisRule {
	t.Helper()
	r, err := c.GetRedisRule(testCtx(t), id)
	require.NoError(t, err)
	return *r
}

func roleByID(t *testing.T, c *client.Client, id int) client.Role {
	t.Helper()
	r, err := c.GetRole(testCtx(t), id)
	require.NoError(t, err)
	return *r
}

func userByID(t *testing.T, c *client.Client, id int) client.User {
	t.Helper()
	u, err := c.GetUser(testCtx(t), id)
	require.NoError(t, err)
	return *u
}

// association is one rule-database pair of a role, for comparing roles as sets.
type association struct {
	rule    string
	sub, db int
	dbName  string
}

func associations(r client.Role) []association {
	var out []association
	for _, rr := range r.RedisRules {
		for _, d := range rr.Databases {
			out = append(out, association{rule: rr.RuleName, sub: d.SubscriptionID, db: d.DatabaseID, dbName: d.DatabaseName})
		}
	}
	slices.SortFunc(out, func(a, b association) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

func sortedAssociations(a ...association) []association {
	slices.SortFunc(a, func(x, y association) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) })
	return a
}

func ruleBody(name, text string) client.CreateRedisRule {
	return client.CreateRedisRule{Name: client.Ptr(name), RedisRule: client.Ptr(text)}
}

func roleBody(name string, rules ...client.RoleRule) client.CreateRole {
	return client.CreateRole{Name: client.Ptr(name), RedisRules: rules}
}

func roleRule(rule string, dbs ...client.RoleDatabase) client.RoleRule {
	return client.RoleRule{RuleName: rule, Databases: dbs}
}

func (f *aclFixture) on(dbs ...int) []client.RoleDatabase {
	out := make([]client.RoleDatabase, 0, len(dbs))
	for _, d := range dbs {
		out = append(out, client.RoleDatabase{SubscriptionID: f.sub, DatabaseID: d})
	}
	return out
}

const userPassword = "someRandom.pa55word"

func userBody(name, role, password string) client.CreateUser {
	return client.CreateUser{Name: client.Ptr(name), Role: client.Ptr(role), Password: client.Ptr(password)}
}

// TestACLDefaultRules: every account lists the three default rules, with the API's exact
// texts (Full-Access has two spaces), active; they can be neither changed, deleted nor
// shadowed by a rule of the same name.
func TestACLDefaultRules(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)
	want := map[string]string{"Full-Access": "+@all  ~*", "Read-Write": "+@all -@dangerous ~*", "Read-Only": "+@read ~*"}
	for _, c := range []*client.Client{f.main, f.other} {
		list, err := c.ListRedisRules(ctx)
		require.NoError(t, err)
		got := map[string]string{}
		for _, r := range list.RedisRules {
			require.True(t, r.IsDefault, "%+v", r)
			require.Equal(t, client.ACLActive, r.Status)
			require.NotZero(t, r.ID)
			got[r.Name] = r.ACL
		}
		require.Equal(t, want, got)
	}
	list, err := f.main.ListRedisRules(ctx)
	require.NoError(t, err)
	var tk *client.Task
	for _, r := range list.RedisRules {
		tk, err = f.main.UpdateRedisRule(ctx, r.ID, ruleBody(r.Name, "+@read ~x"))
		fails(t, f.main, tk, err, http.StatusForbidden, "ACL_REDIS_RULE_CANNOT_UPDATE_DEFAULT")
		tk, err = f.main.DeleteRedisRule(ctx, r.ID)
		fails(t, f.main, tk, err, http.StatusForbidden, "ACL_REDIS_RULE_CANNOT_DELETE_DEFAULT")
		tk, err = f.main.CreateRedisRule(ctx, ruleBody(r.Name, "+@read ~x"))
		fails(t, f.main, tk, err, http.StatusConflict, "ACL_REDIS_RULE_NAME_ALREADY_EXISTS")
	}
	after, err := f.main.ListRedisRules(ctx)
	require.NoError(t, err)
	require.Equal(t, list, after)
}

// TestACLRuleLifecycle: a rule reads back byte for byte as sent, under its id; updates
// (with or without the unchanged name) and a delete complete with the rule's id.
func TestACLRuleLifecycle(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)
	text := "+@read  -@dangerous ~cache:*   %R~log:* &chan"
	tk := f.rawJSON(http.MethodPost, "/acl/redisRules", map[string]string{"name": "cache-reader", "redisRule": text}, http.StatusAccepted)
	require.Equal(t, "aclRedisRuleCreateRequest", tk["commandType"])
	id := done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil)
	for range 2 {
		r := ruleByID(t, f.main, id)
		require.Equal(t, client.RedisRule{ID: id, Name: "cache-reader", ACL: text, IsDefault: false, Status: client.ACLPending}, r)
	}

	// The provider before v1.8.0 resent the unchanged name with the new text.
	tk = f.rawJSON(http.MethodPut, fmt.Sprintf("/acl/redisRules/%d", id), map[string]string{"name": "cache-reader", "redisRule": "+get  ~cache:*"}, http.StatusAccepted)
	require.Equal(t, "aclRedisRuleUpdateRequest", tk["commandType"])
	require.Equal(t, id, done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil))
	require.Equal(t, "+get  ~cache:*", ruleByID(t, f.main, id).ACL)

	// Later versions send the name only when it changed.
	tkc, err := f.main.UpdateRedisRule(ctx, id, client.CreateRedisRule{Name: client.Ptr("cache-getter")})
	require.Equal(t, id, done(t, f.main, tkc, err))
	require.Equal(t, client.RedisRule{ID: id, Name: "cache-getter", ACL: "+get  ~cache:*", Status: client.ACLPending}, ruleByID(t, f.main, id))
	tkc, err = f.main.UpdateRedisRule(ctx, id, client.CreateRedisRule{RedisRule: client.Ptr("+get ~other:*")})
	require.Equal(t, id, done(t, f.main, tkc, err))
	require.Equal(t, client.RedisRule{ID: id, Name: "cache-getter", ACL: "+get ~other:*", Status: client.ACLPending}, ruleByID(t, f.main, id))

	tk = f.rawJSON(http.MethodDelete, fmt.Sprintf("/acl/redisRules/%d", id), nil, http.StatusAccepted)
	require.Equal(t, "aclRedisRuleDeleteRequest", tk["commandType"])
	require.Equal(t, id, done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil))
	_, err = f.main.GetRedisRule(ctx, id)
	require.True(t, client.IsNotFound(err), "err: %v", err)
	list, err := f.main.ListRedisRules(ctx)
	require.NoError(t, err)
	require.Len(t, list.RedisRules, 3)
}

// TestACLRuleErrors: each refusal of a rule command, synchronous for a malformed body or
// a missing field, in the task for the rest.
func TestACLRuleErrors(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)

	for _, body := range []string{`{"name":"x"}`, `{"redisRule":"+@read ~*"}`, `{"name":"","redisRule":"+@read ~*"}`, `{"name":"x","redisRule":""}`, `[]`, `{"name":1,"redisRule":"+get"}`, `{`} {
		r := f.do(http.MethodPost, "/v1/acl/redisRules", mainKey, mainSecret, []byte(body))
		requireError(t, r, http.StatusBadRequest, "")
	}
	r := f.do(http.MethodPut, "/v1/acl/redisRules/5", mainKey, mainSecret, []byte(`{}`))
	requireError(t, r, http.StatusBadRequest, "INVALID_FIELD")
	r = f.do(http.MethodPut, "/v1/acl/redisRules/abc", mainKey, mainSecret, []byte(`{"name":"x"}`))
	requireError(t, r, http.StatusBadRequest, "INVALID_FIELD")

	// The fixtures: a bare word is refused, a category accepted, at create time.
	tk, err := f.main.CreateRedisRule(ctx, ruleBody("bad", "let-me-create-resources"))
	desc := fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_REDIS_RULE_PATTERN_NOT_VALID")
	require.Contains(t, desc, "Invalid ACL redis rule")
	raw := f.taskJSON(tk.ID)
	resp := raw["response"].(map[string]any)
	require.Equal(t, "redis-acl-wrong-acl-rule-pattern", resp["additionalInfo"], "additionalInfo is beside error: %v", raw)
	require.NotContains(t, resp["error"].(map[string]any), "additionalInfo", "additionalInfo is not inside error: %v", raw)
	require.Equal(t, "400 BAD_REQUEST", resp["error"].(map[string]any)["status"])
	id := createRule(t, f.main, "ok", "+@let-me-create-resources")

	tk, err = f.main.CreateRedisRule(ctx, ruleBody("ok", "+@read ~*"))
	fails(t, f.main, tk, err, http.StatusConflict, "ACL_REDIS_RULE_NAME_ALREADY_EXISTS")
	other := createRule(t, f.main, "other", "+@read ~*")
	tk, err = f.main.UpdateRedisRule(ctx, other, client.CreateRedisRule{Name: client.Ptr("ok")})
	fails(t, f.main, tk, err, http.StatusConflict, "ACL_REDIS_RULE_NAME_ALREADY_EXISTS")
	tk, err = f.main.UpdateRedisRule(ctx, other, client.CreateRedisRule{Name: client.Ptr("Full-Access")})
	fails(t, f.main, tk, err, http.StatusConflict, "ACL_REDIS_RULE_NAME_ALREADY_EXISTS")
	tk, err = f.main.UpdateRedisRule(ctx, other, client.CreateRedisRule{RedisRule: client.Ptr("on >secret +@all")})
	fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_REDIS_RULE_PATTERN_NOT_VALID")
	require.Equal(t, client.RedisRule{ID: other, Name: "other", ACL: "+@read ~*", Status: client.ACLPending}, ruleByID(t, f.main, other))

	// An unknown id is accepted, and its task fails with the rule's 404.
	tk, err = f.main.UpdateRedisRule(ctx, 999999, ruleBody("x", "+@read ~*"))
	fails(t, f.main, tk, err, http.StatusNotFound, "ACL_REDIS_RULE_NOT_FOUND")
	tk, err = f.main.DeleteRedisRule(ctx, 999999)
	fails(t, f.main, tk, err, http.StatusNotFound, "ACL_REDIS_RULE_NOT_FOUND")

	// A rule a role uses stays.
	createRole(t, f.main, roleBody("uses-ok", roleRule("ok", f.on(f.db1)...)))
	tk, err = f.main.DeleteRedisRule(ctx, id)
	fails(t, f.main, tk, err, http.StatusConflict, "ACL_REDIS_RULE_CANNOT_DELETE_WHEN_ASSOCIATED_WITH_ROLES")
	ruleByID(t, f.main, id)
}

// TestACLRoleLifecycle: a role reads back its associations as a set, under the current
// names of its rules and databases, with regions [] and the users that hold it; a
// deleted database drops out; updates and the delete complete with the role's id.
func TestACLRoleLifecycle(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)
	custom := createRule(t, f.main, "custom", "+@read ~app:*")

	body := map[string]any{"name": "app", "redisRules": []map[string]any{
		{"ruleName": "custom", "databases": []map[string]any{{"subscriptionId": f.sub, "databaseId": f.db2}}},
		{"ruleName": "Read-Only", "databases": []map[string]any{{"subscriptionId": f.sub, "databaseId": f.db1}}},
	}}
	tk := f.rawJSON(http.MethodPost, "/acl/roles", body, http.StatusAccepted)
	require.Equal(t, "aclRoleCreateRequest", tk["commandType"])
	id := done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil)
	require.NotZero(t, id)
	want := sortedAssociations(association{"custom", f.sub, f.db2, "db-2"}, association{"Read-Only", f.sub, f.db1, "db"})
	for range 2 {
		r := roleByID(t, f.main, id)
		require.Equal(t, "app", r.Name)
		require.Equal(t, client.ACLPending, r.Status)
		require.Equal(t, want, associations(r))
		require.Empty(t, r.Users)
		for _, rr := range r.RedisRules {
			if rr.RuleName == "custom" {
				require.Equal(t, custom, rr.RuleID)
			}
		}
	}
	raw := f.rawJSON(http.MethodGet, "/acl/roles", nil, http.StatusOK)
	roles := raw["roles"].([]any)
	require.Len(t, roles, 1)
	for _, rr := range roles[0].(map[string]any)["redisRules"].([]any) {
		for _, d := range rr.(map[string]any)["databases"].([]any) {
			require.Equal(t, []any{}, d.(map[string]any)["regions"], "regions is [] for a single-region database")
		}
	}
	require.Equal(t, []any{}, roles[0].(map[string]any)["users"])

	// The users holding the role are listed.
	u1 := createUser(t, f.main, "alice", "app")
	u2 := createUser(t, f.main, "bob", "app")
	users := roleByID(t, f.main, id).Users
	slices.SortFunc(users, func(a, b client.RoleUser) int { return a.ID - b.ID })
	require.Equal(t, []client.RoleUser{{ID: u1, Name: "alice"}, {ID: u2, Name: "bob"}}, users)

	// Renamed rules and databases show under their new names.
	tkc, err := f.main.UpdateRedisRule(ctx, custom, client.CreateRedisRule{Name: client.Ptr("custom-2")})
	done(t, f.main, tkc, err)
	tkc, err = f.main.UpdateDatabase(ctx, f.sub, f.db1, client.UpdateDatabase{Name: client.Ptr("renamed")})
	done(t, f.main, tkc, err)
	require.Equal(t, sortedAssociations(association{"custom-2", f.sub, f.db2, "db-2"}, association{"Read-Only", f.sub, f.db1, "renamed"}),
		associations(roleByID(t, f.main, id)))

	// An update as Terraform sends it: name and redisRules, always both.
	tk = f.rawJSON(http.MethodPut, fmt.Sprintf("/acl/roles/%d", id), map[string]any{"name": "app-2", "redisRules": []map[string]any{
		{"ruleName": "Read-Write", "databases": []map[string]any{{"subscriptionId": f.sub, "databaseId": f.db1}, {"subscriptionId": f.sub, "databaseId": f.db2}}},
	}}, http.StatusAccepted)
	require.Equal(t, "aclRoleUpdateRequest", tk["commandType"])
	require.Equal(t, id, done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil))
	r := roleByID(t, f.main, id)
	require.Equal(t, "app-2", r.Name)
	require.Equal(t, sortedAssociations(association{"Read-Write", f.sub, f.db1, "renamed"}, association{"Read-Write", f.sub, f.db2, "db-2"}), associations(r))
	require.Len(t, r.Users, 2)

	// A name alone.
	tkc, err = f.main.UpdateRole(ctx, id, client.CreateRole{Name: client.Ptr("app-3")})
	require.Equal(t, id, done(t, f.main, tkc, err))
	require.Equal(t, "app-3", roleByID(t, f.main, id).Name)
	require.Len(t, associations(roleByID(t, f.main, id)), 2)

	// A database being deleted is gone from the role.
	tkc, err = f.main.DeleteDatabase(ctx, f.sub, f.db2)
	done(t, f.main, tkc, err)
	require.Equal(t, []association{{"Read-Write", f.sub, f.db1, "renamed"}}, associations(roleByID(t, f.main, id)))
	tkc, err = f.main.DeleteDatabase(ctx, f.sub, f.db1)
	done(t, f.main, tkc, err)
	require.Equal(t, []client.RoleRule{}, roleByID(t, f.main, id).RedisRules)

	// Deleted with its users first; DELETE answers 200.
	for _, u := range []int{u1, u2} {
		tkc, err = f.main.DeleteUser(ctx, u)
		done(t, f.main, tkc, err)
	}
	// The users are deleting until the reconciler removes them: the role stays meanwhile.
	tkc, err = f.main.DeleteRole(ctx, id)
	fails(t, f.main, tkc, err, http.StatusConflict, "ACL_ROLE_HAS_ACTIVE_USERS_AND_CANNOT_BE_DELETED")
	f.removeDeletingUsers()
	tk = f.rawJSON(http.MethodDelete, fmt.Sprintf("/acl/roles/%d", id), nil, http.StatusOK)
	require.Equal(t, "aclRoleDeleteRequest", tk["commandType"])
	require.Equal(t, id, done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil))
	_, err = f.main.GetRole(ctx, id)
	require.True(t, client.IsNotFound(err), "err: %v", err)
}

// removeDeletingUsers does what the reconciler does once the servers no longer have a
// deleted user: it deletes the row.
func (f *aclFixture) removeDeletingUsers() {
	f.t.Helper()
	ctx := context.Background()
	require.NoError(f.t, f.store.Update(ctx, func(tx clouddb.Tx) error {
		users, err := tx.ACLUsers(ctx, f.mainAccount)
		if err != nil {
			return err
		}
		for _, u := range users {
			if u.Status == clouddb.ACLDeleting {
				if err := tx.DeleteACLUser(ctx, u.ID); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// TestACLRoleErrors: each refusal of a role command.
func TestACLRoleErrors(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)

	db := func(sub, d any) map[string]any { return map[string]any{"subscriptionId": sub, "databaseId": d} }
	for _, body := range []any{
		map[string]any{"redisRules": []any{map[string]any{"ruleName": "Read-Only", "databases": []any{db(f.sub, f.db1)}}}},
		map[string]any{"name": "r"},
		map[string]any{"name": "", "redisRules": []any{map[string]any{"ruleName": "Read-Only", "databases": []any{db(f.sub, f.db1)}}}},
		map[string]any{"name": "r", "redisRules": []any{}},
		map[string]any{"name": "r", "redisRules": []any{map[string]any{"databases": []any{db(f.sub, f.db1)}}}},
		map[string]any{"name": "r", "redisRules": []any{map[string]any{"ruleName": "Read-Only"}}},
		map[string]any{"name": "r", "redisRules": []any{map[string]any{"ruleName": "Read-Only", "databases": []any{}}}},
		map[string]any{"name": "r", "redisRules": []any{map[string]any{"ruleName": "Read-Only", "databases": []any{map[string]any{"subscriptionId": f.sub}}}}},
		map[string]any{"name": "r", "redisRules": []any{map[string]any{"ruleName": "Read-Only", "databases": []any{db("1", f.db1)}}}},
	} {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		requireError(t, f.do(http.MethodPost, "/v1/acl/roles", mainKey, mainSecret, b), http.StatusBadRequest, "")
	}
	requireError(t, f.do(http.MethodPut, "/v1/acl/roles/3", mainKey, mainSecret, []byte(`{}`)), http.StatusBadRequest, "INVALID_FIELD")
	requireError(t, f.do(http.MethodPut, "/v1/acl/roles/3", mainKey, mainSecret, []byte(`{"redisRules":[]}`)), http.StatusBadRequest, "INVALID_FIELD")

	cases := []struct {
		name   string
		body   client.CreateRole
		status int
		typ    string
	}{
		{"unknown rule", roleBody("r", roleRule("nope", f.on(f.db1)...)), http.StatusNotFound, "ACL_REDIS_RULE_NOT_FOUND"},
		{"unknown subscription", roleBody("r", roleRule("Read-Only", client.RoleDatabase{SubscriptionID: 999999, DatabaseID: f.db1})), http.StatusNotFound, "SUBSCRIPTION_NOT_FOUND"},
		{"unknown database", roleBody("r", roleRule("Read-Only", f.on(999999)...)), http.StatusNotFound, "DATABASE_NOT_FOUND"},
		{"twice on a database", roleBody("r", roleRule("Read-Only", f.on(f.db1)...), roleRule("Read-Write", f.on(f.db2, f.db1)...)),
			http.StatusBadRequest, "ACL_ROLE_REDIS_RULE_MUST_BE_DEFINED_ONLY_ONCE_PER_DATABASE"},
		{"same pair twice", roleBody("r", roleRule("Read-Only", f.on(f.db1, f.db1)...)), http.StatusBadRequest, "ACL_ROLE_REDIS_RULE_MUST_BE_DEFINED_ONLY_ONCE_PER_DATABASE"},
		{"regions", roleBody("r", roleRule("Read-Only", client.RoleDatabase{SubscriptionID: f.sub, DatabaseID: f.db1, Regions: []string{"us-east-1"}})),
			http.StatusBadRequest, "ACL_ROLE_REDIS_RULES_DATABASES_REGION_MUST_BE_CRDB"},
	}
	for _, c := range cases {
		tk, err := f.main.CreateRole(ctx, c.body)
		desc := fails(t, f.main, tk, err, c.status, c.typ)
		switch c.name {
		case "regions":
			require.Contains(t, desc, "redisRules[0].databases[0].regions")
		case "unknown subscription":
			require.Contains(t, desc, "Subscription was not found")
		case "unknown database":
			require.Contains(t, desc, "Database was not found")
		}
	}
	// A database of another subscription of the account.
	sub2, db3 := f.activeSubscription("acl-2")
	tk, err := f.main.CreateRole(ctx, roleBody("r", roleRule("Read-Only", client.RoleDatabase{SubscriptionID: f.sub, DatabaseID: db3})))
	fails(t, f.main, tk, err, http.StatusNotFound, "DATABASE_NOT_FOUND")
	list, err := f.main.ListRoles(ctx)
	require.NoError(t, err)
	require.Empty(t, list.Roles, "no failed create left a role")

	id := createRole(t, f.main, roleBody("r", roleRule("Read-Only", client.RoleDatabase{SubscriptionID: sub2, DatabaseID: db3})))
	other := createRole(t, f.main, roleBody("s", roleRule("Read-Only", f.on(f.db1)...)))
	tk, err = f.main.CreateRole(ctx, roleBody("r", roleRule("Read-Only", f.on(f.db1)...)))
	fails(t, f.main, tk, err, http.StatusConflict, "ACL_ROLE_NAME_ALREADY_EXISTS")
	tk, err = f.main.UpdateRole(ctx, other, client.CreateRole{Name: client.Ptr("r")})
	fails(t, f.main, tk, err, http.StatusConflict, "ACL_ROLE_NAME_ALREADY_EXISTS")
	tk, err = f.main.UpdateRole(ctx, other, roleBody("s", roleRule("Read-Only", f.on(999999)...)))
	fails(t, f.main, tk, err, http.StatusNotFound, "DATABASE_NOT_FOUND")
	require.Equal(t, []association{{"Read-Only", f.sub, f.db1, "db"}}, associations(roleByID(t, f.main, other)), "a failed update changes nothing")
	// The unchanged name is no conflict.
	tk, err = f.main.UpdateRole(ctx, other, roleBody("s", roleRule("Read-Write", f.on(f.db1)...)))
	require.Equal(t, other, done(t, f.main, tk, err))

	tk, err = f.main.UpdateRole(ctx, 999999, client.CreateRole{Name: client.Ptr("x")})
	fails(t, f.main, tk, err, http.StatusNotFound, "ACL_ROLE_NOT_FOUND")
	tk, err = f.main.DeleteRole(ctx, 999999)
	fails(t, f.main, tk, err, http.StatusNotFound, "ACL_ROLE_NOT_FOUND")

	createUser(t, f.main, "holder", "r")
	tk, err = f.main.DeleteRole(ctx, id)
	fails(t, f.main, tk, err, http.StatusConflict, "ACL_ROLE_HAS_ACTIVE_USERS_AND_CANNOT_BE_DELETED")
	roleByID(t, f.main, id)
}

// TestACLUserLifecycle: a user reads back with its role's current name; PUT and DELETE
// answer 200; a deleted user reads as deleting until the reconciler removes it, then 404.
func TestACLUserLifecycle(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)
	createRole(t, f.main, roleBody("readers", roleRule("Read-Only", f.on(f.db1)...)))
	writers := createRole(t, f.main, roleBody("writers", roleRule("Read-Write", f.on(f.db1, f.db2)...)))

	tk := f.rawJSON(http.MethodPost, "/acl/users", map[string]string{"name": "alice", "role": "readers", "password": userPassword}, http.StatusAccepted)
	require.Equal(t, "aclUserCreateRequest", tk["commandType"])
	id := done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil)
	for range 2 {
		require.Equal(t, client.User{ID: id, Name: "alice", Role: "readers", Status: client.ACLPending}, userByID(t, f.main, id))
	}
	list, err := f.main.ListUsers(ctx)
	require.NoError(t, err)
	require.Equal(t, []client.User{{ID: id, Name: "alice", Role: "readers", Status: client.ACLPending}}, list.Users)

	// Terraform's update body: role and the unchanged password.
	tk = f.rawJSON(http.MethodPut, fmt.Sprintf("/acl/users/%d", id), map[string]string{"role": "writers", "password": userPassword}, http.StatusOK)
	require.Equal(t, "aclUserUpdateRequest", tk["commandType"])
	require.Equal(t, id, done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil))
	require.Equal(t, "writers", userByID(t, f.main, id).Role)

	// The provider renames the role and expects the user to follow.
	tkc, err := f.main.UpdateRole(ctx, writers, client.CreateRole{Name: client.Ptr("writers-renamed")})
	done(t, f.main, tkc, err)
	require.Equal(t, "writers-renamed", userByID(t, f.main, id).Role)
	list, err = f.main.ListUsers(ctx)
	require.NoError(t, err)
	require.Equal(t, "writers-renamed", list.Users[0].Role)

	tkc, err = f.main.UpdateUser(ctx, id, client.UpdateUser{Password: client.Ptr("An0ther.secret")})
	require.Equal(t, id, done(t, f.main, tkc, err))
	// The same name is accepted with an update, another one refused.
	b := []byte(`{"name":"alice","role":"readers"}`)
	r := f.do(http.MethodPut, fmt.Sprintf("/v1/acl/users/%d", id), mainKey, mainSecret, b)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var rt client.Task
	require.NoError(t, json.Unmarshal(r.body, &rt))
	require.Equal(t, id, done(t, f.main, &rt, nil))
	require.Equal(t, "readers", userByID(t, f.main, id).Role)
	r = f.do(http.MethodPut, fmt.Sprintf("/v1/acl/users/%d", id), mainKey, mainSecret, []byte(`{"name":"bob","role":"readers"}`))
	require.NoError(t, json.Unmarshal(r.body, &rt))
	fails(t, f.main, &rt, nil, http.StatusBadRequest, "INVALID_FIELD")
	require.Equal(t, "alice", userByID(t, f.main, id).Name)

	tk = f.rawJSON(http.MethodDelete, fmt.Sprintf("/acl/users/%d", id), nil, http.StatusOK)
	require.Equal(t, "aclUserDeleteRequest", tk["commandType"])
	require.Equal(t, id, done(t, f.main, &client.Task{ID: tk["taskId"].(string)}, nil))
	require.Equal(t, client.ACLDeleting, userByID(t, f.main, id).Status)
	tkc, err = f.main.UpdateUser(ctx, id, client.UpdateUser{Role: client.Ptr("readers")})
	fails(t, f.main, tkc, err, http.StatusNotFound, "ACL_USER_NOT_FOUND")
	tkc, err = f.main.DeleteUser(ctx, id)
	fails(t, f.main, tkc, err, http.StatusNotFound, "ACL_USER_NOT_FOUND")
	f.removeDeletingUsers()
	require.NoError(t, f.main.WaitForUserGone(ctx, id))
	_, err = f.main.GetUser(ctx, id)
	requireClientError(t, err, http.StatusNotFound, "ACL_USER_NOT_FOUND")
}

// TestACLUserErrors: each refusal of a user command.
func TestACLUserErrors(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)
	createRole(t, f.main, roleBody("readers", roleRule("Read-Only", f.on(f.db1)...)))

	for _, body := range []string{`{"role":"readers","password":"` + userPassword + `"}`, `{"name":"a","password":"` + userPassword + `"}`,
		`{"name":"a","role":"readers"}`, `{"name":"a","role":"readers","password":""}`, `{"name":"a","role":"readers","password":5}`} {
		requireError(t, f.do(http.MethodPost, "/v1/acl/users", mainKey, mainSecret, []byte(body)), http.StatusBadRequest, "")
	}
	requireError(t, f.do(http.MethodPut, "/v1/acl/users/1", mainKey, mainSecret, []byte(`{"name":"a"}`)), http.StatusBadRequest, "INVALID_FIELD")
	r := f.do(http.MethodGet, "/v1/acl/users/999999", mainKey, mainSecret, nil)
	requireError(t, r, http.StatusNotFound, "ACL_USER_NOT_FOUND")

	tk, err := f.main.CreateUser(ctx, userBody("default", "readers", userPassword))
	fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_USER_NAME_NOT_VALID")
	tk, err = f.main.CreateUser(ctx, userBody("with space", "readers", userPassword))
	fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_USER_NAME_NOT_VALID")
	tk, err = f.main.CreateUser(ctx, userBody("a", "nope", userPassword))
	desc := fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_ROLE_DOES_NOT_EXISTS")
	require.True(t, strings.HasPrefix(desc, "ACL role associated with a user has to exist."), desc)
	tk, err = f.main.CreateUser(ctx, userBody("a", "readers", "I do not meet requirements"))
	fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_USER_PASSWORD_NOT_VALID")
	resp := f.taskJSON(tk.ID)["response"].(map[string]any)
	require.Equal(t, "cluster-user-password-wrong-pattern", resp["additionalInfo"])
	require.NotContains(t, resp["error"].(map[string]any), "additionalInfo")
	users, err := f.main.ListUsers(ctx)
	require.NoError(t, err)
	require.Empty(t, users.Users, "no failed create left a user")

	id := createUser(t, f.main, "a", "readers")
	tk, err = f.main.CreateUser(ctx, userBody("a", "readers", userPassword))
	fails(t, f.main, tk, err, http.StatusConflict, "ACL_USER_NAME_ALREADY_EXISTS")
	tk, err = f.main.UpdateUser(ctx, id, client.UpdateUser{Role: client.Ptr("nope")})
	fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_ROLE_DOES_NOT_EXISTS")
	tk, err = f.main.UpdateUser(ctx, id, client.UpdateUser{Password: client.Ptr("short")})
	fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_USER_PASSWORD_NOT_VALID")
	tk, err = f.main.UpdateUser(ctx, 999999, client.UpdateUser{Role: client.Ptr("readers")})
	fails(t, f.main, tk, err, http.StatusNotFound, "ACL_USER_NOT_FOUND")
	tk, err = f.main.DeleteUser(ctx, 999999)
	fails(t, f.main, tk, err, http.StatusNotFound, "ACL_USER_NOT_FOUND")
	require.Equal(t, client.User{ID: id, Name: "a", Role: "readers", Status: client.ACLPending}, userByID(t, f.main, id))
}

// TestACLIsolation: an account sees and changes only its own rules, roles and users (and
// the default rules); names are per account.
func TestACLIsolation(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)
	rule := createRule(t, f.main, "mine", "+@read ~*")
	role := createRole(t, f.main, roleBody("mine", roleRule("mine", f.on(f.db1)...)))
	user := createUser(t, f.main, "mine", "mine")

	rules, err := f.other.ListRedisRules(ctx)
	require.NoError(t, err)
	require.Len(t, rules.RedisRules, 3)
	roles, err := f.other.ListRoles(ctx)
	require.NoError(t, err)
	require.Empty(t, roles.Roles)
	users, err := f.other.ListUsers(ctx)
	require.NoError(t, err)
	require.Empty(t, users.Users)
	_, err = f.other.GetUser(ctx, user)
	requireClientError(t, err, http.StatusNotFound, "ACL_USER_NOT_FOUND")

	tk, err := f.other.UpdateRedisRule(ctx, rule, ruleBody("x", "+@all ~*"))
	fails(t, f.other, tk, err, http.StatusNotFound, "ACL_REDIS_RULE_NOT_FOUND")
	tk, err = f.other.DeleteRedisRule(ctx, rule)
	fails(t, f.other, tk, err, http.StatusNotFound, "ACL_REDIS_RULE_NOT_FOUND")
	tk, err = f.other.UpdateRole(ctx, role, client.CreateRole{Name: client.Ptr("x")})
	fails(t, f.other, tk, err, http.StatusNotFound, "ACL_ROLE_NOT_FOUND")
	tk, err = f.other.DeleteRole(ctx, role)
	fails(t, f.other, tk, err, http.StatusNotFound, "ACL_ROLE_NOT_FOUND")
	tk, err = f.other.UpdateUser(ctx, user, client.UpdateUser{Password: client.Ptr("Hijack.123")})
	fails(t, f.other, tk, err, http.StatusNotFound, "ACL_USER_NOT_FOUND")
	tk, err = f.other.DeleteUser(ctx, user)
	fails(t, f.other, tk, err, http.StatusNotFound, "ACL_USER_NOT_FOUND")
	// Another account's rule, role and database cannot be named.
	tk, err = f.other.CreateRole(ctx, roleBody("x", roleRule("Read-Only", f.on(f.db1)...)))
	fails(t, f.other, tk, err, http.StatusNotFound, "SUBSCRIPTION_NOT_FOUND")
	otherSub := f.createSubscription(f.other, f.otherPM, "other")
	f.activate(otherSub)
	page, err := f.other.ListDatabases(ctx, otherSub, 100, 0)
	require.NoError(t, err)
	otherDB := client.RoleDatabase{SubscriptionID: otherSub, DatabaseID: page.Subscription[0].Databases[0].ID}
	tk, err = f.other.CreateRole(ctx, roleBody("x", roleRule("mine", otherDB)))
	fails(t, f.other, tk, err, http.StatusNotFound, "ACL_REDIS_RULE_NOT_FOUND")
	tk, err = f.other.CreateUser(ctx, userBody("u", "mine", userPassword))
	fails(t, f.other, tk, err, http.StatusBadRequest, "ACL_ROLE_DOES_NOT_EXISTS")

	// The same names in another account are free.
	createRule(t, f.other, "mine", "+@write ~*")
	createRole(t, f.other, roleBody("mine", roleRule("mine", otherDB)))
	createUser(t, f.other, "mine", "mine")

	require.Equal(t, client.RedisRule{ID: rule, Name: "mine", ACL: "+@read ~*", Status: client.ACLPending}, ruleByID(t, f.main, rule))
	require.Equal(t, "mine", roleByID(t, f.main, role).Name)
	require.Equal(t, client.User{ID: user, Name: "mine", Role: "mine", Status: client.ACLPending}, userByID(t, f.main, user))
	mainUsers, err := f.main.ListUsers(ctx)
	require.NoError(t, err)
	require.Len(t, mainUsers.Users, 1)
}

// TestACLWireShapes: what the official clients dereference or wait on is always there:
// an integer id and a non-empty status on every list element, the envelopes' accountId,
// a response (with the id) on every completed task; and a password appears in no answer,
// task or log entry.
func TestACLWireShapes(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)
	var taskIDs []string
	submit := func(tk *client.Task, err error) int {
		t.Helper()
		taskIDs = append(taskIDs, tk.ID)
		return done(t, f.main, tk, err)
	}
	rule := submit(f.main.CreateRedisRule(ctx, ruleBody("r", "+@read ~*")))
	submit(f.main.UpdateRedisRule(ctx, rule, ruleBody("r", "+@read ~x:*")))
	role := submit(f.main.CreateRole(ctx, roleBody("role", roleRule("r", f.on(f.db1)...))))
	submit(f.main.UpdateRole(ctx, role, roleBody("role", roleRule("r", f.on(f.db1, f.db2)...))))
	const secret = "Very.Secret-Pa55word"
	const secret2 = "Other.Secret-Pa55word"
	user := submit(f.main.CreateUser(ctx, userBody("u", "role", secret)))
	submit(f.main.UpdateUser(ctx, user, client.UpdateUser{Role: client.Ptr("role"), Password: client.Ptr(secret2)}))
	tk, err := f.main.CreateUser(ctx, userBody("v", "role", "not valid but secret"))
	fails(t, f.main, tk, err, http.StatusBadRequest, "ACL_USER_PASSWORD_NOT_VALID")
	taskIDs = append(taskIDs, tk.ID)

	var bodies [][]byte
	get := func(path string) map[string]any {
		t.Helper()
		r := f.do(http.MethodGet, "/v1"+path, mainKey, mainSecret, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		bodies = append(bodies, r.body)
		var out map[string]any
		require.NoError(t, json.Unmarshal(r.body, &out))
		return out
	}
	requireElement := func(kind string, el any) map[string]any {
		t.Helper()
		m := el.(map[string]any)
		id, ok := m["id"].(float64)
		require.True(t, ok && id > 0 && id == float64(int(id)), "%s without an integer id: %v", kind, m)
		status, _ := m["status"].(string)
		require.NotEmpty(t, status, "%s without a status: %v", kind, m)
		return m
	}
	for _, list := range []struct{ path, key string }{{"/acl/redisRules", "redisRules"}, {"/acl/roles", "roles"}, {"/acl/users", "users"}} {
		out := get(list.path)
		require.Equal(t, float64(f.mainAccount), out["accountId"])
		require.Equal(t, []any{}, out["links"])
		els := out[list.key].([]any)
		require.NotEmpty(t, els)
		for _, el := range els {
			m := requireElement(list.key, el)
			if list.key == "users" {
				require.Equal(t, []any{}, m["links"])
				require.Equal(t, "role", m["role"])
			}
		}
	}
	m := requireElement("user", get(fmt.Sprintf("/acl/users/%d", user)))
	require.Equal(t, []any{}, m["links"])
	for _, id := range taskIDs {
		raw := get("/tasks/" + id)
		_, ok := raw["response"].(map[string]any)
		require.True(t, ok, "task without a response: %v", raw)
	}
	for _, id := range taskIDs[:6] {
		resp := get("/tasks/" + id)["response"].(map[string]any)
		require.Contains(t, []float64{float64(rule), float64(role), float64(user)}, resp["resourceId"], "task %s", id)
	}
	get("/logs")
	r := f.do(http.MethodGet, "/v1/tasks", mainKey, mainSecret, nil)
	require.Equal(t, http.StatusOK, r.status)
	bodies = append(bodies, r.body)
	for _, b := range bodies {
		for _, s := range []string{secret, secret2, "not valid but secret"} {
			require.NotContains(t, string(b), s)
		}
	}
	logs, err := f.main.Logs(ctx, client.LogQuery{Limit: 1000})
	require.NoError(t, err)
	var acl int
	for _, e := range logs {
		if strings.HasPrefix(e.Type, "ACL") {
			acl++
		}
	}
	require.Equal(t, 6, acl, "each change is in the system log")

	// The deletes too carry the id.
	require.Equal(t, user, submit(f.main.DeleteUser(ctx, user)))
	f.removeDeletingUsers()
	require.Equal(t, role, submit(f.main.DeleteRole(ctx, role)))
	require.Equal(t, rule, submit(f.main.DeleteRedisRule(ctx, rule)))
}

// TestACLWaits: the client's waits end when the reconciler settles an entity, and fail
// at once on a status Terraform's waiter does not accept.
func TestACLWaits(t *testing.T) {
	t.Parallel()
	f := newACLFixture(t)
	ctx := testCtx(t)
	rule := createRule(t, f.main, "r", "+@read ~*")
	role := createRole(t, f.main, roleBody("role", roleRule("r", f.on(f.db1)...)))
	user := createUser(t, f.main, "u", "role")
	settle := func() {
		time.Sleep(50 * time.Millisecond)
		bg := context.Background()
		err := f.store.Update(bg, func(tx clouddb.Tx) error {
			r, err := tx.ACLRule(bg, f.mainAccount, rule)
			if err != nil {
				return err
			}
			if _, err = tx.SetACLRuleStatus(bg, rule, r.Generation, clouddb.ACLActive); err != nil {
				return err
			}
			ro, err := tx.ACLRole(bg, f.mainAccount, role)
			if err != nil {
				return err
			}
			if _, err = tx.SetACLRoleStatus(bg, role, ro.Generation, clouddb.ACLActive); err != nil {
				return err
			}
			u, err := tx.ACLUser(bg, f.mainAccount, user)
			if err != nil {
				return err
			}
			_, err = tx.SetACLUserStatus(bg, user, u.Generation, clouddb.ACLActive)
			return err
		})
		if err != nil {
			t.Errorf("settle: %v", err)
		}
	}
	go settle()
	r, err := f.main.WaitForRedisRuleStatus(ctx, rule, client.ACLActive)
	require.NoError(t, err)
	require.Equal(t, client.ACLActive, r.Status)
	ro, err := f.main.WaitForRoleStatus(ctx, role, client.ACLActive)
	require.NoError(t, err)
	require.Equal(t, client.ACLActive, ro.Status)
	u, err := f.main.WaitForUserStatus(ctx, user, client.ACLActive)
	require.NoError(t, err)
	require.Equal(t, client.ACLActive, u.Status)

	tk, err := f.main.DeleteUser(ctx, user)
	done(t, f.main, tk, err)
	_, err = f.main.WaitForUserStatus(ctx, user, client.ACLActive)
	require.ErrorContains(t, err, `is "deleting"`)
	_, err = f.main.WaitForRedisRuleStatus(ctx, 999999, client.ACLActive)
	require.True(t, client.IsNotFound(err), "err: %v", err)
}
