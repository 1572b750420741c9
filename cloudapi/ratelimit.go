package cloudapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"clouddb"
)

// DefaultRateLimit is the real API's limit: 400 requests per minute per API key.
const DefaultRateLimit = 400

// rateWindow is the length of a rate-limit window.
const rateWindow = time.Minute

// rateLimiter counts requests per API key in fixed one-minute windows, the model the
// official client's own limiter follows, so its X-Rate-Limit-Remaining bookkeeping agrees
// with ours.
type rateLimiter struct {
	limit int

	mu      sync.Mutex
	windows map[int]*keyWindow
	swept   time.Time
}

type keyWindow struct {
	start time.Time
	count int
}

// take counts one request of key and reports what is left of its window, and, when none
// is, how long until the next window opens.
func (l *rateLimiter) take(key int, now time.Time) (remaining int, retryAfter time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > rateWindow {
		// Forget keys that have been idle for a whole window.
		for k, w := range l.windows {
			if now.Sub(w.start) >= rateWindow {
				delete(l.windows, k)
			}
		}
		l.swept = now
	}
	w := l.windows[key]
	if w == nil || now.Sub(w.start) >= rateWindow {
		w = &keyWindow{start: now}
		l.windows[key] = w
	}
	if w.count >= l.limit {
		return 0, w.start.Add(rateWindow).Sub(now), false
	}
	w.count++
	return l.limit - w.count, 0, true
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
