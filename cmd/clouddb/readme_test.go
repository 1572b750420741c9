package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/internal/syncbuf"
)

// readmeMarker precedes each README block that TestReadmeWalkthrough runs.
const readmeMarker = "<!-- readme-test -->"

// readmeBlocks returns the shell blocks of the README marked with readmeMarker, in order.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var blocks []string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != readmeMarker {
			continue
		}
		require.Less(t, i+1, len(lines), "README: %s at the end of the file", readmeMarker)
		require.Equal(t, "```sh", strings.TrimSpace(lines[i+1]), "README line %d: %s must be followed by a ```sh block", i+2, readmeMarker)
		var block []string
		j := i + 2
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			block = append(block, lines[j])
		}
		require.Less(t, j, len(lines), "README line %d: unterminated block", i+2)
		blocks = append(blocks, strings.Join(block, "\n"))
		i = j
	}
	return blocks
}

// TestReadmeWalkthrough runs the README's walk-through, browser example and curl appendix
// as a user pastes them: in one fresh bash (no CLOUDDB_* variables, a new HOME) in a
// directory laid out like a checkout after `make run` (bin/clouddb, ./clouddb-data), against
// `bin/clouddb serve` started there on a fresh data dir. The one liberty taken is the
// addresses: tests run side by side, so the service listens on free ports and the README's
// default addresses (127.0.0.1:8080, 127.0.0.1:5540) are replaced by the real ones.
//
// The welcome's own advice is checked too: its export lines, pasted into a shell in
// another directory, let the CLI reach the API.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	blocks := readmeBlocks(t)
	require.GreaterOrEqual(t, len(blocks), 3, "the README's walk-through, browser example and curl appendix are marked %s", readmeMarker)
	for _, tool := range []string{"bash", "redis-cli", "curl", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s is needed by the README's examples (make test installs it)", tool)
	}

	checkout := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(checkout, "bin"), 0o755))
	require.NoError(t, os.Link(buildBinary(t), filepath.Join(checkout, "bin", "clouddb")))
	home := t.TempDir()
	// A fresh login shell's environment: PATH and HOME, nothing of clouddb's.
	freshEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}

	serve := exec.Command("bin/clouddb", "serve", "--listen", "127.0.0.1:0", "--browser-listen", "127.0.0.1:0", "--db-ports", portRange())
	serve.Dir = checkout
	serve.Env = freshEnv
	stdout, err := serve.StdoutPipe()
	require.NoError(t, err)
	serveLog := &syncbuf.Buffer{}
	serve.Stderr = serveLog
	require.NoError(t, serve.Start())
	t.Cleanup(func() {
		if err := serve.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Logf("stopping clouddb: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- serve.Wait() }()
		select {
		case err := <-done:
			require.NoError(t, err, "clouddb serve did not stop cleanly")
		case <-time.After(30 * time.Second):
			_ = serve.Process.Kill()
			t.Errorf("clouddb serve did not stop within 30s of SIGTERM (then killed: %v)", <-done)
		}
		if n := sweepServers(filepath.Join(checkout, "clouddb-data")); n > 0 {
			t.Errorf("%d redis-server(s) still ran after clouddb stopped", n)
		}
	})

	// The welcome: read up to the "Try:" lines, which end it.
	var welcome []string
	sc := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(60*time.Second, func() { _ = serve.Process.Kill() })
	for sc.Scan() {
		welcome = append(welcome, sc.Text())
		if strings.HasSuffix(sc.Text(), " --help") {
			break
		}
	}
	deadline.Stop()
	text := strings.Join(welcome, "\n")
	require.Contains(t, text, "--help", "the welcome did not end (clouddb's log:\n%s)", serveLog.String())
	api := regexp.MustCompile(`serving the cloud API at http://(\S+)/v1`).FindStringSubmatch(text)
	require.NotNil(t, api, "no API address in the welcome:\n%s", text)
	browserAddr := regexp.MustCompile(`browser local API at http://(\S+)/api/`).FindStringSubmatch(text)
	require.NotNil(t, browserAddr, "no browser API address in the welcome:\n%s", text)
	exports := regexp.MustCompile(`(?m)^\s*(export CLOUDDB_\w+=\S+)$`).FindAllStringSubmatch(text, -1)
	require.Len(t, exports, 3, "the first start's welcome exports the URL and the key pair:\n%s", text)
	go func() { _, _ = io.Copy(io.Discard, stdout) }() // the pipe must not fill

	runShell := func(t *testing.T, dir, script string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = freshEnv
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the script failed (ctx: %v):\n%s\n--- its output:\n%s\n--- clouddb's log:\n%s", ctx.Err(), script, out, serveLog.String())
		return string(out)
	}

	t.Run("welcome exports", func(t *testing.T) {
		// Elsewhere, with no credentials file in reach: the exported pair alone.
		var script strings.Builder
		for _, e := range exports {
			script.WriteString(e[1] + "\n")
		}
		script.WriteString(filepath.Join(checkout, "bin", "clouddb") + " subscriptions list -o json\n")
		out := runShell(t, t.TempDir(), script.String())
		require.Contains(t, out, `"subscriptions"`)
	})

	t.Run("walk-through", func(t *testing.T) {
		script := strings.Join(blocks, "\n")
		script = strings.ReplaceAll(script, "127.0.0.1:8080", api[1])
		script = strings.ReplaceAll(script, "127.0.0.1:5540", browserAddr[1])
		out := runShell(t, checkout, script)
		t.Logf("walk-through output:\n%s", out)
		// What the README says each step shows.
		require.Contains(t, out, "PONG", "redis-cli reached the database")
		require.Contains(t, out, "hello from the walk-through", "the browser API read the key back")
	})
}
