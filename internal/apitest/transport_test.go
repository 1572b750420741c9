package apitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const testDoc = `{
  "openapi": "3.0.3",
  "info": {"title": "t", "version": "1"},
  "servers": [{"url": "/v1"}],
  "paths": {
    "/things/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 1}}],
      "get": {
        "responses": {
          "200": {"description": "a thing", "content": {"application/json": {"schema": {
            "type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}}}},
          "404": {"description": "none", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        }
      }
    }
  },
  "components": {"schemas": {"Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}}}
}`

// recorder is a TB that keeps the failures.
type recorder struct {
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (r *recorder) Cleanup(f func())               { r.cleanups = append(r.cleanups, f) }

// TestTransport checks the rule: a request that matches gets an answer that matches its
// documented status; one that does not match gets a 4xx with the error envelope.
func TestTransport(t *testing.T) {
	for _, c := range []struct {
		name, path string
		status     int
		body       string
		fails      string // a word of the failure, "" when none
	}{
		{"documented answer", "/v1/things/1", 200, `{"id":1}`, ""},
		{"bare path mapped", "/things/1/", 200, `{"id":1}`, ""},
		{"documented error", "/v1/things/1", 404, `{"error":"gone"}`, ""},
		{"wrong body", "/v1/things/1", 200, `{"id":"one"}`, "does not match"},
		{"undocumented status", "/v1/things/1", 500, `{"error":"x"}`, "does not match"},
		{"bad parameter refused", "/v1/things/0", 400, `{"error":"id"}`, ""},
		{"bad parameter accepted", "/v1/things/0", 200, `{"id":0}`, "not a 4xx"},
		{"unknown path refused", "/v1/nothing", 404, `{"error":"no"}`, ""},
		{"refusal without the envelope", "/v1/nothing", 404, `{"message":"no"}`, "error envelope"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				fmt.Fprint(w, c.body)
			}))
			defer srv.Close()
			rec := &recorder{}
			client := NewTransport(rec, []byte(testDoc), Options{MapURL: CloudPath}).Client()
			resp, err := client.Get(srv.URL + c.path)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, c.status, resp.StatusCode)
			if c.fails == "" {
				require.Empty(t, rec.errors)
				return
			}
			require.Len(t, rec.errors, 1)
			require.Contains(t, rec.errors[0], c.fails)
			for _, f := range rec.cleanups {
				f()
			}
			_, err = client.Get(srv.URL + c.path)
			require.NoError(t, err)
			require.Len(t, rec.errors, 1, "nothing is reported once the test is over")
		})
	}
}

func TestYAMLToJSONKeepsOrder(t *testing.T) {
	out, err := YAMLToJSON([]byte("b: 1\na:\n  - x: \"7.4\"\n    y: true\n  - null\n"))
	require.NoError(t, err)
	require.Equal(t, `{"b":1,"a":[{"x":"7.4","y":true},null]}`, strings.Join(strings.Fields(string(out)), ""))
}

func TestBrowserPath(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "http://localhost/api/db/3/keys/a/b%2Fc/", nil)
	u := *req.URL
	BrowserPath(&u)
	require.Equal(t, "/api/db/3/keys/a%2Fb%2Fc%2F", u.EscapedPath())
	req = httptest.NewRequest(http.MethodGet, "http://localhost/api/db/3/", nil)
	u = *req.URL
	BrowserPath(&u)
	require.Equal(t, "/api/db/3", u.Path)
}

// TestTransportConcurrent: one Transport serves concurrent requests (run with -race).
func TestTransportConcurrent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/0") {
			w.WriteHeader(http.StatusOK) // a bad parameter accepted: a failure
		}
		fmt.Fprint(w, `{"id":1}`)
	}))
	defer srv.Close()
	rec := &syncRecorder{}
	client := NewTransport(rec, []byte(testDoc), Options{}).Client()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			resp, err := client.Get(fmt.Sprintf("%s/v1/things/%d", srv.URL, i%2))
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	require.Len(t, rec.errors(), 10)
}

// syncRecorder is a recorder safe for concurrent use.
type syncRecorder struct {
	mu sync.Mutex
	recorder
}

func (r *syncRecorder) Errorf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recorder.Errorf(format, a...)
}

func (r *syncRecorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recorder.errors
}
