package cloudapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"clouddb"
)

// DefaultRateLimit is the real API's limit: 400 requests per minute per API key.
const DefaultRateLimit = 400

// rateWindow is the length of a rate-limit window.
const rateWindow = time.Minute

// rateLimiter counts requests per API key in fixed one-minute windows, the model the
// official client's own limiter follows, so its X-Rate-Limit-Remaining bookkeeping agrees
// with ours. Every request passes here: it takes no lock, so that requests on both cores
// never wait for each other (a window is replaced by compare-and-swap, counted by atomic
// addition).
type rateLimiter struct {
	limit int

	windows sync.Map     // key id → *rateCount
	swept   atomic.Int64 // when idle keys were last forgotten, in Unix nanoseconds
}

// rateCount is one key's current window. Past the limit its count goes on growing, which
// only ever refuses.
type rateCount struct {
	start time.Time
	count atomic.Int64
}

// take counts one request of key and reports what is left of its window, and, when none
// is, how long until the next window opens.
func (l *rateLimiter) take(key int, now time.Time) (remaining int, retryAfter time.Duration, ok bool) {
	l.sweep(now)
	for {
		v, found := l.windows.Load(key)
		w, _ := v.(*rateCount)
		if !found || now.Sub(w.start) >= rateWindow {
			next := &rateCount{start: now}
			if found && !l.windows.CompareAndSwap(key, w, next) {
				continue // another request opened the new window first: count in it
			}
			if !found {
				if _, loaded := l.windows.LoadOrStore(key, next); loaded {
					continue
				}
			}
			w = next
		}
		n := w.count.Add(1)
		if n > int64(l.limit) {
			return 0, w.start.Add(rateWindow).Sub(now), false
		}
		return l.limit - int(n), 0, true
	}
}

// sweep forgets, once a window, the keys that have been idle for a whole window.
func (l *rateLimiter) sweep(now time.Time) {
	last := l.swept.Load()
	if now.UnixNano()-last <= int64(rateWindow) || !l.swept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	l.windows.Range(func(k, v any) bool {
		if w := v.(*rateCount); now.Sub(w.start) >= rateWindow {
			l.windows.CompareAndDelete(k, w)
		}
		return true
	})
}

// limitRate applies the caller's key's limit: every answer carries
// X-Rate-Limit-Remaining; past the limit the request gets 429 with
// x-rate-limit-retry-after-seconds.
func (s *Server) limitRate(w http.ResponseWriter, c *caller, now time.Time) error {
	if s.limiter == nil {
		return nil
	}
	remaining, retry, ok := s.limiter.take(c.key.ID, now)
	w.Header().Set("X-Rate-Limit-Remaining", strconv.Itoa(remaining))
	if ok {
		return nil
	}
	secs := int(math.Ceil(retry.Seconds()))
	w.Header().Set("X-Rate-Limit-Retry-After-Seconds", strconv.Itoa(secs))
	return clouddb.Errorf(http.StatusTooManyRequests, "RATE_LIMIT_EXCEEDED",
		"more than %d requests in a minute with this API key; retry in %d seconds", s.limiter.limit, secs)
}
