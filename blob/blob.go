// Package blob reads import sources and writes backup files wherever a user points the
// server: a local path or file:// URI, http(s)://, ftp://, s3:// (any S3-compatible
// endpoint) and abs:// (Azure Blob Storage; Azurite for tests).
//
// Every network connection goes through one guarded dialer (see [Dial]): the address
// actually dialed, after DNS resolution and after every HTTP redirect, must not be
// link-local, a cloud metadata address, unspecified, multicast or broadcast. Loopback and
// private ranges are allowed: that is where users' own servers are.
//
// URI forms:
//
//	/abs/path/file.rdb, file:///abs/path/file.rdb      read and write; relative paths and
//	                                                    ".." components are refused
//	http://[user:pass@]host[:port]/path                 read (https too); at most 5 redirects
//	ftp://[user:pass@]host[:port]/path                  read and write; anonymous without
//	                                                    userinfo. As with curl, the path is
//	                                                    relative to the login directory;
//	                                                    start it with "//" for an absolute one
//	s3://[AK:SK@]host:port/bucket/key[?secure=&region=] read and write, path-style, to that
//	                                                    endpoint (the authority is an endpoint
//	                                                    when it has a port, is an IP literal
//	                                                    or is "localhost")
//	s3://[AK:SK@]bucket/key[?region=]                   endpoint and credentials from Options
//	                                                    (default endpoint: AWS, over TLS)
//	abs://:KEY@ACCOUNT/container/blob                   Azure: https://ACCOUNT.blob.core.windows.net,
//	                                                    or Options.AzureEndpoint/ACCOUNT when set
//	abs://ACCOUNT:KEY@host:port/container/blob          Azure-compatible endpoint, path-style
//	                                                    (Azurite); ?secure= as for s3
//
// For s3:// and abs:// endpoint forms, "secure" (TLS) defaults to false when the host is an
// IP literal or "localhost" or the port is 80, and to true otherwise (port 443, DNS names):
// self-hosted S3 servers on a LAN address rarely have a certificate valid for that address.
// Give ?secure=true or ?secure=false to choose.
//
// google-blob-storage (gs://) is refused with ErrUnsupported: no Google Cloud Storage
// emulator can run on this project's machines to test it.
//
// Errors are *Error values that match, with errors.Is, one of ErrForbiddenAddress,
// ErrUnsupported, ErrInvalid, ErrNotFound, ErrAuth or ErrUnreachable (or none, for other
// failures such as a server error or a full disk). Their messages never contain a password
// or key: URIs are shown through Redact.
package blob

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrForbiddenAddress: the host is, or resolves to, an address that may not be dialed
	// (link-local, cloud metadata, unspecified, multicast, broadcast), or a local path
	// outside Options.LocalRoots.
	ErrForbiddenAddress = errors.New("forbidden address")
	// ErrUnsupported: a scheme or storage/source type that this package does not handle.
	ErrUnsupported = errors.New("unsupported")
	// ErrInvalid: a malformed location (a relative path, a ".." component, a missing bucket).
	ErrInvalid = errors.New("invalid location")
	// ErrNotFound: the file or object does not exist (HTTP 404/410, ENOENT, FTP 550, S3
	// NoSuchKey/NoSuchBucket, Azure BlobNotFound/ContainerNotFound).
	ErrNotFound = errors.New("not found")
	// ErrAuth: credentials refused (HTTP 401/403, FTP 530, S3 AccessDenied and friends).
	ErrAuth = errors.New("authentication failed")
	// ErrUnreachable: the server could not be reached in time (connection refused or reset,
	// no route, DNS failure, timeout).
	ErrUnreachable = errors.New("unreachable")
)

// DefaultTimeout is used when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Options configure a call. The zero value is usable.
type Options struct {
	// Timeout bounds connecting, each TLS handshake, the wait for a response and every
	// stall of a transfer (a read or write that makes no progress). It does not bound a
	// whole transfer, which may be long: use the context for that. Default DefaultTimeout.
	Timeout time.Duration

	// S3Endpoint is the endpoint for s3://bucket/key URIs: "host:port" or
	// "http(s)://host[:port]" (AWS_ENDPOINT_URL_S3 or CLOUDDB_S3_ENDPOINT). Empty means AWS.
	S3Endpoint string
	// S3AccessKey and S3SecretKey are used when the URI has no userinfo
	// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). Both empty means anonymous requests.
	S3AccessKey string
	S3SecretKey string
	// S3Region is the signing region (AWS_REGION); default us-east-1 for custom endpoints,
	// discovered for AWS.
	S3Region string

	// AzureEndpoint, when set ("http://127.0.0.1:10000"), serves abs://:KEY@ACCOUNT/...
	// URIs path-style at AzureEndpoint/ACCOUNT (CLOUDDB_AZURE_ENDPOINT).
	AzureEndpoint string
	// AzureKey is the account key used when the URI has none (AZURE_STORAGE_KEY).
	AzureKey string

	// LocalRoots, when set, are the only local directories a file may be written under
	// (local paths and file:// URIs, after symlinks): a service whose users choose
	// backup destinations must not let them write anywhere its own user may. Empty means
	// anywhere.
	LocalRoots []string

	// TLSConfig is used for https, and for s3/abs endpoints over TLS. Nil means the system
	// roots.
	TLSConfig *tls.Config
	// Resolver resolves host names for the guarded dialer. Nil means net.DefaultResolver.
	Resolver *net.Resolver
}

// OptionsFromEnv fills the S3 and Azure fields from the environment variables named in
// the field comments (getenv is os.Getenv when nil). CLOUDDB_S3_ENDPOINT wins over
// AWS_ENDPOINT_URL_S3, which wins over AWS_ENDPOINT_URL.
func OptionsFromEnv(getenv func(string) string) Options {
	if getenv == nil {
		getenv = os.Getenv
	}
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	return Options{
		S3Endpoint:    first("CLOUDDB_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		S3AccessKey:   getenv("AWS_ACCESS_KEY_ID"),
		S3SecretKey:   getenv("AWS_SECRET_ACCESS_KEY"),
		S3Region:      first("AWS_REGION", "AWS_DEFAULT_REGION"),
		AzureEndpoint: getenv("CLOUDDB_AZURE_ENDPOINT"),
		AzureKey:      getenv("AZURE_STORAGE_KEY"),
	}
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// Scheme names as they appear in URIs.
const (
	SchemeFile  = "file"
	SchemeHTTP  = "http"
	SchemeHTTPS = "https"
	SchemeFTP   = "ftp"
	SchemeS3    = "s3"
	SchemeAzure = "abs"
	SchemeGCS   = "gs"
)

// SchemesFor maps an import sourceType or a backup storageType to the URI schemes it
// accepts: "http" → http, https; "ftp" → ftp; "aws-s3" → s3; "azure-blob-storage" → abs.
// The empty type (periodicBackupPath, which has none) accepts a local path or file://,
// s3, ftp and abs. "google-blob-storage" and "redis" (not a blob store: the caller copies
// it with a Redis client) and unknown types give ErrUnsupported.
func SchemesFor(typ string) ([]string, error) {
	switch typ {
	case "":
		return []string{SchemeFile, SchemeFTP, SchemeS3, SchemeAzure}, nil
	case "http":
		return []string{SchemeHTTP, SchemeHTTPS}, nil
	case "ftp":
		return []string{SchemeFTP}, nil
	case "aws-s3":
		return []string{SchemeS3}, nil
	case "azure-blob-storage":
		return []string{SchemeAzure}, nil
	case "google-blob-storage":
		return nil, fmt.Errorf("%w: storage type google-blob-storage is not supported by this server", ErrUnsupported)
	case "redis":
		return nil, fmt.Errorf("%w: source type redis is not a file source", ErrUnsupported)
	}
	return nil, fmt.Errorf("%w: unknown storage or source type %q", ErrUnsupported, typ)
}

// CheckType reports whether uri may be used with the sourceType or storageType typ (see
// SchemesFor): nil, or an error matching ErrUnsupported or ErrInvalid.
func CheckType(typ, uri string) error {
	schemes, err := SchemesFor(typ)
	if err != nil {
		return err
	}
	s, err := schemeOf(uri)
	if err != nil {
		return err
	}
	for _, a := range schemes {
		if a == s {
			return nil
		}
	}
	if typ == "" {
		return fmt.Errorf("%w: a %s URI cannot be a backup destination (want an absolute path or a %s URI)", ErrUnsupported, s,
			strings.Join(schemes, ", "))
	}
	return fmt.Errorf("%w: a %s URI cannot be used with type %q (want %s)", ErrUnsupported, s, typ,
		strings.Join(schemes, ", "))
}

// schemeOf returns the lower-case scheme of uri, "file" for an absolute path.
func schemeOf(uri string) (string, error) {
	if strings.HasPrefix(uri, "/") {
		return SchemeFile, nil
	}
	i := strings.Index(uri, ":")
	if i <= 0 {
		return "", fmt.Errorf("%w: %q is neither an absolute path nor a URI (relative paths are refused)", ErrInvalid, Redact(uri))
	}
	s := strings.ToLower(uri[:i])
	for _, c := range s {
		if !isSchemeChar(c) {
			return "", fmt.Errorf("%w: %q is neither an absolute path nor a URI (relative paths are refused)", ErrInvalid, Redact(uri))
		}
	}
	return s, nil
}

// isSchemeChar reports whether c may appear in a lower-cased URI scheme (RFC 3986).
func isSchemeChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// Open opens the file or object at uri for reading. The size is the length in bytes, or
// -1 when the server does not say. ctx must stay live while the reader is used; the
// caller closes the reader.
func Open(ctx context.Context, uri string, opts Options) (io.ReadCloser, int64, error) {
	op := &call{op: "open", uri: uri, opts: opts}
	scheme, err := schemeOf(uri)
	if err != nil {
		return nil, 0, op.fail(err)
	}
	var (
		rc   io.ReadCloser
		size int64
	)
	switch scheme {
	case SchemeFile:
		rc, size, err = openFile(op)
	case SchemeHTTP, SchemeHTTPS:
		rc, size, err = openHTTP(ctx, op)
	case SchemeFTP:
		rc, size, err = openFTP(ctx, op)
	case SchemeS3:
		rc, size, err = openS3(ctx, op)
	case SchemeAzure:
		rc, size, err = openAzure(ctx, op)
	default:
		err = unsupportedScheme(scheme)
	}
	if err != nil {
		return nil, 0, op.fail(err)
	}
	return &reader{rc: rc, op: op}, size, nil
}

// Put writes the content of r as a file or object named name under dest, a directory-like
// prefix (a local directory, ftp://host/dir/, s3://…/bucket/prefix, abs://…/container/prefix),
// creating local and FTP directories as needed. name is relative and may contain "/" but no
// empty, "." or ".." components. The file appears whole or not at all: local and FTP writes
// go to a temporary name that is renamed when complete, S3 and Azure objects are committed
// only at the end. location is the URI of the written file, in the form of dest and with
// its credentials: pass it through Redact before showing or logging it.
func Put(ctx context.Context, dest, name string, r io.Reader, opts Options) (location string, err error) {
	op := &call{op: "put", uri: dest, opts: opts}
	if err = checkName(name); err != nil {
		return "", op.fail(err)
	}
	scheme, err := schemeOf(dest)
	if err != nil {
		return "", op.fail(err)
	}
	switch scheme {
	case SchemeFile:
		location, err = putFile(op, name, r)
	case SchemeFTP:
		location, err = putFTP(ctx, op, name, r)
	case SchemeS3:
		location, err = putS3(ctx, op, name, r)
	case SchemeAzure:
		location, err = putAzure(ctx, op, name, r)
	case SchemeHTTP, SchemeHTTPS:
		err = fmt.Errorf("%w: %s is read-only here (import sources only)", ErrUnsupported, scheme)
	default:
		err = unsupportedScheme(scheme)
	}
	if err != nil {
		return "", op.fail(err)
	}
	return location, nil
}

func unsupportedScheme(scheme string) error {
	if scheme == SchemeGCS {
		return fmt.Errorf("%w: google cloud storage (gs://) is not supported by this server", ErrUnsupported)
	}
	return fmt.Errorf("%w: scheme %q (supported: file, http, https, ftp, s3, abs)", ErrUnsupported, scheme)
}

// checkName validates a backup file name relative to its destination.
func checkName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsAny(name, "\x00\\") {
		return fmt.Errorf("%w: file name %q must be a relative name", ErrInvalid, name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%w: file name %q has an empty, \".\" or \"..\" component", ErrInvalid, name)
		}
	}
	return nil
}

// joinKey joins a prefix (possibly empty, possibly ending in "/") and a name with one "/".
func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return strings.TrimSuffix(prefix, "/") + "/" + name
}

// locationOf is the URI of name under the destination URI dest, which keeps its exact
// form (userinfo as written, and its query).
func locationOf(dest, name string) string {
	base, query, hasQuery := strings.Cut(dest, "?")
	base, _, _ = strings.Cut(base, "#")
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	loc := strings.TrimSuffix(base, "/") + "/" + strings.Join(parts, "/")
	if hasQuery {
		loc += "?" + query
	}
	return loc
}

// parseURL parses uri without ever returning url.Parse's error, which quotes the input.
func parseURL(uri string) (*url.URL, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed URI %q", ErrInvalid, Redact(uri))
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: malformed URI %q (want scheme://...)", ErrInvalid, Redact(uri))
	}
	return u, nil
}

// userinfo returns the decoded user name and password of u.
func userinfo(u *url.URL) (user, pass string, hasPass bool) {
	if u.User == nil {
		return "", "", false
	}
	pass, hasPass = u.User.Password()
	return u.User.Username(), pass, hasPass
}
