package local

import (
	"os"
	"path/filepath"
)

// writeConfigUnsynced is writeConfig without its syncs, for a new node: syncNewNode
// makes the file durable while its server starts.
func (d *Driver) writeConfigUnsynced(n node, c serverConfig) error {
	data, err := c.render(n.db, n.dir)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(n.dir, confFile), data, 0o600, false)
}

// syncNewNode makes a new node's config file durable and records the Redis version that
// serves it (see start).
func syncNewNode(dir, version string) error {
	f, err := os.Open(filepath.Join(dir, confFile))
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// recordVersion syncs the directory, and with it the config's rename.
	return recordVersion(dir, version)
}
