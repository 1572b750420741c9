package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeTempDir: each process gets a directory of its own; what a process that no
// longer runs left behind is removed, a running replica's is kept.
func TestMakeTempDir(t *testing.T) {
	parent := t.TempDir()
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	left := filepath.Join(parent, strconv.Itoa(dead.Process.Pid)+"-123")
	stray := filepath.Join(parent, "not-a-pid")
	running := filepath.Join(parent, "1-456") // pid 1 always runs
	for _, d := range []string{left, stray, running} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "part"), 0o700))
	}
	a, err := makeTempDir(parent)
	require.NoError(t, err)
	b, err := makeTempDir(parent)
	require.NoError(t, err)
	require.NotEqual(t, a, b, "two services of one process do not share a directory")
	require.DirExists(t, a, "the first is kept: its process runs")
	require.DirExists(t, running)
	require.NoDirExists(t, left)
	require.NoDirExists(t, stray)
}

// TestDBMemory: --db-memory takes auto (the machine's memory), 0 (no limit) or a size.
func TestDBMemory(t *testing.T) {
	auto, err := dbMemory("auto")
	require.NoError(t, err)
	require.Positive(t, auto, "this machine's MemTotal")
	for in, want := range map[string]int64{"": auto, "0": 0, "16GiB": 16 << 30, "512MiB": 512 << 20, "2GB": 2e9} {
		got, err := dbMemory(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"banana", "-1GiB", "0B"} {
		_, err := dbMemory(in)
		require.ErrorContains(t, err, "--db-memory", in)
	}
}
