package local

import "syscall"

// checkProcAttr has the kernel kill a rule-checking server when the thread that started
// it ends: with clouddb, even by SIGKILL, which no deferred kill survives. The thread is
// kept for the check (see runCheck), so that it is the process's death, not the thread's
// reuse, that ends the server.
func checkProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
