package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeTempDir: each service gets a directory of its own; what a process that no
// longer runs left behind (its lock file unlocked) is removed, a running service's is
// kept, and release removes its own.
func TestMakeTempDir(t *testing.T) {
	parent := t.TempDir()
	left := filepath.Join(parent, "import-left")
	stray := filepath.Join(parent, "not-ours")
	for _, d := range []string{left, stray} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "part"), 0o700))
	}
	require.NoError(t, os.WriteFile(filepath.Join(left, ".lock"), nil, 0o600))
	a, releaseA, err := makeTempDir(parent)
	require.NoError(t, err)
	b, releaseB, err := makeTempDir(parent)
	require.NoError(t, err)
	require.NotEqual(t, a, b, "two services of one process do not share a directory")
	require.DirExists(t, a, "the first is kept: its service runs")
	require.NoDirExists(t, left)
	require.NoDirExists(t, stray)
	releaseB()
	require.NoDirExists(t, b)
	releaseA()
	require.NoDirExists(t, a)
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

// TestBackupDirsDefault: without --backup-dirs, local backups go under <data-dir>/backups,
// made absolute; the flag takes a comma-separated list.
func TestBackupDirsDefault(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(wd, "clouddb-data", "backups")}, backupDirs(Config{DataDir: "./clouddb-data"}))
	require.Equal(t, []string{"/srv/a", "/srv/b"}, backupDirs(Config{DataDir: "x", BackupDirs: "/srv/a/, /srv/b"}))
}
