package cloudapi

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/internal/apitest"
)

// TestOpenAPIJSONUpToDate fails when openapi.json is not the JSON form of openapi.yaml:
// run go generate ./cloudapi.
func TestOpenAPIJSONUpToDate(t *testing.T) {
	src, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	want, err := apitest.YAMLToJSON(src)
	require.NoError(t, err)
	require.True(t, string(want) == string(OpenAPI()), "openapi.json is stale: run go generate ./cloudapi")
}

// TestOpenAPICoversRoutes holds the document to the routes the API registers: every
// route is documented (with its path parameters' names) and every documented operation
// is a route; the document validates.
func TestOpenAPICoversRoutes(t *testing.T) {
	doc, err := apitest.Load(OpenAPI())
	require.NoError(t, err)
	require.Len(t, doc.Servers, 1)
	require.Equal(t, "/v1", doc.Servers[0].URL)

	s := &Server{}
	s.Handler()
	var registered []string
	for _, p := range s.patterns {
		method, path, _ := strings.Cut(p, " ")
		path = strings.TrimPrefix(path, "/v1")
		if path == "" {
			path = "/"
		}
		registered = append(registered, method+" "+path)
	}
	slices.Sort(registered)
	require.NotEmpty(t, registered)

	documented := apitest.Operations(doc)
	slices.Sort(documented)
	require.Equal(t, registered, documented, "routes registered (left) and operations documented (right) differ")
}
