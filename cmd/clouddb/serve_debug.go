package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"clouddb/browser"
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
		if err := browser.CheckLocal(r); err != nil {
			http.Error(w, "the profiles answer only to requests for a loopback host, not sent by a web page of another site", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}
