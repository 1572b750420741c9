//go:build !linux

package redisdata

import "syscall"

// dieWithParent has no portable equivalent outside Linux: servers are killed by Close.
func dieWithParent() *syscall.SysProcAttr { return nil }
