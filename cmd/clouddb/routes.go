package main

import (
	"net/http"
	"path"
	"strings"
)

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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if apiPath(r.URL.Path) {
			// Most requests: matching them against the pages would only find "/".
			counted.ServeHTTP(w, r)
			return
		}
		// A path this mux would clean first (a doubled slash from a base URL ending in
		// "/", a dot segment) would be answered with its HTML redirect: the cloud API
		// takes every path that is not exactly one of the pages above, and answers it as
		// it always has (normalised, or a JSON 400 for dot segments).
		if _, pattern := mux.Handler(r); pattern == "/" || pattern == "" {
			counted.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// apiPath reports whether p is, for the listener's mux, certainly the cloud API's: under
// /v1/, not the one page there (/v1/openapi.json), and clean (the mux would redirect an
// unclean path to the page it cleans to).
func apiPath(p string) bool {
	return strings.HasPrefix(p, "/v1/") && p != openAPIPath && path.Clean(p) == p
}
