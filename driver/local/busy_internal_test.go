package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBusy: what the driver counts as a server's being busy (a wait) and what not.
func TestBusy(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "unix", Err: os.ErrDeadlineExceeded}
	require.True(t, busy(fmt.Errorf("apply configuration: ACL USERS: %w", timeout)), "a read that timed out")
	require.True(t, busy(fmt.Errorf("database 1: %w", classify(errors.New("BUSY Redis is busy running a script.")))))
	require.False(t, busy(fmt.Errorf("waiting for every node: %w", context.DeadlineExceeded)), "a wait of the driver's own that ran out")
	require.False(t, busy(errors.New("ERR unknown command")))
	require.False(t, busy(classify(errors.New("LOADING Redis is loading the dataset in memory"))))
}
