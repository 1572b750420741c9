package cloudapi

import (
	"errors"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"clouddb"
)

// caller is the authenticated account and key of a request.
type caller struct {
	account *clouddb.Account
	key     *clouddb.APIKey
}

var errUnauthorized = clouddb.Errorf(http.StatusUnauthorized, clouddb.ErrTypeUnauthorized,
	"authentication failed: send a valid x-api-key and x-api-secret-key")

// authenticate checks the key pair. An unknown key and a wrong secret get the same answer
// after the same work: the lookup result is cached either way, and a secret is compared
// in constant time on its digest, against a dummy digest when the key is unknown.
func (s *Server) authenticate(r *http.Request, now time.Time) (*caller, error) {
	key, secret := header(r, "X-Api-Key"), header(r, "X-Api-Secret-Key")
	if key == "" || secret == "" {
		return nil, errUnauthorized
	}
	e, ok := s.auth.get(key, now)
	if !ok && len(key) > maxKeyLength {
		// No key is that long: not looked up, nor cached (the cache would hold it).
		ok = true
	}
	if !ok {
		err := s.Store.View(r.Context(), func(tx clouddb.Tx) error {
			k, err := tx.APIKey(r.Context(), key)
			if err != nil {
				return err
			}
			a, err := tx.Account(r.Context(), k.AccountID)
			if err != nil {
				return err
			}
			e = authEntry{key: k, account: a, caller: &caller{account: a, key: k}}
			return nil
		})
		if err != nil && !errors.Is(err, clouddb.ErrNotFound) {
			return nil, err
		}
		// An unknown key is cached too (key nil), so that it costs what a known one does.
		e.at = s.Now()
		s.auth.put(key, e)
	}
	k := e.key
	if k == nil {
		k = &s.dummyKey
	}
	if !matchSecret(k, secret) || e.key == nil {
		return nil, errUnauthorized
	}
	return s.authorize(r, e.caller)
}

// header is r.Header.Get(name) for a name already in canonical form, which Get would
// canonicalize again (allocating for the lower-case names clients send).
func header(r *http.Request, name string) string {
	if v := r.Header[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// maxKeyLength is far above the length of the keys clouddb makes.
const maxKeyLength = 256

// matchSecret is (*clouddb.APIKey).MatchSecret; tests watch it.
var matchSecret = (*clouddb.APIKey).MatchSecret

// authorize checks the plan and the key's role.
func (s *Server) authorize(r *http.Request, c *caller) (*caller, error) {
	if !c.account.Plan.APIEnabled() {
		return nil, clouddb.Forbidden(clouddb.ErrTypeUnsupportedPlan,
			"the API is available for flexible and annual plans only; this account is on the %s plan", c.account.Plan)
	}
	// HEAD is a GET without the body: a read like any other.
	if c.key.Role == clouddb.RoleViewer && r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, clouddb.Forbidden(clouddb.ErrTypeForbidden, "this API key is read-only")
	}
	return c, nil
}

// DefaultLoginFailures is how many failed authentications one client address may make
// in a minute before its requests are refused.
const DefaultLoginFailures = 20

// loginWindow is the window failed authentications are counted in.
const loginWindow = time.Minute

// maxLoginAddresses bounds the addresses the throttle remembers.
const maxLoginAddresses = 10000

// loginThrottle counts failed authentications per client address in fixed windows: past
// the limit, every request from the address is refused until its window ends, so a key
// or a secret cannot be guessed at the speed of the network.
type loginThrottle struct {
	limit int
	// full counts the windows that reached the limit (ended or not): while there is none,
	// which is nearly always, no request needs the lock to know it is not blocked.
	full atomic.Int64

	mu      sync.Mutex
	windows map[netip.Prefix]*keyWindow
}

// keyWindow is one address's count of failures in its current window.
type keyWindow struct {
	start time.Time
	count int
}

// blocked reports whether addr has used up its failures, and for how long it stays so.
func (l *loginThrottle) blocked(addr netip.Prefix, now time.Time) (time.Duration, bool) {
	if l.full.Load() == 0 {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[addr]
	if w == nil || now.Sub(w.start) >= loginWindow || w.count < l.limit {
		return 0, false
	}
	return w.start.Add(loginWindow).Sub(now), true
}

// fail counts one failed authentication of addr.
func (l *loginThrottle) fail(addr netip.Prefix, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[addr]
	if w == nil || now.Sub(w.start) >= loginWindow {
		if w == nil && len(l.windows) >= maxLoginAddresses {
			l.makeRoom(now)
		}
		if w != nil {
			l.forget(w)
		}
		w = &keyWindow{start: now}
		l.windows[addr] = w
	}
	w.count++
	if w.count == l.limit {
		l.full.Add(1)
	}
}

// forget uncounts a window that is dropped.
func (l *loginThrottle) forget(w *keyWindow) {
	if w.count >= l.limit {
		l.full.Add(-1)
	}
}

// makeRoom forgets the windows that ended, and if too few have, addresses at random
// down to seven eighths of the bound (so that a flood of addresses sweeps the table once
// every thousand new ones, not at each): memory stays bounded.
func (l *loginThrottle) makeRoom(now time.Time) {
	for a, w := range l.windows {
		if now.Sub(w.start) >= loginWindow {
			l.forget(w)
			delete(l.windows, a)
		}
	}
	for a, w := range l.windows {
		if len(l.windows) < maxLoginAddresses*7/8 {
			break
		}
		l.forget(w)
		delete(l.windows, a)
	}
}

// clientPrefix is the address a request came from: an IPv4 address, or the /64 an IPv6
// address is in (one host usually holds a whole /64).
func clientPrefix(r *http.Request) netip.Prefix {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// checkLogin refuses a request from an address that failed to authenticate too often.
func (s *Server) checkLogin(w http.ResponseWriter, addr netip.Prefix, now time.Time) error {
	if s.logins == nil {
		return nil
	}
	wait, blocked := s.logins.blocked(addr, now)
	if !blocked {
		return nil
	}
	secs := strconv.Itoa(int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", secs)
	return clouddb.Errorf(http.StatusTooManyRequests, "TOO_MANY_FAILED_AUTHENTICATIONS",
		"more than %d failed authentications from this address in a minute; retry in %s seconds", s.logins.limit, secs)
}
