//go:build !linux

package redisdata_test

import "syscall"

func serverProcAttr() *syscall.SysProcAttr { return nil }
