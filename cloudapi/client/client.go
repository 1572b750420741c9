// Package client is a typed client of clouddb's /v1 API, used by the CLI and the tests.
//
// Its wire types mirror the Redis Cloud API v1 as the official Go client
// (github.com/RedisLabs/rediscloud-go-api) reads and writes it: request fields are pointers
// omitted when unset, integers stay integers and timestamps are RFC 3339, so that a
// response the official client could not decode fails here too.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"time"
)

// Version is the client's version, reported in its User-Agent.
const Version = "0.1.0"

// DefaultPollInterval is how often the WaitFor helpers poll. It is short because the
// server is local and the tests wait on it; pass WithPollInterval for a remote server.
const DefaultPollInterval = 100 * time.Millisecond

// Client calls one clouddb server with one API key pair. It is safe for concurrent use.
type Client struct {
	baseURL   string
	apiKey    string
	secretKey string
	http      *http.Client
	userAgent string
	poll      time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (for example with a custom transport or timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent appends s to the User-Agent, as the official client's AdditionalUserAgent
// does, so the server's logs tell callers apart.
func WithUserAgent(s string) Option {
	return func(c *Client) { c.userAgent += " " + s }
}

// WithPollInterval sets how often the WaitFor helpers poll.
func WithPollInterval(d time.Duration) Option { return func(c *Client) { c.poll = d } }

// New returns a client of the API at baseURL, e.g. "http://127.0.0.1:8080/v1". Paths are
// appended to baseURL by plain concatenation, as the official client does, so a trailing
// slash yields a doubled slash (which the server tolerates). An empty apiKey or secretKey
// is not sent at all, which lets tests check the answer to a missing header.
func New(baseURL, apiKey, secretKey string, opts ...Option) *Client {
	c := &Client{
		baseURL:   baseURL,
		apiKey:    apiKey,
		secretKey: secretKey,
		http:      http.DefaultClient,
		userAgent: fmt.Sprintf("clouddb-client/%s (%s; %s; %s)", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH),
		poll:      DefaultPollInterval,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the API root the client was made with.
func (c *Client) BaseURL() string { return c.baseURL }

// Do sends one request to baseURL+path with the client's headers and decodes a 2xx
// answer into out (when out is non-nil). A body that is a []byte or json.RawMessage is
// sent as is (so tests can send malformed JSON); any other non-nil body is JSON-encoded
// with a trailing newline, as the official client sends it. Any answer other than 2xx is
// returned as an *Error. Do is the building block of every typed method, exported for
// endpoints and shapes the typed methods do not cover.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case json.RawMessage:
		rd = bytes.NewReader(b)
	default:
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		rd = &buf
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	// The official client sends Content-Type on every request, GET and DELETE included;
	// the server must not reject it, so we send it too.
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("x-api-key", c.apiKey)
	}
	if c.secretKey != "" {
		req.Header.Set("x-api-secret-key", c.secretKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newHTTPError(resp.StatusCode, resp.Header, data)
	}
	if out == nil {
		return nil
	}
	// Like the official client, a 2xx must carry a JSON body: an empty one fails to decode.
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// Ptr returns a pointer to v, for the optional fields of request bodies.
func Ptr[T any](v T) *T { return &v }

// pathf formats a path; ids are integers, so nothing needs escaping.
func pathf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// trimV1 is the server root for endpoints outside /v1 (the health check).
func trimV1(base string) string {
	return strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1")
}

// Health checks that the server answers its health endpoint, which lives outside /v1.
func (c *Client) Health(ctx context.Context) error {
	root := New(trimV1(c.baseURL), c.apiKey, c.secretKey, WithHTTPClient(c.http))
	root.userAgent = c.userAgent
	var out map[string]any
	return root.Do(ctx, http.MethodGet, "/healthz", nil, &out)
}
