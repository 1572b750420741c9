package main

import (
	"net/http"
	"net/url"

	"clouddb/console"
)

// mountConsole serves the web console at GET / and under /console/ (package console). It
// calls the cloud API's handler (api) in process. GET / with an API key header still
// reaches the API's account endpoint, through the handler the mux already has at /.
func (m *Main) mountConsole(mux *http.ServeMux, api http.Handler) {
	root, pattern := mux.Handler(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/"}})
	if pattern == "" {
		root = api
	}
	console.New(api, m.logger).Register(mux, root)
}
