//go:build !linux

package redisdata

// CapAddressSpace and LiftAddressSpace do nothing here (see the Linux version).
func CapAddressSpace(pid int, maxMemory int64) error { return nil }

func LiftAddressSpace(pid int) error { return nil }
