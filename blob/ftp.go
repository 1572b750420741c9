package blob

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"path"
	"strings"

	"github.com/jlaffaye/ftp"
)

// ftpTarget is a parsed ftp:// URI.
type ftpTarget struct {
	u          *url.URL
	addr       string // host:port
	user, pass string
	path       string // as sent to the server: relative to the login directory unless absolute
}

func parseFTP(op *call) (*ftpTarget, error) {
	u, err := parseURL(op.uri)
	if err != nil {
		return nil, err
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%w: no host", ErrInvalid)
	}
	if u.RawQuery != "" {
		return nil, fmt.Errorf("%w: ftp URI with a query", ErrInvalid)
	}
	t := &ftpTarget{u: u, addr: u.Host}
	if u.Port() == "" {
		t.addr = net.JoinHostPort(u.Hostname(), "21")
	}
	t.user, t.pass, _ = userinfo(u)
	op.secret(t.pass)
	if t.user == "" {
		t.user, t.pass = "anonymous", "anonymous"
	}
	// As curl does: "ftp://h/a/b" is a/b in the login directory, "ftp://h//a/b" is /a/b.
	p := strings.TrimPrefix(u.Path, "/")
	if strings.ContainsAny(p, "\r\n\x00") {
		return nil, fmt.Errorf("%w: control characters in the path", ErrInvalid)
	}
	t.path = p
	return t, nil
}

func (t *ftpTarget) connect(ctx context.Context, o Options) (*ftp.ServerConn, error) {
	if err := CheckHost(t.u.Hostname()); err != nil {
		return nil, err
	}
	c, err := ftp.Dial(t.addr,
		ftp.DialWithContext(ctx),
		ftp.DialWithTimeout(o.timeout()),
		ftp.DialWithShutTimeout(o.timeout()),
		ftp.DialWithDialFunc(func(network, address string) (net.Conn, error) {
			return dialBound(ctx, network, address, o)
		}))
	if err != nil {
		return nil, ftpErr(err, false)
	}
	if err := c.Login(t.user, t.pass); err != nil {
		_ = c.Quit()
		var te *textproto.Error
		if !errors.As(err, &te) && classify(err) == nil {
			// The library reports a refused USER (e.g. "530 anonymous only") without its code.
			return nil, fmt.Errorf("%w: FTP login refused: %v", ErrAuth, err)
		}
		return nil, ftpErr(err, false)
	}
	return c, nil
}

// ftpErr maps FTP replies: 530/332 not logged in → ErrAuth, 421 → ErrUnreachable, and on
// reads 550 → ErrNotFound.
func ftpErr(err error, reading bool) error {
	var te *textproto.Error
	if errors.As(err, &te) {
		switch {
		case te.Code == ftp.StatusNotLoggedIn || te.Code == ftp.StatusStorNeedAccount || te.Code == ftp.StatusLoginNeedAccount:
			return fmt.Errorf("%w: FTP %d %s", ErrAuth, te.Code, te.Msg)
		case te.Code == ftp.StatusNotAvailable:
			return fmt.Errorf("%w: FTP %d %s", ErrUnreachable, te.Code, te.Msg)
		case reading && te.Code == ftp.StatusFileUnavailable:
			return fmt.Errorf("%w: FTP %d %s", ErrNotFound, te.Code, te.Msg)
		}
		return fmt.Errorf("FTP %d %s", te.Code, te.Msg)
	}
	return err
}

func openFTP(ctx context.Context, op *call) (io.ReadCloser, int64, error) {
	t, err := parseFTP(op)
	if err != nil {
		return nil, 0, err
	}
	if t.path == "" || strings.HasSuffix(t.path, "/") {
		return nil, 0, fmt.Errorf("%w: no file name in the path", ErrInvalid)
	}
	c, err := t.connect(ctx, op.opts)
	if err != nil {
		return nil, 0, err
	}
	size, err := c.FileSize(t.path)
	if err != nil {
		size = -1 // SIZE is optional; RETR tells whether the file exists
	}
	resp, err := c.Retr(t.path)
	if err != nil {
		_ = c.Quit()
		return nil, 0, ftpErr(err, true)
	}
	return &ftpReader{resp: resp, conn: c}, size, nil
}

type ftpReader struct {
	resp *ftp.Response
	conn *ftp.ServerConn
}

func (r *ftpReader) Read(p []byte) (int, error) { return r.resp.Read(p) }

func (r *ftpReader) Close() error {
	err := r.resp.Close()
	if qerr := r.conn.Quit(); err == nil && qerr != nil && !isClosed(qerr) {
		err = qerr
	}
	if err != nil {
		return ftpErr(err, true)
	}
	return nil
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF)
}

func putFTP(ctx context.Context, op *call, name string, r io.Reader) (string, error) {
	t, err := parseFTP(op)
	if err != nil {
		return "", err
	}
	target := path.Join(t.path, name)
	if strings.HasPrefix(t.path, "/") {
		target = "/" + strings.TrimPrefix(target, "/")
	}
	c, err := t.connect(ctx, op.opts)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Quit() }()

	dir := path.Dir(target)
	if dir != "." && dir != "/" {
		// Create the directories; an error here (it exists, or we may not) shows up
		// as a clearer one from STOR below.
		prefix := ""
		if strings.HasPrefix(dir, "/") {
			prefix = "/"
		}
		for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
			prefix = path.Join(prefix, part)
			_ = c.MakeDir(prefix)
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, "."+path.Base(target)+".tmp-"+hex.EncodeToString(rnd[:]))
	if err := c.Stor(tmp, r); err != nil {
		_ = c.Delete(tmp)
		return "", ftpErr(err, false)
	}
	if err := c.Rename(tmp, target); err != nil {
		_ = c.Delete(tmp)
		return "", ftpErr(err, false)
	}
	return locationOf(op.uri, name), nil
}
