// Package redistest makes stand-ins for redis-server binaries of other Redis versions,
// for tests. Only one Redis version can be installed on the machines clouddb's tests run
// on, so a second version is played by a small script: it answers --version as that
// version and otherwise runs what the test says, by default the real redis-server.
package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Real is the path of the installed redis-server.
func Real(t testing.TB) string {
	t.Helper()
	real, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	return real
}

// ExecReal is the shell line that runs the installed redis-server with the stand-in's
// arguments.
func ExecReal(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("exec '%s' \"$@\"", Real(t))
}

// StandIn is a stand-in redis-server script.
type StandIn struct {
	// Path is the script, to give where a redis-server binary is expected.
	Path string
	runs string
}

// NewStandIn writes a stand-in for Redis full (e.g. "7.2.4") in a temporary directory:
// it answers --version as that version; any other run is recorded (see Runs) and then
// runs the shell code run ("" for ExecReal; "$1" is the config file a server is given).
func NewStandIn(t testing.TB, full, run string) *StandIn {
	t.Helper()
	if run == "" {
		run = ExecReal(t)
	}
	dir := t.TempDir()
	s := &StandIn{Path: filepath.Join(dir, "redis-server-"+full), runs: filepath.Join(dir, "runs")}
	script := fmt.Sprintf(`#!/bin/sh
# Stand-in for Redis %s: only one Redis version can be installed where the tests run.
if [ "$1" = "--version" ]; then
	echo "Redis server v=%s sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=0000000000000000"
	exit 0
fi
echo run >> '%s'
%s
`, full, full, s.runs, run)
	require.NoError(t, os.WriteFile(s.Path, []byte(script), 0o755))
	return s
}

// Runs is how many times the stand-in was run as a server (not for --version).
func (s *StandIn) Runs(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(s.runs)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "run\n")
}
