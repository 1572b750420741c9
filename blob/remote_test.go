package blob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/blob"
)

func TestHTTP(t *testing.T) {
	ctx := testCtx(t)
	data := payload(5<<20+3, 3)
	mux := http.NewServeMux()
	mux.HandleFunc("/dump.rdb", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "dump.rdb", time.Time{}, bytes.NewReader(data))
	})
	mux.HandleFunc("/private.rdb", func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "reader" || p != "pa55word" {
			w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write(data[:1000])
	})
	mux.HandleFunc("/chunked.rdb", func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush() // no Content-Length
		_, _ = w.Write(data[:4096])
	})
	mux.HandleFunc("/forbidden.rdb", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	})
	mux.HandleFunc("/broken.rdb", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "oops", http.StatusInternalServerError)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	got, size := readAll(t, srv.URL+"/dump.rdb", fastOpts)
	require.Equal(t, int64(len(data)), size)
	require.Equal(t, sha256.Sum256(data), sha256.Sum256(got))

	got, size = readAll(t, "http://reader:pa55word@"+host+"/private.rdb", fastOpts)
	require.Equal(t, int64(1000), size)
	require.Equal(t, data[:1000], got)

	got, size = readAll(t, srv.URL+"/chunked.rdb", fastOpts)
	require.Equal(t, int64(-1), size)
	require.Equal(t, data[:4096], got)

	_, _, err := blob.Open(ctx, srv.URL+"/missing.rdb", fastOpts)
	requireKind(t, err, blob.ErrNotFound)
	_, _, err = blob.Open(ctx, "http://reader:WRONGpass@"+host+"/private.rdb", fastOpts)
	requireKind(t, err, blob.ErrAuth, "WRONGpass")
	_, _, err = blob.Open(ctx, srv.URL+"/forbidden.rdb", fastOpts)
	requireKind(t, err, blob.ErrAuth)
	_, _, err = blob.Open(ctx, srv.URL+"/broken.rdb", fastOpts)
	require.ErrorContains(t, err, "500")
	for _, k := range []error{blob.ErrNotFound, blob.ErrAuth, blob.ErrUnreachable, blob.ErrForbiddenAddress} {
		require.NotErrorIs(t, err, k)
	}
	_, _, err = blob.Open(ctx, "http://reader:SECRETpw@"+closedAddr(t)+"/x.rdb", fastOpts)
	requireKind(t, err, blob.ErrUnreachable, "SECRETpw")
}

func TestHTTPSAndStall(t *testing.T) {
	ctx := testCtx(t)
	data := payload(1<<20, 4)
	stall := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall" {
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			<-stall
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data)
	}))
	defer srv.Close()
	defer close(stall) // before srv.Close, which waits for the handler
	opts := blob.Options{Timeout: 500 * time.Millisecond, TLSConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig}

	got, size := readAll(t, srv.URL+"/data.rdb", opts)
	require.Equal(t, int64(len(data)), size)
	require.True(t, bytes.Equal(data, got))

	// Without the test CA the certificate is refused.
	_, _, err := blob.Open(ctx, srv.URL+"/data.rdb", fastOpts)
	require.Error(t, err)

	// A server that stops sending mid-body: the read fails after Options.Timeout.
	rc, size, err := blob.Open(ctx, srv.URL+"/stall", opts)
	require.NoError(t, err)
	require.Equal(t, int64(100), size)
	start := time.Now()
	_, err = io.ReadAll(rc)
	requireKind(t, err, blob.ErrUnreachable)
	require.Less(t, time.Since(start), 3*time.Second)
	_ = rc.Close()
}

func TestS3(t *testing.T) {
	ctx := testCtx(t)
	s := startS3(t, "backups")
	base := "s3://" + s.ak + ":" + urlEscape(s.sk) + "@" + s.hostport + "/backups"

	// Path-style endpoint form, credentials in the URI; 20 MiB takes the multipart path.
	data := payload(20<<20+5, 5)
	loc, err := blob.Put(ctx, base+"/daily", "db-7/2026-01-02.rdb", bytes.NewReader(data), fastOpts)
	require.NoError(t, err)
	require.Equal(t, base+"/daily/db-7/2026-01-02.rdb", loc)
	got, size := readAll(t, loc, fastOpts)
	require.Equal(t, int64(len(data)), size)
	require.Equal(t, sha256.Sum256(data), sha256.Sum256(got))

	// s3://bucket/key with endpoint and credentials from Options (as from the environment).
	env := map[string]string{
		"AWS_ACCESS_KEY_ID": s.ak, "AWS_SECRET_ACCESS_KEY": s.sk,
		"AWS_ENDPOINT_URL_S3": "http://" + s.hostport,
	}
	opts := blob.OptionsFromEnv(func(k string) string { return env[k] })
	opts.Timeout = fastOpts.Timeout
	small := payload(3<<20, 6)
	loc, err = blob.Put(ctx, "s3://backups", "small.rdb", bytes.NewReader(small), opts)
	require.NoError(t, err)
	require.Equal(t, "s3://backups/small.rdb", loc)
	got, size = readAll(t, "s3://backups/small.rdb", opts)
	require.Equal(t, int64(len(small)), size)
	require.True(t, bytes.Equal(small, got))
	// The same object through the endpoint form.
	got, _ = readAll(t, base+"/small.rdb", fastOpts)
	require.True(t, bytes.Equal(small, got))

	_, _, err = blob.Open(ctx, base+"/nope.rdb", fastOpts)
	requireKind(t, err, blob.ErrNotFound, s.sk)
	_, _, err = blob.Open(ctx, "s3://"+s.ak+":"+urlEscape(s.sk)+"@"+s.hostport+"/no-such-bucket/x.rdb", fastOpts)
	requireKind(t, err, blob.ErrNotFound, s.sk)

	badSecret := "WRONG-secret-value"
	wrong := "s3://" + s.ak + ":" + badSecret + "@" + s.hostport + "/backups/small.rdb"
	_, _, err = blob.Open(ctx, wrong, fastOpts)
	requireKind(t, err, blob.ErrAuth, badSecret)
	_, err = blob.Put(ctx, "s3://"+s.ak+":"+badSecret+"@"+s.hostport+"/backups", "x.rdb", strings.NewReader("x"), fastOpts)
	requireKind(t, err, blob.ErrAuth, badSecret)
	_, _, err = blob.Open(ctx, "s3://OTHERKEY:"+badSecret+"@"+s.hostport+"/backups/small.rdb", fastOpts)
	requireKind(t, err, blob.ErrAuth, badSecret)

	_, _, err = blob.Open(ctx, "s3://"+s.ak+":"+badSecret+"@"+closedAddr(t)+"/backups/small.rdb", fastOpts)
	requireKind(t, err, blob.ErrUnreachable, badSecret)

	_, _, err = blob.Open(ctx, "s3://"+s.ak+":"+badSecret+"@"+s.hostport+"/backups/small.rdb?secure=maybe", fastOpts)
	requireKind(t, err, blob.ErrInvalid, badSecret)
	_, _, err = blob.Open(ctx, "s3://"+s.hostport+"/", fastOpts)
	requireKind(t, err, blob.ErrInvalid)
}

// slowReader pauses for interval after every n bytes.
type slowReader struct {
	r        io.Reader
	n        int
	interval time.Duration
	since    int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.since >= s.n {
		time.Sleep(s.interval)
		s.since = 0
	}
	k, err := s.r.Read(p[:min(len(p), s.n-s.since)])
	s.since += k
	return k, err
}

// An upload that is slow but makes progress may take longer than Options.Timeout: the
// timeout bounds stalls, not transfers.
func TestSlowUploadLongerThanTimeout(t *testing.T) {
	s := startS3With(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = io.NopCloser(&slowReader{r: r.Body, n: 1 << 20, interval: 80 * time.Millisecond})
			h.ServeHTTP(w, r)
		})
	}, "backups")
	// About 4 s at 12.5 MB/s, more than twice the timeout. After the last write the server
	// still reads what the kernel's socket buffers hold (a few MB: a few hundred ms at this
	// rate) and stores 48 MB before it answers: the timeout must cover that, with room to
	// spare on a busy machine.
	data := payload(48<<20, 9)
	opts := blob.Options{Timeout: 1500 * time.Millisecond}
	base := "s3://" + s.ak + ":" + urlEscape(s.sk) + "@" + s.hostport + "/backups"
	start := time.Now()
	loc, err := blob.Put(testCtx(t), base, "slow.rdb", bytes.NewReader(data), opts)
	require.NoError(t, err)
	require.Greater(t, time.Since(start), 2*opts.Timeout, "the upload was not slow: the test proves nothing")
	got, _ := readAll(t, loc, fastOpts)
	require.True(t, bytes.Equal(data, got))
}

func urlEscape(s string) string {
	r := strings.NewReplacer("/", "%2F", "+", "%2B", ":", "%3A", "@", "%40")
	return r.Replace(s)
}

func TestFTP(t *testing.T) {
	ctx := testCtx(t)
	s := startVsftpd(t)
	// vsftpd here takes any password for "anonymous" and refuses every other user.
	base := "ftp://anonymous:s3cret-pass@" + s.addr + "/upload"
	data := payload(6<<20+11, 7)

	loc, err := blob.Put(ctx, base, "db-3/backup.rdb", bytes.NewReader(data), fastOpts)
	require.NoError(t, err)
	require.Equal(t, base+"/db-3/backup.rdb", loc)
	onDisk, err := os.ReadFile(filepath.Join(s.upload, "db-3", "backup.rdb"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, onDisk))
	entries, err := os.ReadDir(filepath.Join(s.upload, "db-3"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")

	got, size := readAll(t, loc, fastOpts)
	require.Equal(t, int64(len(data)), size)
	require.True(t, bytes.Equal(data, got))
	// Without userinfo: anonymous.
	got, _ = readAll(t, "ftp://"+s.addr+"/upload/db-3/backup.rdb", fastOpts)
	require.True(t, bytes.Equal(data, got))
	// Cancelling the context stops a transfer.
	cctx, cancel := context.WithCancel(ctx)
	rc, _, err := blob.Open(cctx, loc, fastOpts)
	require.NoError(t, err)
	_, err = io.ReadFull(rc, make([]byte, 1000))
	require.NoError(t, err)
	cancel()
	_, err = io.ReadAll(rc)
	require.ErrorIs(t, err, context.Canceled)
	_ = rc.Close()

	// Overwrite.
	_, err = blob.Put(ctx, base+"/", "db-3/backup.rdb", strings.NewReader("v2"), fastOpts)
	require.NoError(t, err)
	got, _ = readAll(t, loc, fastOpts)
	require.Equal(t, "v2", string(got))

	_, _, err = blob.Open(ctx, base+"/missing.rdb", fastOpts)
	requireKind(t, err, blob.ErrNotFound, "s3cret-pass")
	_, _, err = blob.Open(ctx, "ftp://bob:WRONGpass@"+s.addr+"/upload/db-3/backup.rdb", fastOpts)
	requireKind(t, err, blob.ErrAuth, "WRONGpass")
	_, err = blob.Put(ctx, "ftp://bob:WRONGpass@"+s.addr+"/upload", "x.rdb", strings.NewReader("x"), fastOpts)
	requireKind(t, err, blob.ErrAuth, "WRONGpass")
	_, _, err = blob.Open(ctx, "ftp://bob:WRONGpass@"+closedAddr(t)+"/x.rdb", fastOpts)
	requireKind(t, err, blob.ErrUnreachable, "WRONGpass")

	// Writing where the server refuses (the root is not writable) fails and leaves nothing.
	_, err = blob.Put(ctx, "ftp://"+s.addr+"/", "x.rdb", strings.NewReader("x"), fastOpts)
	require.Error(t, err)
	_, err = os.Stat(filepath.Join(s.root, "x.rdb"))
	require.True(t, os.IsNotExist(err))
}

func TestAzure(t *testing.T) {
	ctx := testCtx(t)
	s := startAzurite(t)
	keyEsc := urlEscape(s.key)
	base := "abs://" + s.account + ":" + keyEsc + "@" + s.hostport + "/backups"
	createContainer(t, s, "backups")

	data := payload(18<<20+1, 8) // several 8 MiB blocks
	loc, err := blob.Put(ctx, base+"/daily", "db-9/backup.rdb", bytes.NewReader(data), fastOpts)
	require.NoError(t, err)
	require.Equal(t, base+"/daily/db-9/backup.rdb", loc)
	got, size := readAll(t, loc, fastOpts)
	require.Equal(t, int64(len(data)), size)
	require.Equal(t, sha256.Sum256(data), sha256.Sum256(got))

	// The Redis Cloud form abs://:KEY@ACCOUNT/..., with the endpoint from Options.
	opts := fastOpts
	opts.AzureEndpoint = "http://" + s.hostport
	got, _ = readAll(t, "abs://:"+keyEsc+"@"+s.account+"/backups/daily/db-9/backup.rdb", opts)
	require.Equal(t, sha256.Sum256(data), sha256.Sum256(got))
	opts.AzureKey = s.key
	_, err = blob.Put(ctx, "abs://"+s.account+"/backups", "k.rdb", strings.NewReader("hello"), opts)
	require.NoError(t, err)
	got, size = readAll(t, base+"/k.rdb", fastOpts)
	require.Equal(t, "hello", string(got))
	require.Equal(t, int64(5), size)

	_, _, err = blob.Open(ctx, base+"/missing.rdb", fastOpts)
	requireKind(t, err, blob.ErrNotFound, s.key, keyEsc)
	_, _, err = blob.Open(ctx, "abs://"+s.account+":"+keyEsc+"@"+s.hostport+"/no-container/x.rdb", fastOpts)
	requireKind(t, err, blob.ErrNotFound, s.key, keyEsc)

	wrongKey := "V1JPTkdLRVlXUk9OR0tFWQ==" // valid base64, wrong key
	_, _, err = blob.Open(ctx, "abs://"+s.account+":"+wrongKey+"@"+s.hostport+"/backups/k.rdb", fastOpts)
	requireKind(t, err, blob.ErrAuth, wrongKey)
	_, err = blob.Put(ctx, "abs://"+s.account+":"+wrongKey+"@"+s.hostport+"/backups", "x.rdb", strings.NewReader("x"), fastOpts)
	requireKind(t, err, blob.ErrAuth, wrongKey)
	_, _, err = blob.Open(ctx, "abs://"+s.account+":not*base64@"+s.hostport+"/backups/k.rdb", fastOpts)
	requireKind(t, err, blob.ErrAuth, "not*base64")
	_, _, err = blob.Open(ctx, "abs://"+s.account+":"+wrongKey+"@"+closedAddr(t)+"/backups/k.rdb", fastOpts)
	requireKind(t, err, blob.ErrUnreachable, wrongKey)
}
