package clouddb

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// PanicError is a panic recovered in one unit of background work (a task, a provisioning
// step, a replication session): that unit fails with it and the process goes on, since a
// bug met by one tenant's resource must not stop the service for every other tenant.
type PanicError struct {
	// Value is what was passed to panic; Stack is where it happened.
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("internal error (panic: %v)", e.Value) }

// Recovered turns the value of recover() into a *PanicError carrying the stack, or nil
// when there was no panic. Call it as clouddb.Recovered(recover()) in a deferred function,
// so that the stack still holds the panicking frames.
func Recovered(v any) *PanicError {
	if v == nil {
		return nil
	}
	return &PanicError{Value: v, Stack: debug.Stack()}
}

// Guard returns f made to return a panic in it as its error (a *PanicError): for work on
// a goroutine of its own (an errgroup's), where a panic would end the process, and with
// it every tenant's service, rather than the one piece of work.
func Guard(f func() error) func() error {
	return func() (err error) {
		defer func() {
			if p := Recovered(recover()); p != nil {
				err = p
			}
		}()
		return f()
	}
}

// InternalErrorDetail is the reason a resource shows when its work panicked: it says an
// internal error happened without exposing the panic's internals to the tenant.
const InternalErrorDetail = "clouddb hit an internal error while working on this resource; the operator's log has the details"

// Keep runs loop until ctx ends, and again a second later if it panicked: a bug in a
// background loop is logged with its stack instead of ending the service for every
// tenant. The loops recover their own units of work; this is the net under the rest.
func Keep(ctx context.Context, log *slog.Logger, what string, loop func(context.Context)) {
	for {
		func() {
			defer func() {
				if p := Recovered(recover()); p != nil {
					log.Error("background loop panicked; starting it again", "loop", what, "panic", p.Value, "stack", string(p.Stack))
				}
			}()
			loop(ctx)
		}()
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
