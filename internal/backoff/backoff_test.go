package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"clouddb/internal/backoff"
)

func TestUntil(t *testing.T) {
	n := 0
	if err := backoff.Until(context.Background(), time.Second, func() (bool, error) { n++; return n == 3, nil }); err != nil || n != 3 {
		t.Fatalf("Until = %v after %d tries, want nil after 3", err, n)
	}
	last := errors.New("not yet")
	start := time.Now()
	err := backoff.Until(context.Background(), 100*time.Millisecond, func() (bool, error) { return false, last })
	if !errors.Is(err, last) {
		t.Fatalf("Until on timeout = %v, want the condition's last error", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > time.Second {
		t.Fatalf("Until gave up after %v, want about 100ms", d)
	}
	if err = backoff.Until(context.Background(), 50*time.Millisecond, func() (bool, error) { return false, nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Until on timeout without an error = %v, want the deadline", err)
	}
}
