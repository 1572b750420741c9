package redisdata

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is the capacity asked for the pipe an import streams through: the default 64
// KiB made the feeder and the loading server take turns every 64 KiB, which cost more
// than a fifth of the load's time on two cores. 1 MiB is what an unprivileged process may
// ask (/proc/sys/fs/pipe-max-size).
const pipeSize = 1 << 20

// GrowPipe asks for a larger capacity of the pipe behind f; a refusal leaves it as it is.
func GrowPipe(f *os.File) {
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
		})
	}
}
