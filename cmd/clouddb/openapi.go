package main

import "net/http"

// mountOpenAPI serves /v1/openapi.json and the API docs page. (Stub: owned by the OpenAPI
// work.)
func (m *Main) mountOpenAPI(mux *http.ServeMux) {}
