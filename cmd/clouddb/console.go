package main

import "net/http"

// mountConsole serves the console at /. (Stub: owned by the console work.)
func (m *Main) mountConsole(mux *http.ServeMux, api http.Handler) {}
