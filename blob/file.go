package blob

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// localPath returns the absolute path of a local path or file:// URI, refusing relative
// paths, ".." components and hosts other than localhost.
func localPath(uri string) (path string, isURI bool, err error) {
	p := uri
	if !strings.HasPrefix(uri, "/") {
		u, err := parseURL(uri)
		if err != nil {
			return "", false, err
		}
		if u.Host != "" && !strings.EqualFold(u.Host, "localhost") {
			return "", false, fmt.Errorf("%w: file URI with a host other than localhost", ErrInvalid)
		}
		if u.User != nil || u.RawQuery != "" {
			return "", false, fmt.Errorf("%w: file URI with userinfo or a query", ErrInvalid)
		}
		p, isURI = u.Path, true
	}
	if !strings.HasPrefix(p, "/") {
		return "", false, fmt.Errorf("%w: %q is not an absolute path (relative paths are refused)", ErrInvalid, p)
	}
	if strings.ContainsRune(p, 0) {
		return "", false, fmt.Errorf("%w: path contains a NUL byte", ErrInvalid)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", false, fmt.Errorf("%w: path %q has a \"..\" component", ErrInvalid, p)
		}
	}
	return filepath.Clean(p), isURI, nil
}

func openFile(op *call) (io.ReadCloser, int64, error) {
	path, _, err := localPath(op.uri)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fileErr(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fileErr(err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, path)
	}
	return f, st.Size(), nil
}

func fileErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	return err
}

func putFile(op *call, name string, r io.Reader) (string, error) {
	dir, isURI, err := localPath(op.uri)
	if err != nil {
		return "", err
	}
	if err = withinRoots(dir, op.opts.LocalRoots); err != nil {
		return "", err
	}
	target := filepath.Join(dir, filepath.FromSlash(name))
	tdir := filepath.Dir(target)
	if err = os.MkdirAll(tdir, 0o750); err != nil {
		return "", fileErr(err)
	}
	tmp, err := os.CreateTemp(tdir, "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return "", fileErr(err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, r); err != nil {
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return "", err
	}
	done = true
	if d, err := os.Open(tdir); err == nil {
		_ = d.Sync() // make the rename durable; best effort
		d.Close()
	}
	if isURI {
		return (&url.URL{Scheme: SchemeFile, Path: filepath.ToSlash(target)}).String(), nil
	}
	return target, nil
}

// CheckLocal reports whether a destination may be written to under opts: nil for
// anything but a local path or file:// URI, which must lie within opts.LocalRoots.
func CheckLocal(uri string, opts Options) error {
	if s, err := schemeOf(uri); err != nil || s != SchemeFile {
		return err
	}
	dir, _, err := localPath(uri)
	if err != nil {
		return err
	}
	return withinRoots(dir, opts.LocalRoots)
}

// withinRoots refuses a directory outside every root, symlinks resolved as far as the
// path exists (a link inside a root may point out of it).
func withinRoots(dir string, roots []string) error {
	if len(roots) == 0 {
		return nil
	}
	real := resolveExisting(dir)
	for _, root := range roots {
		rel, err := filepath.Rel(resolveExisting(filepath.Clean(root)), real)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is outside the directories backups may be written to (%s)", ErrForbiddenAddress, dir, strings.Join(roots, ", "))
}

// resolveExisting resolves the symlinks of the longest existing prefix of the absolute
// path p and appends the rest unchanged.
func resolveExisting(p string) string {
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
