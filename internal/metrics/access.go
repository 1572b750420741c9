package metrics

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Guard lets a request reach next when it comes from a loopback address, or, when token
// is set, when it carries "Authorization: Bearer <token>". The metrics span every
// tenant: anyone else gets 403 (401 when a token could let them in).
func Guard(token string, next http.Handler) http.Handler {
	check := Checker(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if check(r) {
			next.ServeHTTP(w, r)
			return
		}
		if token == "" {
			refuse(w, http.StatusForbidden, "the metrics are served to loopback clients only; start clouddb with --metrics-token (or CLOUDDB_METRICS_TOKEN) to let others in with that bearer token")
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="clouddb metrics"`)
		refuse(w, http.StatusUnauthorized, "the metrics need header Authorization: Bearer <the --metrics-token>")
	})
}

// Checker returns what Guard asks of a request: whether it comes from a loopback
// address, or carries "Authorization: Bearer <token>" when token is set. Whatever spans
// every tenant is shown only to such a client (an operator).
func Checker(token string) func(*http.Request) bool {
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) bool {
		if loopback(r.RemoteAddr) {
			return true
		}
		if token == "" {
			return false
		}
		// The scheme is case-insensitive; the token is not.
		scheme, given, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer")
		// Digests of equal length: the comparison says nothing of the token's length.
		got := sha256.Sum256([]byte(given))
		return ok && subtle.ConstantTimeCompare(got[:], want[:]) == 1
	}
}

// loopback reports whether a request's remote address ("ip:port") is a loopback one.
func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": code, "error": msg})
}
