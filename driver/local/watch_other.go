//go:build !linux

package local

// watchExit does nothing here: the next check finds a dead server.
func (d *Driver) watchExit(id, pid int) {}

// watchedPid is watchExit's on Linux.
type watchedPid struct{ id, pid int }
