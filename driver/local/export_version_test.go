package local

// ReplicaBinary is the binary the database's replicator loads snapshots with; "" when it
// replicates from none.
func ReplicaBinary(d *Driver, id int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.replicas[id]; r != nil {
		return r.bin
	}
	return ""
}

// BinaryOf is the binary the driver runs a version with.
func BinaryOf(d *Driver, version string) string { return d.bins[version] }
