package redisdata_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/syncbuf"
	"clouddb/redisdata"
)

// TestReplicatorSurvivesPanics: a panic in a replication session and one in the event
// callback are logged with their stack and end neither the process nor replication: the
// session is tried again and the data arrives, and the event reports an internal error
// without the panic's text.
func TestReplicatorSurvivesPanics(t *testing.T) {
	var sessions atomic.Int32
	t.Cleanup(redisdata.SetSessionHook(func(redisdata.Endpoint) {
		if sessions.Add(1) == 1 {
			panic("session internals")
		}
	}))
	src := startServer(t, "srcpw")
	src.do(0, "set", "k", "v")
	tgt, tgtEP := target(t)
	logs := &syncbuf.Buffer{}
	ev := &events{}
	var eventPanics atomic.Int32
	r := redisdata.Start(context.Background(), tgtEP, []redisdata.Endpoint{src.endpoint()}, redisdata.ReplicatorOptions{
		Load: redisdata.LoadConfig{TempDir: t.TempDir()},
		OnEvent: func(e redisdata.Event) {
			ev.add(e)
			if e.State == redisdata.StateStreaming && eventPanics.Add(1) == 1 {
				panic("callback internals")
			}
		},
		MinBackoff: 50 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
	})
	t.Cleanup(r.Stop)
	requireStreaming(t, r)
	eventuallyGet(t, tgt, 0, "k", "v", within)
	src.do(0, "set", "after", "1")
	eventuallyGet(t, tgt, 0, "after", "1", within)

	require.GreaterOrEqual(t, sessions.Load(), int32(2), "the session was tried again")
	require.Positive(t, eventPanics.Load())
	require.Equal(t, 1, ev.count(func(e redisdata.Event) bool {
		return e.State == redisdata.StateError && e.Err != nil && strings.Contains(e.Err.Error(), "internal error") &&
			!strings.Contains(e.Err.Error(), "internals")
	}))
	require.Contains(t, logs.String(), "work=\"replication session\"")
	require.Contains(t, logs.String(), "work=\"replication event\"")
	require.Contains(t, logs.String(), "panic_test.go", "the stack is logged")
}

// TestGuardedPanicIsAnError: a panic in one of the copy's goroutines is that goroutine's
// error (with its stack), as in the caller's own goroutine, not the end of the process.
func TestGuardedPanicIsAnError(t *testing.T) {
	err := redisdata.Guarded(func() error { panic("bad payload") })()
	var p *clouddb.PanicError
	require.ErrorAs(t, err, &p)
	require.Equal(t, "bad payload", p.Value)
	require.NotEmpty(t, p.Stack)
	require.NoError(t, redisdata.Guarded(func() error { return nil })())
}
