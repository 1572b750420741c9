package local

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// inode is the inode number of path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// syncNewNode makes the config's rename durable through the directory sync of the
// version file's own rename: that happens even when the node's directory already holds a
// version file saying the same (left by a node 0 whose removal a crash cut short, its
// config gone first), which a write "only if changed" skipped, leaving the config's
// rename unsynced after Ensure returned.
func TestSyncNewNode_SyncsEvenAnUnchangedVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, confFile), []byte("port 0\n"), 0o600, false))
	require.NoError(t, os.WriteFile(filepath.Join(dir, versionFile), []byte("7.2\n"), 0o600))
	before := inode(t, filepath.Join(dir, versionFile))
	require.NoError(t, syncNewNode(dir, "7.2"))
	require.NotEqual(t, before, inode(t, filepath.Join(dir, versionFile)),
		"the version file is written anew, and the directory synced with it")
	got, err := os.ReadFile(filepath.Join(dir, versionFile))
	require.NoError(t, err)
	require.Equal(t, "7.2\n", string(got))
}
