//go:build !linux

package browser_test

import "os/exec"

func setProcAttr(cmd *exec.Cmd) {}
