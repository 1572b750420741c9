package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/browser"
	"clouddb/cloudapi"
	"clouddb/internal/apitest"
)

// cloudAPIClient is an http.Client that checks every request and answer of the cloud API
// against its OpenAPI document, failing t on a mismatch (the listener's other endpoints,
// /healthz and the like, are left unchecked).
func cloudAPIClient(t *testing.T) *http.Client {
	return apitest.NewTransport(t, cloudapi.OpenAPI(), apitest.Options{MapURL: apitest.CloudPath,
		Skip: func(r *http.Request) bool { return !apitest.CloudAPI(r) }}).Client()
}

// browserAPIClient is the same for the browser local API (its web UI's pages are left
// unchecked).
func browserAPIClient(t *testing.T) *http.Client {
	return apitest.NewTransport(t, browser.OpenAPI(), apitest.Options{MapURL: apitest.BrowserPath,
		Skip: func(r *http.Request) bool { return !apitest.BrowserAPI(r) }}).Client()
}

// get fetches url with the given request headers (pairs of names and values).
func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// TestOpenAPIServed: the documents are served without authentication, as JSON that
// caches revalidate by ETag, on the API listener (/v1/openapi.json, and the browser
// API's under /docs/browser) and on the browser listener (/api/openapi.json); the
// cloud API's catch-all does not take /v1/openapi.json.
func TestOpenAPIServed(t *testing.T) {
	s := startService(t, t.TempDir(), options{})
	for _, c := range []struct {
		url  string
		want []byte
	}{
		{"http://" + s.m.Addr + "/v1/openapi.json", cloudapi.OpenAPI()},
		{"http://" + s.m.Addr + "/docs/browser/openapi.json", browser.OpenAPI()},
		{"http://" + s.m.BrowserAddr + "/api/openapi.json", browser.OpenAPI()},
	} {
		resp, body := get(t, c.url)
		require.Equal(t, http.StatusOK, resp.StatusCode, c.url)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), c.url)
		require.True(t, bytes.Equal(c.want, body), "%s serves the embedded document", c.url)
		require.True(t, json.Valid(body), c.url)
		etag := resp.Header.Get("ETag")
		require.NotEmpty(t, etag, c.url)

		resp, body = get(t, c.url, "If-None-Match", etag)
		require.Equal(t, http.StatusNotModified, resp.StatusCode, c.url)
		require.Empty(t, body, c.url)
	}
	// The rest of /v1 still needs the key pair.
	resp, _ := get(t, "http://"+s.m.Addr+"/v1/subscriptions")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// TestDocsPage: /docs and /docs/browser show every operation and schema of their
// document, server-rendered, without a script and under a strict CSP.
func TestDocsPage(t *testing.T) {
	s := startService(t, t.TempDir(), options{})
	for _, c := range []struct {
		page, json string
		doc        []byte
	}{
		{"/docs", "/v1/openapi.json", cloudapi.OpenAPI()},
		{"/docs/browser", "/docs/browser/openapi.json", browser.OpenAPI()},
	} {
		resp, body := get(t, "http://"+s.m.Addr+c.page)
		require.Equal(t, http.StatusOK, resp.StatusCode, c.page)
		require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "default-src 'none'")
		require.Contains(t, csp, "style-src 'self'")
		require.NotContains(t, csp, "script-src")
		page := string(body)
		require.NotContains(t, strings.ToLower(page), "<script")
		require.Contains(t, page, `href="`+c.json+`"`)

		doc, err := apitest.Load(c.doc)
		require.NoError(t, err)
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				require.Contains(t, page, `id="op-`+op.OperationID+`"`, "%s %s", method, path)
				require.Regexp(t, regexp.MustCompile(`<span class="method `+strings.ToLower(method)+`">`+method+`</span> <code class="path">`+
					regexp.QuoteMeta(doc.Servers[0].URL+path)+`</code>`), page, "%s %s", method, path)
				require.Contains(t, page, htmlText(op.Summary), "%s %s", method, path)
			}
		}
		for name := range doc.Components.Schemas {
			require.Contains(t, page, `id="schema-`+name+`"`)
		}
	}
	// A field of a nested schema, its description and a response of the error envelope.
	_, body := get(t, "http://"+s.m.Addr+"/docs")
	page := string(body)
	require.Contains(t, page, "cloudDetails")
	require.Contains(t, page, "<code>x-api-key</code>")
	require.Contains(t, page, `<a href="#schema-Error" class="type">Error</a>`)

	// A request body's fields are shown in place, required ones marked, those of an
	// allOf merged.
	_, body = get(t, "http://"+s.m.Addr+"/docs/browser")
	page = string(body)
	op := page[strings.Index(page, `id="op-createConnection"`):]
	op = op[:strings.Index(op, "</article>")]
	require.Contains(t, op, `<td class="mono depth0">connectionType <span class="req" title="required">*</span></td>`)
	require.Contains(t, op, `<td class="mono depth1">sentinelMaster.serviceName</td>`)

	resp, css := get(t, "http://"+s.m.Addr+"/docs/docs.css")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, string(css), ".operation")
}

// htmlText escapes s as html/template writes text.
func htmlText(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}
