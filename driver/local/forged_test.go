package local_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEnsure_ForgedNoSpaceIsNotDiskFull: the log a failed start reports is the tenant's
// to write to (Lua's redis.log): a line saying the disk is full, on a disk that is not,
// does not make the failure a full disk, which the reconciler would wait out forever
// instead of reporting.
func TestEnsure_ForgedNoSpaceIsNotDiskFull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxT(t)
	in := b.instance(t, 67, "none")
	dir := filepath.Join(b.dir, "67")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "redis.log"), []byte("1:M 01 Jan 2026 00:00:00.000 # No space left on device\n"), 0o600))
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", in.Port))
	require.NoError(t, err)
	defer l.Close()

	err = b.driver.Ensure(ctx, in)
	require.Error(t, err)
	require.Contains(t, err.Error(), "No space left on device", "the log's tail is reported as it is")
	require.NotErrorIs(t, err, syscall.ENOSPC, "but the disk is not full")
}
