//go:build !linux

package local

import "syscall"

// keepLogRaw is Linux's: elsewhere keepLog reads with a buffer of its own.
func keepLogRaw(syscall.RawConn, func([]byte)) bool { return false }
