package local

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb"
)

// File names of the version bookkeeping inside a database's directory.
const (
	// versionFile holds the Redis version (major.minor) of the binary whose server last
	// served the data, written once that server answered: a server whose version is
	// older than its instance's is upgraded (see upgradeStop), a newer one is kept (no
	// downgrade).
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

// binary returns the Redis version an instance runs and the binary of that version, as
// its files tell (see versionFor); it does not ask a running server.
func (d *Driver) binary(in clouddb.Instance) (version, bin string, err error) {
	served, known := servedOnDisk(d.primaryNode(in.DatabaseID).dir)
	return d.versionFor(in, served, known)
}

// versionFor is the version an instance runs, its data last served by served (when
// known), and that version's binary. An offered stored version is the one: an older one
// than served is refused by the caller (no downgrade), a newer one is an upgrade. Any
// other stored version (none, or free text kept from before clouddb offered several)
// keeps what served the data (see RedisVersions.Keep), or the default for a database
// that never ran. A version without a binary fails, naming it.
func (d *Driver) versionFor(in clouddb.Instance, served string, known bool) (version, bin string, err error) {
	switch version = in.RedisVersion; {
	case d.versions.Offers(version):
	case known:
		version = d.versions.Keep(served)
	default:
		version = d.versions.Default
	}
	bin, ok := d.bins[version]
	if !ok {
		return "", "", fmt.Errorf("database %d: its data was last served by Redis %s, which is not offered by this clouddb (it has binaries for %s): start clouddb with a --redis-server binary of Redis %s",
			in.DatabaseID, version, strings.Join(d.versions.Offered, ", "), version)
	}
	return version, bin, nil
}

// ServedVersion returns the Redis version (major.minor) that last served the database's
// data, "" when nothing tells (it never ran, or left no data). See servedVersion.
func (d *Driver) ServedVersion(ctx context.Context, in clouddb.Instance) (string, error) {
	unlock, err := d.lock(ctx, in.DatabaseID)
	if err != nil {
		return "", err
	}
	defer unlock()
	p := d.primaryServer(in, d.primaryNode(in.DatabaseID))
	old, haveOld, err := d.readConfig(p.node)
	if err != nil {
		return "", fmt.Errorf("database %d: %w", in.DatabaseID, err)
	}
	v, _ := d.servedVersion(ctx, p, d.livePid(p.node), old, haveOld)
	return v, nil
}

// servedVersion is the Redis version that last served the database's data, and whether
// anything tells: the version file; else the running server pid itself (INFO server),
// which it then records, as a server started before clouddb kept the file has none;
// else the version that wrote its data files (see dataVersion).
func (d *Driver) servedVersion(ctx context.Context, in server, pid int, old serverConfig, haveOld bool) (string, bool) {
	dir := in.dir
	if v, ok := readVersionFile(dir); ok {
		return v, true
	}
	if pid != 0 {
		if v, ok := d.liveVersion(ctx, in, pid, old, haveOld); ok {
			if err := recordVersion(dir, v); err != nil {
				d.log.Warn("cannot record the Redis version of the running server", keyDatabase, in.DatabaseID, "error", err)
			} else {
				d.log.Info("recorded the Redis version of a server started without it", keyDatabase, in.DatabaseID, keyPid, pid, "version", v)
			}
			return v, true
		}
	}
	return dataVersion(dir)
}

// servedOnDisk is servedVersion without asking a running server.
func servedOnDisk(dir string) (string, bool) {
	if v, ok := readVersionFile(dir); ok {
		return v, true
	}
	return dataVersion(dir)
}

// readVersionFile reads the version file.
func readVersionFile(dir string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(dir, versionFile))
	if err != nil {
		return "", false
	}
	return clouddb.MajorMinor(strings.TrimSpace(string(data)))
}

// liveTimeout bounds the question to a running server about its version: one that does
// not answer at once is left to adopt, which deals with it.
const liveTimeout = 2 * time.Second

// liveVersion asks the running server pid its version (INFO server), logged in as adopt
// would be.
func (d *Driver) liveVersion(ctx context.Context, in server, pid int, old serverConfig, haveOld bool) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	port := in.Port
	creds := []cred{{"", in.Password}}
	if haveOld {
		if old.Port != 0 {
			port = old.Port
		}
		if old.InternalSecret != "" {
			creds = append([]cred{{internalUser, old.InternalSecret}}, creds...)
		}
		if old.Password != "" && old.Password != in.Password {
			creds = append(creds, cred{"", old.Password})
		}
	}
	for _, cr := range creds {
		c, err := d.probe(ctx, in.node, port, cr, pid)
		if err != nil {
			continue
		}
		info, err := c.Info(ctx, "server").Result()
		c.Close()
		if err != nil {
			return "", false
		}
		return clouddb.MajorMinor(infoField(info, "redis_version"))
	}
	return "", false
}

// dataVersion is the newest Redis version that wrote one of the database's data files
// (its RDB, the base of its AOF), read from the redis-ver field each RDB carries; a
// server started by an older clouddb, which kept no version file, left those. Newest:
// versions only ever go up, so the newest writer is the last.
func dataVersion(dir string) (string, bool) {
	files := []string{filepath.Join(dir, rdbFile)}
	if bases, err := filepath.Glob(filepath.Join(dir, aofDir, "*.base.rdb")); err == nil {
		files = append(files, bases...)
	}
	newest := ""
	for _, f := range files {
		if v, ok := rdbRedisVersion(f); ok && (newest == "" || clouddb.CompareRedisVersions(v, newest) > 0) {
			newest = v
		}
	}
	return newest, newest != ""
}

// rdbRedisVersion reads the major.minor of the redis-ver auxiliary field of an RDB file:
// after the "REDIS0010" header, Redis writes its auxiliary fields (opcode 0xFA, then a
// name and a value, each a length-prefixed string) with redis-ver among the first.
func rdbRedisVersion(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	r := bufio.NewReader(io.LimitReader(f, 4096))
	header := make([]byte, 9)
	if _, err := io.ReadFull(r, header); err != nil || string(header[:5]) != "REDIS" {
		return "", false
	}
	for range 16 {
		op, err := r.ReadByte()
		if err != nil || op != 0xFA {
			return "", false
		}
		name, err := rdbString(r)
		if err != nil {
			return "", false
		}
		value, err := rdbString(r)
		if err != nil {
			return "", false
		}
		if name == "redis-ver" {
			return clouddb.MajorMinor(value)
		}
	}
	return "", false
}

// rdbString reads a string of an RDB file's auxiliary field: a plain one, or an integer
// one (as Redis writes numbers such as redis-bits). Compressed strings, which Redis does
// not use for these fields, fail.
func rdbString(r *bufio.Reader) (string, error) {
	b, err := r.ReadByte()
	if err != nil {
		return "", err
	}
	var n int
	switch b >> 6 {
	case 0:
		n = int(b & 0x3F)
	case 1:
		next, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		n = int(b&0x3F)<<8 | int(next)
	case 2:
		if b != 0x80 {
			return "", errors.New("rdb: string too long for an auxiliary field")
		}
		var buf [4]byte
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return "", err
		}
		n = int(binary.BigEndian.Uint32(buf[:]))
	default:
		size := map[byte]int{0xC0: 1, 0xC1: 2, 0xC2: 4}[b]
		if size == 0 {
			return "", errors.New("rdb: compressed auxiliary field")
		}
		buf := make([]byte, 8)
		if _, err := io.ReadFull(r, buf[:size]); err != nil {
			return "", err
		}
		v := int64(binary.LittleEndian.Uint64(buf))
		v = v << (64 - 8*size) >> (64 - 8*size) // sign-extend
		return strconv.FormatInt(v, 10), nil
	}
	if n > 1024 {
		return "", errors.New("rdb: string too long for an auxiliary field")
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}

// recordVersion notes the version of the binary a server is started with.
func recordVersion(dir, version string) error {
	return writeFileChanged(filepath.Join(dir, versionFile), []byte(version+"\n"), 0o600)
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
func (d *Driver) upgradeStop(ctx context.Context, in server, pid int, old serverConfig, haveOld bool, to string) error {
	id := in.DatabaseID
	dir := in.dir
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
	c, _, err := d.connect(ctx, in.node, pid, port, creds)
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
		// SHUTDOWN SAVE answers only once the save is done, which takes longer than the
		// client's read timeout on a large dataset: it gets the whole stop timeout.
		sctx, cancel := context.WithTimeout(ctx, d.stopTimeout)
		err = c.ShutdownSave(sctx).Err()
		cancel()
		if err == nil || gone(pid) {
			// The connection closed, or the process is gone: redis exits only once its
			// data is saved.
			if !d.waitGone(ctx, pid, d.stopTimeout) {
				return fmt.Errorf("database %d: upgrade to Redis %s: redis-server pid %d saved its data but did not exit", id, to, pid)
			}
			break
		}
		// Redis refuses to exit while it writes its first AOF (AOF just turned on), or
		// when the RDB cannot be written: try again until the stop timeout. Until then
		// it runs on, with its data, and no RDB of it is to be loaded.
		if ctx.Err() != nil || time.Now().After(deadline) {
			var refused redis.Error
			if errors.As(err, &refused) {
				// The server answered that it will not stop: it runs on, and the mark
				// must not make a later start keep an older RDB.
				if rerr := os.Remove(filepath.Join(dir, upgradeFile)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
					d.log.Warn("cannot remove the upgrade mark", keyDatabase, id, "error", rerr)
				}
			}
			// Otherwise (no answer: it may still be saving, then exit) the mark stays, so
			// that the next start loads what it saved instead of deleting it.
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

// upgradeAllowed is asked before a server is stopped (or, stopped, started) on the
// binary bin of a newer version for an upgrade; an error refuses the upgrade, and the
// server runs on as it is. The new version must take the database's ACL users: a rule
// the old version took may name a command or category the new one lacks, and a server
// whose config it refuses does not start.
func (d *Driver) upgradeAllowed(ctx context.Context, in server, bin string) error {
	if len(in.Users) == 0 {
		return nil
	}
	rules := make([]string, 0, len(in.Users))
	for _, u := range in.Users {
		rules = append(rules, u.Rule)
	}
	return d.checkRulesOn(ctx, bin, rules)
}

// rollBack starts the database's server again on the binary of version from, the one
// that served its data before an upgrade whose new server did not come up (cause): the
// data is as the old server left it, the RDB that SHUTDOWN SAVE wrote included (the
// upgrade mark keeps it). The upgrade still fails, saying whether the old version runs.
func (d *Driver) rollBack(ctx context.Context, in server, want, old serverConfig, haveOld bool, from, to string, cause error) error {
	id := in.DatabaseID
	fail := fmt.Errorf("database %d: upgrade to Redis %s failed: %w", id, to, cause)
	bin, ok := d.bins[from]
	if !ok {
		return fmt.Errorf("%w; the binary of Redis %s, which served the data, is not offered: the server stays stopped", fail, from)
	}
	// The new server may still run (it did not answer in time): it goes without a word
	// to its files, which belong to the old version.
	if pid := d.livePid(in.node); pid != 0 {
		if err := d.kill(ctx, id, pid); err != nil {
			return fmt.Errorf("%w; %w", fail, err)
		}
	}
	d.log.Warn("upgrade failed; starting redis-server again on the version that served its data", keyDatabase, id, "version", from, "to_version", to, "error", cause)
	if err := d.start(ctx, in, want, old, haveOld, from, bin); err != nil {
		return fmt.Errorf("%w; and on Redis %s again: %w", fail, from, err)
	}
	return fmt.Errorf("%w; it runs Redis %s again, with its data", fail, from)
}

// upgraded removes the upgrade mark once a server has loaded the data saved for the
// upgrade.
// finishUpgrade removes the upgrade mark of an adopted server that answers on the version
// the upgrade was for: it has loaded the data saved for it (it was still loading when its
// start gave up waiting). Left, the mark would make a later start of a database without
// persistence load that old snapshot instead of starting empty.
func (d *Driver) finishUpgrade(n node) {
	dir := n.dir
	b, err := os.ReadFile(filepath.Join(dir, upgradeFile))
	if err != nil {
		return
	}
	if v, ok := readVersionFile(dir); ok && v == strings.TrimSpace(string(b)) {
		d.upgraded(n, v)
	}
}

func (d *Driver) upgraded(n node, version string) {
	err := os.Remove(filepath.Join(n.dir, upgradeFile))
	if err == nil {
		d.log.Info("redis-server loaded the data saved for its upgrade", keyDatabase, n.db, keyNode, n.idx, "version", version)
	} else if !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("cannot remove the upgrade mark", keyDatabase, n.db, keyNode, n.idx, "error", err)
	}
}
