package blob_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/blob"
	"clouddb/internal/dnstest"
)

func TestCheckAddr(t *testing.T) {
	for _, a := range []string{
		"169.254.169.254", "169.254.170.2", "169.254.0.1", "fe80::1", "fe80::1%eth0",
		"fd00:ec2::254", "100.100.100.200", "168.63.129.16",
		"0.0.0.0", "0.1.2.3", "::", "224.0.0.1", "239.255.255.250", "ff02::1", "255.255.255.255",
		"::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1", "::169.254.169.254",
	} {
		require.ErrorIs(t, blob.CheckAddr(netip.MustParseAddr(a)), blob.ErrForbiddenAddress, a)
	}
	for _, a := range []string{
		"127.0.0.1", "127.1.2.3", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.10", "100.64.0.1",
		"fd12:3456::1", "8.8.8.8", "2001:db8::1", "::ffff:127.0.0.1", "64:ff9b::808:808",
	} {
		require.NoError(t, blob.CheckAddr(netip.MustParseAddr(a)), a)
	}
	for _, h := range []string{"metadata.google.internal", "METADATA.GOOGLE.INTERNAL.", "metadata", "169.254.169.254", "[fe80::1]"} {
		require.ErrorIs(t, blob.CheckHost(h), blob.ErrForbiddenAddress, h)
	}
	require.NoError(t, blob.CheckHost("localhost"))
	require.NoError(t, blob.CheckHost("backups.example.com"))
}

// Every network scheme refuses a metadata address, before sending anything.
func TestGuardRefusesMetadataAddress(t *testing.T) {
	ctx := testCtx(t)
	for _, uri := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"https://169.254.169.254/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/latest/meta-data/",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://0.0.0.0:80/",
		"ftp://user:pw@169.254.169.254/x.rdb",
		"s3://AK:SECRET@169.254.169.254:80/bucket/x.rdb",
		"abs://acct:a2V5@169.254.169.254:10000/container/x.rdb",
	} {
		start := time.Now()
		_, _, err := blob.Open(ctx, uri, fastOpts)
		requireKind(t, err, blob.ErrForbiddenAddress, "SECRET", ":pw@")
		require.Less(t, time.Since(start), 2*time.Second, uri)
	}
	_, err := blob.Put(ctx, "s3://AK:SECRET@169.254.169.254:80/bucket", "x.rdb", strings.NewReader("x"), fastOpts)
	requireKind(t, err, blob.ErrForbiddenAddress, "SECRET")
	_, err = blob.Put(ctx, "ftp://169.254.169.254/dir", "x.rdb", strings.NewReader("x"), fastOpts)
	requireKind(t, err, blob.ErrForbiddenAddress)

	// s3://bucket/key with a metadata endpoint from the environment.
	opts := fastOpts
	opts.S3Endpoint = "http://169.254.169.254"
	_, _, err = blob.Open(ctx, "s3://bucket/x.rdb", opts)
	requireKind(t, err, blob.ErrForbiddenAddress)
}

// A host name that resolves to a link-local address is refused when dialed.
func TestGuardRefusesNameResolvingToLinkLocal(t *testing.T) {
	ctx := testCtx(t)
	opts := fastOpts
	opts.Resolver = dnstest.Resolver(t, func(string, int) netip.Addr { return netip.MustParseAddr("169.254.169.254") })
	for _, uri := range []string{
		"http://imds.evil.test/latest/meta-data/",
		"ftp://imds.evil.test:2121/x.rdb",
		"s3://AK:SK@imds.evil.test:9000/bucket/x.rdb",
	} {
		_, _, err := blob.Open(ctx, uri, opts)
		requireKind(t, err, blob.ErrForbiddenAddress)
	}
	_, err := blob.Resolve(ctx, "imds.evil.test", opts)
	require.ErrorIs(t, err, blob.ErrForbiddenAddress)
	_, err = blob.Dial(ctx, "tcp", "imds.evil.test:6379", opts)
	require.ErrorIs(t, err, blob.ErrForbiddenAddress)
}

// DNS rebinding: the first answer is loopback, later ones link-local. The check is on the
// address each connection dials, so the second fetch is refused.
func TestGuardDNSRebinding(t *testing.T) {
	ctx := testCtx(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	opts := fastOpts
	opts.Resolver = dnstest.Resolver(t, func(_ string, n int) netip.Addr {
		if n == 1 {
			return netip.MustParseAddr("127.0.0.1")
		}
		return netip.MustParseAddr("169.254.169.254")
	})
	uri := "http://rebind.evil.test:" + port + "/x"
	got, _ := readAll(t, uri, opts)
	require.Equal(t, "ok", string(got))
	_, _, err := blob.Open(ctx, uri, opts)
	requireKind(t, err, blob.ErrForbiddenAddress)
}

// An HTTP redirect to the metadata address is refused; one to loopback is followed.
func TestGuardHTTPRedirect(t *testing.T) {
	ctx := testCtx(t)
	var target *httptest.Server
	target = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
		case "/to-metadata-name":
			http.Redirect(w, r, "http://metadata.google.internal/computeMetadata/v1/", http.StatusTemporaryRedirect)
		case "/to-loopback":
			http.Redirect(w, r, target.URL+"/data", http.StatusMovedPermanently)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/data":
			fmt.Fprint(w, "data")
		default:
			http.NotFound(w, r)
		}
	}))
	defer target.Close()

	_, _, err := blob.Open(ctx, target.URL+"/to-metadata", fastOpts)
	requireKind(t, err, blob.ErrForbiddenAddress)
	_, _, err = blob.Open(ctx, target.URL+"/to-metadata-name", fastOpts)
	requireKind(t, err, blob.ErrForbiddenAddress)
	_, _, err = blob.Open(ctx, target.URL+"/to-file", fastOpts)
	requireKind(t, err, blob.ErrUnsupported)
	_, _, err = blob.Open(ctx, target.URL+"/loop", fastOpts)
	require.ErrorContains(t, err, "redirects")

	rc, _, err := blob.Open(ctx, target.URL+"/to-loopback", fastOpts)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, "data", string(b))
}

func TestResolveAndDialAllowLoopback(t *testing.T) {
	ctx := testCtx(t)
	addrs, err := blob.Resolve(ctx, "localhost", fastOpts)
	require.NoError(t, err)
	require.NotEmpty(t, addrs)
	for _, a := range addrs {
		require.True(t, a.IsLoopback(), a)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	c, err := blob.Dial(ctx, "tcp", l.Addr().String(), fastOpts)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = blob.Dial(ctx, "tcp", "169.254.169.254:80", fastOpts)
	require.ErrorIs(t, err, blob.ErrForbiddenAddress)
	_, err = blob.Dial(ctx, "tcp", closedAddr(t), fastOpts)
	require.Error(t, err)
}
