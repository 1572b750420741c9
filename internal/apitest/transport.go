// Package apitest checks HTTP traffic against an OpenAPI 3 document in tests, so that the
// documents clouddb serves cannot drift from what its APIs do: a Transport validates
// every request a test sends and every answer it gets (github.com/getkin/kin-openapi),
// and reports what does not match with t.Errorf.
//
// The rule, which lets the tests of bad input run through it as well: a request that
// matches the document must get an answer the document describes for its status (an
// undocumented status is a failure); a request that does not match (an unknown path or
// method, a malformed parameter or body, missing credentials) must get a 4xx whose body
// is the document's error envelope (its schema named Error).
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Options configure a Transport.
type Options struct {
	// Base sends the requests; nil is http.DefaultTransport.
	Base http.RoundTripper
	// Skip leaves the requests it reports true for unchecked (pages beside the API).
	Skip func(*http.Request) bool
	// MapURL rewrites, on a copy of each request's URL, a form the server also accepts
	// onto the document's (see CloudPath).
	MapURL func(*url.URL)
}

// Transport is an http.RoundTripper that validates the traffic it carries.
type Transport struct {
	doc     *openapi3.T
	router  routers.Router
	errType *openapi3.Schema
	opts    Options

	mu   sync.Mutex
	t    TB
	done bool
}

// TB is the part of testing.TB a Transport uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

var _ TB = testing.TB(nil)

// NewTransport returns a Transport checking traffic against the OpenAPI document docJSON;
// it fails t at once when the document does not load or validate. Failures are reported
// until the test's cleanups run: a request made after that is only carried.
func NewTransport(t TB, docJSON []byte, opts Options) *Transport {
	t.Helper()
	doc, err := Load(docJSON)
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("apitest: router: %v", err)
	}
	errRef := doc.Components.Schemas["Error"]
	if errRef == nil || errRef.Value == nil {
		t.Fatalf("apitest: the document has no Error schema (the error envelope)")
	}
	if opts.Base == nil {
		opts.Base = http.DefaultTransport
	}
	v := &Transport{doc: doc, router: router, errType: errRef.Value, opts: opts, t: t}
	t.Cleanup(func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.done = true
	})
	return v
}

// Load parses an OpenAPI document and validates it.
func Load(docJSON []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docJSON)
	if err != nil {
		return nil, fmt.Errorf("load the document: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("the document is not valid: %w", err)
	}
	return doc, nil
}

// Client is an http.Client whose transport is v.
func (v *Transport) Client() *http.Client { return &http.Client{Transport: v} }

// errorf reports a failure, unless the test is over.
func (v *Transport) errorf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.done {
		v.t.Errorf(format, args...)
	}
}

// RoundTrip sends req and validates it and its answer.
func (v *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if v.opts.Skip != nil && v.opts.Skip(req) {
		return v.opts.Base.RoundTrip(req)
	}
	input, reqErr := v.validateRequest(req, body)

	resp, err := v.opts.Base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	respBody, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if err != nil {
		// The connection broke mid-answer: nothing to validate, the caller sees why.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(respBody), errReader{err}))
		return resp, nil
	}
	what := req.Method + " " + req.URL.RequestURI()
	if reqErr != nil {
		v.checkRefusal(what, reqErr, resp, respBody)
		return resp, nil
	}
	if req.Method == http.MethodHead {
		// A HEAD answer has no body to check, only its status.
		if input.Route.Operation.Responses.Status(resp.StatusCode) == nil && input.Route.Operation.Responses.Default() == nil {
			v.errorf("apitest: %s: the answer's status %d is not documented", what, resp.StatusCode)
		}
		return resp, nil
	}
	if err := openapi3filter.ValidateResponse(req.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                validationOptions(),
	}); err != nil {
		v.errorf("apitest: %s: the answer %d does not match the OpenAPI document: %s\nbody: %s", what, resp.StatusCode, clip([]byte(err.Error())), clip(respBody))
	}
	return resp, nil
}

// validateRequest validates req, whose body is body, against the document; it returns
// the input the answer's validation needs, or why the request does not match.
func (v *Transport) validateRequest(req *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	vreq := req.Clone(context.WithoutCancel(req.Context()))
	u := *req.URL
	if v.opts.MapURL != nil {
		v.opts.MapURL(&u)
	}
	vreq.URL = &u
	if vreq.Method == http.MethodHead {
		// HEAD is a GET without the body (RFC 9110): the servers answer it on every GET
		// route.
		vreq.Method = http.MethodGet
	}
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	if body == nil {
		vreq.Body = http.NoBody
	}
	route, params, err := v.router.FindRoute(vreq)
	if err != nil {
		return nil, err
	}
	input := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: validationOptions()}
	if err := openapi3filter.ValidateRequest(vreq.Context(), input); err != nil {
		return nil, err
	}
	return input, nil
}

// checkRefusal checks the answer to a request that does not match the document: a 4xx
// with the error envelope.
func (v *Transport) checkRefusal(what string, why error, resp *http.Response, body []byte) {
	if resp.StatusCode < 400 || resp.StatusCode > 499 {
		v.errorf("apitest: %s does not match the OpenAPI document (%s), yet it was answered %d, not a 4xx: fix the document or the server\nbody: %s",
			what, clip([]byte(why.Error())), resp.StatusCode, clip(body))
		return
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		v.errorf("apitest: %s: the %d answer is %q, not the JSON error envelope", what, resp.StatusCode, ct)
		return
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		v.errorf("apitest: %s: the %d answer is not JSON: %v\nbody: %s", what, resp.StatusCode, err, clip(body))
		return
	}
	if err := v.errType.VisitJSON(value, openapi3.VisitAsResponse(), openapi3.MultiErrors()); err != nil {
		v.errorf("apitest: %s: the %d answer is not the error envelope: %s\nbody: %s", what, resp.StatusCode, clip([]byte(err.Error())), clip(body))
	}
}

func validationOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		AuthenticationFunc:    requireCredentials,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{
			openapi3.EnableFormatValidation(),
			openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)),
		},
	}
}

// requireCredentials is the check of a security scheme: an API key scheme's header or
// query parameter must be there (whether it is right is the server's to say).
func requireCredentials(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s == nil || s.Type != "apiKey" {
		return nil
	}
	req := in.RequestValidationInput.Request
	var got string
	switch s.In {
	case "header":
		got = req.Header.Get(s.Name)
	case "query":
		got = req.URL.Query().Get(s.Name)
	case "cookie":
		if c, err := req.Cookie(s.Name); err == nil {
			got = c.Value
		}
	}
	if got == "" {
		return fmt.Errorf("no %s %s", s.In, s.Name)
	}
	return nil
}

// CloudPath maps the forms of a /v1 path that the cloud API accepts onto the documented
// ones, as the API's router does (cloudapi's normalizePath): the /v1 prefix may be
// missing, slashes doubled or trailing, and the Go client sends
// redis-versions?subscriptionId=N with the '?' percent-encoded in the path. The account
// is documented at "/" under the server URL /v1.
func CloudPath(u *url.URL) {
	p := u.Path
	if i := strings.IndexByte(p, '?'); i >= 0 {
		q := p[i+1:]
		p = p[:i]
		if u.RawQuery != "" {
			q += "&" + u.RawQuery
		}
		u.RawQuery = q
	}
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	if p != "/v1" && !strings.HasPrefix(p, "/v1/") {
		p = "/v1" + p
	}
	if p == "/v1" {
		p = "/v1/"
	}
	u.Path, u.RawPath = p, ""
}

// TrailingSlash maps a path with a trailing slash onto the one without, as the browser
// API answers both.
func TrailingSlash(u *url.URL) {
	if len(u.Path) > 1 && strings.HasSuffix(u.Path, "/") {
		u.Path = strings.TrimSuffix(u.Path, "/")
		u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	}
}

// clip shortens a body for a failure message.
func clip(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Operations lists the operations of a document as "METHOD /path" (the path as the
// document writes it, relative to its server URL), for comparing with the patterns a
// server registers.
func Operations(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	return out
}

// BrowserPath maps the forms of a path that the browser API accepts onto the documented
// ones, as its router does: a trailing slash is dropped, except in a key's path
// (/api/db/{id}/keys/{key}), where the rest of the path is the key, slashes included,
// which is escaped here into the one segment the document's {key} is.
func BrowserPath(u *url.URL) {
	escaped := u.EscapedPath()
	if rest, ok := strings.CutPrefix(escaped, "/api/db/"); ok {
		if id, key, ok := strings.Cut(rest, "/keys/"); ok && id != "" && !strings.Contains(id, "/") && key != "" {
			if k, err := url.PathUnescape(key); err == nil {
				u.RawPath = "/api/db/" + id + "/keys/" + url.PathEscape(k)
				u.Path, _ = url.PathUnescape(u.RawPath)
				return
			}
		}
	}
	TrailingSlash(u)
}

// BrowserAPI reports whether a request is one of the browser API's (under /api/), not
// one of its web UI's pages, nor the document itself.
func BrowserAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api/openapi.json"
}

// CloudAPI reports whether a request is one of the cloud API's, not one of the endpoints
// its listener serves beside it (health, readiness, metrics, the documents and their
// pages), which the typed client also reaches.
func CloudAPI(r *http.Request) bool {
	switch p := strings.TrimSuffix(r.URL.Path, "/"); {
	case p == "/healthz", p == "/readyz", p == "/metrics", p == "/v1/openapi.json":
		return false
	case p == "/docs", strings.HasPrefix(p, "/docs/"):
		return false
	}
	return true
}
