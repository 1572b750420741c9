package kubernetes_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"clouddb/internal/pki"
)

// testCA is the installation's CA of the tests' drivers: it issues the certificates of
// their TLS databases, which TestConformance's clients trust.
var testCA = func() *pki.CA {
	ca, err := pki.New("clouddb kubernetes test CA")
	if err != nil {
		panic(err)
	}
	return ca
}()

// waitRoutedTLS is waitRouted for a TLS database: a completed handshake is a server (one
// that requires a client certificate refuses only after it).
func waitRoutedTLS(t *testing.T, addr string) {
	t.Helper()
	var last error
	err := poll(context.Background(), 30*time.Second, func() (bool, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second},
			Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // a probe of the route, not a client
		var c net.Conn
		c, last = d.DialContext(context.Background(), "tcp", addr)
		if last == nil {
			c.Close()
		}
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("no TLS server answers at %s: %v (%v)", addr, last, err)
	}
}
