//go:build !linux

package local

import "syscall"

// checkProcAttr: only Linux can tie a child's life to its parent's; elsewhere a
// rule-checking server outlives a clouddb killed during the check (it holds no data and
// listens only on a unix socket in a temporary directory).
func checkProcAttr() *syscall.SysProcAttr { return nil }
