package cloudapi

import "strings"

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
