package redisdata

import "syscall"

// dieWithParent makes the kernel kill a throwaway server when this process dies, so a
// crash of the caller does not leave servers holding a copy of someone's data in memory.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
