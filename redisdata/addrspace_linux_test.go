package redisdata_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/redisdata"
)

// TestCapAddressSpaceOfAGoneProcess: a server that exited before it could be capped (a
// file it refused at once) is no error: the caller learns from its exit why it went.
func TestCapAddressSpaceOfAGoneProcess(t *testing.T) {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	require.NoError(t, cmd.Wait())
	require.NoError(t, redisdata.CapAddressSpace(pid, 1<<20))
}
