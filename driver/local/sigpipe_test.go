package local_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServersInheritIgnoredSIGPIPE: a server writes its log to a pipe clouddb reads; if
// clouddb dies while the server is still starting, before redis ignores SIGPIPE itself,
// the server's next log line must not kill it. Ignored signals are inherited across exec,
// so once a Driver exists, whatever it starts ignores SIGPIPE from its first instruction.
func TestServersInheritIgnoredSIGPIPE(t *testing.T) {
	setup(t)
	out, err := exec.Command("sh", "-c", "grep SigIgn /proc/self/status").Output()
	if err != nil {
		if _, serr := os.Stat("/proc/self/status"); serr != nil {
			t.Skip("optional: needs /proc")
		}
		require.NoError(t, err)
	}
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "SigIgn:")), 16, 64)
	require.NoError(t, err, "%s", out)
	require.NotZero(t, mask&(1<<(13-1)), "SIGPIPE (13) is not ignored in a child: %s", out)
}
