package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
	"clouddb/internal/syncbuf"
)

// run runs a command line in process as the binary does, with the process's environment,
// and returns the error the binary would print.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &CLI{Stdout: stdout, Stderr: stderr, LookupEnv: os.LookupEnv}
	return c.execute(ctx, args)
}

// cliCase runs clouddb commands in process against a service, with an environment of its
// own (never the process's).
type cliCase struct {
	t   *testing.T
	s   *service
	env map[string]string
	// terminal makes stderr a terminal.
	terminal bool
}

// newCLICase points the commands at s: its URL (without /v1, which the CLI adds) and its
// data dir, where the default account's credentials are.
func newCLICase(t *testing.T, s *service) *cliCase {
	return &cliCase{t: t, s: s, env: map[string]string{"CLOUDDB_URL": "http://" + s.m.Addr, "CLOUDDB_DATA_DIR": s.dir}}
}

// cliRun is what a command printed and its exit status.
type cliRun struct {
	stdout, stderr string
	code           int
}

func (h *cliCase) run(args ...string) cliRun {
	h.t.Helper()
	var stdout, stderr syncbuf.Buffer
	c := &CLI{Stdout: &stdout, Stderr: &stderr, StderrTerminal: h.terminal, PollInterval: 50 * time.Millisecond,
		LookupEnv: func(k string) (string, bool) { v, ok := h.env[k]; return v, ok }}
	if h.s != nil {
		// Against the real service, every request and answer is checked against the
		// OpenAPI document (the fake API's scripted answers are partial by design).
		c.Transport = cloudAPIClient(h.t).Transport
	}
	code := c.Run(testContext(h.t), args)
	return cliRun{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// ok runs a command that must succeed and returns its stdout without the last newline.
func (h *cliCase) ok(args ...string) string {
	h.t.Helper()
	r := h.run(args...)
	require.Equal(h.t, 0, r.code, "clouddb %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	return strings.TrimSuffix(r.stdout, "\n")
}

// fails runs a command that must exit with code and returns what it printed.
func (h *cliCase) fails(code int, args ...string) cliRun {
	h.t.Helper()
	r := h.run(args...)
	require.Equal(h.t, code, r.code, "clouddb %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	return r
}

// rawGet is the API's answer at path as the typed client receives it.
func (s *service) rawGet(ctx context.Context, path string) json.RawMessage {
	s.t.Helper()
	var raw json.RawMessage
	require.NoError(s.t, s.c.Do(ctx, http.MethodGet, path, nil, &raw))
	return raw
}

// TestCLIWalkthrough drives the README's walk-through with the CLI against a real service:
// a subscription and a database created with --wait, the database reached with the
// password read back with --field, list and get in every output, an update and a delete
// with --wait, and the tasks they made.
func TestCLIWalkthrough(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{})
	ctx := testContext(t)
	h := newCLICase(t, s)

	// The defaults make a working subscription; stdout carries only the field.
	r := h.run("subscriptions", "create", "--name", "demo", "--wait", "--field", "id")
	require.Equal(t, 0, r.code, r.stderr)
	sub, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	require.NoError(t, err, "stdout is the id alone: %q", r.stdout)
	require.Regexp(t, `(?m)^task \S+: processing-completed$`, r.stderr, "plain progress lines on a stderr that is no terminal")
	require.Contains(t, r.stderr, fmt.Sprintf("subscription %d: active\n", sub))
	got, err := s.c.GetSubscription(ctx, sub)
	require.NoError(t, err)
	require.Equal(t, "active", got.Status)
	plan, err := s.c.AllDatabases(ctx, sub)
	require.NoError(t, err)
	require.Len(t, plan, 1)
	require.Equal(t, "demo-db", plan[0].Name)
	require.Equal(t, 1.0, plan[0].MemoryLimitInGB)

	// A database with a generated password, reached with what --field reads back.
	db := h.ok("databases", "create", "--subscription", strconv.Itoa(sub), "--name", "cache", "--memory-gb", "0.5", "--wait", "--quiet", "--field", "id")
	dbID, err := strconv.Atoi(db)
	require.NoError(t, err, db)
	get := []string{"databases", "get", "--subscription", strconv.Itoa(sub), db}
	password := h.ok(append(get, "--field", "security.password")...)
	require.Len(t, password, 26, "a generated password: rand.Text")
	endpoint := h.ok(append(get, "--field", "publicEndpoint")...)
	rdb := redis.NewClient(&redis.Options{Addr: endpoint, Password: password, MaxRetries: -1})
	require.Equal(t, "PONG", rdb.Ping(ctx).Val())
	require.Equal(t, "active", h.ok(append(get, "--field", "status")...))
	require.Equal(t, db, h.ok(append(get, "--field", "databaseId")...), "--field id reads databaseId")

	// get: the table has the useful columns; json is the API's answer.
	table := h.ok(get...)
	lines := strings.Split(table, "\n")
	require.Len(t, lines, 2, table)
	require.Regexp(t, `^ID\s+NAME\s+STATUS\s+ENDPOINT\s+MEMORY_GB\s+REPLICATION\s+TLS\s+REDIS$`, lines[0])
	require.Regexp(t, `^`+db+`\s+cache\s+active\s+`+endpoint+`\s+0.5\s+no\s+no\s+7\.`, lines[1])
	require.JSONEq(t, string(s.rawGet(ctx, databasePath(sub, dbID))), h.ok(append(get, "-o", "json")...))
	require.Contains(t, h.ok(append(get, "-o", "json")...), "\n  \"databaseId\": "+db, "indented")

	// list: a row, or with --field a line, per database.
	list := []string{"databases", "list", "--subscription", strconv.Itoa(sub)}
	require.Equal(t, "demo-db\ncache", h.ok(append(list, "--field", "name")...))
	table = h.ok(list...)
	require.Len(t, strings.Split(table, "\n"), 3, table)
	require.JSONEq(t, string(s.rawGet(ctx, fmt.Sprintf("/subscriptions/%d/databases?limit=100&offset=0", sub))), h.ok(append(list, "-o", "json")...))
	require.Equal(t, strconv.Itoa(sub), h.ok("subscriptions", "list", "--field", "id"))
	require.Regexp(t, `(?m)^`+strconv.Itoa(sub)+`\s+demo\s+active\s+2\s+AWS\s+us-east-1\s+`, h.ok("subscriptions", "list"))
	require.Equal(t, "demo", h.ok("subscriptions", "get", strconv.Itoa(sub), "--field", "name"))

	// A missing field is an error that names what there is.
	r = h.fails(exitError, append(get, "--field", "security.nope")...)
	require.Contains(t, r.stderr, "--field security.nope: the result has no security.nope (it has ")
	require.Empty(t, r.stdout)

	// update --wait prints the changed database; on a terminal the progress is a spinner.
	h.terminal = true
	r = h.run("databases", "update", "--subscription", strconv.Itoa(sub), db, "--memory-gb", "1", "--wait", "--field", "memoryLimitInGb")
	h.terminal = false
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "1\n", r.stdout)
	require.Contains(t, r.stderr, "\r", "the spinner redraws its line")
	require.Regexp(t, `task \S+: processing-completed`, r.stderr)
	require.Regexp(t, fmt.Sprintf(`\rsubscription %d: active \(\d+(\.\d)?m?s\)\n$`, sub), r.stderr, "the spinner is cleared and its last status stays as a line")
	updated, err := s.c.GetDatabase(ctx, sub, dbID)
	require.NoError(t, err)
	require.Equal(t, 1.0, updated.MemoryLimitInGB)
	require.Equal(t, "PONG", rdb.Ping(ctx).Val(), "the same password still works")
	require.NoError(t, rdb.Close())

	// Without --wait a command prints its task, which tasks wait follows.
	task := h.ok("databases", "update", "--subscription", strconv.Itoa(sub), db, "--name", "renamed", "--field", "taskId")
	require.Regexp(t, `^[0-9a-f-]{36}$`, task)
	require.Equal(t, "processing-completed", h.ok("tasks", "wait", task, "--field", "status"))
	require.Equal(t, db, h.ok("tasks", "get", task, "--field", "response.resourceId"))
	require.Contains(t, h.ok("tasks", "list", "--field", "taskId"), task)
	require.Regexp(t, `(?m)^TASK\s+STATUS\s+COMMAND\s+RESOURCE\s+UPDATED\s+DESCRIPTION$`, h.ok("tasks", "list"))

	// delete --wait returns once the database is gone.
	r = h.run("databases", "delete", "--subscription", strconv.Itoa(sub), db, "--wait", "--field", "status")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "processing-completed\n", r.stdout)
	require.Contains(t, r.stderr, fmt.Sprintf("database %d: deleted\n", dbID))
	_, err = s.c.GetDatabase(ctx, sub, dbID)
	require.True(t, client.IsNotFound(err), "gone: %v", err)
	require.Equal(t, "demo-db", h.ok(append(list, "--field", "name")...))

	// And the subscription, once its last database is gone.
	h.ok("databases", "delete", "--subscription", strconv.Itoa(sub), strconv.Itoa(plan[0].ID), "--wait")
	h.ok("subscriptions", "delete", strconv.Itoa(sub), "--wait")
	_, err = s.c.GetSubscription(ctx, sub)
	require.True(t, client.IsNotFound(err), "gone: %v", err)
	require.Empty(t, h.ok("subscriptions", "list", "--field", "id"))
}

// TestCLIFailingTask: a task the API accepts but cannot carry out (a database larger than
// the host's memory budget) makes --wait and tasks wait exit 1 with the task's error type
// and description on stderr, and nothing on stdout.
func TestCLIFailingTask(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{dbMemory: "512MiB"})
	h := newCLICase(t, s)
	sub := h.ok("subscriptions", "create", "--name", "small", "--db-memory-gb", "0.1", "--wait", "--field", "id")

	r := h.fails(exitError, "databases", "create", "--subscription", sub, "--name", "huge", "--memory-gb", "2", "--wait")
	require.Empty(t, r.stdout)
	require.Regexp(t, `(?m)^task \S+: processing-error$`, r.stderr)
	require.Regexp(t, `(?m)^clouddb: task \S+: 507 INSUFFICIENT_STORAGE - INSUFFICIENT_MEMORY: database: this host keeps 0.5 GB of memory for databases \(--db-memory\)`, r.stderr)

	task := h.ok("databases", "create", "--subscription", sub, "--name", "huge", "--memory-gb", "2", "--field", "taskId")
	r = h.fails(exitError, "tasks", "wait", task)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "INSUFFICIENT_MEMORY")
	require.Equal(t, "processing-error", h.ok("tasks", "get", task, "--field", "status"))

	// An error the API answers at once: its type, status and description.
	r = h.fails(exitError, "subscriptions", "get", "999")
	require.Equal(t, "clouddb: 404 NOT_FOUND - SUBSCRIPTION_NOT_FOUND: subscription 999 not found\n", r.stderr)
}

// TestCLIWaitTimeout: a wait longer than --timeout ends with exit status 1 and says how to
// follow the work, which goes on.
func TestCLIWaitTimeout(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir(), options{delay: time.Second})
	h := newCLICase(t, s)
	r := h.fails(exitError, "subscriptions", "create", "--name", "slow", "--db-memory-gb", "0.1", "--wait", "--timeout", "300ms")
	require.Empty(t, r.stdout)
	m := regexp.MustCompile(`(?m)^clouddb: --timeout 300ms passed: .*context deadline exceeded \(the work goes on: clouddb tasks get (\S+)\)$`).FindStringSubmatch(r.stderr)
	require.NotNil(t, m, r.stderr)
	require.Equal(t, "processing-completed", h.ok("tasks", "wait", m[1], "--field", "status"))
}
