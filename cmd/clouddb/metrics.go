package main

import "net/http"

// mountMetrics serves /metrics. (Stub: owned by the metrics work.)
func (m *Main) mountMetrics(mux *http.ServeMux) {}

// instrumentAPI counts the cloud API's requests. (Stub: owned by the metrics work.)
func (m *Main) instrumentAPI(api http.Handler) http.Handler { return api }
