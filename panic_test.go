package clouddb_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/syncbuf"
)

// TestKeepRestartsPanickedLoop: a background loop that panics is logged with its
// stack and started again instead of ending the process; it is not started again once
// its context has ended.
func TestKeepRestartsPanickedLoop(t *testing.T) {
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var runs atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		clouddb.Keep(ctx, log, "test loop", func(ctx context.Context) {
			if runs.Add(1) == 1 {
				panic("loop internals")
			}
			<-ctx.Done()
		})
	}()
	require.Eventually(t, func() bool { return runs.Load() == 2 }, 5*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("keep did not return after its context ended")
	}
	require.Equal(t, int32(2), runs.Load())
	require.Equal(t, 1, strings.Count(logs.String(), "background loop panicked"))
	require.Contains(t, logs.String(), "TestKeepRestartsPanickedLoop", "the stack is logged")
}

// TestGuard: a panic in guarded work is its error, with the stack; work that returns
// returns as it did.
func TestGuard(t *testing.T) {
	err := clouddb.Guard(func() error { panic("boom") })()
	var p *clouddb.PanicError
	require.ErrorAs(t, err, &p)
	require.Equal(t, "boom", p.Value)
	require.Contains(t, string(p.Stack), "TestGuard")
	want := errors.New("plain")
	require.Same(t, want, clouddb.Guard(func() error { return want })())
	require.NoError(t, clouddb.Guard(func() error { return nil })())
}
