package browser_test

import (
	"os/exec"
	"syscall"
)

// setProcAttr has the kernel kill the server if the test binary dies before its cleanup.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
