package console

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"

	"clouddb/cloudapi/client"
)

// inProcess is an http.RoundTripper that serves each request on the cloud API's handler
// in this process, as if it had come from the browser's address: the API's login
// throttle and rate limit count the console's calls as that client's.
type inProcess struct {
	api        http.Handler
	host       string
	remoteAddr string
	tls        *tls.ConnectionState
}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	in := req.Clone(req.Context())
	// What a server sees: a path-only URL, the host apart, the client's address.
	in.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	in.RequestURI = req.URL.RequestURI()
	in.Host = t.host
	in.RemoteAddr = t.remoteAddr
	in.TLS = t.tls
	if in.Body == nil {
		in.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	t.api.ServeHTTP(rec, in)
	if req.Body != nil {
		_ = req.Body.Close() // a RoundTripper closes the body; an in-memory one cannot fail
	}
	return rec.Result(), nil
}

// inProcessBase is the client's base URL: the transport never dials it. The host the
// browser reached is handed to the API by the transport instead, as it came: it need not
// parse as a URL's host.
const inProcessBase = "http://clouddb.invalid/v1"

// apiClient is a client of the cloud API, in process, with the signed-in key pair, on
// behalf of the browser request r. The API sees the browser's Host, so the links in its
// answers (a task's resource) are those of this listener.
func (c *Console) apiClient(r *http.Request, key, secret string) *client.Client {
	hc := &http.Client{Transport: inProcess{api: c.api, host: r.Host, remoteAddr: r.RemoteAddr, tls: r.TLS}}
	return client.New(inProcessBase, key, secret, client.WithHTTPClient(hc), client.WithUserAgent("clouddb-console"))
}
