package browser

import (
	"crypto/sha256"
	_ "embed" // the OpenAPI document
	"encoding/hex"
	"net/http"
)

// The OpenAPI 3.0 document of the API is written in openapi.yaml; openapi.json is its
// JSON form, which is what is served (GET /api/openapi.json) and what the tests validate
// the API's traffic against. TestOpenAPIJSONUpToDate fails when it is stale.
//
//go:generate go run ../internal/apitest/openapijson openapi.yaml openapi.json

//go:embed openapi.json
var openAPIJSON []byte

// OpenAPI returns the OpenAPI 3.0 document of the API, as JSON. The bytes are shared:
// callers must not modify them.
func OpenAPI() []byte { return openAPIJSON }

func (s *Server) registerOpenAPIRoute() {
	s.mux.HandleFunc("GET /api/openapi.json", serveDocument(openAPIJSON))
}

// serveDocument answers with doc, JSON that caches may keep and revalidate with its ETag
// (304 when it has not changed).
func serveDocument(doc []byte) http.HandlerFunc {
	sum := sha256.Sum256(doc)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("ETag", etag)
		h.Set("Cache-Control", "no-cache")
		if match := r.Header.Get("If-None-Match"); match == etag || match == "*" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/json")
		_, _ = w.Write(doc) // it fails only when the client has gone
	}
}
