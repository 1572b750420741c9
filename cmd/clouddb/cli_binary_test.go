package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIBinary runs the built binary against a service: real exit codes, stdout that is
// the result alone, and plain progress lines on a stderr that is not a terminal.
func TestCLIBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	s := startService(t, t.TempDir(), options{dbMemory: "512MiB"})
	// The test's own environment, without any CLOUDDB_* setting it may carry.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLOUDDB_") {
			env = append(env, kv)
		}
	}
	env = append(env, "CLOUDDB_URL=http://"+s.m.Addr, "CLOUDDB_DATA_DIR="+s.dir)
	clouddbCmd := func(args ...string) cliRun {
		t.Helper()
		cmd := exec.CommandContext(testContext(t), bin, args...)
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return cliRun{stdout: stdout.String(), stderr: stderr.String(), code: code}
	}

	r := clouddbCmd("subscriptions", "create", "--name", "bin", "--db-memory-gb", "0.1", "--wait", "--field", "id")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^\d+\n$`, r.stdout, "stdout is the id alone")
	sub := strings.TrimSpace(r.stdout)
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	plain := regexp.MustCompile(`^(task [0-9a-f-]{36}: (received|processing-in-progress|processing-completed)|subscription ` + sub + `: (pending|active))$`)
	for _, l := range lines {
		require.Regexp(t, plain, l, "a plain line per status: %q", r.stderr)
	}
	require.Equal(t, "subscription "+sub+": active", lines[len(lines)-1])
	require.NotContains(t, r.stderr, "\r", "no spinner off a terminal")

	r = clouddbCmd("databases", "create", "--subscription", sub, "--name", "huge", "--memory-gb", "2", "--wait")
	require.Equal(t, exitError, r.code, "a failed task")
	require.Empty(t, r.stdout)
	require.Regexp(t, `(?m)^clouddb: task \S+: 507 INSUFFICIENT_STORAGE - INSUFFICIENT_MEMORY: database: this host keeps 0.5 GB`, r.stderr)

	r = clouddbCmd("databases", "list", "--subscription", sub, "--field", "name", "--quiet")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "bin-db\n", r.stdout)
	require.Empty(t, r.stderr)

	r = clouddbCmd("databases", "list", "-o", "yaml", "--subscription", sub)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `--output "yaml": want table or json`)

	for _, args := range [][]string{{"--help"}, {"databases", "create", "--help"}, {"serve", "--help"}, {"--version"}} {
		r = clouddbCmd(args...)
		require.Equal(t, 0, r.code, "clouddb %s: %s", strings.Join(args, " "), r.stderr)
	}
}
