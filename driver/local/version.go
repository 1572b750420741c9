package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"clouddb"
)

// File names of the version bookkeeping inside a database's directory.
const (
	// versionFile holds the Redis version (major.minor) of the binary the server was last
	// started with: a running server whose version differs from its instance's is
	// upgraded (see upgradeStop), and an older version is refused (see versionChange).
	versionFile = "redis.version"
	// upgradeFile marks that the server was shut down for an upgrade after writing an
	// RDB of its whole data set: the next start loads that RDB whatever the persistence,
	// even after a crash in between. It goes once the new server has loaded it.
	upgradeFile = "upgrade.pending"
)

// MinRedisVersion is the oldest Redis clouddb runs: the ACL rules it gives tenants' users
// need 7.0 (subcommand rules such as -script|debug, %R~ read-only key patterns, selectors
// off, allchannels).
const MinRedisVersion = "7.0"

// RedisBinary is a redis-server binary and the version it reports.
type RedisBinary struct {
	// Path is the binary's absolute path (a name is looked up in PATH when it is probed).
	Path string
	// Version is its major.minor (7.0), the version clouddb offers it as.
	Version string
	// Full is its full version (7.0.15).
	Full string
}

// versionOutput finds the version in `redis-server --version`: "Redis server v=7.0.15
// sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=...".
var versionOutput = regexp.MustCompile(`\bv=([0-9]+\.[0-9]+(?:\.[0-9]+)?)`)

// probeTimeout bounds `redis-server --version`, which answers at once.
const probeTimeout = 10 * time.Second

// ProbeRedisServer runs `path --version` and returns the version the binary reports. A
// binary that is not found, does not run, does not answer like redis-server or is older
// than MinRedisVersion fails.
func ProbeRedisServer(ctx context.Context, path string) (RedisBinary, error) {
	abs, err := lookBinary(path)
	if err != nil {
		return RedisBinary{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, abs, "--version").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && len(exit.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, firstLine(strings.TrimSpace(string(exit.Stderr))))
		}
		return RedisBinary{}, fmt.Errorf("%s --version: %w", path, err)
	}
	m := versionOutput.FindSubmatch(out)
	if m == nil {
		return RedisBinary{}, fmt.Errorf("%s --version answered %q, not a redis-server version (Redis server v=X.Y.Z ...)", path, firstLine(strings.TrimSpace(string(out))))
	}
	full := string(m[1])
	mm, ok := clouddb.MajorMinor(full)
	if !ok {
		return RedisBinary{}, fmt.Errorf("%s --version: version %q is not major.minor[.patch]", path, full)
	}
	b := RedisBinary{Path: abs, Version: mm, Full: full}
	return b, b.checkMin()
}

// checkMin fails for a binary older than MinRedisVersion.
func (b RedisBinary) checkMin() error {
	if clouddb.CompareRedisVersions(b.Version, MinRedisVersion) < 0 {
		return fmt.Errorf("%s is Redis %s; clouddb needs Redis %s or newer (the ACL rules it gives tenants use -script|debug, %%R~ key patterns, selectors off and allchannels)",
			b.Path, b.Full, MinRedisVersion)
	}
	return nil
}

// lookBinary is the absolute path of a binary given as a path or a name in PATH.
func lookBinary(name string) (string, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("redis-server not found (%s): install it, e.g. apt-get install -y redis-server: %w", name, err)
	}
	return filepath.Abs(bin)
}

// binaries resolves the Config's binaries into version → absolute path and the versions
// offered, the first binary's the default. Without any, redis-server in PATH is probed.
func binaries(cfg Config) (map[string]string, clouddb.RedisVersions, error) {
	given := cfg.RedisServers
	if len(given) == 0 {
		b, err := ProbeRedisServer(context.Background(), DefaultRedisServer)
		if err != nil {
			return nil, clouddb.RedisVersions{}, err
		}
		given = []RedisBinary{b}
	}
	bins := make(map[string]string, len(given))
	versions := clouddb.RedisVersions{Default: given[0].Version, Full: make(map[string]string, len(given))}
	for _, b := range given {
		if _, ok := clouddb.MajorMinor(b.Version); !ok || b.Path == "" {
			return nil, clouddb.RedisVersions{}, fmt.Errorf("RedisServers: %+v is not a probed binary (see ProbeRedisServer)", b)
		}
		if _, dup := bins[b.Version]; dup {
			return nil, clouddb.RedisVersions{}, fmt.Errorf("RedisServers: two binaries of Redis %s", b.Version)
		}
		if err := b.checkMin(); err != nil {
			return nil, clouddb.RedisVersions{}, err
		}
		abs, err := lookBinary(b.Path)
		if err != nil {
			return nil, clouddb.RedisVersions{}, fmt.Errorf("the binary of Redis %s: %w", b.Version, err)
		}
		bins[b.Version] = abs
		versions.Full[b.Version] = cmp.Or(b.Full, b.Version)
		versions.Offered = append(versions.Offered, b.Version)
	}
	slices.SortFunc(versions.Offered, clouddb.CompareRedisVersions)
	return bins, versions, nil
}

// Versions are the Redis versions this Driver offers: one per binary, the first
// binary's the default.
func (d *Driver) Versions() clouddb.RedisVersions { return d.versions }

// binary returns the Redis version an instance runs and the binary of that version. A
// version not offered (its binary was not given to this clouddb) fails.
func (d *Driver) binary(in clouddb.Instance) (version, bin string, err error) {
	version = in.RedisVersion
	if version == "" {
		version = d.versions.Default
	}
	bin, ok := d.bins[version]
	if !ok {
		return "", "", fmt.Errorf("database %d: Redis %s is not offered by this clouddb (it has binaries for %s): start clouddb with a --redis-server binary of Redis %s",
			in.DatabaseID, version, strings.Join(d.versions.Offered, ", "), version)
	}
	return version, bin, nil
}

// versionChange compares the version the database's server was last started with to
// want: it reports whether they differ, and fails when want is older. There is no
// downgrade: an older redis-server cannot load what a newer one wrote (its RDB version).
func (d *Driver) versionChange(id int, want string) (bool, error) {
	data, err := os.ReadFile(filepath.Join(d.dbDir(id), versionFile))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("unreadable version file; taking the server for the default version", keyDatabase, id, "error", err)
		}
		// Never started, or started before clouddb offered several versions: then by the
		// one binary it had, taken for the default version's.
		return want != d.versions.Default, nil
	}
	ran := strings.TrimSpace(string(data))
	if clouddb.CompareRedisVersions(want, ran) < 0 {
		return false, fmt.Errorf("database %d: its data was last served by Redis %s, and Redis %s cannot load it: there is no downgrade (keep the --redis-server binary of Redis %s)",
			id, ran, want, ran)
	}
	return ran != want, nil
}

// recordVersion notes the version of the binary a server is started with.
func recordVersion(dir, version string) error {
	return writeFileAtomic(filepath.Join(dir, versionFile), []byte(version+"\n"), 0o600)
}

// upgrading reports whether the server was shut down for an upgrade and its RDB, written
// then, is still to be loaded.
func upgrading(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, upgradeFile))
	return err == nil
}

// upgradeStop shuts the running server pid down for a restart on another version's
// binary, keeping its whole data set whatever its persistence: SHUTDOWN SAVE writes an
// RDB (and flushes the AOF when AOF is on), and the upgrade mark makes the next start
// load it even with persistence none, whose start otherwise drops old files. With AOF on
// the new server loads the AOF, as complete as the RDB; with AOF off it loads the RDB,
// which SHUTDOWN SAVE has just replaced: no older file can win over it.
func (d *Driver) upgradeStop(ctx context.Context, in clouddb.Instance, pid int, old serverConfig, haveOld bool, to string) error {
	id := in.DatabaseID
	dir := d.dbDir(id)
	port := in.Port
	var creds []cred
	if haveOld {
		if old.Port != 0 {
			port = old.Port
		}
		if old.InternalSecret != "" {
			creds = append(creds, cred{internalUser, old.InternalSecret})
		}
	}
	creds = append(creds, cred{"", in.Password})
	c, _, err := d.connect(ctx, pid, port, creds)
	if err != nil {
		// Without a connection there is no way to save what the server holds: it is
		// left running, on its version, rather than restarted without its data.
		return fmt.Errorf("database %d: upgrade to Redis %s: cannot reach the running server (pid %d, port %d) to save its data first: %w", id, to, pid, port, err)
	}
	defer c.Close()
	if err = writeFileAtomic(filepath.Join(dir, upgradeFile), []byte(to+"\n"), 0o600); err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	deadline := time.Now().Add(d.stopTimeout)
	for {
		err = c.ShutdownSave(ctx).Err()
		if err == nil {
			// The connection closed: the server saved and is exiting.
			if !d.waitGone(ctx, pid, d.stopTimeout) {
				return fmt.Errorf("database %d: upgrade to Redis %s: redis-server pid %d saved its data but did not exit", id, to, pid)
			}
			break
		}
		// Redis refuses to exit while it writes its first AOF (AOF just turned on), or
		// when the RDB cannot be written: try again until the stop timeout. Until then
		// it runs on, with its data, and no RDB of it is to be loaded.
		if ctx.Err() != nil || time.Now().After(deadline) {
			if rerr := os.Remove(filepath.Join(dir, upgradeFile)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				d.log.Warn("cannot remove the upgrade mark", keyDatabase, id, "error", rerr)
			}
			return fmt.Errorf("database %d: upgrade to Redis %s: SHUTDOWN SAVE: %w; %s", id, to, classify(err), logTail(dir))
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	d.log.Info("stopped redis-server to upgrade it, its data saved", keyDatabase, id, keyPid, pid, "to_version", to)
	return nil
}

// upgraded removes the upgrade mark once the new server has loaded the data.
func (d *Driver) upgraded(id int) {
	err := os.Remove(filepath.Join(d.dbDir(id), upgradeFile))
	if err == nil {
		d.log.Info("redis-server upgraded with its data", keyDatabase, id)
	} else if !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("cannot remove the upgrade mark", keyDatabase, id, "error", err)
	}
}
