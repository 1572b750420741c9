package main

import "net/http"

// apiListenerHandler is everything the API listener serves: the cloud API (/v1, and the
// bare paths it normalises onto /v1), and beside it the console at /, the OpenAPI
// documents and their docs page, /metrics, /healthz and /readyz. api is the cloud API's
// handler; the console calls it in process, counted in the request metrics like any
// other client.
func (m *Main) apiListenerHandler(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	counted := m.instrumentAPI(api)
	mux.Handle("/", counted)
	m.mountHealth(mux)
	m.mountMetrics(mux)
	m.mountOpenAPI(mux)
	m.mountConsole(mux, counted)
	return mux
}
