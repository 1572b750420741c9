package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"clouddb"
	"clouddb/blob"
	"clouddb/browser"
	"clouddb/cloudapi"
	k8sdriver "clouddb/driver/kubernetes"
	"clouddb/driver/local"
	"clouddb/internal/metrics"
	"clouddb/reconcile"
	"clouddb/redisdata"
	"clouddb/task"
)

// Config is the configuration of `clouddb serve`.
type Config struct {
	DataDir       string
	Listen        string
	BrowserListen string
	AdvertiseHost string
	DBPorts       string
	// DBMemory is the memory the databases may take together: "auto" (the machine's
	// memory), "0" (no limit) or a size such as 16GiB.
	DBMemory string
	// BackupDirs are the local directories (comma-separated) that backups may be written
	// under; empty means <data-dir>/backups.
	BackupDirs        string
	ProvisioningDelay time.Duration
	RateLimit         int
	TaskLease         time.Duration
	// DataTimeout bounds a data job (an import, a backup) as a whole.
	DataTimeout time.Duration
	LogLevel    string
	// Store is "sqlite" (or empty: a file in the data dir) or a postgres:// URL, which
	// several replicas may share.
	Store string
	// EncryptionKey seals the secrets at rest; it comes from CLOUDDB_ENCRYPTION_KEY only.
	// Empty means the key file in the data dir.
	EncryptionKey string
	// RedisServers are the redis-server binaries (--redis-server, repeatable), one per
	// Redis version offered; the first runs the databases that name no version. Empty
	// means redis-server in PATH.
	RedisServers []string
	// MetricsToken, when set, lets clients beyond loopback read /metrics with it as a
	// bearer token (see metrics.go).
	MetricsToken string
	// MetricsInterval is how often the databases' figures are read for /metrics; 0 means
	// defaultMetricsInterval.
	MetricsInterval time.Duration
	// DebugListen, when set, is the loopback address that serves Go's profiles
	// (/debug/pprof/); empty turns them off.
	DebugListen string
	// Driver is the data plane: "local" (redis-server processes on this machine, the
	// default) or "kubernetes" (a StatefulSet per database, see driver/kubernetes), with
	// the cluster of Kubeconfig (empty: the one clouddb runs in), the Namespace that
	// holds the databases, the RedisImages they run (each "VERSION=IMAGE", or an image
	// tagged with its version; one per major.minor offered, the first the default
	// version), the StorageClass of their volumes (empty: the default) and the
	// ServiceType of their endpoints (NodePort or LoadBalancer), and the cluster's own
	// address ranges (ClusterNetworks, CIDRs separated by commas), which tenants' import
	// and replicaOf sources may not name, and the NodePorts of OSS Cluster databases'
	// other nodes (ClusterPorts, LOW-HIGH, outside DBPorts).
	Driver          string
	Kubeconfig      string
	Namespace       string
	RedisImages     []string
	StorageClass    string
	ServiceType     string
	ClusterNetworks string
	ClusterPorts    string
}

// Defaults of `clouddb serve`.
const (
	DefaultDataDir       = "./clouddb-data"
	DefaultListen        = "127.0.0.1:8080"
	DefaultBrowserListen = "127.0.0.1:5540"
	DefaultAdvertiseHost = "127.0.0.1"
	DefaultDBPorts       = "10000-19999"
	DefaultDBMemory      = "auto"
)

// Main is the running service; tests reach its parts.
type Main struct {
	Config Config

	Store clouddb.Store
	// Driver is the local driver, nil with --driver kubernetes; DataPlane is the driver
	// in use, either.
	Driver     *local.Driver
	DataPlane  clouddb.Driver
	Engine     *task.Engine
	Reconciler *reconcile.Reconciler
	// Addr is the address the API listens on once Run has started it.
	Addr string
	// BrowserAddr is the address of the browser local API, or "" when it is off.
	BrowserAddr string

	stdout, stderr io.Writer
	logger         *slog.Logger
	ready          chan struct{}
	readyOnce      sync.Once
	// leading is set while this process runs the workers (always with SQLite; with a
	// shared store, while it holds the workers' lock).
	leading atomic.Bool
	// timeouts are the HTTP servers' (defaultHTTPTimeouts; tests shorten them).
	timeouts httpTimeouts
	// metrics are what /metrics serves (see metrics.go).
	metrics *metrics.Metrics
}

// httpTimeouts bound how long a connection holds a server's resources: without them an
// idle or half-sent connection, authenticated or not, was held for ever.
type httpTimeouts struct {
	// ReadHeader is the time a client has to send a request's headers, Read its whole
	// request, Write the time an answer may take to produce and send, Idle how long a
	// keep-alive connection may wait for its next request.
	ReadHeader, Read, Write, Idle time.Duration
}

// defaultHTTPTimeouts: every request body is capped at 1 MiB and the slowest answer (a
// browser key read or connection test) takes seconds, so a minute to read and two to
// write leave a wide margin.
var defaultHTTPTimeouts = httpTimeouts{ReadHeader: 10 * time.Second, Read: time.Minute, Write: 2 * time.Minute, Idle: 2 * time.Minute}

// newHTTPServer is the server of either API.
func newHTTPServer(h http.Handler, t httpTimeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle}
}

// NewMain returns a Main with the default configuration.
func NewMain(stdout, stderr io.Writer) *Main {
	return &Main{
		Config: Config{DataDir: DefaultDataDir, Listen: DefaultListen, BrowserListen: DefaultBrowserListen, AdvertiseHost: DefaultAdvertiseHost, DBPorts: DefaultDBPorts, DBMemory: DefaultDBMemory,
			Driver: driverLocal, Namespace: DefaultNamespace, RedisImages: []string{DefaultRedisImage}, ServiceType: DefaultServiceType,
			RateLimit: cloudapi.DefaultRateLimit, TaskLease: task.DefaultLease, DataTimeout: task.DefaultDataTimeout, LogLevel: "info"},
		stdout: stdout, stderr: stderr, ready: make(chan struct{}), timeouts: defaultHTTPTimeouts,
	}
}

// ParseFlags reads the flags and their CLOUDDB_* environment twins.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("clouddb serve", flag.ContinueOnError)
	fs.SetOutput(m.stderr)
	c := &m.Config
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of the state (clouddb.db) and of the databases' data")
	fs.StringVar(&c.Listen, "listen", c.Listen, "address of the cloud API")
	fs.StringVar(&c.BrowserListen, "browser-listen", c.BrowserListen, "address of the browser local API (it has no authentication: keep it on loopback); empty turns it off")
	fs.StringVar(&c.AdvertiseHost, "advertise-host", c.AdvertiseHost, "host the databases bind and that endpoints name")
	fs.StringVar(&c.DBPorts, "db-ports", c.DBPorts, "range of ports for the databases, LOW-HIGH")
	fs.StringVar(&c.BackupDirs, "backup-dirs", c.BackupDirs, "local directories, comma-separated, that backups to a local path or file:// URI may be written under (default <data-dir>/backups; / allows any)")
	fs.StringVar(&c.DBMemory, "db-memory", c.DBMemory, "memory the databases may take together (the sum of their memoryLimitInGb): auto (this machine's memory), 0 (no limit), or a size such as 16GiB")
	fs.DurationVar(&c.ProvisioningDelay, "provisioning-delay", c.ProvisioningDelay, "extra time each provisioning step waits before it completes (to watch pending states)")
	fs.IntVar(&c.RateLimit, "rate-limit", c.RateLimit, "requests per minute per API key (0 turns the limit off)")
	fs.DurationVar(&c.TaskLease, "task-lease", c.TaskLease, "how long a task in processing is held by its worker before another takes it over (after a crash)")
	fs.DurationVar(&c.DataTimeout, "data-timeout", c.DataTimeout, "longest an import or a backup may take as a whole; past it the task fails")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.Var((*redisServersFlag)(&c.RedisServers), "redis-server", "a redis-server binary, path or name in PATH (repeat it, one binary per Redis major.minor version; the first is the default version; default redis-server in PATH)")
	fs.StringVar(&c.MetricsToken, "metrics-token", c.MetricsToken, "bearer token that lets clients beyond loopback read /metrics (prefer CLOUDDB_METRICS_TOKEN: a flag shows in the process list); empty: loopback only")
	fs.DurationVar(&c.MetricsInterval, "metrics-interval", c.MetricsInterval, "how often each database's figures (memory, keys, ops/s, clients) are read for /metrics (default 10s)")
	fs.StringVar(&c.DebugListen, "debug-listen", c.DebugListen, "loopback address that serves Go's profiles under /debug/pprof/ (CPU, heap, goroutines; no authentication); empty turns them off")
	fs.StringVar(&c.Store, "store", c.Store, "sqlite (a file in the data dir) or a postgres:// URL that several replicas may share (they need the same "+envKey+")")
	fs.StringVar(&c.Driver, "driver", c.Driver, "where the databases run: local (redis-server processes on this machine) or kubernetes (a StatefulSet each, in --namespace; --db-ports then defaults to the NodePort range 30000-32767 and --advertise-host should be a node's address)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "with --driver kubernetes: the kubeconfig file of the cluster; empty: the cluster clouddb runs in")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "with --driver kubernetes: the namespace of the databases' objects (give clouddb deploy/kubernetes/rbac.yaml's Role there)")
	fs.Var(&redisImagesFlag{images: &c.RedisImages}, "k8s-redis-image", "with --driver kubernetes: a redis `IMAGE` the databases run, tagged with its Redis version (redis:7.2.4) or given as VERSION=IMAGE; repeat it, or separate images with commas or spaces (as CLOUDDB_K8S_REDIS_IMAGE may), to offer several Redis versions, one image per major.minor; the first is the default version")
	fs.StringVar(&c.StorageClass, "k8s-storage-class", c.StorageClass, "with --driver kubernetes: the StorageClass of persistent databases' volumes; empty: the cluster's default")
	fs.StringVar(&c.ServiceType, "k8s-service-type", c.ServiceType, "with --driver kubernetes: the type of the databases' Services, their publicEndpoint: NodePort (the database's port on --advertise-host, a node's address) or LoadBalancer (the database's port on the address the cluster's load-balancer controller gives)")
	fs.StringVar(&c.ClusterNetworks, "k8s-cluster-networks", c.ClusterNetworks, "with --driver kubernetes: the cluster's pod and service networks, CIDRs separated by commas (such as 10.244.0.0/16,10.96.0.0/12): tenants' import and replicaOf sources there are refused (the node, the API server, the namespace's pods and Services and loopback are refused in any case)")
	fs.StringVar(&c.ClusterPorts, "k8s-cluster-ports", c.ClusterPorts, "with --driver kubernetes: the NodePorts of the nodes of OSS Cluster databases but their first (which is on the database's port), LOW-HIGH, in the cluster's NodePort range and outside --db-ports (default "+defaultClusterPorts+")")
	if err := envFlags(fs, args); err != nil {
		return err
	}
	if c.Driver == driverKubernetes && !flagSet(fs, "db-ports") {
		c.DBPorts = defaultNodePorts
	}
	if c.Driver == driverKubernetes && !flagSet(fs, "k8s-cluster-ports") && !portsOverlap(defaultClusterPorts, c.DBPorts) {
		// A --db-ports of the whole NodePort range (this driver's default before it ran
		// OSS Cluster) leaves none: then OSS Cluster is refused until one is given.
		c.ClusterPorts = defaultClusterPorts
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	key, err := envEncryptionKey()
	if err != nil {
		return err
	}
	c.EncryptionKey = key
	return c.Validate()
}

// Validate checks the configuration; messages name the flag.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("--data-dir must not be empty")
	}
	if err := validateStore(c.Store); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT", c.Listen)
	}
	if c.BrowserListen != "" {
		host, _, err := net.SplitHostPort(c.BrowserListen)
		if err != nil {
			return fmt.Errorf("--browser-listen %q: want HOST:PORT", c.BrowserListen)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("--browser-listen %q: the browser API has no authentication and listens on loopback only", c.BrowserListen)
		}
	}
	if err := validateDebugListen(c.DebugListen); err != nil {
		return err
	}
	if err := validateDriver(c); err != nil {
		return err
	}
	if net.ParseIP(c.AdvertiseHost) == nil {
		return fmt.Errorf("--advertise-host %q: want an IP address the databases can bind", c.AdvertiseHost)
	}
	if _, err := dbMemory(c.DBMemory); err != nil {
		return err
	}
	for _, d := range backupDirs(*c) {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("--backup-dirs: %q is not an absolute path", d)
		}
	}
	if _, _, err := task.ParseRange(c.DBPorts); err != nil {
		return fmt.Errorf("--db-ports: %v", err)
	}
	if c.ProvisioningDelay < 0 {
		return errors.New("--provisioning-delay must not be negative")
	}
	if c.RateLimit < 0 {
		return errors.New("--rate-limit must not be negative (0 turns it off)")
	}
	if c.TaskLease < 100*time.Millisecond {
		return errors.New("--task-lease must be at least 100ms")
	}
	// 0 is the engine's default (a Config built in code leaves it out).
	if c.DataTimeout < 0 || (c.DataTimeout > 0 && c.DataTimeout < time.Second) {
		return errors.New("--data-timeout must be at least 1s")
	}
	if err := validateMetrics(c); err != nil {
		return err
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// Ready is closed once the API answers.
func (m *Main) Ready() <-chan struct{} { return m.ready }

// Run starts the service and blocks until ctx is cancelled, then shuts down gracefully:
// it stops taking requests, finishes the tasks in hand, and stops every database server
// cleanly so the next start brings them back with their data.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	m.logger = slog.New(slog.NewTextHandler(m.stderr, &slog.HandlerOptions{Level: level}))
	redisLog.Store(m.logger)
	// Checked before anything is opened: a wrong binary is a wrong command line.
	var bins []local.RedisBinary
	if c.Driver != driverKubernetes {
		var err error
		if bins, err = redisServers(ctx, c.RedisServers); err != nil {
			return err
		}
	}

	// The workers exist before the store opens: a shared store's change hook, which
	// wakes them, may fire as soon as it is open.
	m.Reconciler = &reconcile.Reconciler{Logger: m.logger, Delay: c.ProvisioningDelay}
	m.Engine = &task.Engine{
		Logger:      m.logger,
		Lease:       c.TaskLease,
		DataTimeout: c.DataTimeout,
		Processed:   func(*clouddb.Task) { m.Reconciler.Notify() },
	}
	m.initMetrics()
	db, cipher, err := openState(ctx, c, func() {
		// Another replica committed: a task to claim, or a change to provision, if this
		// one runs the workers.
		m.Engine.Notify()
		m.Reconciler.Notify()
	})
	if err != nil {
		return err
	}
	defer db.Close()
	m.Store = db
	// One process serves a SQLite data dir: another one's caches would not see this
	// one's writes. Several replicas share a Postgres store instead.
	if _, shared := db.(leader); !shared {
		l, ok, lockErr := tryLock(filepath.Join(c.DataDir, workersFile))
		// A clouddb killed a moment ago may have left a child between fork and exec
		// (starting a redis-server) that holds the lock's file for a few milliseconds
		// more: give it that time before calling the data dir taken.
		for deadline := time.Now().Add(lockGrace); lockErr == nil && !ok && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			l, ok, lockErr = tryLock(filepath.Join(c.DataDir, workersFile))
		}
		if lockErr != nil {
			return lockErr
		}
		if !ok {
			return fmt.Errorf("another clouddb serves %s (its SQLite store is this process's alone; replicas share a postgres:// --store)", c.DataDir)
		}
		defer l.unlock()
	}
	creds, err := bootstrap(ctx, db, c.DataDir)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	ca, err := loadCA(ctx, db, cipher)
	if err != nil {
		return err
	}
	// Sources of imports and replicas are where users point clouddb: every connection to
	// them goes through the address guard. Local backups go only where the operator said.
	blobOpts := blob.OptionsFromEnv(nil)
	blobOpts.LocalRoots = backupDirs(c)
	for _, d := range blobOpts.LocalRoots {
		if mkErr := os.MkdirAll(d, 0o700); mkErr != nil {
			return fmt.Errorf("--backup-dirs: %w", mkErr)
		}
	}
	portLow, portHigh, _ := task.ParseRange(c.DBPorts)
	dataPlane, versions, err := m.newDriver(bins, ca, portLow, portHigh, blobOpts)
	if err != nil {
		return err
	}
	m.DataPlane = dataPlane
	m.logger.Info("Redis versions offered", "versions", strings.Join(versions.Offered, ", "), "default", versions.Default)
	low, high, _ := task.ParseRange(c.DBPorts)
	tmpDir, releaseTmp, err := makeTempDir(filepath.Join(c.DataDir, "tmp"))
	if err != nil {
		return err
	}
	defer releaseTmp()
	// The reconciler's transactions also record how upgrades end (see
	// task.RecordUpgradeOutcomes).
	m.Reconciler.Store, m.Reconciler.Driver = task.RecordUpgradeOutcomes(db), dataPlane
	m.Engine.Store, m.Engine.Driver = db, dataPlane
	m.Engine.Ports = &task.Ports{Low: low, High: high, Host: c.AdvertiseHost}
	var privateEndpoint, publicEndpoint func(databaseID, port int) string
	if k, ok := dataPlane.(*k8sdriver.Driver); ok {
		// A NodePort is no socket of this host to probe: the Service's creation says
		// when something else holds it.
		m.Engine.Ports.Free = func(string, int) bool { return true }
		privateEndpoint, publicEndpoint = k.PrivateEndpoint, k.PublicEndpointOf
	}
	m.Engine.MemoryLimit, _ = dbMemory(c.DBMemory)
	m.Engine.Blob, m.Engine.TempDir = blobOpts, tmpDir
	m.Engine.RedisVersions = versions
	api := &cloudapi.Server{Store: db, Tasks: m.Engine, CA: ca, AdvertiseHost: c.AdvertiseHost, PrivateEndpoint: privateEndpoint, PublicEndpoint: publicEndpoint,
		RedisVersions: versions, Logger: m.logger, RateLimit: c.RateLimit}

	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	m.Addr = ln.Addr().String()
	if urlErr := writeAPIURL(c.DataDir, m.Addr); urlErr != nil {
		_ = ln.Close()
		return urlErr
	}
	srv := newHTTPServer(m.apiListenerHandler(api.Handler()), m.timeouts)
	servers := []*http.Server{srv}
	serveErr := make(chan error, 3)
	if c.BrowserListen != "" {
		b, openErr := browser.Open(browser.Config{Path: filepath.Join(c.DataDir, "browser.db"), Cipher: cipher, Logger: m.logger})
		if openErr != nil {
			_ = ln.Close()
			return fmt.Errorf("browser API: %w", openErr)
		}
		defer b.Close()
		bln, listenErr := net.Listen("tcp", c.BrowserListen)
		if listenErr != nil {
			_ = ln.Close()
			return fmt.Errorf("browser API: %w", listenErr)
		}
		m.BrowserAddr = bln.Addr().String()
		bsrv := newHTTPServer(b.Handler(), m.timeouts)
		servers = append(servers, bsrv)
		go func() { serveErr <- bsrv.Serve(bln) }()
	}

	if c.DebugListen != "" {
		dln, listenErr := net.Listen("tcp", c.DebugListen)
		if listenErr == nil {
			if listenErr = boundToLoopback(dln.Addr()); listenErr != nil {
				_ = dln.Close()
			}
		}
		if listenErr != nil {
			_ = ln.Close()
			return fmt.Errorf("--debug-listen: %w", listenErr)
		}
		// No write timeout: a CPU profile or a trace takes as long as it was asked to.
		dsrv := &http.Server{Handler: debugHandler(), ReadHeaderTimeout: m.timeouts.ReadHeader, IdleTimeout: m.timeouts.Idle}
		servers = append(servers, dsrv)
		m.logger.Info("serving Go's profiles", "addr", dln.Addr().String())
		go func() { serveErr <- dsrv.Serve(dln) }()
	}

	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { clouddb.Keep(workCtx, m.logger, "workers", m.work) })
	wg.Go(func() { watchCAEnd(workCtx, m.logger, ca.NotAfter()) })
	go func() { serveErr <- srv.Serve(ln) }()

	m.printWelcome(creds)
	m.readyOnce.Do(func() { close(m.ready) })
	m.logger.Info("clouddb serving", "addr", m.Addr, "data_dir", c.DataDir)

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	}
	m.logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, s := range servers {
		if serr := s.Shutdown(sctx); serr != nil {
			// Connections still open past the timeout are cut; the work below still stops.
			m.logger.Warn("HTTP shutdown", "addr", s.Addr, "err", serr)
		}
	}
	stopWork()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// backupDirs are the directories local backups may be written under: --backup-dirs, or
// <data-dir>/backups (made absolute, as the data dir may be relative).
func backupDirs(c Config) []string {
	if c.BackupDirs == "" {
		abs, err := filepath.Abs(filepath.Join(c.DataDir, "backups"))
		if err != nil {
			return []string{filepath.Join(c.DataDir, "backups")}
		}
		return []string{abs}
	}
	var dirs []string
	for _, d := range strings.Split(c.BackupDirs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs
}

// dbMemory is the byte count --db-memory names; 0 means no limit.
func dbMemory(s string) (int64, error) {
	switch s {
	case "", "auto":
		return machineMemory(), nil
	case "0":
		return 0, nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > math.MaxInt64 {
		return 0, fmt.Errorf("--db-memory %q: want auto, 0 (no limit) or a size such as 16GiB or 512MiB", s)
	}
	return int64(n), nil
}

// machineMemory is the memory this process may use: the machine's (MemTotal), or its
// control group's limit when that is lower (a container); 0 (no limit) where neither can
// be read.
func machineMemory() int64 {
	var total int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			var kb int64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
				total = kb << 10
				break
			}
		}
	}
	// cgroup v2, then v1; "max" or a huge number means no limit.
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && limit > 0 && (total == 0 || limit < total) {
			total = limit
		}
		break
	}
	return total
}

// workersLock names the lock that the replica running the workers holds in a shared
// store.
const workersLock = "clouddb-workers"

// leader is a store several replicas share: one at a time holds a named lock.
type leader interface {
	Lead(ctx context.Context, name string) (lost <-chan struct{}, release func(), err error)
}

// workersFile is the lock file in the data dir that the process running the workers
// holds: the fence that keeps two supervisors off one data dir. A replica that lost the
// store's lock holds it until its workers have stopped, so the next holder never acts
// while the previous one still does.
const workersFile = "workers.lock"

// lockGrace is how long a start waits for the workers' lock file before it says that
// another clouddb serves the data dir.
const lockGrace = 2 * time.Second

// work runs the task engine and the reconciler (with the database servers it supervises)
// until ctx ends, then stops the database servers cleanly. One process at a time runs
// them for a data dir: the local driver's servers live on this machine, and one
// supervisor must own them. On SQLite that process is the only one (Run holds the data
// dir's lock file). With a shared store it holds the store's workers' lock and the lock
// file; the other replicas serve the APIs and stand by, and one takes over when the
// holder stops or loses the store.
func (m *Main) work(ctx context.Context) {
	path := filepath.Join(m.Config.DataDir, workersFile)
	l, shared := m.Store.(leader)
	if !shared {
		m.lead(ctx, nil) // Run holds the data dir's lock file
		return
	}
	for ctx.Err() == nil {
		lost, release, err := l.Lead(ctx, workersLock)
		if err != nil {
			if ctx.Err() == nil {
				m.logger.Error("waiting for the workers' lock", "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		// The previous holder, if it runs here still, holds the file until its workers
		// have stopped.
		fctx, stop := context.WithCancel(ctx)
		go func() {
			select {
			case <-lost:
				stop()
			case <-fctx.Done():
			}
		}()
		fl, err := lockFile(fctx, path)
		stop()
		if err == nil {
			m.logger.Info("this replica runs the task engine and the databases")
			m.lead(ctx, lost)
			fl.unlock()
		}
		release()
		if ctx.Err() == nil {
			m.logger.Warn("lost the workers' lock (the store connection broke): standing by")
		}
	}
}

// lead runs the workers until ctx ends or lost closes. On the end of ctx (a graceful
// stop) it stops the database servers before it returns, so that a replica taking over
// finds them stopped, not half-way. On a lost lock it leaves them running, as a crash
// would, for the next holder to adopt.
func (m *Main) lead(ctx context.Context, lost <-chan struct{}) {
	m.leading.Store(true)
	defer m.leading.Store(false)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Before the reconciler acts on any stored Redis version: one kept from before
	// clouddb offered several must not move a server to another version.
	for {
		err := m.Engine.NormalizeRedisVersions(wctx)
		if err == nil || wctx.Err() != nil {
			break
		}
		m.logger.Error("making the stored Redis versions those the servers run", "err", err)
		select {
		case <-wctx.Done():
		case <-lost:
			cancel()
		case <-time.After(time.Second):
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		clouddb.Keep(wctx, m.logger, "task engine", func(ctx context.Context) { m.logStopped("task engine", ctx, m.Engine.Run(ctx)) })
	})
	wg.Go(func() {
		clouddb.Keep(wctx, m.logger, "reconciler", func(ctx context.Context) { m.logStopped("reconciler", ctx, m.Reconciler.Run(ctx)) })
	})
	wg.Go(func() { clouddb.Keep(wctx, m.logger, "database figures", m.collectStats) })
	select {
	case <-ctx.Done():
	case <-lost:
	}
	cancel()
	wg.Wait()
	if ctx.Err() == nil {
		return
	}
	sctx, cancelStop := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancelStop()
	if m.Config.Driver == driverKubernetes {
		// The databases are the cluster's to run: they outlive this process, as the
		// local driver's servers outlive a crash, and the next clouddb adopts them.
		return
	}
	if err := m.Reconciler.Shutdown(sctx); err != nil {
		m.logger.Error("stopping databases", "err", err)
	}
}

// newDriver makes the data plane of --driver: the local driver (bins are its
// redis-server binaries) or the kubernetes one.
func (m *Main) newDriver(bins []local.RedisBinary, ca clouddb.CertificateAuthority, portLow, portHigh int, blobOpts blob.Options) (clouddb.Driver, clouddb.RedisVersions, error) {
	if m.Config.Driver == driverKubernetes {
		d, versions, err := newKubernetesDriver(m.Config, m.logger, ca, blobOpts)
		if err != nil {
			return nil, versions, err
		}
		return d, versions, nil
	}
	c := m.Config
	drv, err := local.New(local.Config{Dir: filepath.Join(c.DataDir, "databases"), Host: c.AdvertiseHost, Logger: m.logger,
		RedisServers: bins, CA: ca,
		// The ports the store hands out are not the driver's to take for cluster nodes.
		AvoidPorts: func(p int) bool { return p >= portLow && p <= portHigh },
		// A server that exits wakes the reconciler, which restarts it if its database
		// is still meant to run.
		Exited: func(int) { m.Reconciler.Notify() },
		DialSource: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return blob.Dial(ctx, network, addr, blobOpts)
		},
		ReplicaEvent: func(id int, e redisdata.Event) {
			m.Reconciler.SourceEvent(id, e.Endpoint, e.State, e.Message, e.Err)
		},
	})
	if err != nil {
		return nil, clouddb.RedisVersions{}, err
	}
	m.Driver = drv
	return drv, drv.Versions(), nil
}

// logStopped logs a loop that returned an error other than its context ending; keep
// starts it again.
func (m *Main) logStopped(what string, ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil {
		m.logger.Error("background loop stopped", "loop", what, "err", err)
	}
}

// Leading reports whether this process runs the workers now.
func (m *Main) Leading() bool { return m.leading.Load() }

// sleep waits for d or the end of ctx.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// printWelcome tells a new user where everything is and how to call it from another
// shell: every line it prints works as pasted there. The secret is printed on the first
// start only (it is also in credentials.json); later starts point the CLI at the file.
func (m *Main) printWelcome(creds *credentials) {
	root := "http://" + m.Addr
	api := root + "/v1"
	w := m.stdout
	fmt.Fprintf(w, "clouddb %s is serving the cloud API at %s\n", clouddb.Version(), api)
	fmt.Fprintf(w, "  console:        %s/\n", root)
	fmt.Fprintf(w, "  API reference:  %s/docs (OpenAPI: %s/openapi.json)\n", root, api)
	fmt.Fprintf(w, "  metrics:        %s/metrics (health: %s/healthz, %s/readyz)\n", root, root, root)
	if m.BrowserAddr != "" {
		fmt.Fprintf(w, "and the browser local API at http://%s/api/ (its web UI: http://%s/)\n", m.BrowserAddr, m.BrowserAddr)
	}
	dataDir := m.Config.DataDir
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	credsFile := filepath.Join(dataDir, "credentials.json")
	fmt.Fprintf(w, "\nTo use the CLI from another shell, paste:\n  export CLOUDDB_URL=%s\n", api)
	switch {
	case creds != nil && creds.secretGiven:
		fmt.Fprintf(w, "  export CLOUDDB_API_KEY=%s\n  export CLOUDDB_API_SECRET_KEY=\"$CLOUDDB_BOOTSTRAP_SECRET_KEY\"\n", creds.APIKey)
		fmt.Fprintf(w, "(a default account was made on this first start, with the secret clouddb was given in CLOUDDB_BOOTSTRAP_SECRET_KEY; its key pair is also in %s)\n", credsFile)
	case creds != nil:
		fmt.Fprintf(w, "  export CLOUDDB_API_KEY=%s\n  export CLOUDDB_API_SECRET_KEY=%s\n", creds.APIKey, creds.SecretKey)
		fmt.Fprintf(w, "(a default account was made on this first start; its key pair, shown once, is also in %s)\n", credsFile)
	default:
		fmt.Fprintf(w, "  export CLOUDDB_DATA_DIR=%s\n", dataDir)
		fmt.Fprintf(w, "(the CLI reads the default account's key pair from %s)\n", credsFile)
	}
	fmt.Fprintf(w, "\nTry:\n  %s subscriptions list\n  %s --help\n", cliPath(), cliPath())
}

// cliPath is how the user ran this binary (./bin/clouddb under make run), for the lines
// the welcome suggests; plain "clouddb" when it was found in PATH or is not the CLI (a
// test binary).
func cliPath() string {
	arg := os.Args[0]
	if filepath.Base(arg) != "clouddb" {
		return "clouddb"
	}
	return arg
}

// redisLog is the logger go-redis's lines go to (main installs redisLogger once; a
// global, since go-redis's logger is one).
var redisLog atomic.Pointer[slog.Logger]

// redisLogger sends go-redis's log lines, routine connection failures to servers that
// are starting or stopping, to the debug level of the service's log.
type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l := redisLog.Load(); l != nil {
		l.DebugContext(ctx, fmt.Sprintf(format, v...), "system", "go-redis")
	}
}

// apiURLFile, in the data dir, holds the URL the API serves at, so that the CLI run in a
// shell beside the data dir reaches this service whatever --listen said.
const apiURLFile = "api-url"

// writeAPIURL records the API's URL for the CLI (written whole: a CLI reading it meanwhile
// sees the old URL or the new one).
func writeAPIURL(dataDir, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// Listening on every address: the loopback one reaches it from this machine.
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	u := "http://" + net.JoinHostPort(host, port) + "/v1\n"
	tmp := filepath.Join(dataDir, apiURLFile+".tmp")
	if err := os.WriteFile(tmp, []byte(u), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", apiURLFile, err)
	}
	return os.Rename(tmp, filepath.Join(dataDir, apiURLFile))
}

// credentials are the bootstrap key pair, written once to <data-dir>/credentials.json.
type credentials struct {
	AccountID int    `json:"accountId"`
	APIKey    string `json:"apiKey"`
	SecretKey string `json:"secretKey"`
	// secretGiven: the secret came from CLOUDDB_BOOTSTRAP_SECRET_KEY, which its operator
	// holds: the welcome does not print it (into a pod's log, say).
	secretGiven bool
}

// bootstrap creates, on first start, the default account (flexible plan), its payment
// method, the internal cloud account and an API key pair. It returns the pair when it
// made one, nil otherwise.
func bootstrap(ctx context.Context, store clouddb.Store, dataDir string) (*credentials, error) {
	var creds *credentials
	err := store.Update(ctx, func(tx clouddb.Tx) error {
		if err := ensureInternalCloudAccount(ctx, tx); err != nil {
			return err
		}
		accounts, err := tx.Accounts(ctx)
		if err != nil || len(accounts) > 0 {
			return err
		}
		a, err := createAccount(ctx, tx, "default", clouddb.PlanFlexible)
		if err != nil {
			return err
		}
		key, secret := os.Getenv("CLOUDDB_BOOTSTRAP_API_KEY"), os.Getenv("CLOUDDB_BOOTSTRAP_SECRET_KEY")
		k, secret, err := createKey(ctx, tx, a.ID, "default", clouddb.RoleOwner, key, secret)
		if err != nil {
			return err
		}
		creds = &credentials{AccountID: a.ID, APIKey: k.Key, SecretKey: secret, secretGiven: os.Getenv("CLOUDDB_BOOTSTRAP_SECRET_KEY") != ""}
		b, _ := json.MarshalIndent(creds, "", "  ")
		return os.WriteFile(filepath.Join(dataDir, "credentials.json"), append(b, '\n'), 0o600)
	})
	return creds, err
}

// ensureInternalCloudAccount creates cloud account 1, the service's own resources, which
// every account sees.
func ensureInternalCloudAccount(ctx context.Context, tx clouddb.Tx) error {
	_, err := tx.CloudAccount(ctx, 0, clouddb.InternalCloudAccountID)
	if !errors.Is(err, clouddb.ErrNotFound) {
		return err
	}
	return tx.CreateCloudAccount(ctx, &clouddb.CloudAccount{
		ID: clouddb.InternalCloudAccountID, Name: "Redis Internal Resources", Provider: "AWS", Status: clouddb.CloudAccountActive, Generation: 1,
	})
}

// createAccount makes an account with one payment method that expires in the future
// (Terraform skips expired cards).
func createAccount(ctx context.Context, tx clouddb.Tx, name string, plan clouddb.Plan) (*clouddb.Account, error) {
	a := &clouddb.Account{Name: name, Plan: plan}
	if err := tx.CreateAccount(ctx, a); err != nil {
		return nil, err
	}
	exp := time.Now().AddDate(10, 0, 0)
	if err := tx.CreatePaymentMethod(ctx, &clouddb.PaymentMethod{
		AccountID: a.ID, Type: "Visa", CreditCardEndsWith: 4242, NameOnCard: name, ExpirationMonth: int(exp.Month()), ExpirationYear: exp.Year(),
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// createKey makes an API key; an empty key or secret is generated (128 random bits or
// more).
func createKey(ctx context.Context, tx clouddb.Tx, accountID int, name string, role clouddb.APIKeyRole, key, secret string) (*clouddb.APIKey, string, error) {
	if key == "" {
		key = rand.Text()
	}
	if secret == "" {
		secret = rand.Text() + rand.Text()
	}
	k := &clouddb.APIKey{AccountID: accountID, Name: name, Key: key, SecretDigest: clouddb.DigestSecret(secret), Role: role}
	if err := tx.CreateAPIKey(ctx, k); errors.Is(err, clouddb.ErrConflict) {
		return nil, "", fmt.Errorf("API key %q already exists", key)
	} else if err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

// redisServersFlag is --redis-server: repeatable, one binary each time.
type redisServersFlag []string

func (f *redisServersFlag) String() string {
	if f == nil {
		return ""
	}
	return fmt.Sprint([]string(*f))
}

func (f *redisServersFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty path")
	}
	*f = append(*f, v)
	return nil
}

// redisServers runs each --redis-server binary's --version and returns them probed, the
// first (the default version's) first. A binary that does not run, is older than Redis
// 7.0, or is a second binary of a major.minor already given fails the start.
func redisServers(ctx context.Context, paths []string) ([]local.RedisBinary, error) {
	if len(paths) == 0 {
		paths = []string{local.DefaultRedisServer}
	}
	bins := make([]local.RedisBinary, 0, len(paths))
	given := map[string]string{} // version → path as given
	for _, p := range paths {
		b, err := local.ProbeRedisServer(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("--redis-server %s: %w", p, err)
		}
		if other, ok := given[b.Version]; ok {
			return nil, fmt.Errorf("--redis-server %s and %s are both Redis %s: give one binary per major.minor version", other, p, b.Version)
		}
		given[b.Version] = p
		bins = append(bins, b)
	}
	return bins, nil
}
