//go:build !linux

package local

// watchExit does nothing here: the next check finds a dead server.
func (d *Driver) watchExit(n node, pid int) {}

// watchPid cannot watch here: the caller waits for the process itself.
func (d *Driver) watchPid(id, pid int, dir string, gone func()) bool { return false }

// watchedPid is watchExit's on Linux.
type watchedPid struct {
	id, pid int
	dir     string
}
