// Package s3test runs an S3-compatible server on loopback for tests: gofakes3 behind an
// AWS Signature V4 check. It is only imported by tests.
package s3test

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"
)

// Server is a running S3-compatible server.
type Server struct {
	// HostPort is where it listens; URIs take it as s3://AK:SK@HostPort/bucket/key.
	HostPort             string
	AccessKey, SecretKey string
	Backend              *s3mem.Backend
}

// Start serves gofakes3 over a real HTTP server on loopback until the test ends, with
// the buckets made. gofakes3 checks no credentials, so requests first pass an AWS
// Signature V4 check with the server's keys; it also leaves the aws-chunked bodies of
// multipart parts encoded, which real S3 servers decode, so the check decodes them. wrap,
// if not nil, is put around the whole handler.
func Start(t testing.TB, wrap func(http.Handler) http.Handler, buckets ...string) *Server {
	t.Helper()
	s := &Server{AccessKey: "AKIDCLOUDDBTEST", SecretKey: "s3cr3t-S3-key/with+chars", Backend: s3mem.New()}
	for _, b := range buckets {
		require.NoError(t, s.Backend.CreateBucket(b))
	}
	h := sigV4(s.AccessKey, s.SecretKey, gofakes3.New(s.Backend).Server())
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.HostPort = strings.TrimPrefix(srv.URL, "http://")
	return s
}

func s3Fail(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, code)
}

func hmacSHA256(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

// sigV4 checks the AWS Signature Version 4 header of each request against ak/sk.
func sigV4(ak, sk string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		const alg = "AWS4-HMAC-SHA256 "
		if !strings.HasPrefix(auth, alg) {
			s3Fail(w, http.StatusForbidden, "AccessDenied")
			return
		}
		fields := map[string]string{}
		for _, f := range strings.Split(strings.TrimPrefix(auth, alg), ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
			fields[k] = v
		}
		cred := strings.Split(fields["Credential"], "/")
		if len(cred) != 5 || cred[0] != ak {
			s3Fail(w, http.StatusForbidden, "InvalidAccessKeyId")
			return
		}
		signed := strings.Split(fields["SignedHeaders"], ";")
		var headers strings.Builder
		for _, h := range signed {
			v := strings.Join(r.Header.Values(h), ",")
			if h == "host" {
				v = r.Host
			}
			headers.WriteString(h + ":" + strings.TrimSpace(v) + "\n")
		}
		path, _, _ := strings.Cut(r.RequestURI, "?")
		query := r.URL.Query()
		canonical := strings.Join([]string{
			r.Method, path, strings.ReplaceAll(query.Encode(), "+", "%20"),
			headers.String(), fields["SignedHeaders"], r.Header.Get("X-Amz-Content-Sha256"),
		}, "\n")
		sum := sha256.Sum256([]byte(canonical))
		toSign := "AWS4-HMAC-SHA256\n" + r.Header.Get("X-Amz-Date") + "\n" +
			strings.Join(cred[1:], "/") + "\n" + hex.EncodeToString(sum[:])
		key := []byte("AWS4" + sk)
		for _, part := range cred[1:] {
			key = hmacSHA256(key, part)
		}
		if !hmac.Equal([]byte(hex.EncodeToString(hmacSHA256(key, toSign))), []byte(fields["Signature"])) {
			s3Fail(w, http.StatusForbidden, "SignatureDoesNotMatch")
			return
		}
		// gofakes3 decodes aws-chunked bodies of PutObject but not of UploadPart: do it here.
		if r.Header.Get("X-Amz-Content-Sha256") == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" && r.URL.Query().Has("partNumber") {
			body, err := decodeAWSChunked(r.Body)
			if err != nil {
				s3Fail(w, http.StatusBadRequest, "IncompleteBody")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.Header.Set("Content-Length", strconv.Itoa(len(body)))
			r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}
		next.ServeHTTP(w, r)
	})
}

// decodeAWSChunked reads an aws-chunked body: "hex-size;chunk-signature=...\r\n" data
// "\r\n", ending with a zero-size chunk.
func decodeAWSChunked(r io.Reader) ([]byte, error) {
	br := bufio.NewReader(r)
	var out bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		sizeHex, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		n, err := strconv.ParseInt(sizeHex, 16, 64)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out.Bytes(), nil
		}
		if _, err := io.CopyN(&out, br, n); err != nil {
			return nil, err
		}
		if _, err := br.Discard(2); err != nil {
			return nil, err
		}
	}
}
