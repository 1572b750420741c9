package redisdata

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errProtocol is wrapped by the errors that mean the peer did not speak the replication
// protocol as a Redis master does.
var errProtocol = errors.New("replication protocol error")

// Bounds on what a master may announce, so that garbage or a hostile "source" cannot make
// us allocate without limit. They are Redis's own limits (proto-max-bulk-len's maximum
// and the multibulk length it accepts).
const (
	maxBulk  = 512 << 20
	maxArgs  = 1 << 20
	markSize = 40 // the random delimiter of a diskless (EOF:<mark>) RDB payload
)

// link is a connection to a master that we speak the replication protocol on by hand:
// go-redis has no notion of a connection that turns into a byte stream (the RDB) and
// then into a stream of commands the server pushes.
type link struct {
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex // REPLCONF ACKs are written from two goroutines
	stop func() bool
}

// openLink connects to e and authenticates. Every read waits at most idle for the next
// byte (a master sends `\n` keep-alives while it prepares the RDB and PINGs on the
// stream, so silence longer than that is a dead link), and cancelling ctx closes the
// connection so a blocked read returns at once.
func openLink(ctx context.Context, e Endpoint, idle time.Duration) (*link, error) {
	conn, err := dial(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", e.Addr, err)
	}
	l := &link{conn: conn}
	l.br = bufio.NewReaderSize(idleReader{conn: conn, idle: idle}, 64<<10)
	l.stop = context.AfterFunc(ctx, func() { conn.Close() })
	if e.Password != "" {
		args := []string{"AUTH", e.Password}
		if e.Username != "" {
			args = []string{"AUTH", e.Username, e.Password}
		}
		if _, err := l.call(args...); err != nil {
			l.close()
			return nil, fmt.Errorf("AUTH on %s: %w", e.Addr, classify(err))
		}
	}
	return l, nil
}

func (l *link) close() {
	l.stop()
	l.conn.Close()
}

// idleReader sets a fresh read deadline before each read.
type idleReader struct {
	conn net.Conn
	idle time.Duration
}

func (r idleReader) Read(p []byte) (int, error) {
	if err := r.conn.SetReadDeadline(time.Now().Add(r.idle)); err != nil {
		return 0, err
	}
	return r.conn.Read(p)
}

// send writes one command as a RESP array.
func (l *link) send(args ...string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.conn.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	_, err := l.conn.Write(b.Bytes())
	return err
}

// replyError is an error reply (`-ERR …`) of the master.
type replyError string

func (e replyError) Error() string { return string(e) }

// call sends a command and reads its status reply. Empty lines before the reply are
// keep-alives (a master may send them before it answers PSYNC) and are skipped.
func (l *link) call(args ...string) (string, error) {
	if err := l.send(args...); err != nil {
		return "", err
	}
	for {
		line, err := l.readLine()
		if err != nil {
			return "", err
		}
		switch {
		case line == "":
			continue
		case line[0] == '-':
			return "", replyError(line[1:])
		case line[0] == '+':
			return line[1:], nil
		default:
			return "", fmt.Errorf("%w: unexpected reply %.40q to %s", errProtocol, line, args[0])
		}
	}
}

// readLine reads one line without its CR LF.
func (l *link) readLine() (string, error) {
	s, err := l.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(s) > 64<<10 {
		return "", fmt.Errorf("%w: line too long", errProtocol)
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// handshake announces us as a replica that understands diskless payloads (capa eof) and
// PSYNC2, then asks for a full resync (replid "?") or a continuation, and returns the
// master's answer. rdbOnly asks the master not to keep us as a replica after the RDB
// (Redis 7.0+, ignored by older servers), as `redis-cli --rdb` does. Masters without PSYNC
// get SYNC, which always answers with a full payload and no FULLRESYNC line.
func (l *link) handshake(rdbOnly bool, replid string, offset int64) (psyncReply, error) {
	if _, err := l.call("REPLCONF", "capa", "eof", "capa", "psync2"); err != nil {
		return psyncReply{}, fmt.Errorf("REPLCONF capa: %w", classify(err))
	}
	if rdbOnly {
		if _, err := l.call("REPLCONF", "rdb-only", "1"); err != nil {
			var re replyError
			if !errors.As(err, &re) {
				return psyncReply{}, err
			}
		}
	}
	off := "-1"
	if replid == "" {
		replid = "?"
	} else {
		off = strconv.FormatInt(offset+1, 10) // the first byte we still need
	}
	line, err := l.call("PSYNC", replid, off)
	var re replyError
	if errors.As(err, &re) && strings.Contains(strings.ToLower(string(re)), "unknown command") {
		if serr := l.send("SYNC"); serr != nil {
			return psyncReply{}, serr
		}
		return psyncReply{full: true, offset: -1}, nil
	}
	if err != nil {
		return psyncReply{}, fmt.Errorf("PSYNC: %w", classify(err))
	}
	f := strings.Fields(line)
	switch {
	case len(f) == 3 && f[0] == "FULLRESYNC":
		o, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return psyncReply{}, fmt.Errorf("%w: bad FULLRESYNC offset %q", errProtocol, f[2])
		}
		return psyncReply{full: true, replid: f[1], offset: o}, nil
	case len(f) >= 1 && f[0] == "CONTINUE":
		r := psyncReply{replid: replid, offset: offset}
		if len(f) == 2 {
			r.replid = f[1]
		}
		return r, nil
	}
	return psyncReply{}, fmt.Errorf("%w: unexpected PSYNC reply %.60q", errProtocol, line)
}

// psyncReply is what a master answered to PSYNC: a full resync from replid/offset, with
// an RDB payload to follow, or a continuation of the stream we had (offset is then the
// last byte we applied).
type psyncReply struct {
	full   bool
	replid string
	offset int64
}

// readRDB copies the RDB payload that follows a full resync to w and returns its size.
// The master sends `\n` keep-alives until the payload starts, then either `$<len>\r\n`
// and len bytes (disk-based sync), or `$EOF:<40-byte mark>\r\n`, the bytes, and the mark
// again (diskless sync, whose size is not known in advance).
func (l *link) readRDB(w io.Writer) (int64, error) {
	for {
		b, err := l.br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b == '\n' {
			continue
		}
		if b == '-' {
			line, err := l.readLine()
			if err != nil {
				return 0, err
			}
			return 0, replyError(line)
		}
		if b != '$' {
			return 0, fmt.Errorf("%w: expected an RDB payload, got byte %q", errProtocol, b)
		}
		break
	}
	head, err := l.readLine()
	if err != nil {
		return 0, err
	}
	if mark, ok := strings.CutPrefix(head, "EOF:"); ok {
		if len(mark) != markSize {
			return 0, fmt.Errorf("%w: EOF mark of %d bytes", errProtocol, len(mark))
		}
		return copyUntilMark(l.br, w, []byte(mark))
	}
	n, err := strconv.ParseInt(head, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: bad payload length %.40q", errProtocol, head)
	}
	return io.CopyN(w, l.br, n)
}

// copyUntilMark copies from br to w until mark, which it consumes but does not copy, and
// leaves whatever follows the mark in br. The last len(mark)-1 bytes seen are held back
// until more arrive, because they may be the start of the mark.
func copyUntilMark(br *bufio.Reader, w io.Writer, mark []byte) (int64, error) {
	var total int64
	held := make([]byte, 0, len(mark))
	var scratch []byte
	for {
		if _, err := br.Peek(1); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return total, err
		}
		chunk, _ := br.Peek(br.Buffered())
		scratch = append(append(scratch[:0], held...), chunk...)
		if i := bytes.Index(scratch, mark); i >= 0 {
			n, err := w.Write(scratch[:i])
			total += int64(n)
			if _, derr := br.Discard(i + len(mark) - len(held)); err == nil {
				err = derr
			}
			return total, err
		}
		cut := max(len(scratch)-(len(mark)-1), 0)
		n, err := w.Write(scratch[:cut])
		total += int64(n)
		if err != nil {
			return total, err
		}
		held = append(held[:0], scratch[cut:]...)
		if _, err := br.Discard(len(chunk)); err != nil {
			return total, err
		}
	}
}

// command is one command of the replication stream, with the number of bytes it took in
// the stream (the replication offset advances by that much).
type command struct {
	args [][]byte
	size int64
}

func (c command) name() string {
	if len(c.args) == 0 {
		return ""
	}
	return strings.ToLower(string(c.args[0]))
}

// readCommand reads one command of the stream that follows the RDB. A master sends every
// command as a RESP array of bulk strings; a stray newline (a late keep-alive) is not
// part of the replication offset and is skipped.
func (l *link) readCommand() (command, error) {
	var c command
	for {
		line, err := l.br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = fmt.Errorf("%w: line too long", errProtocol)
			}
			return c, err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			continue
		}
		if line[0] != '*' {
			return c, fmt.Errorf("%w: expected a command array, got %.40q", errProtocol, line)
		}
		n, err := parseLen(line[1:], maxArgs)
		if err != nil {
			return c, err
		}
		c.size = int64(len(line))
		c.args = make([][]byte, n)
		break
	}
	for i := range c.args {
		line, err := l.br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = fmt.Errorf("%w: line too long", errProtocol)
			}
			return c, err
		}
		if line[0] != '$' {
			return c, fmt.Errorf("%w: expected a bulk string, got %.40q", errProtocol, line)
		}
		n, err := parseLen(line[1:], maxBulk)
		if err != nil {
			return c, err
		}
		c.size += int64(len(line))
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(l.br, buf); err != nil {
			return c, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return c, fmt.Errorf("%w: bulk string not terminated by CRLF", errProtocol)
		}
		c.args[i] = buf[:n:n]
		c.size += int64(n + 2)
	}
	return c, nil
}

func parseLen(b []byte, limit int) (int, error) {
	s := string(bytes.TrimRight(b, "\r\n"))
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > limit {
		return 0, fmt.Errorf("%w: bad length %.20q", errProtocol, s)
	}
	return n, nil
}
