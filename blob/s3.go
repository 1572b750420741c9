package blob

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const s3PartSize = 16 << 20 // memory per upload; objects up to 160 GiB

// isEndpointAuthority tells whether a URI authority names a server (it has a port, is
// an IP literal or is localhost) rather than a bucket or account.
func isEndpointAuthority(u *url.URL) bool {
	if u.Port() != "" {
		return true
	}
	h := u.Hostname()
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return strings.EqualFold(h, "localhost")
}

// defaultSecure is the TLS default for an endpoint given in a URI: see the package doc.
func defaultSecure(u *url.URL) bool {
	switch u.Port() {
	case "443":
		return true
	case "80":
		return false
	}
	h := u.Hostname()
	if _, err := netip.ParseAddr(h); err == nil {
		return false
	}
	return !strings.EqualFold(h, "localhost")
}

// secureParam reads ?secure=true|false.
func secureParam(q url.Values, def bool) (bool, error) {
	v := q.Get("secure")
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: secure=%q is not a boolean", ErrInvalid, v)
	}
	return b, nil
}

// endpointOf splits an endpoint setting ("host:port" or "http(s)://host[:port]") into a
// host:port and a TLS choice.
func endpointOf(s string) (hostport string, secure bool, err error) {
	if !strings.Contains(s, "://") {
		u := &url.URL{Host: s}
		return s, defaultSecure(u), nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false, fmt.Errorf("%w: endpoint setting %q is not host:port or http(s)://host[:port]", ErrInvalid, Redact(s))
	}
	return u.Host, u.Scheme == "https", nil
}

type s3Target struct {
	client      *minio.Client
	bucket, key string
}

func parseS3(op *call) (*s3Target, error) {
	o := op.opts
	u, err := parseURL(op.uri)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	ak, sk, _ := userinfo(u)
	op.secret(sk)
	op.secret(o.S3SecretKey)
	if ak == "" && sk == "" {
		ak, sk = o.S3AccessKey, o.S3SecretKey
	}
	region := q.Get("region")
	if region == "" {
		region = o.S3Region
	}
	var (
		endpoint string
		secure   bool
		lookup   = minio.BucketLookupPath
		bucket   string
		key      string
	)
	if isEndpointAuthority(u) {
		endpoint = u.Host
		if secure, err = secureParam(q, defaultSecure(u)); err != nil {
			return nil, err
		}
		p := strings.TrimPrefix(u.Path, "/")
		bucket, key, _ = strings.Cut(p, "/")
		if region == "" {
			region = "us-east-1"
		}
	} else {
		bucket = u.Hostname()
		key = strings.TrimPrefix(u.Path, "/")
		if o.S3Endpoint != "" {
			if endpoint, secure, err = endpointOf(o.S3Endpoint); err != nil {
				return nil, err
			}
			if region == "" {
				region = "us-east-1"
			}
		} else {
			endpoint, secure, lookup = "s3.amazonaws.com", true, minio.BucketLookupAuto
		}
		if secure, err = secureParam(q, secure); err != nil {
			return nil, err
		}
	}
	if bucket == "" {
		return nil, fmt.Errorf("%w: no bucket in the URI", ErrInvalid)
	}
	if err = CheckHost((&url.URL{Host: endpoint}).Hostname()); err != nil {
		return nil, err
	}
	client, err := minio.New(endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(ak, sk, ""),
		Secure:       secure,
		Transport:    o.transport(),
		Region:       region,
		BucketLookup: lookup,
		MaxRetries:   3,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: S3 endpoint %q: %v", ErrInvalid, endpoint, err)
	}
	return &s3Target{client: client, bucket: bucket, key: key}, nil
}

// s3Err maps S3 error codes and statuses to the sentinels.
func s3Err(err error) error {
	r := minio.ToErrorResponse(err)
	switch r.Code {
	case "NoSuchKey", "NoSuchBucket", "NotFound", "NoSuchUpload":
		return fmt.Errorf("%w: S3 %s: %s", ErrNotFound, r.Code, r.Message)
	case "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidToken",
		"ExpiredToken", "InvalidSecurity", "AuthorizationHeaderMalformed", "AllAccessDisabled":
		return fmt.Errorf("%w: S3 %s: %s", ErrAuth, r.Code, r.Message)
	}
	switch r.StatusCode {
	case 404:
		return fmt.Errorf("%w: S3 %d %s", ErrNotFound, r.StatusCode, r.Code)
	case 401, 403:
		return fmt.Errorf("%w: S3 %d %s", ErrAuth, r.StatusCode, r.Code)
	case 502, 503, 504:
		return fmt.Errorf("%w: S3 %d %s", ErrUnreachable, r.StatusCode, r.Code)
	}
	if r.Code != "" {
		return fmt.Errorf("S3 %s: %s", r.Code, r.Message)
	}
	return err
}

func openS3(ctx context.Context, op *call) (io.ReadCloser, int64, error) {
	t, err := parseS3(op)
	if err != nil {
		return nil, 0, err
	}
	if t.key == "" || strings.HasSuffix(t.key, "/") {
		return nil, 0, fmt.Errorf("%w: no object key in the URI", ErrInvalid)
	}
	obj, err := t.client.GetObject(ctx, t.bucket, t.key, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, s3Err(err)
	}
	st, err := obj.Stat()
	if err != nil {
		obj.Close()
		return nil, 0, s3Err(err)
	}
	return obj, st.Size, nil
}

func putS3(ctx context.Context, op *call, name string, r io.Reader) (string, error) {
	t, err := parseS3(op)
	if err != nil {
		return "", err
	}
	key := joinKey(t.key, name)
	_, err = t.client.PutObject(ctx, t.bucket, key, r, -1, minio.PutObjectOptions{
		PartSize:    s3PartSize,
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return "", s3Err(err)
	}
	return locationOf(op.uri, name), nil
}
