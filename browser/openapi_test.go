package browser

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/apitest"
)

// TestOpenAPIJSONUpToDate fails when openapi.json is not the JSON form of openapi.yaml:
// run go generate ./browser.
func TestOpenAPIJSONUpToDate(t *testing.T) {
	src, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	want, err := apitest.YAMLToJSON(src)
	require.NoError(t, err)
	require.True(t, string(want) == string(OpenAPI()), "openapi.json is stale: run go generate ./browser")
}

func openTestServer(t *testing.T) *Server {
	t.Helper()
	key, err := clouddb.ParseKey(clouddb.NewKey())
	require.NoError(t, err)
	cipher, err := clouddb.NewCipher(key)
	require.NoError(t, err)
	s, err := Open(Config{Path: filepath.Join(t.TempDir(), "browser.db"), Cipher: cipher})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// TestOpenAPICoversRoutes holds the document to the API's routes: every route is
// documented (with its path parameters' names) and every documented operation is a
// route; the document validates.
func TestOpenAPICoversRoutes(t *testing.T) {
	doc, err := apitest.Load(OpenAPI())
	require.NoError(t, err)
	require.Len(t, doc.Servers, 1)
	require.Equal(t, "/api", doc.Servers[0].URL)

	s := openTestServer(t)
	// The key route is served outside the mux (serveHTTP), so that the key keeps its
	// slashes and dots.
	const keyRoute = "GET /api/db/{id}/keys/{key}"
	id, key, ok := keyPath("/api/db/7/keys/a%2Fb/")
	require.True(t, ok)
	require.Equal(t, []string{"7", "a/b/"}, []string{id, key})
	var registered []string
	for _, p := range append(slices.Clone(s.patterns), keyRoute) {
		method, path, _ := strings.Cut(p, " ")
		registered = append(registered, method+" "+strings.TrimPrefix(path, "/api"))
	}
	slices.Sort(registered)
	documented := apitest.Operations(doc)
	slices.Sort(documented)
	require.Equal(t, registered, documented, "routes registered (left) and operations documented (right) differ")
}

// TestOpenAPIServed: GET /api/openapi.json answers the document, cacheable by its ETag,
// behind the listener's guard.
func TestOpenAPIServed(t *testing.T) {
	s := openTestServer(t)
	h := s.Handler()

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, string(OpenAPI()), rec.Body.String())
	etag := rec.Header().Get("ETag")
	require.NotEmpty(t, etag)

	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/openapi.json", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotModified, rec.Code)
	require.Empty(t, rec.Body.String())

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://evil.example/api/openapi.json", nil))
	require.Equal(t, http.StatusForbidden, rec.Code, "the guard applies to the document too")
}
