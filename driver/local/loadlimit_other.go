//go:build !linux

package local

// limitLoader and liftLoaderLimit do nothing here: the memory watch alone bounds a
// loading server (see the Linux version).
func limitLoader(pid int, maxMemory int64) error { return nil }

func liftLoaderLimit(pid int) error { return nil }
