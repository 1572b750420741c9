package local

import "time"

// defaultMaxBusy is how long a server may answer BUSY (a tenant's script or function that
// does not end) before clouddb restarts it: long enough for any script a tenant means to
// run, and for the tenant to SCRIPT KILL one it did not.
const defaultMaxBusy = 10 * time.Minute

// busyMark is since when a node's server (process pid) has answered BUSY.
type busyMark struct {
	pid   int
	since time.Time
}

// markBusy records that node n's server pid answers BUSY and returns since when it has,
// and whether that is longer than the driver lets it be.
func (d *Driver) markBusy(n node, pid int) (since time.Time, tooLong bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.busySince[n]
	if !ok || m.pid != pid {
		m = busyMark{pid: pid, since: time.Now()}
		d.busySince[n] = m
	}
	return m.since, time.Since(m.since) >= d.maxBusy
}
