package local

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// The driver's own connections to its servers (probes, administration, backups, imports,
// replicators) go through a unix socket each server listens on, not through its TCP
// port: the port is the tenant's and may speak TLS only, and nodes that serve no
// endpoint of their own listen on the socket alone (port 0).

// sockFile is a server's socket in its database directory.
const sockFile = "redis.sock"

// maxSocketPath is the longest unix socket path the kernel takes (sun_path holds 108
// bytes with the terminating NUL).
const maxSocketPath = 107

// maxIDDigits is the length of the largest database id (a positive int64).
const maxIDDigits = 19

// socketDir is where the servers' sockets go. "" means each database's own directory,
// which is used when the longest such path fits maxSocketPath. A deep data directory (Go
// test temporary directories alone are ~90 bytes) gets a short directory under
// os.TempDir() instead, named after the data directory, so that a later Driver on the
// same data directory finds the sockets of the servers it adopts. That directory is made
// 0700 and must be ours: a directory someone else made there could hand clouddb's
// connections to a stranger.
func socketDir(dataDir string) (string, error) {
	if len(dataDir)+len("/")+maxIDDigits+len("/"+sockFile) <= maxSocketPath {
		return "", nil
	}
	sum := sha256.Sum256([]byte(dataDir))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("clouddb-%d-%x", os.Getuid(), sum[:6]))
	if len(dir)+len("/")+maxIDDigits+len(".sock") > maxSocketPath {
		return "", fmt.Errorf("no directory for unix sockets: %s and %s are too long (a socket path has at most %d bytes); set TMPDIR to a short path", dataDir, dir, maxSocketPath)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm() != 0o700 {
		return "", fmt.Errorf("socket directory %s is not a directory of this user with mode 0700; remove it", dir)
	}
	return dir, nil
}

// sockPath is the unix socket of database id's server.
func (d *Driver) sockPath(id int) string {
	if d.sockDir == "" {
		return filepath.Join(d.dbDir(id), sockFile)
	}
	return filepath.Join(d.sockDir, strconv.Itoa(id)+".sock")
}
