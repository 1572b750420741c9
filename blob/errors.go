package blob

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
)

// Error is the error of a failed Open, Put or read. Its message names the operation and
// the redacted URI and never contains a secret.
type Error struct {
	Op   string // "open", "put" or "read"
	URI  string // redacted
	Kind error  // ErrForbiddenAddress, ErrUnsupported, ErrInvalid, ErrNotFound, ErrAuth, ErrUnreachable or nil
	// Detail describes the cause, with every secret of the call removed.
	Detail string
	std    error // context.Canceled, context.DeadlineExceeded or io.ErrUnexpectedEOF when the cause was one
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("blob: ")
	b.WriteString(e.Op)
	b.WriteString(" ")
	b.WriteString(e.URI)
	b.WriteString(": ")
	switch {
	case e.Kind != nil && e.Detail != "":
		b.WriteString(e.Kind.Error())
		b.WriteString(": ")
		b.WriteString(e.Detail)
	case e.Kind != nil:
		b.WriteString(e.Kind.Error())
	default:
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap gives the sentinel kind and, when the cause was a context error or
// io.ErrUnexpectedEOF, that error.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.std != nil {
		errs = append(errs, e.std)
	}
	return errs
}

// call carries what an operation needs to report a failure safely.
type call struct {
	op      string
	uri     string
	opts    Options
	secrets []string // removed from every message
}

func (c *call) secret(s string) {
	if s != "" {
		c.secrets = append(c.secrets, s, url.QueryEscape(s), url.PathEscape(s))
	}
}

// fail turns any error into an *Error.
func (c *call) fail(err error) error {
	return c.failOp(c.op, err)
}

func (c *call) failOp(op string, err error) error {
	var be *Error
	if errors.As(err, &be) {
		return be
	}
	e := &Error{Op: op, URI: Redact(c.uri), Kind: classify(err)}
	for _, std := range []error{context.Canceled, context.DeadlineExceeded, io.ErrUnexpectedEOF} {
		if errors.Is(err, std) {
			e.std = std
			break
		}
	}
	detail := describe(err)
	if e.Kind != nil {
		// Avoid "not found: not found: ..." when the cause already names the kind.
		detail = strings.ReplaceAll(detail, e.Kind.Error()+": ", "")
		if detail == e.Kind.Error() {
			detail = ""
		}
	}
	e.Detail = c.scrub(detail)
	return e
}

func (c *call) scrub(s string) string {
	for _, sec := range c.secrets {
		if len(sec) >= 3 {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return s
}

// describe renders err without the URLs that url.Error and similar wrappers quote.
func describe(err error) string {
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// classify maps a cause to a sentinel, or nil.
func classify(err error) error {
	for _, k := range []error{ErrForbiddenAddress, ErrUnsupported, ErrInvalid, ErrNotFound, ErrAuth, ErrUnreachable} {
		if errors.Is(err, k) {
			return k
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrUnreachable
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return ErrUnreachable
	}
	for _, errno := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT, syscall.EHOSTDOWN, syscall.ENETDOWN, syscall.EPIPE} {
		if errors.Is(err, errno) {
			return ErrUnreachable
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrUnreachable
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return ErrUnreachable
	}
	return nil
}

// reader wraps a returned stream so that its errors are *Error values too.
type reader struct {
	rc io.ReadCloser
	op *call
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if err != nil && err != io.EOF {
		err = r.op.failOp("read", err)
	}
	return n, err
}

func (r *reader) Close() error {
	if err := r.rc.Close(); err != nil {
		return r.op.failOp("close", err)
	}
	return nil
}
