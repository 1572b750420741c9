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
	remoteAddr string
	tls        *tls.ConnectionState
}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	in := req.Clone(req.Context())
	// What a server sees: a path-only URL, the host apart, the client's address.
	in.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	in.RequestURI = req.URL.RequestURI()
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

// apiClient is a client of the cloud API, in process, with the signed-in key pair, on
// behalf of the browser request r. Its base URL is the one the browser reached, so the
// links in the API's answers (a task's resource) are those of this listener.
func (c *Console) apiClient(r *http.Request, key, secret string) *client.Client {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	hc := &http.Client{Transport: inProcess{api: c.api, remoteAddr: r.RemoteAddr, tls: r.TLS}}
	return client.New(scheme+"://"+r.Host+"/v1", key, secret, client.WithHTTPClient(hc), client.WithUserAgent("clouddb-console"))
}
