// Package cloudapi serves the cloud management API (/v1): routes, authentication, the
// wire types (kept apart from the domain types), and the single error writer. Handlers
// validate the shape of a request and either answer from the store or enqueue a task;
// business rules belong to the processing phase (package task).
package cloudapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"clouddb"
)

// DefaultMaxBodyBytes caps request bodies; the largest real body is a few KB.
const DefaultMaxBodyBytes = 1 << 20

// Submitter enqueues tasks (the task engine).
type Submitter interface {
	Submit(ctx context.Context, t *clouddb.Task) error
}

// Server is the /v1 HTTP API.
type Server struct {
	Store clouddb.Store
	Tasks Submitter
	// AdvertiseHost is the host put in database endpoints.
	AdvertiseHost string
	// PublicEndpoint, if set, is a database's publicEndpoint (such as a Kubernetes load
	// balancer's address); nil means AdvertiseHost and the database's port.
	PublicEndpoint func(databaseID, port int) string
	// PrivateEndpoint, if set, is a database's privateEndpoint (the data plane's own
	// address for it, such as a Kubernetes Service's DNS name); nil means the public one.
	PrivateEndpoint func(databaseID, port int) string
	Logger          *slog.Logger
	Now             func() time.Time
	MaxBodyBytes    int64
	// RedisVersions are the versions offered; when it offers none,
	// clouddb.DefaultRedisVersion alone is.
	RedisVersions clouddb.RedisVersions
	// RateLimit is how many requests one API key may make per minute; 0 turns the limit
	// off.
	RateLimit int
	// LoginFailures is how many failed authentications one client address may make per
	// minute before its requests get 429; 0 means DefaultLoginFailures, a negative value
	// turns the throttle off.
	LoginFailures int
	// CA is the installation's certificate authority, whose certificate the databases'
	// certificate endpoint returns.
	CA clouddb.CertificateAuthority

	// mux holds the routes; serve is the same routes and a catch-all that answers what
	// none of them takes, so that a request is matched once (mux is kept for unrouted,
	// which needs the mux's own 404-or-405 verdict).
	mux     *http.ServeMux
	serve   *http.ServeMux
	limiter *rateLimiter
	logins  *loginThrottle
	// dummyKey is compared with the secret sent with an unknown key.
	dummyKey clouddb.APIKey
	auth     authCache
	views    viewCache
	// patterns are the routes registered, for the test that holds the OpenAPI document
	// to them.
	patterns []string
}

// Handler returns the API's http.Handler.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Now == nil {
		s.Now = func() time.Time { return time.Now().UTC() }
	}
	if s.MaxBodyBytes <= 0 {
		s.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if s.RateLimit > 0 {
		s.limiter = &rateLimiter{limit: s.RateLimit}
	}
	if s.LoginFailures == 0 {
		s.LoginFailures = DefaultLoginFailures
	}
	if s.LoginFailures > 0 {
		s.logins = &loginThrottle{limit: s.LoginFailures, windows: map[netip.Prefix]*keyWindow{}}
	}
	s.dummyKey = clouddb.APIKey{SecretDigest: clouddb.DigestSecret(rand.Text())}
	s.mux, s.serve = http.NewServeMux(), http.NewServeMux()
	s.handle("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.serve.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Not a route: the request metrics read an empty pattern as unmatched.
		r.Pattern = ""
		s.unrouted(w, r)
	})
	s.registerAccountRoutes()
	s.registerCloudAccountRoutes()
	s.registerSubscriptionRoutes()
	s.registerDatabaseRoutes()
	s.registerTaskRoutes()
	s.registerLogRoutes()
	s.registerACLRoutes()
	return http.HandlerFunc(s.serveHTTP)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	normalizePath(r)
	if r.Body != http.NoBody {
		// net/http gives a request without a body NoBody, which needs no cap.
		r.Body = http.MaxBytesReader(w, r.Body, s.MaxBodyBytes)
	}
	if hasDotSegment(r.URL.Path) {
		// The mux would answer a redirect to the cleaned path, with an HTML body.
		writeError(w, r, s.Logger, clouddb.Invalid(clouddb.ErrTypeBadRequest,
			"path %q has a . or .. segment: send the path without them", r.URL.Path))
		return
	}
	if r.RequestURI == "*" {
		// ServeMux answers a request for "*" itself, with an empty 400.
		s.unrouted(w, r)
		return
	}
	// normalizePath and hasDotSegment leave nothing for the mux to clean or redirect.
	s.serve.ServeHTTP(w, r)
}

// handle registers a route on both muxes.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, h)
	s.serve.HandleFunc(pattern, h)
}

// normalizePath maps the forms real clients send onto the routes: the /v1 prefix may be
// missing (the Go client's own tests use a bare base URL), a trailing slash on the base
// URL doubles slashes, and the Go client sends redis-versions?subscriptionId=N with the
// '?' percent-encoded inside the path.
func normalizePath(r *http.Request) {
	p := r.URL.Path
	if i := strings.IndexByte(p, '?'); i >= 0 {
		q := p[i+1:]
		p = p[:i]
		if r.URL.RawQuery != "" {
			q += "&" + r.URL.RawQuery
		}
		r.URL.RawQuery = q
	}
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	if p != "/healthz" && p != "/v1" && !strings.HasPrefix(p, "/v1/") {
		p = "/v1" + strings.TrimSuffix(p, "/")
	}
	r.URL.Path = p
	r.URL.RawPath = ""
}

// hasDotSegment reports whether a path has a "." or ".." segment.
func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// unrouted answers a request no route takes with the mux's status (404 or 405, with its
// Allow header) and a JSON body.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	h, _ := s.mux.Handler(r)
	h.ServeHTTP(rec, r)
	if allow := rec.Header().Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if rec.Code == http.StatusMethodNotAllowed {
		writeError(w, r, s.Logger, clouddb.Errorf(rec.Code, clouddb.ErrTypeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	writeError(w, r, s.Logger, clouddb.NotFound(clouddb.ErrTypeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// handler is the shape of every authenticated endpoint: it returns the status and body
// of a success, or an error for the single error writer.
type handler func(r *http.Request, c *caller) (int, any, error)

// route registers an authenticated endpoint under /v1. The answers of GET endpoints are
// cached until the store changes.
func (s *Server) route(pattern string, h handler) {
	s.register(pattern, h, strings.HasPrefix(pattern, "GET "))
}

// routeUncached registers an endpoint whose answer must be made every time: a GET that
// creates a task, or one that shows the caller's address.
func (s *Server) routeUncached(pattern string, h handler) { s.register(pattern, h, false) }

func (s *Server) register(pattern string, h handler, cached bool) {
	method, path, _ := strings.Cut(pattern, " ")
	full := method + " /v1" + path
	if path == "/" {
		full = method + " /v1"
	}
	s.patterns = append(s.patterns, full)
	s.handle(full, func(w http.ResponseWriter, r *http.Request) {
		// One reading of the clock serves the throttle, the key cache and the limiter.
		now := s.Now()
		addr := clientPrefix(r)
		err := s.checkLogin(w, addr, now)
		var c *caller
		if err == nil {
			c, err = s.authenticate(r, now)
			if err == errUnauthorized && s.logins != nil && header(r, "X-Api-Key") != "" {
				s.logins.fail(addr, now)
			}
		}
		if err == nil {
			err = s.limitRate(w, c, now)
		}
		if err != nil {
			writeError(w, r, s.Logger, err)
			return
		}
		var keyBuf [256]byte
		var key []byte
		var version uint64
		if cached {
			// The version is read before the store is, so that a write that lands
			// meanwhile makes the cached answer stale rather than wrong.
			version = s.Store.Version()
			key = viewKey(keyBuf[:0], c.account.ID, r)
			if v, ok := s.views.get(key, version); ok {
				writeBytes(w, v.status, v.body)
				return
			}
		}
		status, body, err := h(r, c)
		if err != nil {
			writeError(w, r, s.Logger, err)
			return
		}
		b, err := encode(body)
		if err != nil {
			writeError(w, r, s.Logger, err)
			return
		}
		if cached {
			s.views.put(string(key), view{version: version, status: status, body: b})
		}
		writeBytes(w, status, b)
	})
}

// viewKey appends to b the cache key of r's answer for the account: the answer depends
// on the account, the base URL its links are made of (scheme and host) and the path and
// query. It is built in the caller's buffer, so that a cached answer costs no allocation.
func viewKey(b []byte, accountID int, r *http.Request) []byte {
	b = strconv.AppendInt(b, int64(accountID), 10)
	b = append(b, ' ')
	if r.TLS != nil {
		b = append(b, "https://"...)
	} else {
		b = append(b, "http://"...)
	}
	b = append(b, r.Host...)
	b = append(b, "/v1"...)
	b = append(b, r.URL.Path...)
	b = append(b, '?')
	return append(b, r.URL.RawQuery...)
}

// encode renders a body as the API sends it: JSON and a newline.
func encode(body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := encode(body)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"type":"GENERAL_ERROR","status":500,"description":"internal error"}}`+"\n")
	}
	writeBytes(w, status, b)
}

// jsonContentType is the Content-Type header's value, shared by every answer (net/http
// only reads it) rather than allocated for each.
var jsonContentType = []string{"application/json"}

func writeBytes(w http.ResponseWriter, status int, b []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(b) // it fails only when the client has gone: there is no one left to tell
}

// errorBody is the envelope of every synchronous error.
type errorBody struct {
	Error errorView `json:"error"`
}

type errorView struct {
	Type        string `json:"type"`
	Status      int    `json:"status"`
	Description string `json:"description"`
}

// writeError is the single error writer: domain errors go out as they are, a missing row
// as 404, an oversized body as 413; anything else is logged and answered with a generic
// 500 that leaks nothing.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	e := clouddb.AsError(err)
	var tooBig *http.MaxBytesError
	switch {
	case e != nil:
		if e.Status >= http.StatusInternalServerError {
			// An outage or a full disk: worth a line, with the cause the answer omits.
			logger.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
		}
	case errors.As(err, &tooBig):
		e = clouddb.Errorf(http.StatusRequestEntityTooLarge, "REQUEST_TOO_LARGE", "request body is larger than %d bytes", tooBig.Limit)
	case errors.Is(err, clouddb.ErrNotFound):
		e = clouddb.NotFound(clouddb.ErrTypeNotFound, "not found")
	case r.Context().Err() != nil && errors.Is(err, r.Context().Err()):
		// The client went away mid-request: nothing failed on this side, and nobody
		// reads the answer (499, as proxies log it).
		logger.Debug("request cancelled by the client", "method", r.Method, "path", r.URL.Path)
		e = clouddb.Errorf(499, "CLIENT_CLOSED_REQUEST", "the client closed the request")
	default:
		logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		e = clouddb.Errorf(http.StatusInternalServerError, clouddb.ErrTypeGeneral, "internal error")
	}
	writeJSON(w, e.Status, errorBody{errorView{Type: e.Type, Status: e.Status, Description: e.Description}})
}

// pathID reads an integer path parameter.
func pathID(r *http.Request, name string) (int, error) {
	v := r.PathValue(name)
	id, err := strconv.Atoi(v)
	if err != nil || id <= 0 {
		return 0, clouddb.Invalid(clouddb.ErrTypeInvalidField, "path parameter %s must be a positive integer, got %q", name, v)
	}
	return id, nil
}

// queryInt reads an optional integer query parameter within [lo, hi].
func queryInt(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, clouddb.Invalid(clouddb.ErrTypeInvalidField, "query parameter %s must be an integer from %d to %d, got %q", name, lo, hi, v)
	}
	return n, nil
}

// decodeBody decodes a required JSON object body into v, turning every decoding failure
// into a 400 that names the field, or a 413 for an oversized body. Anything but an object
// is refused: encoding/json would read `null` as an empty object.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return bodyError(err)
	}
	if raw[0] != '{' {
		return clouddb.Invalid(clouddb.ErrTypeMalformedBody, "request body must be a JSON object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			// encoding/json names the field by Go struct and without array indices
			// (DatabaseSpec.alerts.value): name it as it is on the wire instead.
			return clouddb.Invalid(clouddb.ErrTypeInvalidField, "field %s: expected %s, got %s",
				wirePath(raw, typ.Offset, typ.Field), jsonKind(typ.Type.String()), typ.Value)
		}
		return bodyError(err)
	}
	if dec.More() {
		return clouddb.Invalid(clouddb.ErrTypeMalformedBody, "request body must hold a single JSON object")
	}
	return nil
}

// decodeOptionalBody is decodeBody for endpoints whose body may be absent (the real
// clients send POST …/backup with none, but with Content-Type: application/json).
func decodeOptionalBody(r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return bodyError(err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return decodeBody(r, v)
}

func bodyError(err error) error {
	var (
		syntax  *json.SyntaxError
		typ     *json.UnmarshalTypeError
		tooBig  *http.MaxBytesError
		invalid *fieldError
	)
	switch {
	case errors.Is(err, io.EOF):
		return clouddb.Invalid(clouddb.ErrTypeMalformedBody, "a JSON request body is required")
	case errors.As(err, &tooBig):
		return err
	case errors.As(err, &syntax):
		return clouddb.Invalid(clouddb.ErrTypeMalformedBody, "malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return clouddb.Invalid(clouddb.ErrTypeMalformedBody, "request body must be a JSON object, not %s", typ.Value)
		}
		return clouddb.Invalid(clouddb.ErrTypeInvalidField, "field %s: expected %s, got %s", typ.Field, jsonKind(typ.Type.String()), typ.Value)
	case errors.As(err, &invalid):
		return clouddb.Invalid(clouddb.ErrTypeInvalidField, "%s", invalid.Error())
	}
	return clouddb.Invalid(clouddb.ErrTypeMalformedBody, "malformed JSON: %v", err)
}

// wirePath is the path, as the wire names it (databases[0].alerts[1].value), of the
// value of raw that encoding/json refused at offset: the first value whose opening
// token (for an object or an array) or whole literal ends at or past offset. When raw
// cannot be walked, goField is used without its Go type names.
func wirePath(raw []byte, offset int64, goField string) string {
	type frame struct {
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []*frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	// next moves the innermost container past a value that ended.
	next := func() {
		if n := len(stack); n > 0 {
			if f := stack[n-1]; f.array {
				f.index++
			} else {
				f.wantKey = true
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			next()
			continue
		}
		if top != nil && !top.array && top.wantKey {
			top.key, _ = tok.(string)
			top.wantKey = false
			continue
		}
		here, past := path(), dec.InputOffset() >= offset
		if d, ok := tok.(json.Delim); ok {
			if past {
				return here
			}
			stack = append(stack, &frame{array: d == '[', wantKey: d == '{'})
			continue
		}
		if past {
			return here
		}
		next()
	}
	var kept []string
	for _, part := range strings.Split(goField, ".") {
		if part != "" && (part[0] < 'A' || part[0] > 'Z') {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, ".")
}

// fieldError is returned by custom decoders of a field.
type fieldError struct{ field, rule string }

func (e *fieldError) Error() string { return "field " + e.field + ": " + e.rule }

func jsonKind(goType string) string {
	goType = strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return "an object"
}
