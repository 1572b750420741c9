package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/time/rate"
)

// A server's log is clouddb's to keep, not the server's: a tenant's Lua script may write
// to it (redis.log) as fast as the server runs, with no ACL check, and a log file the
// server appends to would fill the disk every database shares. So each server logs to
// its stdout (logfile ""), a pipe that a clouddb goroutine reads at a bounded rate and
// writes to redis.log through a writer that rotates it to redis.log.1 at logCap. A flood
// fills the pipe and then blocks the server's own writes: it slows the tenant's own
// server, not clouddb nor the disk.
//
// The pipe lives as long as the clouddb that started the server: a server adopted after
// clouddb restarted still writes to its old pipe, whose reader is gone, and its lines are
// lost (it inherits an ignored SIGPIPE, see New, so it only sees failed writes) until
// its next restart.

// logCap is the size at which redis.log is rotated to redis.log.1, replacing it: a
// database keeps at most about twice this much log.
const logCap = 4 << 20

// logBurst is how much log a server may write at once before the rate applies: more than
// a start-up or a shutdown writes.
const logBurst = 1 << 20

// logRate is how many bytes a second clouddb reads from each server's log pipe past the
// burst: far more than a server writes of itself (a few lines a minute), far less than a
// script can.
var logRate atomic.Int64

func init() { logRate.Store(1 << 20) }

// logChunk is the most read from the pipe at a time.
const logChunk = 32 << 10

// keepLog copies the server's output from r into the capped log at path, at most
// logRate bytes a second past logBurst, until r ends (the server and every process it
// forked have exited). Whatever goes wrong with the file, it keeps draining r, so the
// server never blocks for good on a log clouddb cannot write.
func keepLog(path string, r io.ReadCloser) { keepLogReady(path, r, nil) }

// readyLine is what redis logs once it accepts connections ("Ready to accept connections
// tcp" since 7.2).
var readyLine = []byte("Ready to accept connections")

// keepLogReady is keepLog that also calls ready, if not nil, when the server logs that it
// accepts connections, so that its start need not poll finely for it. Nobody but the
// server writes there before: its clients cannot connect yet.
func keepLogReady(path string, r io.ReadCloser, ready func()) {
	defer r.Close()
	w := openCappedLog(path, logCap)
	defer w.Close()
	lim := rate.NewLimiter(rate.Limit(logRate.Load()), logBurst)
	copyChunk := func(p []byte) {
		if ready != nil && bytes.Contains(p, readyLine) {
			ready()
			ready = nil
		}
		_, _ = w.Write(p)                           // a line that cannot be written is dropped
		_ = lim.WaitN(context.Background(), len(p)) // len(p) ≤ logChunk < logBurst: it cannot fail
	}
	if sc, ok := r.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil && keepLogRaw(rc, copyChunk) {
			return
		}
	}
	buf := make([]byte, logChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			copyChunk(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// cappedLog appends to a file and, before a write would take it past max, renames it to
// path.1 (replacing the one before) and starts a new one. It never fails a write for
// good: after an error it tries to open the file again at the next write.
type cappedLog struct {
	path string
	max  int64
	f    *os.File
	size int64
}

func openCappedLog(path string, max int64) *cappedLog {
	w := &cappedLog{path: path, max: max}
	w.open(os.O_APPEND)
	if w.f != nil && w.size >= max {
		// A log grown by an older clouddb, whose servers appended to it themselves.
		w.rotate()
	}
	return w
}

func (w *cappedLog) open(flag int) {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err != nil {
		return
	}
	w.f, w.size = f, 0
	if st, err := f.Stat(); err == nil {
		w.size = st.Size()
	}
}

// rotate moves the log to path.1 and starts an empty one. A path.1 larger than the cap
// (left by an older clouddb) keeps only its last max bytes.
func (w *cappedLog) rotate() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	old := w.path + ".1"
	if err := os.Rename(w.path, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(w.path)
	}
	if st, err := os.Stat(old); err == nil && st.Size() > w.max+logChunk {
		keepTail(old, w.max)
	}
	w.open(os.O_TRUNC)
}

func (w *cappedLog) Write(p []byte) (int, error) {
	if w.f == nil {
		w.open(os.O_APPEND)
		if w.f == nil {
			return 0, errors.New("log file cannot be opened")
		}
	}
	if w.size > 0 && w.size+int64(len(p)) > w.max {
		w.rotate()
		if w.f == nil {
			return 0, errors.New("log file cannot be opened")
		}
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	if err != nil {
		w.f.Close()
		w.f = nil
	}
	return n, err
}

func (w *cappedLog) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// keepTail cuts the file at path down to its last n bytes; if it cannot, it removes it.
func keepTail(path string, n int64) {
	data, err := func() ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if _, err = f.Seek(-n, io.SeekEnd); err != nil {
			return nil, err
		}
		return io.ReadAll(io.LimitReader(f, n))
	}()
	if err == nil {
		err = writeFileAtomic(path, data, 0o600)
	}
	if err != nil {
		_ = os.Remove(path)
	}
}
