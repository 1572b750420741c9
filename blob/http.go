package blob

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
)

const maxRedirects = 5

// transport returns an HTTP transport whose every connection goes through the guard. It
// ignores proxy settings on purpose: through a proxy, the address dialed would be the
// proxy's and the guard would not see the real destination.
func (o Options) transport() *http.Transport {
	t := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dial(ctx, network, addr, o)
		},
		TLSHandshakeTimeout:   o.timeout(),
		ResponseHeaderTimeout: o.timeout(),
		ExpectContinueTimeout: o.timeout(),
		IdleConnTimeout:       o.timeout(),
		MaxIdleConnsPerHost:   4,
		DisableCompression:    true, // the bytes as stored, and their real size
	}
	if o.TLSConfig != nil {
		t.TLSClientConfig = o.TLSConfig.Clone()
	}
	return t
}

// httpClient is a client over transport() that follows at most maxRedirects redirects,
// to http or https only; each redirect's address is checked by the guard when dialed.
func (o Options) httpClient() *http.Client {
	return &http.Client{
		Transport: o.transport(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if req.URL.Scheme != SchemeHTTP && req.URL.Scheme != SchemeHTTPS {
				return fmt.Errorf("%w: redirect to scheme %q", ErrUnsupported, req.URL.Scheme)
			}
			return CheckHost(req.URL.Hostname())
		},
	}
}

func openHTTP(ctx context.Context, op *call) (io.ReadCloser, int64, error) {
	u, err := parseURL(op.uri)
	if err != nil {
		return nil, 0, err
	}
	if u.Host == "" {
		return nil, 0, fmt.Errorf("%w: no host", ErrInvalid)
	}
	_, pass, _ := userinfo(u)
	op.secret(pass)
	if err = CheckHost(u.Hostname()); err != nil {
		return nil, 0, err
	}
	client := op.opts.httpClient()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: bad request", ErrInvalid)
	}
	resp, err := client.Do(req)
	if err != nil {
		client.CloseIdleConnections()
		return nil, 0, err // describe() drops the URL that *url.Error quotes
	}
	if resp.StatusCode/100 != 2 {
		resp.Body.Close()
		client.CloseIdleConnections()
		return nil, 0, httpStatusErr(resp)
	}
	return &httpBody{ReadCloser: resp.Body, client: client}, resp.ContentLength, nil
}

func httpStatusErr(resp *http.Response) error {
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusGone:
		return fmt.Errorf("%w: HTTP %s", ErrNotFound, resp.Status)
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired:
		return fmt.Errorf("%w: HTTP %s", ErrAuth, resp.Status)
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return fmt.Errorf("%w: HTTP %s", ErrUnreachable, resp.Status)
	}
	return fmt.Errorf("HTTP %s", resp.Status)
}

type httpBody struct {
	io.ReadCloser
	client *http.Client
}

func (b *httpBody) Close() error {
	err := b.ReadCloser.Close()
	b.client.CloseIdleConnections()
	return err
}
