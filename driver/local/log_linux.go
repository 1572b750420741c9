package local

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// logBufs are the buffers keepLogRaw reads into, shared between the servers' logs.
var logBufs = sync.Pool{New: func() any { b := make([]byte, logChunk); return &b }}

// keepLogRaw is keepLog's loop on a pipe in the runtime's poller: it holds a buffer only
// while the pipe has data, not while it waits. A thousand servers, quiet nearly always,
// held 32 KiB each otherwise. It reports false if rc cannot be read this way (nothing
// read then), and true once the pipe ended.
func keepLogRaw(rc syscall.RawConn, copyChunk func([]byte)) bool {
	for {
		eof, failed := false, false
		err := rc.Read(func(fd uintptr) bool {
			// What the pipe holds, without a buffer; a read of one byte, if none, tells
			// an empty pipe (wait) from its end.
			avail, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
			if err != nil {
				failed = true
				return true
			}
			if avail == 0 {
				var one [1]byte
				n, err := syscall.Read(int(fd), one[:])
				switch {
				case err == syscall.EAGAIN:
					return false
				case err == syscall.EINTR:
					return false
				case err != nil || n == 0:
					eof = true
					return true
				}
				copyChunk(one[:n])
				return true
			}
			bp := logBufs.Get().(*[]byte)
			defer logBufs.Put(bp)
			// Drained until empty: the poller reports only new data, not data left behind.
			for {
				n, err := syscall.Read(int(fd), *bp)
				if n > 0 {
					copyChunk((*bp)[:n])
				}
				switch {
				case err == syscall.EINTR:
					continue
				case err == syscall.EAGAIN:
					return true
				case err != nil || n == 0:
					eof = true
					return true
				}
			}
		})
		if failed {
			return false
		}
		if err != nil || eof {
			return true
		}
	}
}
