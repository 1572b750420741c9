// Package storehealth tells the background loops when the store cannot write (a full
// disk, an I/O error, an unreachable server), so that they back off instead of spinning
// and log each change of state once instead of every failed attempt.
package storehealth

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"clouddb"
)

// Bounds of the backoff while the store cannot write.
const (
	MinBackoff = 250 * time.Millisecond
	MaxBackoff = 4 * time.Second
)

// Down reports whether err means the store cannot write just now: the work is to be
// tried again later, when it may.
func Down(err error) bool {
	return errors.Is(err, clouddb.ErrStorageFull) || errors.Is(err, clouddb.ErrUnavailable) ||
		errors.Is(err, clouddb.ErrStorageUnwritable)
}

// Monitor tracks one loop's view of the store. Its zero value is ready (with
// slog.Default) once Logger and Component are set, or without them.
type Monitor struct {
	Logger *slog.Logger
	// Component names the loop in the log lines ("task engine", "reconciler").
	Component string

	mu      sync.Mutex
	down    bool
	backoff time.Duration
}

// Failed records a failure that Down accepts and returns how long to wait before the
// next attempt, doubling up to MaxBackoff. Only the first failure after a success is
// logged.
func (m *Monitor) Failed(err error) time.Duration {
	m.mu.Lock()
	first := !m.down
	m.down = true
	if first {
		m.backoff = MinBackoff
	} else {
		m.backoff = min(2*m.backoff, MaxBackoff)
	}
	wait := m.backoff
	m.mu.Unlock()
	if first {
		m.logger().Error("store cannot write: backing off until it can", "component", m.Component, "err", err)
	}
	return wait
}

// OK records a write that succeeded; the first one after failures is logged.
func (m *Monitor) OK() {
	m.mu.Lock()
	was := m.down
	m.down = false
	m.mu.Unlock()
	if was {
		m.logger().Info("store writable again", "component", m.Component)
	}
}

// Backoff is the current pause between attempts while the store cannot write.
func (m *Monitor) Backoff() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.backoff, MinBackoff)
}

// Down reports whether the last outcome was a failure.
func (m *Monitor) Down() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down
}

func (m *Monitor) logger() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.Default()
}
