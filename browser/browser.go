// Package browser serves the local API of the database browser (spec/browser-api.md):
// connection records for standalone, cluster and sentinel-monitored databases, TLS client
// certificate/key pairs, and read-only browsing of the keys of a registered connection.
//
// The API has no authentication, so it is meant for a loopback listener, and it refuses
// (403) every request whose Host is not a loopback name or that carries an Origin whose
// host is not loopback: a web page cannot reach it by DNS rebinding or cross-site requests.
//
// Routes (each also answers with a trailing slash):
//
//	POST   /api/tls-client-cert         {name, cert, key} → 201 {"certificate": {id, name}}
//	GET    /api/tls-client-cert         → 200 {"certificates": [{id, name}]}
//	DELETE /api/tls-client-cert/{id}    → 204; 409 while a connection uses the pair
//	POST   /api/certificates/ca         {name, certificate} → 201 {id, name}
//	GET    /api/certificates/ca         → 200 [{id, name}]
//	DELETE /api/certificates/ca/{id}    → 204; 409 while a connection uses it
//	POST   /api/db[?test=false]         connection record → 201 the stored record
//	GET    /api/db                      → 200 {"dbs": [record]}
//	GET    /api/db/{id}                 → 200 record
//	DELETE /api/db/{id}                 → 204
//	PATCH  /api/db/{id}[?test=false]    some fields of a record → 200 the stored record
//	POST   /api/db/test/{id}            optional unsaved changes → 200 {version, nodes, master}
//	GET    /api/db/{id}/overview        → 200 {version, mode, totalKeys, usedMemory, connectedClients, opsPerSecond, …}
//	GET    /api/db/{id}/keys            ?match=&type=&cursor=&count= → 200 {cursor, total, scanned, keys}
//	GET    /api/db/{id}/keys/{key}      ?cursor=&count= → 200 {name, type, ttl, length, value, cursor, truncated}
//	POST   /api/redis-sentinel/get-databases  {host, port, password, tls} → 200 [{name, host, port, status, numberOfSlaves, nodes}]
//
// The same listener serves a web UI at / (ui.go): server-rendered pages under /ui/ that
// call these handlers in process, behind the same guard.
//
// The key route takes the rest of the path, percent-decoded, as the key name, verbatim:
// there a trailing slash is part of the key. A key's count is in bytes for a string
// (default 64 KiB, at most 1 MiB) and in elements otherwise (default 100, at most 1000);
// its cursor is an offset for strings, lists and sorted sets, a SCAN cursor for hashes
// and sets, the last entry ID for streams; "0" means the value is complete, and
// truncated says when it is not. A cluster's key listing walks every primary under one
// opaque cursor. Names and values that are not UTF-8 show as {"base64": "..."}.
//
// Answers are bounded by bytes as well as by count: a page of a value holds at most
// 16 MiB of element bytes (before JSON encoding) and ends early, with truncated and a
// cursor, where that budget would be crossed; each string of an element (list item, set
// or sorted-set member, hash or stream field and value) is cut to 64 KiB. A cut element
// says so: a hash or stream field/value and a sorted-set member get "truncated": true and
// their full fieldLength, valueLength or memberLength; a list or set page lists its cut
// elements in "cutElements": [{index, length}]; "cut": true says that a page holds any.
// Elements are read and cut on the server by a read-only Lua script (EVAL), so a server
// that refuses scripting answers 424 to element reads. A key listing stops before a SCAN
// page that would take its names past 16 MiB, and shows a name longer than 64 KiB cut,
// with "truncated": true and its full "nameLength".
//
// A connection may not point at a link-local or cloud metadata address (169.254.0.0/16,
// fe80::/10, metadata.google.internal, …), as imports may not: the guard of package blob
// refuses it with a 400 ADDRESS_FORBIDDEN naming the host field, for a literal address
// or a metadata name always and for a name resolving to such an address when the
// connection is tested; every connection the API makes checks the address it dials, so
// a node a cluster or a sentinel names there answers 424 ADDRESS_FORBIDDEN. Loopback and
// private addresses are allowed.
//
// Before a connection record is saved, the connection is tested against the real server
// (unless ?test=false): STANDALONE connects, authenticates, PINGs and reads the server's
// mode (INFO server redis_mode), as the tool does: a sentinel is refused with a 400
// SENTINEL_AS_STANDALONE saying to register it as SENTINEL, and a cluster node is saved
// as a CLUSTER record whose seedNodes is that node, tested as such; CLUSTER connects to
// the first seed node that answers, checks cluster_state, discovers the nodes and PINGs
// each; SENTINEL asks the sentinel (with sentinelPassword) for the master serviceName
// names, then connects to it with authPass. A failure answers 424 and saves nothing, not
// even an inline new pair; its code names the cause: CONNECTION_UNREACHABLE,
// CONNECTION_AUTH_FAILED, CONNECTION_TLS_FAILED, NOT_A_CLUSTER, CLUSTER_STATE_NOT_OK,
// CLUSTER_NODES_UNREACHABLE, NOT_A_SENTINEL or CONNECTION_FAILED. A master group the
// sentinel does not monitor is the tool's 404 (SENTINEL_MASTER_UNKNOWN), whose message
// lists the groups it does monitor; POST /api/redis-sentinel/get-databases lists them
// (the sentinel given as host, port, password, or as a record's sentinelHost,
// sentinelPort, sentinelPassword; with tls) and stores nothing.
// Errors are JSON: {"statusCode", "error" (the HTTP reason phrase, "Bad Request", as the
// tool answers), "code" (a machine code), "message", "field" (when a field is at fault)}.
// No response ever holds a password, a certificate body or a private key: secrets show as
// true where set, and are sealed with the clouddb.Cipher in the store.
//
// Choices where the spec says "not shown":
//   - A request holds exactly the fields of its connectionType; any other field is a 400
//     naming it.
//   - The server's TLS certificate is verified only with tls.verifyServerCert true,
//     against tls.caCert ({id} of a stored CA certificate or {new: {name, certificate}})
//     or the system's roots, and must be issued for the host dialled; a server it does
//     not vouch for answers 424 SERVER_CERTIFICATE_REJECTED. caCert without
//     verifyServerCert is a 400 rather than a CA that verifies nothing. A duplicate CA
//     certificate name is a 400, as in RedisInsight (see ca_certificate.go).
//   - username (sentinelMaster.username and sentinelUsername for SENTINEL) names a
//     Redis 6+ ACL user: the connection authenticates with AUTH username password.
//   - tls.clientCertificateKeyPair is required when tls.clientAuth is true, and both need
//     tls.useTls. A pair id that does not exist is a 400 naming the field; a pair name
//     already taken is a 400 "This client certificate name is already in use." (the
//     tool's answer); a certificate that is malformed, expired or not yet valid, or a key
//     that is malformed, encrypted or does not match, is a 400 with its own code.
//   - Connection names are not unique (any string is valid); certificate names are.
//   - The list of connections is {"dbs": [...]}, as the tool's v1 answered; deletes
//     answer 204.
package browser

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"clouddb"
)

// maxBodyBytes caps request bodies: the largest real body holds a certificate chain and a
// private key, a few KB.
const maxBodyBytes = 1 << 20

// Config configures a Server.
type Config struct {
	// Path is the browser's own SQLite file, e.g. <data-dir>/browser.db.
	Path string
	// Cipher seals passwords, certificates and private keys at rest. Required.
	Cipher *clouddb.Cipher
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Resolver resolves the host names of connections; nil is net.DefaultResolver.
	Resolver *net.Resolver
}

// Server is the browser local API.
type Server struct {
	store    *store
	resolver *net.Resolver
	logger   *slog.Logger
	now      func() time.Time
	mux      *http.ServeMux
	// patterns are the API routes registered, for the test that holds the OpenAPI
	// document to them.
	patterns []string
}

// Open opens (creating if needed) the store at cfg.Path and returns the Server.
func Open(cfg Config) (*Server, error) {
	if cfg.Path == "" {
		return nil, errors.New("browser: Config.Path is required")
	}
	if cfg.Cipher == nil {
		return nil, errors.New("browser: Config.Cipher is required: secrets are encrypted at rest")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := openStore(cfg.Path, cfg.Cipher)
	if err != nil {
		return nil, err
	}
	s := &Server{store: st, resolver: cfg.Resolver, logger: cfg.Logger, now: func() time.Time { return time.Now().UTC() }}
	s.mux = http.NewServeMux()
	s.registerCertificateRoutes()
	s.registerCACertificateRoutes()
	s.registerConnectionRoutes()
	s.registerKeyRoutes()
	s.registerSentinelRoutes()
	s.registerRecordRoutes()
	s.registerUIRoutes()
	s.registerOpenAPIRoute()
	return s, nil
}

// Close closes the store.
func (s *Server) Close() error { return s.store.close() }

// Handler returns the API's http.Handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if err := CheckLocal(r); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if id, key, ok := keyPath(r.URL.EscapedPath()); ok {
		// Served outside the mux, which would clean "//" and "." segments out of a key.
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, r, s.logger, clouddb.Errorf(http.StatusMethodNotAllowed, clouddb.ErrTypeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
			return
		}
		r.SetPathValue("id", id)
		r.SetPathValue("key", key)
		s.serve(w, r, s.getKey)
		return
	}
	if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		r.URL.Path = strings.TrimSuffix(p, "/")
		r.URL.RawPath = strings.TrimSuffix(r.URL.RawPath, "/")
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.unrouted(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// keyPath splits an escaped path of the form /api/db/{id}/keys/{key} into its decoded id
// and key.
func keyPath(escaped string) (id, key string, ok bool) {
	rest, ok := strings.CutPrefix(escaped, "/api/db/")
	if !ok {
		return "", "", false
	}
	rawID, rawKey, ok := strings.Cut(rest, "/keys/")
	if !ok || rawID == "" || strings.Contains(rawID, "/") || rawKey == "" {
		return "", "", false
	}
	id, err1 := url.PathUnescape(rawID)
	key, err2 := url.PathUnescape(rawKey)
	if err1 != nil || err2 != nil {
		return "", "", false
	}
	return id, key, true
}

// unrouted answers a request no route takes with the mux's status (404, or 405 with its
// Allow header) and a JSON body.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	h, _ := s.mux.Handler(r)
	h.ServeHTTP(rec, r)
	if allow := rec.Header().Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if rec.Code == http.StatusMethodNotAllowed {
		writeError(w, r, s.logger, clouddb.Errorf(rec.Code, clouddb.ErrTypeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	writeError(w, r, s.logger, clouddb.NotFound(clouddb.ErrTypeNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// CheckLocal refuses requests that a web page could have sent: a Host that is not a
// loopback name (DNS rebinding), an Origin whose host is not loopback (cross-site), and a
// request a browser marks as coming from another site (Sec-Fetch-Site), which covers the
// GETs a page makes without an Origin (an image, a link, a script), some of which act
// (a connection test, a key read). Every unauthenticated loopback listener of clouddb
// guards itself with it.
func CheckLocal(r *http.Request) error {
	if !loopbackHost(r.Host) {
		return clouddb.Forbidden(errHostNotAllowed, "host %q is not a loopback name: the browser API answers only to localhost, 127.0.0.1 or [::1]", r.Host)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return clouddb.Forbidden(errOriginNotAllowed, "a request from another site (Sec-Fetch-Site: %s) is not allowed: only pages served from this listener may use it", site)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !loopbackHost(u.Host) {
			return clouddb.Forbidden(errOriginNotAllowed, "origin %q is not allowed: only pages served from a loopback host may call the browser API", origin)
		}
	}
	return nil
}

// loopbackHost reports whether hostport names the local machine: localhost, a name under
// .localhost, or a loopback IP address, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// handler is the shape of every endpoint: the status and body of a success, or an error
// for the single error writer. A nil body with 204 writes nothing.
type handler func(r *http.Request) (int, any, error)

func (s *Server) route(pattern string, h handler) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, h) })
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, h handler) {
	status, body, err := h(r)
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"statusCode":500,"error":"Internal Server Error","code":"GENERAL_ERROR","message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// Two writes rather than append(b, '\n'), which would copy a large answer again. A
	// failed write means the client went away: there is nobody to tell.
	_, _ = w.Write(b)
	_, _ = w.Write([]byte{'\n'})
}

// errorBody is the envelope of every error. Error is the HTTP reason phrase ("Bad
// Request"), as the tool's NestJS server answers; Code holds the machine code
// (INVALID_FIELD, CONNECTION_UNREACHABLE, ...).
type errorBody struct {
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	Field      string `json:"field,omitempty"`
}

// writeError is the single error writer: domain errors go out as they are, an oversized
// body as 413; anything else is logged and answered with a generic 500 that leaks nothing.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	var (
		fe     *fieldError
		tooBig *http.MaxBytesError
		field  string
	)
	if errors.As(err, &fe) {
		field = fe.field
	}
	e := clouddb.AsError(err)
	switch {
	case e != nil:
	case errors.As(err, &tooBig):
		e = clouddb.Errorf(http.StatusRequestEntityTooLarge, "REQUEST_TOO_LARGE", "request body is larger than %d bytes", tooBig.Limit)
	case r.Context().Err() != nil && errors.Is(err, r.Context().Err()):
		// The client went away mid-request (a connection test it stopped waiting for):
		// nothing failed here, and nobody reads the answer.
		logger.Debug("browser: request cancelled by the client", "method", r.Method, "path", r.URL.Path)
		e = clouddb.Errorf(499, "CLIENT_CLOSED_REQUEST", "the client closed the request")
	default:
		logger.Error("browser: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		e = clouddb.Errorf(http.StatusInternalServerError, clouddb.ErrTypeGeneral, "internal error")
	}
	writeJSON(w, e.Status, errorBody{StatusCode: e.Status, Error: reasonPhrase(e.Status), Code: e.Type, Message: e.Description, Field: field})
}

// fieldError is a client error caused by one field of the request; the error body names
// the field.
type fieldError struct {
	err   *clouddb.Error
	field string
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// fieldErr returns a fieldError of the given status and type whose message starts with
// the field's path.
func fieldErr(status int, typ, field, format string, args ...any) error {
	return &fieldError{err: clouddb.Errorf(status, typ, "%s: %s", field, fmt.Sprintf(format, args...)), field: field}
}

// invalid is a 400 INVALID_FIELD naming the field and the rule it breaks.
func invalid(field, format string, args ...any) error {
	return fieldErr(http.StatusBadRequest, clouddb.ErrTypeInvalidField, field, format, args...)
}

// Error types of the browser API, besides the shared ones in package clouddb.
const (
	errHostNotAllowed          = "HOST_NOT_ALLOWED"
	errOriginNotAllowed        = "ORIGIN_NOT_ALLOWED"
	errConnectionNotFound      = "CONNECTION_NOT_FOUND"
	errCertificateNotFound     = "CERTIFICATE_NOT_FOUND"
	errCertificateInUse        = "CERTIFICATE_IN_USE"
	errCertificateNameTaken    = "CERTIFICATE_NAME_TAKEN"
	errCertificateMalformed    = "CERTIFICATE_MALFORMED"
	errCertificateExpired      = "CERTIFICATE_EXPIRED"
	errCertificateNotYetValid  = "CERTIFICATE_NOT_YET_VALID"
	errKeyMalformed            = "PRIVATE_KEY_MALFORMED"
	errKeyMismatch             = "PRIVATE_KEY_MISMATCH"
	errKeyNotFound             = "KEY_NOT_FOUND"
	errInvalidCursor           = "INVALID_CURSOR"
	errUnreachable             = "CONNECTION_UNREACHABLE"
	errAuthFailed              = "CONNECTION_AUTH_FAILED"
	errTLSFailed               = "CONNECTION_TLS_FAILED"
	errConnectionFailed        = "CONNECTION_FAILED"
	errNotACluster             = "NOT_A_CLUSTER"
	errClusterStateNotOK       = "CLUSTER_STATE_NOT_OK"
	errClusterNodesUnreachable = "CLUSTER_NODES_UNREACHABLE"
	errNotASentinel            = "NOT_A_SENTINEL"
	errSentinelMasterUnknown   = "SENTINEL_MASTER_UNKNOWN"
	errAddressForbidden        = "ADDRESS_FORBIDDEN"
)
