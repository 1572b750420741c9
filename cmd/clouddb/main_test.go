package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"clouddb/cloudapi/client"
	"clouddb/internal/pgtest"
	"clouddb/internal/syncbuf"
)

// These end-to-end tests run the real service (store, task engine, reconciler, local
// driver with real redis-server processes, HTTP API) on port 0 with a temporary data dir,
// and drive it over HTTP with the typed client, as a user's automation would.

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintln(os.Stderr, "redis-server not found: install it (apt-get install -y redis-server) or run `make test`, which does")
		os.Exit(1)
	}
	pgtest.Main(m)
}

var portBlock atomic.Int32

// portRange gives each service its own block of database ports, so tests that run in
// parallel never race for one. The blocks stay below Linux's ephemeral range.
func portRange() string {
	// The blocks wrap within 20000-31999: the package makes well over a hundred
	// services, and blocks past 32767 would be in the ephemeral range.
	const base, span = 20000, 12000
	n := int(portBlock.Add(1))
	low := base + ((os.Getpid()%40)*300+n*12)%(span-12)
	return fmt.Sprintf("%d-%d", low, low+11)
}

// service is a running clouddb.
type service struct {
	t      *testing.T
	m      *Main
	dir    string
	cancel context.CancelFunc
	done   chan error
	c      *client.Client
	// logs is what the service logged (stderr); stdout carries only the welcome text,
	// which shows the first start's key pair once, by design.
	logs *syncbuf.Buffer
}

type options struct {
	delay     time.Duration
	ports     string
	rateLimit int // 0: off, so that polling tests are not throttled
	store     string
	dbMemory  string
	// backupDirs defaults to the system's temporary directory, where tests' backups go.
	backupDirs string
	// advertiseHost defaults to 127.0.0.1.
	advertiseHost string
	key           string // the encryption key; "" lets the service make a key file
	dataTimeout   time.Duration
	// timeouts replace the HTTP servers' defaults when set.
	timeouts *httpTimeouts
	// redisServers are --redis-server binaries; none means redis-server in PATH.
	redisServers []string
}

func startService(t *testing.T, dir string, o options) *service {
	t.Helper()
	if o.ports == "" {
		o.ports = portRange()
	}
	if o.backupDirs == "" {
		o.backupDirs = os.TempDir()
	}
	if o.advertiseHost == "" {
		o.advertiseHost = "127.0.0.1"
	}
	logs := &syncbuf.Buffer{}
	m := NewMain(&syncbuf.Buffer{}, logs)
	m.Config = Config{DataDir: dir, Listen: "127.0.0.1:0", BrowserListen: "127.0.0.1:0", AdvertiseHost: o.advertiseHost, DBPorts: o.ports, ProvisioningDelay: o.delay,
		RateLimit: o.rateLimit, TaskLease: 2 * time.Second, LogLevel: "info", Store: o.store, EncryptionKey: o.key, DBMemory: o.dbMemory, BackupDirs: o.backupDirs,
		DataTimeout: o.dataTimeout, RedisServers: o.redisServers}
	require.NoError(t, m.Config.Validate())
	if o.timeouts != nil {
		m.timeouts = *o.timeouts
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{t: t, m: m, dir: dir, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { s.done <- m.Run(ctx) }()
	select {
	case <-m.Ready():
	case err := <-s.done:
		t.Fatalf("clouddb did not start: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("clouddb not ready after 30s\n%s", logs.String())
	}
	creds := readCredentials(t, dir)
	// Registered before stop, so it runs after it: a graceful stop leaves no server.
	t.Cleanup(func() {
		if n := sweepServers(dir); n > 0 {
			t.Errorf("%d redis-server(s) of %s still ran after clouddb stopped", n, dir)
		}
	})
	// Every request of the client, and every answer, is checked against the OpenAPI
	// document the binary serves (internal/apitest).
	s.c = client.New("http://"+m.Addr+"/v1", creds.APIKey, creds.SecretKey, client.WithPollInterval(50*time.Millisecond),
		client.WithHTTPClient(cloudAPIClient(t)))
	t.Cleanup(func() { s.stop() })
	return s
}

// stop shuts the service down gracefully, as SIGTERM does.
func (s *service) stop() {
	s.t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		require.NoError(s.t, err)
	case <-time.After(60 * time.Second):
		s.t.Fatalf("clouddb did not stop within 60s\n%s", s.logs.String())
	}
}

func readCredentials(t *testing.T, dir string) credentials {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "credentials.json"))
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(dir, "credentials.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "credentials.json must be private")
	var c credentials
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// subscriptionBody is a create body like the README's, with the given creation plan.
func subscriptionBody(pm int, name string, dbs ...client.CreateSubscriptionDatabase) client.CreateSubscription {
	return client.CreateSubscription{
		Name:            client.Ptr(name),
		PaymentMethodID: client.Ptr(pm),
		CloudProviders: []client.CreateCloudProvider{{
			Provider:       client.Ptr("AWS"),
			CloudAccountID: client.Ptr(1),
			Regions: []client.CreateRegion{{
				Region:     client.Ptr("us-east-1"),
				Networking: &client.CreateNetworking{DeploymentCIDR: client.Ptr("10.0.0.0/24")},
			}},
		}},
		Databases: dbs,
	}
}

func planDB(name string, gb float64) client.CreateSubscriptionDatabase {
	return client.CreateSubscriptionDatabase{Name: client.Ptr(name), DatasetSizeInGB: client.Ptr(gb)}
}

func (s *service) paymentMethod(ctx context.Context) int {
	pms, err := s.c.ListPaymentMethods(ctx)
	require.NoError(s.t, err)
	require.NotEmpty(s.t, pms)
	return pms[0].ID
}

// createSubscription creates a subscription and waits for its task; it returns the id.
func (s *service) createSubscription(ctx context.Context, body client.CreateSubscription) int {
	s.t.Helper()
	task, err := s.c.CreateSubscription(ctx, body)
	require.NoError(s.t, err)
	done, err := s.c.WaitForTask(ctx, task.ID)
	require.NoError(s.t, err)
	return done.ResourceID()
}

// activeSubscription creates a subscription with one plan database and waits until it is
// active; it returns the subscription id and the database.
func (s *service) activeSubscription(ctx context.Context, name string, gb float64) (int, *client.Database) {
	s.t.Helper()
	sub := s.createSubscription(ctx, subscriptionBody(s.paymentMethod(ctx), name, planDB(name+"-db", gb)))
	_, err := s.c.WaitForSubscriptionStatus(ctx, sub, "active")
	require.NoError(s.t, err)
	dbs, err := s.c.AllDatabases(ctx, sub)
	require.NoError(s.t, err)
	require.Len(s.t, dbs, 1)
	return sub, &dbs[0]
}

// createDatabase creates a database and waits for its task; it returns the id.
func (s *service) createDatabase(ctx context.Context, sub int, body client.CreateDatabase) int {
	s.t.Helper()
	task, err := s.c.CreateDatabase(ctx, sub, body)
	require.NoError(s.t, err)
	done, err := s.c.WaitForTask(ctx, task.ID)
	require.NoError(s.t, err)
	return done.ResourceID()
}

// addDatabase creates a database and waits, as Terraform does, until it and its
// subscription (which a resize makes pending) are active.
func (s *service) addDatabase(ctx context.Context, sub int, body client.CreateDatabase) *client.Database {
	s.t.Helper()
	id := s.createDatabase(ctx, sub, body)
	db, err := s.c.WaitForDatabaseStatus(ctx, sub, id, "active")
	require.NoError(s.t, err)
	_, err = s.c.WaitForSubscriptionStatus(ctx, sub, "active")
	require.NoError(s.t, err)
	return db
}

// redisOf connects to a database at the endpoint and with the password its GET returns.
func redisOf(t *testing.T, db *client.Database) *redis.Client {
	t.Helper()
	require.NotNil(t, db.Security)
	r := redis.NewClient(&redis.Options{Addr: db.PublicEndpoint, Password: db.Security.Password, MaxRetries: -1, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { r.Close() })
	return r
}

// portOf is the port of an endpoint "host:port".
func portOf(t *testing.T, endpoint string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(endpoint)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// listening reports whether something accepts connections on the port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// eventually polls cond every 50ms until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sweepServers kills every redis-server whose working directory is under dir and says
// how many there were.
func sweepServers(dir string) int {
	pids := serversIn(dir)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL) // it may be gone already
	}
	return len(pids)
}

// serversIn lists the redis-server processes whose working directory is under dir.
func serversIn(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err != nil || !strings.HasPrefix(cwd, dir+"/") {
			continue
		}
		if cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); bytes.Contains(cmd, []byte("redis-server")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func timeoutCtx(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(testContext(t), d)
}
