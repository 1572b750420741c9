package redisdata_test

import "syscall"

// serverProcAttr makes the test's servers die with the test binary, even when it is
// killed by a timeout.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
