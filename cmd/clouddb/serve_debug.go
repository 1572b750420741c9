package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strings"
)

// validateDebugListen checks --debug-listen: the profiles show what the process does and
// holds (the heap may hold secrets), so they are served on loopback only, without
// authentication, as the browser API is.
func validateDebugListen(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--debug-listen %q: want HOST:PORT", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--debug-listen %q: the profiles have no authentication and are served on loopback only", addr)
	}
	return nil
}

// boundToLoopback refuses a listener bound beyond loopback: a name such as localhost
// that resolves elsewhere on some host passes validateDebugListen.
func boundToLoopback(a net.Addr) error {
	if tcp, ok := a.(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		return fmt.Errorf("bound to %s, not a loopback address: the profiles are served on loopback only", a)
	}
	return nil
}

// debugHandler serves Go's profiles under /debug/pprof/ (go tool pprof reads them).
// A loopback listener is reachable by the web pages open on the machine too: a request
// whose Host is not a loopback name (DNS rebinding, which would let a page read the
// command line and the profiles) or that a browser marks as sent by another site (which
// could start a CPU profile or a trace) is refused, as the browser API refuses them.
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !debugLocal(r) {
			http.Error(w, "the profiles answer only to requests for a loopback host, not sent by a web page of another site", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// debugLocal reports whether r names a loopback host and was not sent by another site's
// page (its Origin, or its Sec-Fetch-Site, which covers the GETs a page makes without one).
func debugLocal(r *http.Request) bool {
	if !debugLoopbackHost(r.Host) {
		return false
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !debugLoopbackHost(u.Host) {
			return false
		}
	}
	return true
}

// debugLoopbackHost reports whether hostport names the local machine: localhost, a name
// under .localhost, or a loopback IP address, with or without a port.
func debugLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
