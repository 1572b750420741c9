package cloudapi

import (
	"net/netip"
	"strings"

	"clouddb"
)

// LimitCache sets the answer cache's byte budget and per-answer cap.
func LimitCache(budget, entryMax int64) func(*Server) {
	return func(s *Server) { s.views.budget, s.views.entryMax = budget, entryMax }
}

// CacheSize reports the entries and bytes the answer cache holds.
func CacheSize(s *Server) (int, int64) { return s.views.size() }

// Cached reports whether an answer to a request whose path and query end with suffix is
// in the cache.
func Cached(s *Server, suffix string) bool {
	s.views.mu.Lock()
	defer s.views.mu.Unlock()
	for k := range s.views.m {
		if strings.HasSuffix(k, suffix) {
			return true
		}
	}
	return false
}

// WatchSecretMatches calls f with the key every secret is compared with, until restore.
// Tests that use it must not run in parallel.
func WatchSecretMatches(f func(*clouddb.APIKey)) (restore func()) {
	orig := matchSecret
	matchSecret = func(k *clouddb.APIKey, secret string) bool {
		f(k)
		return orig(k, secret)
	}
	return func() { matchSecret = orig }
}

// FailLogins records one failed authentication from each of n distinct addresses.
func FailLogins(s *Server, n int) {
	for i := range n {
		s.logins.fail(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), s.Now())
	}
}

// LoginAddresses is how many addresses the failed-login throttle remembers.
func LoginAddresses(s *Server) int {
	s.logins.mu.Lock()
	defer s.logins.mu.Unlock()
	return len(s.logins.windows)
}

// MaxLoginAddresses is maxLoginAddresses.
const MaxLoginAddresses = maxLoginAddresses
