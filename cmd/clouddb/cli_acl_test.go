package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
)

// TestCLIACLAndCloudAccounts: the ACL's rules, roles and users and the cloud accounts go
// through create, get, list, update and delete with --wait, and a user made by the CLI
// reaches its database with the role's rule; logs lists what happened.
func TestCLIACLAndCloudAccounts(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	h := newCLICase(t, s)
	sub, db := s.activeSubscription(ctx, "acl", 0.1)

	rule := h.ok("acl", "rules", "create", "--name", "cache-reader", "--rule", "+@read ~cache:*", "--wait", "--field", "id")
	require.Equal(t, "+@read ~cache:*", h.ok("acl", "rules", "get", rule, "--field", "acl"))
	require.Regexp(t, `(?m)^`+rule+`\s+cache-reader\s+\+@read ~cache:\*\s+no\s+active$`, h.ok("acl", "rules", "list"))
	require.Equal(t, "active", h.ok("acl", "rules", "update", rule, "--rule", "+@read +@write ~cache:*", "--wait", "--field", "status"))

	role := h.ok("acl", "roles", "create", "--name", "cachers", "--rule", fmt.Sprintf("cache-reader=%d/%d", sub, db.ID), "--wait", "--field", "id")
	require.Regexp(t, fmt.Sprintf(`(?m)^%s\s+cachers\s+cache-reader=%d/%d\s+active$`, role, sub, db.ID), h.ok("acl", "roles", "list"))
	require.Equal(t, strconv.Itoa(db.ID), h.ok("acl", "roles", "get", role, "--field", "redisRules.0.databases.0.databaseId"))

	user := h.ok("acl", "users", "create", "--name", "alice", "--role", "cachers", "--password", "Alice.pa55word", "--wait", "--field", "id")
	require.Regexp(t, `(?m)^`+user+`\s+alice\s+cachers\s+active$`, h.ok("acl", "users", "get", user))
	r := redisOf(t, &client.Database{PublicEndpoint: db.PublicEndpoint, Security: &client.Security{}})
	require.NoError(t, r.Do(ctx, "AUTH", "alice", "Alice.pa55word").Err())
	require.NoError(t, r.Set(ctx, "cache:a", "1", 0).Err(), "the updated rule lets alice write cache:*")

	h.ok("acl", "users", "update", user, "--password", "Alice.pa55word-2", "--wait")
	require.Error(t, r.Do(ctx, "AUTH", "alice", "Alice.pa55word").Err(), "the old password no longer works")
	require.NoError(t, r.Do(ctx, "AUTH", "alice", "Alice.pa55word-2").Err())

	require.Equal(t, "processing-completed", h.ok("acl", "users", "delete", user, "--wait", "--field", "status"))
	_, err := s.c.GetUser(ctx, mustAtoi(t, user))
	require.True(t, client.IsNotFound(err), "%v", err)
	h.ok("acl", "roles", "delete", role, "--wait")
	h.ok("acl", "rules", "delete", rule, "--wait")
	_, err = s.c.GetRedisRule(ctx, mustAtoi(t, rule))
	require.True(t, client.IsNotFound(err), "%v", err)
	r2 := h.fails(exitError, "acl", "rules", "get", rule)
	require.Equal(t, fmt.Sprintf("clouddb: 404 NOT_FOUND - NOT_FOUND: ACL rule %s not found\n", rule), r2.stderr)

	ca := h.ok("cloud-accounts", "create", "--name", "team-aws", "--access-key-id", "AKIA1", "--access-secret-key", "secret-1",
		"--console-username", "ops", "--console-password", "pw-1", "--sign-in-login-url", "https://example.com/console", "--wait", "--field", "id")
	require.Regexp(t, `(?m)^`+ca+`\s+team-aws\s+AWS\s+active\s+AKIA1$`, h.ok("cloud-accounts", "list"))
	require.Equal(t, "team-aws-2", h.ok("cloud-accounts", "update", ca, "--name", "team-aws-2", "--wait", "--field", "name"))
	all := h.ok("cloud-accounts", "get", ca, "-o", "json")
	require.NotContains(t, all, "secret-1")
	require.NotContains(t, all, "pw-1")
	h.ok("cloud-accounts", "delete", ca, "--wait")
	_, err = s.c.GetCloudAccount(ctx, mustAtoi(t, ca))
	require.True(t, client.IsNotFound(err), "%v", err)

	logs := h.ok("logs", "--limit", "500")
	require.Regexp(t, `^ID\s+TIME\s+ORIGINATOR\s+TYPE\s+RESOURCE\s+DESCRIPTION\n`, logs)
	require.Contains(t, logs, "team-aws")
	require.Len(t, strings.Split(h.ok("logs", "--limit", "2", "--field", "id"), "\n"), 2)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
