package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
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

// debugHandler serves Go's profiles under /debug/pprof/ (go tool pprof reads them).
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}
