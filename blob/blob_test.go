package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/blob"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var fastOpts = blob.Options{Timeout: 3 * time.Second}

// requireKind checks that err is a *blob.Error of the given kind whose message contains
// none of the secrets.
func requireKind(t *testing.T, err error, kind error, secrets ...string) {
	t.Helper()
	require.Error(t, err)
	t.Log(err)
	require.ErrorIs(t, err, kind, "error: %v", err)
	var be *blob.Error
	require.True(t, errors.As(err, &be), "not a *blob.Error: %T %v", err, err)
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s, "the error message shows a secret")
	}
}

// readAll opens uri and returns its bytes and the size Open reported.
func readAll(t *testing.T, uri string, opts blob.Options) ([]byte, int64) {
	t.Helper()
	rc, size, err := blob.Open(testCtx(t), uri, opts)
	require.NoError(t, err)
	defer func() { require.NoError(t, rc.Close()) }()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b, size
}

func TestFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	data := payload(3<<20+17, 1)
	ctx := testCtx(t)

	loc, err := blob.Put(ctx, dir+"/backups", "db-1/backup.rdb", bytes.NewReader(data), blob.Options{})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "backups", "db-1", "backup.rdb"), loc)
	got, size := readAll(t, loc, blob.Options{})
	require.Equal(t, int64(len(data)), size)
	require.True(t, bytes.Equal(data, got))
	st, err := os.Stat(loc)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// file:// URIs, and overwriting an existing file.
	data2 := payload(1<<20, 2)
	loc2, err := blob.Put(ctx, "file://"+dir+"/backups/", "db-1/backup.rdb", bytes.NewReader(data2), blob.Options{})
	require.NoError(t, err)
	require.Equal(t, "file://"+filepath.Join(dir, "backups", "db-1", "backup.rdb"), loc2)
	got, _ = readAll(t, loc2, blob.Options{})
	require.True(t, bytes.Equal(data2, got))

	// No temporary file is left behind.
	entries, err := os.ReadDir(filepath.Join(dir, "backups", "db-1"))
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("source broke")
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestFilePutIsAtomic(t *testing.T) {
	dir := t.TempDir()
	_, err := blob.Put(testCtx(t), dir, "x.rdb", &failingReader{n: 1 << 20}, blob.Options{})
	require.ErrorContains(t, err, "source broke")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "a failed write leaves nothing behind")
}

func TestFileErrors(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()

	_, _, err := blob.Open(ctx, dir+"/missing.rdb", blob.Options{})
	requireKind(t, err, blob.ErrNotFound)
	_, _, err = blob.Open(ctx, "file://"+dir+"/missing.rdb", blob.Options{})
	requireKind(t, err, blob.ErrNotFound)

	for _, bad := range []string{
		"backup.rdb", "./backup.rdb", "some/dir/backup.rdb", "../etc/passwd",
		dir + "/../x.rdb", "file://" + dir + "/a/../../x.rdb", "file:relative.rdb",
		"file://otherhost/tmp/x.rdb", "",
	} {
		_, _, err = blob.Open(ctx, bad, blob.Options{})
		requireKind(t, err, blob.ErrInvalid)
		_, err = blob.Put(ctx, bad, "x.rdb", strings.NewReader("x"), blob.Options{})
		requireKind(t, err, blob.ErrInvalid)
	}
	for _, badName := range []string{"", "/abs.rdb", "../x.rdb", "a/../../x.rdb", "a//b", ".", "a/"} {
		_, err = blob.Put(ctx, dir, badName, strings.NewReader("x"), blob.Options{})
		requireKind(t, err, blob.ErrInvalid)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)

	// A directory is not a file.
	_, _, err = blob.Open(ctx, dir, blob.Options{})
	requireKind(t, err, blob.ErrInvalid)
}

func TestUnsupportedSchemesAndTypes(t *testing.T) {
	ctx := testCtx(t)
	for _, uri := range []string{"gs://bucket/backup.rdb", "gopher://host/x", "redis://127.0.0.1:6379"} {
		_, _, err := blob.Open(ctx, uri, blob.Options{})
		requireKind(t, err, blob.ErrUnsupported)
	}
	_, err := blob.Put(ctx, "http://127.0.0.1:1/dir", "x.rdb", strings.NewReader("x"), blob.Options{})
	requireKind(t, err, blob.ErrUnsupported)
	_, err = blob.Put(ctx, "gs://bucket/dir", "x.rdb", strings.NewReader("x"), blob.Options{})
	requireKind(t, err, blob.ErrUnsupported)

	for typ, want := range map[string][]string{
		"http":               {"http", "https"},
		"ftp":                {"ftp"},
		"aws-s3":             {"s3"},
		"azure-blob-storage": {"abs"},
		"":                   {"file", "ftp", "s3", "abs"},
	} {
		got, err := blob.SchemesFor(typ)
		require.NoError(t, err, typ)
		require.Equal(t, want, got, typ)
	}
	for _, typ := range []string{"google-blob-storage", "redis", "dropbox"} {
		_, err := blob.SchemesFor(typ)
		require.ErrorIs(t, err, blob.ErrUnsupported, typ)
	}
	require.NoError(t, blob.CheckType("http", "https://example.com/a.rdb"))
	require.NoError(t, blob.CheckType("aws-s3", "s3://bucket/a.rdb"))
	require.NoError(t, blob.CheckType("", "/var/backups"))
	require.NoError(t, blob.CheckType("ftp", "FTP://h/a.rdb"))
	require.ErrorIs(t, blob.CheckType("http", "file:///etc/passwd"), blob.ErrUnsupported)
	require.ErrorIs(t, blob.CheckType("http", "/etc/passwd"), blob.ErrUnsupported)
	require.ErrorIs(t, blob.CheckType("aws-s3", "ftp://h/a.rdb"), blob.ErrUnsupported)
	require.ErrorIs(t, blob.CheckType("", "relative/dir"), blob.ErrInvalid)
	require.ErrorIs(t, blob.CheckType("google-blob-storage", "gs://b/a.rdb"), blob.ErrUnsupported)
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"ftp://user:hunter2@host:21/dir/file.rdb":                   "ftp://user:xxxxx@host:21/dir/file.rdb",
		"s3://AKID:s%2Fecret@127.0.0.1:9000/b/k.rdb":                "s3://AKID:xxxxx@127.0.0.1:9000/b/k.rdb",
		"abs://:bXlrZXk=@account/container/blob.rdb":                "abs://:xxxxx@account/container/blob.rdb",
		"redis://:pw@10.0.0.1:6379":                                 "redis://:xxxxx@10.0.0.1:6379",
		"https://h/a.rdb?X-Amz-Signature=abc&x=1":                   "https://h/a.rdb?X-Amz-Signature=xxxxx&x=1",
		"https://acct.blob.core.windows.net/c/b?sv=1&sig=SECRETSIG": "https://acct.blob.core.windows.net/c/b?sig=xxxxx&sv=1",
		"http://user@host/a.rdb":                                    "http://user@host/a.rdb",
		"/var/backups/a.rdb":                                        "/var/backups/a.rdb",
		"ftp://u:p%zz@host/x":                                       "ftp://xxxxx@host/x",
		"ftp://u:pa ss@ho st/x?token=zzz":                           "ftp://xxxxx@ho st/x?xxxxx",
	} {
		got := blob.Redact(in)
		require.Equal(t, want, got, in)
	}
	for _, secret := range []string{"hunter2", "s%2Fecret", "bXlrZXk=", "SECRETSIG", "p%zz", "zzz"} {
		require.NotContains(t, blob.Redact("ftp://user:"+secret+"@host/x"), secret)
	}
}

// TestLocalRoots: with LocalRoots set, files are written only under them, whatever the
// path says: a path outside, or a link inside a root that points out of it, is refused
// before anything is written; without roots any absolute path goes.
func TestLocalRoots(t *testing.T) {
	ctx := testCtx(t)
	root, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "escape")))
	opts := blob.Options{LocalRoots: []string{root}}
	put := func(dest string) error {
		_, err := blob.Put(ctx, dest, "b.rdb", strings.NewReader("data"), opts)
		return err
	}
	for _, dest := range []string{root, filepath.Join(root, "nested", "dir"), "file://" + filepath.Join(root, "uri")} {
		require.NoError(t, blob.CheckLocal(dest, opts), dest)
		require.NoError(t, put(dest), dest)
	}
	for _, dest := range []string{outside, filepath.Join(root, "escape"), filepath.Join(root, "escape", "deeper"), "file://" + outside, root + "-sibling"} {
		require.ErrorIs(t, blob.CheckLocal(dest, opts), blob.ErrForbiddenAddress, dest)
		require.ErrorIs(t, put(dest), blob.ErrForbiddenAddress, dest)
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was written outside the root")
	_, err = os.Stat(root + "-sibling")
	require.True(t, os.IsNotExist(err), "not even a directory")

	require.NoError(t, blob.CheckLocal("s3://bucket/x", opts), "only local paths are held to the roots")
	require.NoError(t, blob.CheckLocal(outside, blob.Options{}), "no roots, no limit")
	require.NoError(t, blob.CheckLocal(outside, blob.Options{LocalRoots: []string{"/"}}), "the root of the file system holds everything")
}
