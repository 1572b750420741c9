package main

import "net/http"

// mountHealth serves /healthz and /readyz. (Stub: owned by the metrics work.)
func (m *Main) mountHealth(mux *http.ServeMux) {}
