//go:build linux

// The console test drives Debian's chromium (Linux only) through playwright-core.

package main

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/internal/uitest"
)

// uiShots keeps the console test's screenshots in a directory instead of a temporary
// one: go test ./cmd/clouddb/ -run TestConsoleFlow -args -ui-shots=DIR
var uiShots = flag.String("ui-shots", "", "directory for TestConsoleFlow's screenshots (default: a temporary one)")

// cliLine is the redis-cli line of a database without TLS, as the console shows it.
var cliLine = regexp.MustCompile(`^redis-cli -h 127\.0\.0\.1 -p \d+ --user default --pass '[^']+'$`)

// TestConsoleFlow runs internal/uitest/console.mjs in a real headless chromium against
// the console of a real clouddb: a wrong key pair is refused; signed in, it creates a
// subscription and a database through the forms and follows their tasks until they are
// active; it hands the database's redis-cli line over, which this test runs (PING) as
// pasted; it deletes the database through the UI and sees it go, and signs out. No page
// it received holds the secret key.
func TestConsoleFlow(t *testing.T) {
	t.Parallel()
	node := uitest.RequireTools(t)
	_, err := exec.LookPath("redis-cli")
	require.NoError(t, err, "redis-cli runs the console's line: install redis-tools")
	s := startService(t, t.TempDir(), options{})
	creds := readCredentials(t, s.dir)
	handoff := t.TempDir()
	shots := uitest.ShotDir(t, *uiShots)

	script := uitest.Start(t, node, "console.mjs", 4*time.Minute,
		"UI_URL=http://"+s.m.Addr,
		"API_KEY="+creds.APIKey,
		"SECRET_KEY="+creds.SecretKey,
		"SHOT_DIR="+shots,
		"HANDOFF_DIR="+handoff,
	)

	// The flow hands over the line read from the database page and waits for our PING.
	line := waitHandoff(t, script, filepath.Join(handoff, "redis-cli.txt"))
	require.Regexp(t, cliLine, line)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", line+" ping").CombinedOutput()
	reply := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(reply, '\n'); i >= 0 {
		reply = reply[i+1:] // after redis-cli's warning about a password on the command line
	}
	pingFile := filepath.Join(handoff, "ping.txt")
	require.NoError(t, os.WriteFile(pingFile+".tmp", []byte(reply), 0o600))
	require.NoError(t, os.Rename(pingFile+".tmp", pingFile))
	require.NoError(t, err, "%s ping: %s", line, out)
	require.Equal(t, "PONG", reply, "%s ping: %s", line, out)

	script.Wait(t)

	for _, name := range []string{"console.png", "task.png", "database.png"} {
		uitest.RequireScreenshot(t, filepath.Join(shots, name))
	}
	pages, err := filepath.Glob(filepath.Join(handoff, "pages", "*.html"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pages), 12, "pages the flow saved")
	for _, p := range pages {
		b, readErr := os.ReadFile(p)
		require.NoError(t, readErr)
		require.NotContains(t, string(b), creds.SecretKey, "%s holds the secret key", filepath.Base(p))
	}
	require.NotContains(t, s.logs.String(), creds.SecretKey, "the service's logs hold the secret key")

	// What the UI did, seen through the API: the subscription it made has only its
	// creation-plan database left.
	subs, err := s.c.ListSubscriptions(ctx)
	require.NoError(t, err)
	require.Len(t, subs.Subscriptions, 1)
	require.Equal(t, "console-sub", subs.Subscriptions[0].Name)
	dbs, err := s.c.AllDatabases(ctx, subs.Subscriptions[0].ID)
	require.NoError(t, err)
	require.Len(t, dbs, 1)
	require.Equal(t, "console-sub-plan", dbs[0].Name)
}

// waitHandoff waits for the script to write a file and returns its content; the script
// ending first fails the test with its output.
func waitHandoff(t *testing.T, script *uitest.Script, file string) string {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-script.Done():
			script.Wait(t)
			t.Fatalf("console.mjs ended without handing over %s:\n%s", filepath.Base(file), script.Output())
		case <-tick.C:
		}
	}
}
