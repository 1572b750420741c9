package main

import (
	"net/http"

	"clouddb/console"
)

// mountConsole serves the web console at GET / and under /console/ (package console). It
// calls the cloud API's handler (api) in process. GET / with an API key header still
// reaches the API's account endpoint (api is the counted handler the mux has at /).
func (m *Main) mountConsole(mux *http.ServeMux, api http.Handler) {
	console.New(api, m.logger).Register(mux, api)
}
