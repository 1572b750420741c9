package local

import (
	"time"

	"clouddb/redisdata"
)

// SetLogRate sets how many bytes a second the servers started from now on may have
// clouddb read of their log output, and returns the rate it replaces.
func SetLogRate(bytesPerSecond int64) int64 { return logRate.Swap(bytesPerSecond) }

// NodePids returns the pids of the database's primary and replica servers, 0 for one
// that does not run.
func (d *Driver) NodePids(id int) (primary, replica int) {
	p := d.primaryNode(id)
	return d.livePid(p), d.livePid(d.other(p))
}

// LimitLoader caps the address space of process pid as that of a server loading an
// import into a database limited to maxMemory bytes.
func LimitLoader(pid int, maxMemory int64) error { return redisdata.CapAddressSpace(pid, maxMemory) }

// SetMaxBusy sets how long a server may answer BUSY before the driver restarts it.
func (d *Driver) SetMaxBusy(v time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.maxBusy = v
}

// SetStopTimeout sets how long the driver waits for a server to stop, and for a
// background save to end before an import's reload.
func (d *Driver) SetStopTimeout(t time.Duration) { d.stopTimeout = t }
