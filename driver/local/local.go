// Package local is the data-plane driver that runs every database as redis-server
// processes on this machine: one per node of its topology (a primary, its replica, the
// nodes of an OSS Cluster; see node.go and cluster.go), each with its own data
// directory, config file and unix socket, the database's port served by its primary.
//
// The processes are not tied to clouddb: they run in their own session and survive a
// crash of clouddb; the next Driver on the same directory adopts them (pid file plus an
// authenticated PING that reports the same pid).
package local

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb"
	"clouddb/redisdata"
)

// Defaults of Config.
const (
	DefaultHost         = "127.0.0.1"
	DefaultRedisServer  = "redis-server"
	DefaultStartTimeout = 10 * time.Second
)

// stopTimeout bounds a clean shutdown before SIGKILL.
const stopTimeout = 30 * time.Second

// Log attribute keys.
const (
	keyDatabase = "database_id"
	keyPid      = "pid"
	keyPort     = "port"
	keyExit     = "exit"
	keyChanged  = "changed"
	keyNode     = "node"
)

// Config configures a Driver.
type Config struct {
	// Dir is the root directory; each database gets Dir/<id>/.
	Dir string
	// Host is the address the servers bind to, e.g. 127.0.0.1.
	Host string
	// RedisServers are the redis-server binaries, as ProbeRedisServer found them: one per
	// Redis version offered, the first the default version (that of a new instance that
	// names none). None means redis-server in PATH.
	RedisServers []RedisBinary
	// StartTimeout bounds the wait for a started server to answer PING.
	StartTimeout time.Duration
	// Logger receives the driver's logs; it never receives a password.
	Logger *slog.Logger
	// Exited, if set, is called when a server this Driver started or adopted exits, so
	// that a supervisor can restart it at once instead of at its next check. It is called
	// on a goroutine of its own, and may be called concurrently.
	Exited func(databaseID int)
	// DialSource, if set, opens the connections to import and replication sources: the
	// place for the address guard, since users choose those addresses.
	DialSource func(ctx context.Context, network, addr string) (net.Conn, error)
	// CA is the installation's certificate authority: the server certificates of TLS
	// databases, and the client certificates of clouddb's own connections to them, come
	// from it. Without it, an instance with TLS fails.
	CA clouddb.CertificateAuthority
	// AvoidPorts, if set, says which ports the driver must not pick for the nodes of a
	// cluster (see cluster.go): those the store hands out as databases' endpoints.
	AvoidPorts func(port int) bool
	// ReplicaEvent, if set, is told what happens to the sources of a replicating
	// database (synced, link lost, retrying), from the replicator's goroutines.
	ReplicaEvent func(databaseID int, e redisdata.Event)
}

// Driver runs one redis-server process per database.
type Driver struct {
	dir          string
	sockDir      string // see socketDir
	host         string
	connectHost  string
	bin          string
	startTimeout time.Duration
	stopTimeout  time.Duration
	log          *slog.Logger
	exited       func(int)
	dialSource   func(ctx context.Context, network, addr string) (net.Conn, error)
	replicaEvent func(int, redisdata.Event)
	avoidPorts   func(int) bool
	ca           clouddb.CertificateAuthority
	tlsHosts     []string // what server certificates name (see tlsHosts)

	// bins maps each Redis version offered to its binary; bin is the default version's.
	bins     map[string]string
	versions clouddb.RedisVersions

	mu    sync.Mutex
	locks map[int]chan struct{} // per database id, a one-slot semaphore
	// imports ends the import under way into a database (see loadSwap), for Stop and
	// Remove, which must not wait for a slow source.
	imports   map[int]context.CancelCauseFunc
	children  map[int]*child      // by pid, servers this Driver started and has not reaped
	secrets   map[int]string      // internal-user secrets, by database id (see internalSecret)
	checked   map[node]deepCheck  // by node, when Running last saw its server answer
	busySince map[node]busyMark   // by node, since when its server answers BUSY (see adopt)
	maxBusy   time.Duration       // how long a server may answer BUSY before a restart
	rules     map[node]knownRules // by node, the default user's rules as its server last showed them
	replicas  map[int]*replica    // running replicators, by database id
	tlsFiles  map[int]tlsFiles    // by database id, the certificate files prepareTLS chose
	tlsChecks map[int]tlsCheck    // by database id, when tlsCurrent found its files usable

	// The named ACL users (see acl.go): by database id, as its server last showed them;
	// one CheckACLRules server at a time (the verdicts are acl.go's verdicts).
	users     map[node]map[string]knownUser
	ruleCheck chan struct{}

	// Adopted servers whose exit is watched (see watchExit): by pidfd; the epoll
	// instance, 0 until the first, -1 when there can be none.
	watched  map[int]watchedPid
	watching map[int]int // the pids of watched, to their pidfds
	epoll    int

	topos map[int]topology // by database id, as read from its topology file
	// clusters: by database id, when an OSS Cluster database last looked whole.
	clusters map[int]time.Time
	topoGen  map[int]uint64 // by database id, changed by every write of its topology file

	cwds *cwdScan // see findByCwd

	// testHook, set by tests before any call, runs at the points named hook* (with the
	// pid of the server concerned, if any), so that a test can kill a server exactly
	// there.
	testHook func(point string, id, pid int)
}

var _ clouddb.Driver = (*Driver)(nil)

// New returns a Driver. It fails if the redis-server binary cannot be found.
func New(cfg Config) (*Driver, error) {
	if cfg.Dir == "" {
		return nil, errors.New("local driver: Dir is required")
	}
	// A server logs to a pipe that this process reads (see keepLog). Should this process
	// die, a server that is still starting (redis ignores SIGPIPE only once initialised)
	// would be killed by its next log line: servers inherit an ignored SIGPIPE instead.
	signal.Ignore(syscall.SIGPIPE)
	bins, versions, err := binaries(cfg)
	if err != nil {
		return nil, fmt.Errorf("local driver: %w", err)
	}
	if err = os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("local driver: %w", err)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err == nil {
		// The kernel reports a server's working directory with symlinks resolved.
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("local driver: %w", err)
	}
	sockDir, err := socketDir(dir)
	if err != nil {
		return nil, fmt.Errorf("local driver: %w", err)
	}
	host := cfg.Host
	if host == "" {
		host = DefaultHost
	}
	connectHost := host
	if a, err := netip.ParseAddr(host); err == nil && a.IsUnspecified() {
		connectHost = "127.0.0.1"
		if a.Is6() {
			connectHost = "::1"
		}
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Driver{
		dir:          dir,
		sockDir:      sockDir,
		host:         host,
		connectHost:  connectHost,
		bin:          bins[versions.Default],
		startTimeout: timeout,
		stopTimeout:  stopTimeout,
		log:          logger.With("driver", "local"),
		exited:       cfg.Exited,
		dialSource:   cfg.DialSource,
		replicaEvent: cfg.ReplicaEvent,
		avoidPorts:   cfg.AvoidPorts,
		ca:           cfg.CA,
		tlsHosts:     tlsHosts(host, connectHost),
		tlsFiles:     make(map[int]tlsFiles),
		tlsChecks:    make(map[int]tlsCheck),
		locks:        make(map[int]chan struct{}),
		imports:      make(map[int]context.CancelCauseFunc),
		children:     make(map[int]*child),
		secrets:      make(map[int]string),
		checked:      make(map[node]deepCheck),
		busySince:    make(map[node]busyMark),
		maxBusy:      defaultMaxBusy,
		rules:        make(map[node]knownRules),
		users:        make(map[node]map[string]knownUser),
		replicas:     make(map[int]*replica),
		ruleCheck:    make(chan struct{}, 1),
		watched:      make(map[int]watchedPid),
		watching:     make(map[int]int),
		topos:        make(map[int]topology),
		topoGen:      make(map[int]uint64),
		clusters:     make(map[int]time.Time),
		cwds:         newCwdScan(),
		bins:         bins,
		versions:     versions,
	}, nil
}

// dbDir is the data directory of a database.
func (d *Driver) dbDir(id int) string { return filepath.Join(d.dir, strconv.Itoa(id)) }

// lock serialises calls for one database id; calls for other ids run in parallel.
func (d *Driver) lock(ctx context.Context, id int) (func(), error) {
	l := d.semaphore(id)
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// semaphore is the one-slot semaphore of database id that lock and tryLock take.
func (d *Driver) semaphore(id int) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.locks[id]
	if !ok {
		l = make(chan struct{}, 1)
		d.locks[id] = l
	}
	return l
}

// tryLock is lock without a wait: it reports false when another call holds id.
func (d *Driver) tryLock(id int) (func(), bool) {
	l := d.semaphore(id)
	select {
	case l <- struct{}{}:
		return func() { <-l }, true
	default:
		return nil, false
	}
}

// Pid returns the pid recorded in the pid file of the database's primary. The error
// wraps os.ErrNotExist when there is none (the server is stopped or was never started).
func (d *Driver) Pid(id int) (int, error) { return d.pidOf(d.primaryNode(id)) }

// pidOf returns the pid recorded in node n's pid file.
func (d *Driver) pidOf(n node) (int, error) {
	path := filepath.Join(n.dir, pidFile)
	for range 3 {
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		if s := strings.TrimSpace(string(data)); s != "" {
			pid, err := strconv.Atoi(s)
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("pid file %s: bad content %q", path, s)
			}
			return pid, nil
		}
		// redis truncates then writes the file at start-up; give it a moment.
		time.Sleep(10 * time.Millisecond)
	}
	return 0, fmt.Errorf("pid file %s is empty", path)
}

// livePid returns the pid of node n's running server, or 0 if none runs. A pid file
// naming a dead process, or one that is not this node's server, is removed.
func (d *Driver) livePid(n node) int {
	id, dir := n.db, n.dir
	if d.testHook != nil {
		d.testHook(hookLivePid, id, 0)
	}
	pid, err := d.pidOf(n)
	if err != nil {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return 0 // no node there: no server to look for
		}
		if !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("unreadable pid file; ignoring it", keyDatabase, id, keyNode, n.idx, "error", err)
		}
		// A server whose pid file is not written yet (clouddb died right after starting
		// it) is found by its working directory, so it is never started twice. A lock
		// file that no one holds says there is none without that scan of every process,
		// whose cost grows with the servers running (see holdLock); so does a directory
		// without a config file, as no server was ever started on it (the config is
		// written first).
		if lockFree(dir) {
			return 0
		}
		if _, serr := os.Stat(filepath.Join(dir, confFile)); errors.Is(serr, os.ErrNotExist) {
			return 0
		}
		return d.findByCwd(dir)
	}
	if ours(pid, dir) {
		return pid
	}
	d.log.Info("removing stale pid file", keyDatabase, id, keyNode, n.idx, keyPid, pid)
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("cannot remove stale pid file", keyDatabase, id, keyNode, n.idx, "error", err)
	}
	return 0
}

// readConfig returns the config clouddb last wrote for node n, if any.
func (d *Driver) readConfig(n node) (serverConfig, bool, error) {
	data, err := os.ReadFile(filepath.Join(n.dir, confFile))
	if errors.Is(err, os.ErrNotExist) {
		return serverConfig{}, false, nil
	}
	if err != nil {
		return serverConfig{}, false, err
	}
	c, err := parseConfig(data)
	if err != nil {
		return serverConfig{}, false, fmt.Errorf("%s: %w", confFile, err)
	}
	return c, true, nil
}

// writeConfig writes node n's config file atomically, mode 0600.
func (d *Driver) writeConfig(n node, c serverConfig) error {
	dir := n.dir
	data, err := c.render(n.db, dir)
	if err != nil {
		return err
	}
	return writeFileChanged(filepath.Join(dir, confFile), data, 0o600)
}

func (d *Driver) configOf(in server) serverConfig {
	c := serverConfig{
		Primary:        in.primary,
		ClusterBus:     in.bus,
		Port:           in.Port,
		Host:           d.host,
		Socket:         d.sockPath(in.node),
		Password:       in.Password,
		MaxMemory:      in.MaxMemoryBytes,
		Policy:         in.EvictionPolicy,
		Persistence:    in.DataPersistence,
		ReadOnly:       len(in.ReplicaOf) > 0,
		InternalSecret: d.internalSecret(in.DatabaseID),
		DefaultOff:     in.DefaultUserOff,
		Users:          in.Users,
	}
	if in.TLS != nil {
		c.TLS = true
		c.TLSAuthClients = len(in.TLS.ClientCertificates) > 0
		c.TLSFiles = d.knownTLS(in.DatabaseID)
		if d.ca != nil {
			c.TLSCA = filepath.Join(d.dbDir(in.DatabaseID), contentName("ca", "pem", d.caBundle(in.Instance)))
		}
	}
	return c
}

// internalSecret is the password of the database's internal user, the same on its
// nodes (a replica logs in to its primary as it): the one in a node's config file, or a
// new random one until a file has it.
//
// It is kept once known: it never changes, and the cluster and failover code asks for it
// at every poll (each read lists the database's nodes and parses their config files).
func (d *Driver) internalSecret(id int) string {
	d.mu.Lock()
	s, ok := d.secrets[id]
	d.mu.Unlock()
	if ok {
		return s
	}
	for _, n := range d.nodes(id) {
		if c, ok, err := d.readConfig(n); err == nil && ok && c.InternalSecret != "" {
			s = c.InternalSecret
			break
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if known, ok := d.secrets[id]; ok {
		return known
	}
	if s == "" {
		s = rand.Text() + rand.Text()
	}
	d.secrets[id] = s
	return s
}

func (d *Driver) validate(in clouddb.Instance) error {
	if in.TLS != nil {
		if d.ca == nil {
			return fmt.Errorf("database %d: TLS needs the installation's certificate authority, and this driver was given none (local.Config.CA)", in.DatabaseID)
		}
		for i, c := range in.TLS.ClientCertificates {
			if pemCertificates(c) == 0 {
				return fmt.Errorf("database %d: client certificate %d is not a PEM certificate", in.DatabaseID, i)
			}
		}
	}
	switch {
	case in.DatabaseID <= 0:
		return fmt.Errorf("database id %d: must be positive", in.DatabaseID)
	case in.Port < 1 || in.Port > 65535:
		return fmt.Errorf("database %d: port %d out of range", in.DatabaseID, in.Port)
	case in.Password == "":
		return fmt.Errorf("database %d: a password is required", in.DatabaseID)
	case in.Shards < 0 || in.Shards > clouddb.MaxShards:
		return fmt.Errorf("database %d: %d shards: want 1 to %d", in.DatabaseID, in.Shards, clouddb.MaxShards)
	case in.Shards > 1 && !in.OSSCluster:
		return fmt.Errorf("database %d: %d shards need the OSS Cluster API: there is no proxy to serve several shards on one endpoint", in.DatabaseID, in.Shards)
	case in.MaxMemoryBytes < 0:
		return fmt.Errorf("database %d: negative maxmemory", in.DatabaseID)
	case !slices.Contains(clouddb.EvictionPolicies, in.EvictionPolicy):
		return fmt.Errorf("database %d: unknown eviction policy %q", in.DatabaseID, in.EvictionPolicy)
	}
	if _, ok := persistences[in.DataPersistence]; !ok {
		return fmt.Errorf("database %d: unknown data persistence %q", in.DatabaseID, in.DataPersistence)
	}
	return validateUsers(in)
}

// Ensure makes the database's servers run with the instance's configuration. A running
// server is adopted and reconfigured live (CONFIG SET) without a restart, unless its port
// changes; a stopped one is started on in.Port with the data in its directory. It returns
// once the server answers an authenticated PING with the instance's password.
//
// With replication, the replica is made and kept as well (see node.go); when the
// primary's server is gone and the replica has its data, the replica takes over first
// (see failover): a primary is started on its own files only when no live replica holds
// the data, so a restarted empty primary never becomes the source its replica syncs
// from, which would empty it.
func (d *Driver) Ensure(ctx context.Context, in clouddb.Instance) error {
	err := d.ensure(ctx, in)
	if err != nil && ctx.Err() == nil && busy(err) && !errors.Is(err, clouddb.ErrServerBusy) {
		err = fmt.Errorf("%w (%w)", err, clouddb.ErrServerBusy)
	}
	return err
}

func (d *Driver) ensure(ctx context.Context, in clouddb.Instance) error {
	if err := d.validate(in); err != nil {
		return err
	}
	in.Shards = max(in.Shards, 1) // 0: an instance of before shards
	id := in.DatabaseID
	unlock, err := d.lockUnlessImporting(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	if err = makeDir(d.dbDir(id)); err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if in.OSSCluster {
		return d.ensureCluster(ctx, in)
	}
	topo, err := d.readTopology(id)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	if topo.Shards != 0 {
		return fmt.Errorf("database %d: it runs as a cluster of %d shards: turning the OSS Cluster API off for a live database is not supported (create a database without it and import a backup)", id, topo.Shards)
	}
	p := d.nodeOf(id, topo.Primary)
	r := d.other(p)
	for round := 0; ; round++ {
		var running bool
		if p, r, running, err = d.failover(ctx, in, p, r); err != nil {
			return err
		}
		// A primary that ran after failover (or was promoted by it) and is gone now died
		// while this round went on: whatever failed because of it, failover decides again.
		again := func() bool {
			if !running || !in.Replication || round+1 >= maxFailoverRounds || d.livePid(p) != 0 {
				return false
			}
			d.log.Warn("the primary's server exited while Ensure ran; failing over again", keyDatabase, id, keyNode, p.idx)
			return true
		}
		if !in.Replication {
			if err = d.removeNode(ctx, r); err != nil {
				return err
			}
		} else {
			if err = makeDir(r.dir); err != nil {
				return fmt.Errorf("database %d: %w", id, err)
			}
			// The replica first: an upgrade must give it the new binary before the
			// primary writes data an older one could not load.
			if err = d.ensureServer(ctx, d.replicaServer(in, r)); err != nil {
				if again() {
					continue
				}
				return err
			}
		}
		if d.testHook != nil {
			d.testHook(hookBeforePrimary, id, 0)
		}
		ps := d.primaryServer(in, p)
		ps.ranAtFailover = running && in.Replication
		err = d.ensureServer(ctx, ps)
		if errors.Is(err, errStopped) && round == 0 {
			continue // the replica takes over: see errStopped
		}
		if err != nil && again() {
			continue
		}
		return err
	}
}

// errStopped: adopting a running server stopped it (it did not answer, its port changed,
// someone else administers it) while its partner runs: the partner may hold the only
// copy of the data (a primary without persistence), so the caller fails over to it
// rather than start the stopped one on its own files, which would then be the source
// its replica empties itself to sync from.
var errStopped = errors.New("the server was stopped to be started again")

// makeDir makes a node's directory, private to clouddb.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// ensureServer makes one node's server run as in says (the body of Ensure for a node).
func (d *Driver) ensureServer(ctx context.Context, in server) error {
	id := in.DatabaseID
	if in.TLS != nil {
		if err := d.prepareTLS(in.Instance); err != nil {
			return fmt.Errorf("database %d: %w", id, err)
		}
	}
	want := d.configOf(in)
	old, haveOld, err := d.readConfig(in.node)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}

	pid := d.livePid(in.node)
	if pid == 0 && in.ranAtFailover {
		return fmt.Errorf("database %d: %w", id, errPrimaryExited)
	}
	served, known := d.servedVersion(ctx, in, pid, old, haveOld)
	version, bin, err := d.versionFor(in.Instance, served, known)
	if err != nil {
		return err
	}
	if known && clouddb.CompareRedisVersions(version, served) < 0 {
		// There is no downgrade: an older redis-server cannot load what a newer one
		// wrote (its RDB version). The server is left as it is.
		return fmt.Errorf("database %d: its data was last served by Redis %s, and Redis %s cannot load it: there is no downgrade (keep the --redis-server binary of Redis %s)",
			id, served, version, served)
	}
	upgrade := known && version != served
	if upgrade {
		if err := d.upgradeAllowed(ctx, in, bin); err != nil {
			return fmt.Errorf("database %d: upgrade to Redis %s refused: %w", id, version, err)
		}
	}
	// A server started by a clouddb from before the unix sockets is reached on its port:
	// to serve TLS there it restarts, its data saved as for an upgrade, and gets its
	// socket. cluster-enabled does not change live either: a server restarts with its
	// data to switch (the OSS Cluster API turned on for a one-shard database).
	restart := pid != 0 && !upgrade && in.TLS != nil && !isSocket(d.sockPath(in.node))
	if restart {
		d.log.Info("redis-server has no unix socket and turns TLS on; restarting it with its data", keyDatabase, id, keyNode, in.idx, keyPid, pid)
	}
	if pid != 0 && !upgrade && haveOld && (old.ClusterBus == 0) != (want.ClusterBus == 0) {
		restart = true
		d.log.Info("restarting redis-server to switch cluster mode", keyDatabase, id, keyNode, in.idx, keyPid, pid, "cluster", want.ClusterBus != 0)
	}
	if pid != 0 {
		if upgrade || restart {
			// The server restarts on the new version's binary with its data.
			if err := d.upgradeStop(ctx, in, pid, old, haveOld, version); err != nil {
				return err
			}
		} else {
			adopted, err := d.adopt(ctx, in, pid, old, haveOld)
			if err != nil {
				return err
			}
			if adopted {
				d.syncSources(in, bin)
				return nil
			}
			if in.primary == "" && in.Replication && d.livePid(d.other(in.node)) != 0 {
				return errStopped
			}
		}
	}
	if err := d.start(ctx, in, want, old, haveOld, version, bin); err != nil {
		var answered answeredError
		if !upgrade || errors.Is(err, errLoading) || errors.As(err, &answered) || ctx.Err() != nil {
			// Not an upgrade; or the new server runs and loads the data (a LOADING
			// answer) or answered and then failed to be configured, which a later Ensure
			// adopts (it may have taken writes: it is never killed for the old one); or
			// the caller gave up.
			return err
		}
		// The new binary did not come up (it refused its config, died, or did not
		// answer): the old one serves the data again rather than nothing.
		return d.rollBack(ctx, in, want, old, haveOld, served, version, err)
	}
	d.syncSources(in, bin)
	return nil
}

// syncSources runs the replicators of the database's replicaOf sources, which write into
// its primary.
func (d *Driver) syncSources(in server, bin string) {
	if in.primary == "" {
		d.syncReplica(in.Instance, bin)
	}
}

// adopt reconfigures the running server pid, removing what clouddb did not set up on it
// (users, replication: see applyLive). It reports false, after stopping the server, when
// the server must be started again: its port changes, it refuses every credential
// clouddb knows, or what clouddb removes keeps coming back.
//
// It logs in as the internal user, whose secret never changes: the clients' password may
// be anything after a crash between two password changes (the server took one, the
// config file still has an older one, the store wants a newer one), and a server must not
// be restarted, losing what it does not persist, for that.
func (d *Driver) adopt(ctx context.Context, in server, pid int, old serverConfig, haveOld bool) (bool, error) {
	id := in.DatabaseID
	port := in.Port
	if haveOld && old.Port != 0 {
		port = old.Port
	}
	var creds []cred
	if haveOld && old.InternalSecret != "" {
		creds = append(creds, cred{internalUser, old.InternalSecret})
	}
	creds = append(creds, cred{"", in.Password})
	if haveOld && old.Password != "" && old.Password != in.Password {
		creds = append(creds, cred{"", old.Password})
	}
	c, cr, err := d.connect(ctx, in.node, pid, port, creds)
	switch {
	case err != nil && ctx.Err() != nil:
		// Given up by the caller (clouddb shutting down): no verdict on the server, which
		// a restart would cut off in the middle of whatever it is doing.
		return false, ctx.Err()
	case errors.Is(err, errAuth):
		d.log.Warn("running redis-server refuses the known passwords; restarting it", keyDatabase, id, keyPid, pid)
		return false, d.terminate(ctx, id, pid)
	case errors.Is(err, errLoading):
		return false, fmt.Errorf("database %d: redis-server pid %d is still loading its data on port %d: %w; %s", id, pid, port, err, logTail(in.dir))
	case errors.Is(err, errBusy):
		// A tenant's script or function runs past busy-reply-threshold: the server lives
		// and holds the data, and the tenant may end the script (SCRIPT KILL, FUNCTION
		// KILL). A restart would lose what it does not persist. Past maxBusy it is
		// restarted: a script that wrote cannot be killed, and only SHUTDOWN NOSAVE
		// (not the tenant's to run) ends it.
		since, tooLong := d.markBusy(in.node, pid)
		if !tooLong {
			return false, fmt.Errorf("database %d: redis-server pid %d has been busy running a script since %s: %w",
				id, pid, since.UTC().Format(time.RFC3339), err)
		}
		d.log.Warn("running redis-server has been busy running a script for too long; restarting it", keyDatabase, id, keyPid, pid,
			"since", since.UTC().Format(time.RFC3339))
		// SHUTDOWN NOSAVE is the one way out redis takes while busy (it waits out a
		// SIGTERM); the data since the last save is lost, as it would be by the tenant's.
		return false, d.shutdownNoSave(ctx, in.node, pid)
	case err != nil:
		// The process is ours (its directory says so) but does not serve its port: it
		// moved (CONFIG SET port, as tenants once could), hangs, or a stranger holds the
		// port. A clean restart on the configured port brings it back, with its data as
		// persisted; a port held by a stranger fails the start with that cause.
		d.log.Warn("running redis-server does not answer on its port; restarting it", keyDatabase, id, keyPid, pid, keyPort, port, "error", err)
		return false, d.terminate(ctx, id, pid)
	}
	if cr.user == "" {
		// Only the tenant's password got in: a server from before the internal user (its
		// default user may still administer it) gets that user now and is reached as it;
		// one whose default user is already restricted lost the internal user, and a
		// restart defines it again from the config file.
		// An internal user that exists with a password clouddb does not know was
		// defined by someone else, who may be logged in as it: cut those connections
		// once the user is clouddb's again.
		secret := d.internalSecret(id)
		prior, gerr := getUser(ctx, c, internalUser)
		err := setUser(ctx, c, internalUser, internalUserRules("#"+passwordHash(secret)))
		c.Close()
		if err != nil {
			d.log.Warn("running redis-server refuses clouddb's internal user; restarting it", keyDatabase, id, keyPid, pid, "error", classify(err))
			return false, d.terminate(ctx, id, pid)
		}
		if c, _, err = d.connect(ctx, in.node, pid, port, []cred{{internalUser, secret}}); err != nil {
			return false, fmt.Errorf("database %d: redis-server pid %d refuses the internal user it was just given: %w", id, pid, err)
		}
		if gerr == nil && prior.canLogIn() {
			if err := c.Do(ctx, "client", "kill", "user", internalUser).Err(); err != nil {
				c.Close()
				return false, fmt.Errorf("database %d: CLIENT KILL USER %s: %w", id, internalUser, classify(err))
			}
			d.log.Warn("closed the connections of an internal user clouddb did not define", keyDatabase, id, keyPid, pid)
		}
	}
	defer c.Close()
	d.mu.Lock()
	delete(d.busySince, in.node)
	d.mu.Unlock()
	if err := redisdata.LiftAddressSpace(pid); err != nil {
		d.log.Warn("cannot lift the memory cap of an import's server", keyDatabase, id, keyPid, pid, "error", err)
	}
	d.finishUpgrade(in.node)
	if port != in.Port {
		d.log.Info("port changes; restarting redis-server", keyDatabase, id, keyPid, pid, "old_port", port, keyPort, in.Port)
		return false, d.terminate(ctx, id, pid)
	}
	if d.testHook != nil {
		d.testHook(hookAdopting, id, pid)
	}
	if err := d.reconfigure(ctx, c, in); err != nil {
		if errors.Is(err, errUnruly) {
			// Someone still administers the server, faster than clouddb can take the
			// rights away: a restart from the config file, which defines only clouddb's
			// users, ends it (what the server does not persist is lost).
			d.log.Warn("redis-server cannot be brought in line live; restarting it", keyDatabase, id, keyPid, pid, "error", err)
			return false, d.terminate(ctx, id, pid)
		}
		return true, err
	}
	d.watchExit(in.node, pid)
	d.log.Debug("adopted running redis-server", keyDatabase, id, keyPid, pid, keyPort, port)
	return true, nil
}

// connect waits, up to StartTimeout, until the server pid on port accepts one of the
// passwords, and returns a client authenticated with it. It gives up at once when every
// password is refused (the error wraps errAuth) or the process is gone.
func (d *Driver) connect(ctx context.Context, n node, pid, port int, creds []cred) (*redis.Client, cred, error) {
	ctx, cancel := context.WithTimeout(ctx, d.startTimeout)
	defer cancel()
	for {
		var last error
		refused := 0
		for _, cr := range creds {
			c, err := d.probe(ctx, n, port, cr, pid)
			if err == nil {
				return c, cr, nil
			}
			if errors.Is(err, errAuth) {
				refused++
			}
			if errors.Is(err, errBusy) {
				return nil, cred{}, err // it answers: alive, and busy for as long as it takes
			}
			last = err
		}
		if refused == len(creds) {
			return nil, cred{}, last
		}
		if gone(pid) {
			return nil, cred{}, fmt.Errorf("process exited")
		}
		select {
		case <-ctx.Done():
			return nil, cred{}, fmt.Errorf("no answer within %s: %w", d.startTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reconfigure applies the instance's settings to the server behind c, then records them
// in the config file (after the server has them, so a crash in between leaves a config
// whose password the server still accepts, or the instance's).
func (d *Driver) reconfigure(ctx context.Context, c *redis.Client, in server) error {
	id := in.DatabaseID
	want := d.configOf(in)
	changed, user, users, err := d.applyLive(ctx, c, want, d.madeUsers(in.node))
	if err != nil {
		return fmt.Errorf("database %d: apply configuration: %w", id, err)
	}
	d.mu.Lock()
	d.rules[in.node] = knownRules{want.ReadOnly, want.DefaultOff, user.rules}
	d.users[in.node] = users
	d.mu.Unlock()
	if err := d.writeConfig(in.node, want); err != nil {
		return fmt.Errorf("database %d: write %s: %w", id, confFile, err)
	}
	d.pruneTLS(id, want)
	if len(changed) > 0 {
		d.log.Info("applied configuration to running redis-server", keyDatabase, id, keyChanged, changed)
		if slices.Contains(changed, changedPassword) && !want.DefaultOff && in.primary == "" {
			// Check that a new connection gets in with the new password.
			pid, _ := strconv.Atoi(infoField(c.Info(ctx, "server").Val(), "process_id"))
			nc, err := d.probe(ctx, in.node, in.Port, cred{"", in.Password}, pid)
			if err != nil {
				return fmt.Errorf("database %d: new password not accepted: %w", id, err)
			}
			nc.Close()
		}
	}
	return nil
}

// start starts the database's server and waits until it answers PING. It starts the
// server with the persistence it last ran with, so it loads the data that persistence
// wrote (redis reads only the AOF when AOF is on, only the RDB when it is off), then
// switches persistence live.
func (d *Driver) start(ctx context.Context, in server, want, old serverConfig, haveOld bool, version, bin string) error {
	id := in.DatabaseID
	dir := in.dir
	first := want
	if haveOld && old.Persistence != "" {
		first.Persistence = old.Persistence
	}
	// A new node (no config yet: no server ever ran on it, it has no data) has its
	// config synced, and its version recorded, while its server starts, not before: the
	// syncs were a few ms of each create. Until they are done Ensure does not return, and
	// a crash before leaves a node that never answered, whose config, if the crash
	// emptied it, is as good as none.
	fresh := !haveOld
	var err error
	if fresh {
		err = d.writeConfigUnsynced(in.node, first)
	} else {
		err = d.writeConfig(in.node, first)
	}
	if err != nil {
		return fmt.Errorf("database %d: write %s: %w", id, confFile, err)
	}
	if haveOld && first.Persistence == "none" {
		// Files left by an earlier persistence setting are stale: without persistence a
		// server starts empty, as documented, rather than with an old snapshot. After
		// an upgrade's stop the RDB is the data itself (see upgradeStop).
		stale := []string{rdbFile, aofDir}
		if upgrading(dir) {
			stale = []string{aofDir}
		}
		for _, name := range stale {
			if err = os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("database %d: %w", id, err)
			}
		}
	}
	pid, ch, err := d.spawn(id, dir, bin)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	// The node's files are written on the side while the server starts or is configured
	// (see fresh, and below); every return waits for that: nothing writes in the node's
	// directory once Ensure returned.
	recorded, pending := make(chan error, 1), false
	record := func(write func() error) {
		pending = true
		go func() { recorded <- write() }()
	}
	joinRecorded := func() error {
		if !pending {
			return nil
		}
		pending = false
		return <-recorded
	}
	defer func() { _ = joinRecorded() }()
	if fresh {
		record(func() error { return syncNewNode(dir, version) })
	}
	// redis writes its pid file too, but only once it has read its config. Not synced: a
	// pid file is worth nothing after the machine went down (its process went too), and
	// one that is lost is made up for by findByCwd.
	if werr := writeFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o600, false); werr != nil {
		d.log.Warn("cannot write pid file", keyDatabase, id, keyPid, pid, "error", werr)
	}
	d.log.Info("started redis-server", keyDatabase, id, keyNode, in.idx, keyPid, pid, keyPort, in.Port)

	// The internal user, since what follows administers the server.
	c, err := d.waitReady(ctx, in, pid, ch, cred{internalUser, first.InternalSecret})
	if err != nil {
		select {
		case <-ch.done:
			_ = os.Remove(filepath.Join(dir, pidFile))
		default:
		}
		if errors.Is(err, errLoading) {
			// It answered, loading the data: this version serves it now.
			_ = joinRecorded() // which wrote the same, or failed and is written again here
			if rerr := recordVersion(dir, version); rerr != nil {
				return fmt.Errorf("%w; database %d: %w", err, id, rerr)
			}
		}
		return err
	}
	defer c.Close()
	// Only now that the server answers: until then the version that served the data is
	// the one before (an upgrade whose new binary does not start rolls back to it). It is
	// written (and synced) while the server is configured, which waits on the server.
	if !fresh {
		record(func() error { return recordVersion(dir, version) })
	}
	if same := !haveOld || old.Persistence == "" || old.Persistence == want.Persistence; !same || !d.startedAsWanted(ctx, c, in, want) {
		err = d.reconfigure(ctx, c, in)
	}
	if rerr := joinRecorded(); rerr != nil {
		return fmt.Errorf("database %d: %w", id, rerr)
	}
	d.upgraded(in.node, version)
	if err != nil {
		return answeredError{err}
	}
	return nil
}

// startedAsWanted records what reconfigure would of a server just started from want's
// config file, when one look (a round trip) finds it as want says, and reports whether
// it did: then nothing is left to apply. The full reconfigure, some ten round trips that
// a create and every server of a restart waited for, compares and sets each part anew.
func (d *Driver) startedAsWanted(ctx context.Context, c *redis.Client, in server, want serverConfig) bool {
	diff, rules, live, err := inspect(ctx, c, want, nil, nil)
	if err != nil || len(diff) > 0 {
		return false
	}
	users := make(map[string]knownUser, len(want.Users))
	for _, u := range want.Users {
		users[u.Name] = knownUser{sig: userSig(u, want.ReadOnly), line: live[u.Name]}
	}
	d.mu.Lock()
	d.rules[in.node] = knownRules{want.ReadOnly, want.DefaultOff, rules}
	d.users[in.node] = users
	d.mu.Unlock()
	d.pruneTLS(in.DatabaseID, want)
	return true
}

// answeredError is a failure of a started server after it answered: it runs with the
// data, on the version recorded for it, and a later Ensure adopts it; an upgrade is not
// rolled back then.
type answeredError struct{ error }

func (e answeredError) Unwrap() error { return e.error }

// waitReady polls until the started server answers a PING authenticated as cr as process pid,
// up to StartTimeout. If the process exits first (a port in use, a bad config), the error
// says so and carries the tail of its log. A server still starting at the deadline is
// left running, so the next Ensure adopts it.
func (d *Driver) waitReady(ctx context.Context, in server, pid int, ch *child, cr cred) (*redis.Client, error) {
	id := in.DatabaseID
	dir := in.dir
	ctx, cancel := context.WithTimeout(ctx, d.startTimeout)
	defer cancel()
	addr := fmt.Sprintf("%s:%d", d.host, in.Port)
	exited := func() error {
		ch.waitLog() // its last lines say why
		why := logTail(dir)
		err := fmt.Errorf("database %d: redis-server on %s exited during start-up (%s): %s",
			id, addr, exitText(ch.err), why)
		if strings.Contains(why, "No space left on device") && diskNearlyFull(dir) {
			// The log is the tenant's to write to (Lua's redis.log): its words alone do
			// not make a full disk, the file system's free space confirms them.
			err = fmt.Errorf("%w (%w)", err, syscall.ENOSPC)
		}
		return err
	}
	type result struct {
		c   *redis.Client
		err error
	}
	var last error
	// A new server answers within a few milliseconds: poll fast first (a refused
	// connect costs microseconds), then back off gently. The server's log line saying
	// it accepts connections wakes the wait at once: a step of the backoff added its
	// half on average to every start, and polling every millisecond took the CPU from
	// the servers starting at a restart of hundreds.
	wait := time.Millisecond
	ready := ch.ready
	for {
		// A probe of a port that a stranger holds may hang until its read timeout; the
		// exit of our process must not wait for it.
		res := make(chan result, 1)
		go func() {
			// A bare connect first: until the server listens, a refused connect costs a
			// few system calls, a probe a client with its pool and goroutines (and a log
			// line of its failed dial), several times per start of each of N servers.
			conn, err := d.dialServer(ctx, in.node, in.Port)
			if err != nil {
				res <- result{nil, err}
				return
			}
			conn.Close()
			c, err := d.probe(ctx, in.node, in.Port, cr, pid)
			res <- result{c, err}
		}()
		select {
		case r := <-res:
			if r.err == nil {
				return r.c, nil
			}
			last = r.err
		case <-ch.done:
			go func() {
				if r := <-res; r.c != nil {
					r.c.Close()
				}
			}()
			return nil, exited()
		}
		select {
		case <-ch.done:
			return nil, exited()
		case <-ctx.Done():
			return nil, fmt.Errorf("database %d: redis-server pid %d did not answer PING on %s within %s (%w): %w; %s",
				id, pid, addr, d.startTimeout, clouddb.ErrServerStarting, last, logTail(dir))
		case <-ready:
			ready = nil // once
		case <-time.After(wait):
			wait = min(wait*3/2, 20*time.Millisecond)
		}
	}
}

// deepCheckEvery is how often Running confirms with an authenticated PING that a live
// process still serves; in between, a live process of the database counts as running.
// The process check is a few system calls, the PING a connection: with hundreds of
// databases checked every second, the difference is a good part of a core.
const deepCheckEvery = 10 * time.Second

// Running reports whether the database's server runs as the instance says: its process
// is alive, and within the last deepCheckEvery it answered clouddb's internal user on the
// instance's port with the instance's settings, password and default user's rules, its
// named users (see usersDrift), no other user and no replication from a master. A server
// whose configuration drifted reports false, so that Ensure puts it back; so does a TLS
// database whose certificates need renewal (see tlsCurrent), so that Ensure renews them.
//
// With replication, the replica must run too and follow the primary; without, no
// replica may be left.
func (d *Driver) Running(ctx context.Context, in clouddb.Instance) (bool, error) {
	in.Shards = max(in.Shards, 1)
	unlock, err := d.lockUnlessImporting(ctx, in.DatabaseID)
	if errors.Is(err, errImporting) {
		return true, nil // the import answers for the servers (see errImporting)
	}
	if err != nil {
		return false, err
	}
	defer unlock()
	topo, err := d.readTopology(in.DatabaseID)
	if err != nil {
		return false, nil // Ensure reports it
	}
	if in.TLS != nil && d.ca != nil && !d.tlsCurrent(in.DatabaseID) {
		return false, nil // Ensure renews them (see tlsCurrent)
	}
	if in.OSSCluster || topo.Shards != 0 {
		if topo.Shards != in.Shards || !in.OSSCluster {
			return false, nil // Ensure says why
		}
		for _, idx := range clusterNodes(in) {
			ok, rerr := d.serverRunning(ctx, d.clusterServer(in, idx, topo.Ports[idx]))
			if !ok || rerr != nil {
				return ok, rerr
			}
		}
		return d.clusterHealthy(ctx, in, topo), nil
	}
	p := d.nodeOf(in.DatabaseID, topo.Primary)
	r := d.other(p)
	ok, err := d.serverRunning(ctx, d.primaryServer(in, p))
	if !ok || err != nil {
		return ok, err
	}
	if in.Replication {
		return d.serverRunning(ctx, d.replicaServer(in, r))
	}
	// A replica no longer wanted (node 0's files, or node 1's directory, made but
	// perhaps never given a config): Ensure removes it.
	left := r.dir
	if r.idx == 0 {
		left = filepath.Join(r.dir, confFile)
	}
	if _, err := os.Stat(left); err == nil {
		return false, nil
	}
	return true, nil
}

// serverRunning is Running for one node's server.
func (d *Driver) serverRunning(ctx context.Context, in server) (bool, error) {
	id := in.DatabaseID
	key := checkKey{0, in.Port, in.Password, usersKey(in.Instance), tlsKey(in.Instance)}
	d.mu.Lock()
	last, ok := d.checked[in.node]
	watched := ok && d.exitWatched(last.key.pid, in.dir)
	d.mu.Unlock()
	key.pid = last.key.pid
	if watched && last.key == key && time.Since(last.at) < deepCheckEvery {
		// Its exit would be known (and reported) by now: no need to look at its pid
		// file and /proc, which at a thousand servers every second was most of the
		// idle CPU.
		return true, nil
	}
	pid := d.livePid(in.node)
	if pid == 0 {
		return false, nil
	}
	key.pid = pid
	d.mu.Lock()
	last, ok = d.checked[in.node]
	known := d.rules[in.node]
	knownUsers := d.users[in.node]
	d.mu.Unlock()
	if ok && last.key == key && time.Since(last.at) < deepCheckEvery {
		return true, nil
	}
	want := d.configOf(in)
	c, err := d.probe(ctx, in.node, in.Port, cred{internalUser, want.InternalSecret}, pid)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, nil
	}
	rules := known.rules
	if rules == "" || known.readOnly != want.ReadOnly || known.off != want.DefaultOff {
		// Not set by this Driver yet (clouddb restarted): learn the server's form of them.
		rules, err = normalRules(ctx, c, want.ReadOnly, want.DefaultOff)
		if err == nil {
			d.mu.Lock()
			d.rules[in.node] = knownRules{want.ReadOnly, want.DefaultOff, rules}
			d.mu.Unlock()
		}
	}
	var diff []string
	if err == nil {
		diff, err = drifted(ctx, c, want, rules, knownUsers)
	}
	c.Close()
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		d.log.Warn("cannot compare redis-server's configuration", keyDatabase, id, keyNode, in.idx, "error", err)
		return false, nil
	}
	if len(diff) > 0 {
		d.log.Warn("redis-server's configuration drifted from the desired one", keyDatabase, id, keyNode, in.idx, keyPid, pid, keyChanged, diff)
		return false, nil
	}
	d.mu.Lock()
	d.checked[in.node] = deepCheck{key, time.Now()}
	d.mu.Unlock()
	return true, nil
}

// exitWatched reports whether the exit of process pid, the server of the node in dir,
// would have been reported (Config.Exited): it is that node's child not yet reaped, or
// its adopted server watched (see watchExit). Either is forgotten before its exit is
// reported. d.mu must be held.
func (d *Driver) exitWatched(pid int, dir string) bool {
	if pid <= 0 || d.exited == nil {
		return false
	}
	if c := d.children[pid]; c != nil {
		return c.dir == dir
	}
	fd, ok := d.watching[pid]
	return ok && d.watched[fd].dir == dir
}

// knownRules are the default user's rules in its server's normal form (see getUser).
type knownRules struct {
	readOnly, off bool
	rules         string
}

// checkKey is what a deep check vouched for: a change of any of it needs a new one.
type checkKey struct {
	pid, port int
	password  string
	users     string // see usersKey
	tls       string // see tlsKey
}

type deepCheck struct {
	key checkKey
	at  time.Time
}

// Stop shuts the database's server down cleanly (SIGTERM: redis writes an RDB if the
// database has snapshot persistence and flushes its AOF) and waits until it is gone. The
// data stays. Stopping a stopped database does nothing.
func (d *Driver) Stop(ctx context.Context, id int) error {
	d.endImport(id, errImportStopped)
	unlock, err := d.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	d.stopReplica(id)
	p := d.primaryNode(id)
	nodes := slices.DeleteFunc(d.nodes(id), func(n node) bool { return n == p })
	for _, n := range append(nodes, p) {
		pid := d.livePid(n)
		if pid == 0 {
			continue
		}
		if err := d.terminate(ctx, id, pid); err != nil {
			return err
		}
		d.log.Info("stopped redis-server", keyDatabase, id, keyNode, n.idx, keyPid, pid)
	}
	return nil
}

// Remove stops the database's server without saving and deletes its directory.
// Removing a removed database does nothing.
func (d *Driver) Remove(ctx context.Context, id int) error {
	if id <= 0 {
		return fmt.Errorf("database id %d: must be positive", id)
	}
	d.endImport(id, errImportRemoved)
	unlock, err := d.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	d.stopReplica(id)
	nodes := d.nodes(id)
	for _, n := range nodes {
		d.forget(n)
		if pid := d.livePid(n); pid != 0 {
			if err := d.shutdownNoSave(ctx, n, pid); err != nil {
				return err
			}
			d.log.Info("stopped redis-server for removal", keyDatabase, id, keyNode, n.idx, keyPid, pid)
		}
	}
	// The sockets outside the directory first: once the directory is gone, nothing
	// lists the database to remove them again after a crash.
	if d.sockDir != "" {
		for _, n := range nodes {
			if err := os.Remove(d.sockPath(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("database %d: %w", id, err)
			}
		}
	}
	if err := removeAll(d.dbDir(id)); err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	d.mu.Lock()
	delete(d.topos, id)
	delete(d.clusters, id)
	delete(d.secrets, id)
	delete(d.tlsFiles, id)
	delete(d.tlsChecks, id)
	d.topoGen[id]++
	d.mu.Unlock()
	d.log.Info("removed database directory", keyDatabase, id)
	return nil
}

// Instances lists the ids of the database directories under Dir.
func (d *Driver) Instances(ctx context.Context) ([]int, error) {
	entries, err := os.ReadDir(d.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, e := range entries {
		if id, err := strconv.Atoi(e.Name()); err == nil && id > 0 && e.IsDir() {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// shutdownNoSave stops the server with SHUTDOWN NOSAVE (its background save, if any, is
// stopped too), and with SIGKILL if it cannot be reached.
func (d *Driver) shutdownNoSave(ctx context.Context, n node, pid int) error {
	id := n.db
	conf, ok, err := d.readConfig(n)
	if err == nil && ok && (conf.Port != 0 || isSocket(d.sockPath(n))) {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cr := cred{"", conf.Password}
		if conf.InternalSecret != "" {
			cr = cred{internalUser, conf.InternalSecret}
		}
		c, perr := d.probe(sctx, n, conf.Port, cr, pid)
		if perr == nil {
			err := c.ShutdownNoSave(sctx).Err()
			c.Close()
			if err == nil && d.waitGone(sctx, pid, 5*time.Second) {
				cancel()
				return nil
			}
		}
		cancel()
	}
	return d.kill(ctx, id, pid)
}
