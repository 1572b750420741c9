package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"clouddb"
)

// offline is a cliCase with no service: the commands it runs fail before they would
// reach one (its URL is a closed port, its data dir empty).
func offline(t *testing.T) *cliCase {
	return &cliCase{t: t, env: map[string]string{"CLOUDDB_URL": "http://127.0.0.1:1", "CLOUDDB_DATA_DIR": t.TempDir()}}
}

// TestCLIHelpEverywhere: --help exits 0 for every command of the tree, on stdout, and
// every help ends with the exit codes; serve keeps its own flags' help.
func TestCLIHelpEverywhere(t *testing.T) {
	t.Parallel()
	h := offline(t)
	var walk func(cmd *cobra.Command, path []string)
	n := 0
	walk = func(cmd *cobra.Command, path []string) {
		n++
		r := h.run(append(append([]string(nil), path...), "--help")...)
		require.Equal(t, 0, r.code, "clouddb %s --help: %s", strings.Join(path, " "), r.stderr)
		if cmd.Name() == "serve" {
			require.Contains(t, r.stderr, "-data-dir", "serve's own flags")
			require.Contains(t, r.stderr, "-db-memory")
			return
		}
		require.Empty(t, r.stderr, "clouddb %s --help", strings.Join(path, " "))
		require.Contains(t, r.stdout, "Usage:", "clouddb %s --help", strings.Join(path, " "))
		require.Contains(t, r.stdout, "Exit status: 0 success; 1 an API error", "clouddb %s --help", strings.Join(path, " "))
		for _, sub := range cmd.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk((&CLI{}).rootCommand(), nil)
	require.Greater(t, n, 50, "the whole tree was walked")

	r := h.run("serve", "-h")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stderr, "Usage of clouddb serve:")
}

// TestCLIVersion: --version and the version command print clouddb.Version().
func TestCLIVersion(t *testing.T) {
	t.Parallel()
	h := offline(t)
	want := "clouddb version " + clouddb.Version()
	require.Equal(t, want, h.ok("--version"))
	require.Equal(t, want, h.ok("version"))
}

// TestCLIUsageErrors: a command line that cannot run exits 2 with a message naming the
// flag or argument and the rule, and prints nothing on stdout.
func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{}, nil, "clouddb needs a command: acl, admin,"},
		{[]string{"bogus"}, nil, `unknown command "bogus" for "clouddb"`},
		{[]string{"databases", "bogus"}, nil, `unknown command "bogus" for "clouddb databases"`},
		{[]string{"subscriptions", "list", "--bogus"}, nil, "unknown flag: --bogus"},
		{[]string{"databases", "create", "--name", "x"}, nil, "--subscription is required"},
		{[]string{"databases", "create", "--subscription", "1"}, nil, "--name is required"},
		{[]string{"databases", "create", "--subscription", "1", "--name", "x", "--memory-gb", "0"}, nil, "--memory-gb 0: want a positive size"},
		{[]string{"databases", "list", "--subscription", "x"}, nil, `invalid argument "x" for "--subscription"`},
		{[]string{"databases", "list", "--subscription", "1", "--limit", "101"}, nil, "--limit 101: want 1 to 100"},
		{[]string{"databases", "get", "--subscription", "1"}, nil, "clouddb databases get needs the database ID"},
		{[]string{"databases", "get", "--subscription", "1", "x"}, nil, `database ID "x": want a positive number`},
		{[]string{"databases", "update", "--subscription", "1", "2"}, nil, "nothing to change: give --memory-gb"},
		{[]string{"subscriptions", "get", "1", "2"}, nil, "clouddb subscriptions get takes one subscription ID (got 2 arguments)"},
		{[]string{"subscriptions", "create"}, nil, "--name is required"},
		{[]string{"subscriptions", "update", "1"}, nil, "nothing to change: give --name or --payment-method"},
		{[]string{"subscriptions", "list", "extra"}, nil, `clouddb subscriptions list takes no arguments (got "extra")`},
		{[]string{"-o", "yaml", "subscriptions", "list"}, nil, `--output "yaml": want table or json`},
		{[]string{"--timeout", "0s", "tasks", "wait", "x"}, nil, "--timeout 0s: want a positive duration"},
		{[]string{"tasks", "wait"}, nil, "clouddb tasks wait needs the task ID"},
		{[]string{"--url", "ftp://host", "subscriptions", "list"}, nil, `--url "ftp://host": want an http:// or https:// URL`},
		{[]string{"subscriptions", "list"}, nil, "no API key: give --api-key and --api-secret-key"},
		{[]string{"--api-key", "k", "subscriptions", "list"}, nil, "--api-key is given but --api-secret-key (CLOUDDB_API_SECRET_KEY) is not"},
		{[]string{"subscriptions", "list"}, map[string]string{"CLOUDDB_API_SECRET_KEY": "s"}, "--api-secret-key is given but --api-key (CLOUDDB_API_KEY) is not"},
		{[]string{"tasks", "list"}, map[string]string{"CLOUDDB_URL": "::"}, `--url "::"`},
		{[]string{"cloud-accounts", "create", "--name", "x"}, nil, "--access-key-id is required"},
		{[]string{"cloud-accounts", "update", "2"}, nil, "nothing to change: give --access-key-id, --access-secret-key, --console-password, --console-username, --name, --sign-in-login-url"},
		{[]string{"acl", "roles", "create", "--name", "r", "--rule", "Read-Only"}, nil, `--rule "Read-Only": want RULE=SUBSCRIPTION/DATABASE`},
		{[]string{"acl", "roles", "create", "--name", "r", "--rule", "Read-Only=1/x"}, nil, `"1/x" is not SUBSCRIPTION/DATABASE`},
		{[]string{"acl", "users", "create", "--name", "u", "--role", "r"}, nil, "--password is required"},
		{[]string{"acl", "users", "update", "5"}, nil, "nothing to change: give --password, --role"},
		{[]string{"logs", "--limit", "0"}, nil, "--limit 0: want 1 to 1000"},
		{[]string{"admin", "keys", "create"}, nil, "--account is required"},
		{[]string{"admin", "keys", "create", "--account", "1", "--role", "god"}, nil, `--role "god": want owner or viewer`},
		{[]string{"admin", "accounts", "create", "--name", "x", "--plan", "gold"}, nil, `--plan "gold": want flexible, annual, fixed or free`},
		{[]string{"admin", "accounts", "list", "--store", "mysql://x"}, nil, "--store: want sqlite"},
		{[]string{"admin", "keys", "revoke"}, nil, "clouddb admin keys revoke needs the key"},
		{[]string{"serve", "--listen", "nope"}, nil, `--listen "nope": want HOST:PORT`},
	} {
		h := offline(t)
		for k, v := range tc.env {
			h.env[k] = v
		}
		r := h.fails(exitUsage, tc.args...)
		require.Regexp(t, `(?m)^clouddb: .*`+regexp.QuoteMeta(tc.want), r.stderr, "clouddb %s", strings.Join(tc.args, " "))
		require.Contains(t, r.stderr, "--help' for usage.", "clouddb %s", strings.Join(tc.args, " "))
		require.Empty(t, r.stdout, "clouddb %s", strings.Join(tc.args, " "))
	}
}

// TestCLIUnreachable: a service that does not answer is an error (exit 1) that says
// where it was looked for.
func TestCLIUnreachable(t *testing.T) {
	t.Parallel()
	h := offline(t)
	r := h.fails(exitError, "subscriptions", "list", "--api-key", "k", "--api-secret-key", "s")
	require.Contains(t, r.stderr, "connection refused (is clouddb serve running at http://127.0.0.1:1? see --url)")
}
