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
	// The version file's write syncs the directory, and with it the config's rename: it
	// is written even if it already says the same (recordVersion would skip it then, and
	// the directory's sync with it), as a node whose removal a crash cut short may have
	// left one behind its config.
	return writeFileAtomic(filepath.Join(dir, versionFile), []byte(version+"\n"), 0o600)
}
