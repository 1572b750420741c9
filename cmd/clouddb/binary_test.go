package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"clouddb"
	"clouddb/blob"
	"clouddb/cloudapi/client"
	k8sdriver "clouddb/driver/kubernetes"
)

// buildBinary builds the clouddb binary once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "clouddb")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// runBinary starts `clouddb serve` as a process and returns it with the API URL it
// prints.
func runBinary(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	// Tests run side by side: the browser API takes any free port unless told otherwise.
	cmd.Env = append(append(os.Environ(), "CLOUDDB_BROWSER_LISTEN=127.0.0.1:0"), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	// Database servers outlive a killed clouddb by design, so the clean-up stops clouddb
	// gracefully (which stops them) and sweeps whatever is left.
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Logf("stopping clouddb: %v", err)
		}
		done := make(chan struct{})
		go func() {
			// A test that killed clouddb has reaped it already; how it ended was its
			// business.
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // Wait below reports how it ended
			<-done
		}
	})
	urls := make(chan string, 1)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		re := regexp.MustCompile(`serving the cloud API at (\S+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
	}()
	select {
	case u := <-urls:
		return cmd, u
	case <-closed:
		select {
		case u := <-urls:
			return cmd, u
		default:
		}
		// Its output ended without the address: it exited, and said why on stderr (above).
		t.Fatal("clouddb serve exited before it printed its address (see its error above)")
	case <-time.After(30 * time.Second):
		t.Fatal("clouddb serve printed no address within 30s")
	}
	return nil, ""
}

// TestBinarySIGTERM drives the real binary: the bootstrap key pair comes from the
// environment, SIGTERM stops it cleanly (exit 0, database servers stopped), and the next
// start brings the database back with its data and password.
func TestBinarySIGTERM(t *testing.T) {
	t.Parallel()
	b := newBinaryCase(t)
	t.Cleanup(func() {
		if n := sweepServers(b.dir); n > 0 {
			t.Errorf("%d redis-server(s) still ran after clouddb stopped", n)
		}
	})
	b.start()
	ctx := testContext(t)
	subID := b.activeSubscription(ctx, "bin")
	db := b.keptDatabase(ctx, subID)

	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	waitExit(t, b.cmd, 30*time.Second)
	require.False(t, listening(portOf(t, db.PublicEndpoint)), "SIGTERM stops the database servers")

	b.start()
	got, err := b.c.GetDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	require.Equal(t, db.PublicEndpoint, got.PublicEndpoint)
	r := redisOf(t, got)
	eventually(t, 15*time.Second, "database back", func() bool { return r.Ping(ctx).Err() == nil })
	require.Equal(t, "42", r.Get(ctx, "answer").Val())
}

// TestBinarySIGINTWithWorkInFlight: SIGINT while tasks wait, are processed and are being
// provisioned: clouddb exits 0 without losing any, and after a restart every task whose
// id was returned ends and every database it made runs.
func TestBinarySIGINTWithWorkInFlight(t *testing.T) {
	t.Parallel()
	b := newBinaryCase(t, "--provisioning-delay", "300ms")
	b.env = append(b.env, "CLOUDDB_RATE_LIMIT=0")
	t.Cleanup(func() { sweepServers(b.dir) })
	b.start()
	ctx := testContext(t)
	subID := b.activeSubscription(ctx, "inflight")

	var ids []string
	for i := range 6 {
		task, err := b.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr(fmt.Sprintf("db-%d", i)), MemoryLimitInGB: client.Ptr(0.1),
			Password: client.Ptr("pw")})
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGINT))
	waitExit(t, b.cmd, 30*time.Second)
	require.Empty(t, serversIn(b.dir), "the stop left no database server running")

	b.start()
	for _, id := range ids {
		done, err := b.c.WaitForTask(ctx, id)
		require.NoError(t, err, "task %s", id)
		db, err := b.c.WaitForDatabaseStatus(ctx, subID, done.ResourceID(), "active")
		require.NoError(t, err)
		r := redisOf(t, db)
		eventually(t, 15*time.Second, "database "+db.Name+" answers", func() bool { return r.Ping(ctx).Err() == nil })
	}
}

// binaryCase is the real binary on a data dir of its own, with the bootstrap key fixed.
type binaryCase struct {
	t    *testing.T
	bin  string
	dir  string
	env  []string
	args []string
	cmd  *exec.Cmd
	c    *client.Client
}

func newBinaryCase(t *testing.T, args ...string) *binaryCase {
	dir := t.TempDir()
	return &binaryCase{t: t, bin: buildBinary(t), dir: dir, args: append([]string{"--listen", "127.0.0.1:0"}, args...),
		env: []string{"CLOUDDB_BOOTSTRAP_API_KEY=ci-key", "CLOUDDB_BOOTSTRAP_SECRET_KEY=ci-secret-0123456789", "CLOUDDB_DATA_DIR=" + dir,
			"CLOUDDB_DB_PORTS=" + portRange()}}
}

// start runs the binary and points the client at it.
func (b *binaryCase) start() {
	b.t.Helper()
	var url string
	b.cmd, url = runBinary(b.t, b.bin, b.env, b.args...)
	b.c = client.New(url, "ci-key", "ci-secret-0123456789", client.WithPollInterval(50*time.Millisecond), client.WithHTTPClient(cloudAPIClient(b.t)))
}

// activeSubscription creates a subscription with one plan database and waits until it is
// active.
func (b *binaryCase) activeSubscription(ctx context.Context, name string) int {
	b.t.Helper()
	pms, err := b.c.ListPaymentMethods(ctx)
	require.NoError(b.t, err)
	task, err := b.c.CreateSubscription(ctx, subscriptionBody(pms[0].ID, name, planDB(name+"-db", 0.1)))
	require.NoError(b.t, err)
	done, err := b.c.WaitForTask(ctx, task.ID)
	require.NoError(b.t, err)
	_, err = b.c.WaitForSubscriptionStatus(ctx, done.ResourceID(), "active")
	require.NoError(b.t, err)
	return done.ResourceID()
}

// keptDatabase creates a database that persists every write, waits until it is active
// and writes answer=42 into it.
func (b *binaryCase) keptDatabase(ctx context.Context, subID int) *client.Database {
	b.t.Helper()
	task, err := b.c.CreateDatabase(ctx, subID, client.CreateDatabase{Name: client.Ptr("kept"), MemoryLimitInGB: client.Ptr(0.1),
		Password: client.Ptr("keep-me"), DataPersistence: client.Ptr("aof-every-write")})
	require.NoError(b.t, err)
	done, err := b.c.WaitForTask(ctx, task.ID)
	require.NoError(b.t, err)
	db, err := b.c.WaitForDatabaseStatus(ctx, subID, done.ResourceID(), "active")
	require.NoError(b.t, err)
	require.NoError(b.t, redisOf(b.t, db).Set(ctx, "answer", "42", 0).Err())
	return db
}

func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "clouddb exits 0 after SIGTERM")
	case <-time.After(within):
		t.Fatalf("clouddb did not exit within %s of SIGTERM", within)
	}
}

// TestAdminCommands: accounts and keys made by `clouddb admin` work against the API, and
// the plan decides access.
func TestAdminCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startService(t, dir, options{})
	ctx := testContext(t)

	admin := func(args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		require.NoError(t, run(context.Background(), append([]string{"admin"}, append(args, "--data-dir", dir)...), &out, &errOut), errOut.String())
		return out.String()
	}
	keyOf := func(out string) (string, string) {
		t.Helper()
		m := regexp.MustCompile(`x-api-key: (\S+)\nx-api-secret-key: (\S+)`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		return m[1], m[2]
	}
	idOf := func(out string) int {
		t.Helper()
		var id int
		_, err := fmt.Sscanf(out, "account %d created", &id)
		require.NoError(t, err, out)
		return id
	}
	base := "http://" + s.m.Addr + "/v1"

	annual := idOf(admin("accounts", "create", "--name", "team-a", "--plan", "annual"))
	k, sec := keyOf(admin("keys", "create", "--account", fmt.Sprint(annual), "--name", "ci"))
	ca := client.New(base, k, sec)
	acct, err := ca.GetAccount(ctx)
	require.NoError(t, err)
	require.Equal(t, annual, acct.ID)
	pms, err := ca.ListPaymentMethods(ctx)
	require.NoError(t, err)
	require.Len(t, pms, 1, "a new account gets a payment method")
	// The internal cloud account is visible to every account.
	cl, err := ca.GetCloudAccount(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, "active", cl.Status)

	for _, plan := range []string{"fixed", "free"} {
		id := idOf(admin("accounts", "create", "--name", "p-"+plan, "--plan", plan))
		k, sec := keyOf(admin("keys", "create", "--account", fmt.Sprint(id)))
		_, listErr := client.New(base, k, sec).ListSubscriptions(ctx)
		require.Equal(t, 403, client.StatusCode(listErr), "plan %s", plan)
		require.Contains(t, listErr.Error(), "flexible and annual")
	}

	vk, vsec := keyOf(admin("keys", "create", "--account", fmt.Sprint(annual), "--role", "viewer"))
	viewer := client.New(base, vk, vsec)
	_, err = viewer.ListSubscriptions(ctx)
	require.NoError(t, err)
	_, err = viewer.CreateSubscription(ctx, subscriptionBody(pms[0].ID, "nope", planDB("d", 1)))
	require.Equal(t, 403, client.StatusCode(err))

	var out, errOut strings.Builder
	require.Error(t, run(ctx, []string{"admin", "accounts", "create", "--name", "x", "--plan", "gold", "--data-dir", dir}, &out, &errOut))
	require.Error(t, run(ctx, []string{"admin", "keys", "create", "--account", "999", "--data-dir", dir}, &out, &errOut))
}

// TestFlags: every flag has a CLOUDDB_* twin, the command line wins, and bad values are
// refused with a message naming the flag.
func TestFlags(t *testing.T) {
	t.Setenv("CLOUDDB_DATA_DIR", "/from/env")
	t.Setenv("CLOUDDB_PROVISIONING_DELAY", "3s")
	t.Setenv("CLOUDDB_DB_PORTS", "30000-30010")
	t.Setenv("CLOUDDB_STORE", "postgres://clouddb@127.0.0.1/clouddb")
	t.Setenv("CLOUDDB_ENCRYPTION_KEY", "the-key")
	m := NewMain(os.Stdout, os.Stderr)
	require.NoError(t, m.ParseFlags([]string{"--db-ports", "40000-40100", "--db-memory", "8GiB"}))
	require.Equal(t, Config{DataDir: "/from/env", Listen: DefaultListen, BrowserListen: DefaultBrowserListen, AdvertiseHost: DefaultAdvertiseHost, DBPorts: "40000-40100",
		DBMemory: "8GiB", ProvisioningDelay: 3 * time.Second, RateLimit: 400, TaskLease: 30 * time.Second, DataTimeout: time.Hour, LogLevel: "info",
		Store: "postgres://clouddb@127.0.0.1/clouddb", EncryptionKey: "the-key",
		Driver: "local", Namespace: DefaultNamespace, RedisImages: []string{DefaultRedisImage}, ServiceType: DefaultServiceType}, m.Config)
	t.Setenv("CLOUDDB_STORE", "")
	t.Setenv("CLOUDDB_ENCRYPTION_KEY", "")
	err := NewMain(os.Stdout, os.Stderr).ParseFlags(nil)
	require.ErrorContains(t, err, "CLOUDDB_ENCRYPTION_KEY is set but empty")
	os.Unsetenv("CLOUDDB_ENCRYPTION_KEY")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db-ports", "9-1"}, "--db-ports"},
		{[]string{"--listen", "nope"}, "--listen"},
		{[]string{"--advertise-host", "example.com"}, "--advertise-host"},
		{[]string{"--provisioning-delay", "-1s"}, "--provisioning-delay"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--rate-limit", "-1"}, "--rate-limit"},
		{[]string{"--browser-listen", "0.0.0.0:5540"}, "loopback only"},
		{[]string{"--task-lease", "1ms"}, "--task-lease"},
		{[]string{"--db-memory", "lots"}, "--db-memory"},
		{[]string{"--store", "mysql://x"}, "--store"},
		{[]string{"--backup-dirs", "/srv/backups,relative/dir"}, "--backup-dirs"},
	} {
		err := NewMain(os.Stdout, os.Stderr).ParseFlags(tc.args)
		require.ErrorContains(t, err, tc.want)
	}
}

// TestDeadServerAfterCrash: a database server that died while clouddb was down (both
// killed outright) is started again by the next start, on its port, with the data its
// persistence kept.
func TestDeadServerAfterCrash(t *testing.T) {
	t.Parallel()
	b := newBinaryCase(t)
	t.Cleanup(func() { sweepServers(b.dir) })
	b.start()
	ctx := testContext(t)
	subID := b.activeSubscription(ctx, "crash")
	db := b.keptDatabase(ctx, subID)

	require.NoError(t, b.cmd.Process.Kill())
	_ = b.cmd.Wait() // reports the kill
	pids := serversIn(b.dir)
	require.Len(t, pids, 2, "the servers outlive a crashed clouddb")
	for _, pid := range pids {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	eventually(t, 10*time.Second, "the servers are gone", func() bool { return len(serversIn(b.dir)) == 0 })

	b.start()
	got, err := b.c.GetDatabase(ctx, subID, db.ID)
	require.NoError(t, err)
	require.Equal(t, db.PublicEndpoint, got.PublicEndpoint, "the same port")
	r := redisOf(t, got)
	eventually(t, 15*time.Second, "the database is started again", func() bool { return r.Ping(ctx).Err() == nil })
	require.Equal(t, "42", r.Get(ctx, "answer").Val(), "with its data")
	require.Len(t, serversIn(b.dir), 2, "each server once")
}

// TestFlagDefaultsAndTwins: the defaults are the documented values, and every flag takes
// its value from its CLOUDDB_* twin.
func TestFlagDefaultsAndTwins(t *testing.T) {
	m := NewMain(io.Discard, io.Discard)
	require.NoError(t, m.ParseFlags(nil))
	require.Equal(t, Config{DataDir: "./clouddb-data", Listen: "127.0.0.1:8080", BrowserListen: "127.0.0.1:5540", AdvertiseHost: "127.0.0.1",
		DBPorts: "10000-19999", DBMemory: "auto", RateLimit: 400, TaskLease: 30 * time.Second, DataTimeout: time.Hour, LogLevel: "info",
		Driver: "local", Namespace: "clouddb", RedisImages: []string{"redis:7.0.15"}, ServiceType: "NodePort"}, m.Config)

	twins := map[string]string{
		"CLOUDDB_DATA_DIR": "/srv/clouddb", "CLOUDDB_LISTEN": "127.0.0.1:9999", "CLOUDDB_BROWSER_LISTEN": "127.0.0.1:5541",
		"CLOUDDB_ADVERTISE_HOST": "127.0.0.3", "CLOUDDB_DB_PORTS": "20000-20099", "CLOUDDB_PROVISIONING_DELAY": "250ms",
		"CLOUDDB_RATE_LIMIT": "7", "CLOUDDB_TASK_LEASE": "5s", "CLOUDDB_LOG_LEVEL": "debug", "CLOUDDB_DB_MEMORY": "1GiB",
		"CLOUDDB_BACKUP_DIRS": "/srv/backups", "CLOUDDB_STORE": "postgres://clouddb@127.0.0.1/clouddb", "CLOUDDB_DATA_TIMEOUT": "90s",
		"CLOUDDB_DRIVER": "kubernetes", "CLOUDDB_KUBECONFIG": "/srv/kubeconfig", "CLOUDDB_NAMESPACE": "dbs",
		"CLOUDDB_K8S_REDIS_IMAGE": "7.2.4=registry.example/redis:7.2", "CLOUDDB_K8S_STORAGE_CLASS": "fast",
		"CLOUDDB_K8S_SERVICE_TYPE": "LoadBalancer", "CLOUDDB_K8S_CLUSTER_PORTS": "20100-20199",
	}
	for k, v := range twins {
		t.Setenv(k, v)
	}
	m = NewMain(io.Discard, io.Discard)
	require.NoError(t, m.ParseFlags(nil))
	require.Equal(t, Config{DataDir: "/srv/clouddb", Listen: "127.0.0.1:9999", BrowserListen: "127.0.0.1:5541", AdvertiseHost: "127.0.0.3",
		DBPorts: "20000-20099", ProvisioningDelay: 250 * time.Millisecond, RateLimit: 7, TaskLease: 5 * time.Second, LogLevel: "debug",
		DBMemory: "1GiB", BackupDirs: "/srv/backups", Store: "postgres://clouddb@127.0.0.1/clouddb", DataTimeout: 90 * time.Second,
		Driver: "kubernetes", Kubeconfig: "/srv/kubeconfig", Namespace: "dbs", RedisImages: []string{"7.2.4=registry.example/redis:7.2"}, StorageClass: "fast",
		ServiceType: "LoadBalancer", ClusterPorts: "20100-20199"}, m.Config)
}

// TestDriverFlags: --driver kubernetes splits the NodePort range between the databases'
// ports and their cluster nodes' unless --db-ports or --k8s-cluster-ports say otherwise,
// and its flags are checked.
func TestDriverFlags(t *testing.T) {
	m := NewMain(io.Discard, io.Discard)
	require.NoError(t, m.ParseFlags([]string{"--driver", "kubernetes"}))
	require.Equal(t, []string{"30000-31999", "32000-32767"}, []string{m.Config.DBPorts, m.Config.ClusterPorts})
	m = NewMain(io.Discard, io.Discard)
	require.NoError(t, m.ParseFlags([]string{"--driver", "kubernetes", "--db-ports", "31000-31099"}))
	require.Equal(t, []string{"31000-31099", "32000-32767"}, []string{m.Config.DBPorts, m.Config.ClusterPorts})
	// The whole range for the databases: no cluster nodes' ports (OSS Cluster refused).
	m = NewMain(io.Discard, io.Discard)
	require.NoError(t, m.ParseFlags([]string{"--driver", "kubernetes", "--db-ports", "30000-32767"}))
	require.Equal(t, []string{"30000-32767", ""}, []string{m.Config.DBPorts, m.Config.ClusterPorts})
	m = NewMain(io.Discard, io.Discard)
	require.NoError(t, m.ParseFlags([]string{"--driver", "kubernetes", "--db-ports", "30000-32699", "--k8s-cluster-ports", "32700-32767"}))
	ports, perr := clusterPorts(&m.Config)
	require.NoError(t, perr)
	require.Equal(t, [2]int{32700, 32767}, ports)
	for args, want := range map[string]string{
		"--driver nomad":                                          "--driver",
		"--driver kubernetes --namespace=":                        "--namespace",
		"--driver kubernetes --k8s-redis-image redis":             "--k8s-redis-image",
		"--driver kubernetes --k8s-redis-image 7=redis:7":         "--k8s-redis-image",
		"--driver kubernetes --k8s-redis-image registry:5000/red": "--k8s-redis-image",
		"--driver kubernetes --k8s-redis-image redis:6.2.14":      "older than 7.0",
		"--driver kubernetes --k8s-service-type ClusterIP":        "--k8s-service-type",
		"--driver kubernetes --k8s-service-type loadbalancer":     "--k8s-service-type",
		"--driver kubernetes --k8s-cluster-networks 10.96.0.0":    "--k8s-cluster-networks",
		"--driver kubernetes --k8s-cluster-ports 31000-31100":     "overlaps --db-ports",
		"--driver kubernetes --k8s-cluster-ports 32000":           "--k8s-cluster-ports",
	} {
		err := NewMain(io.Discard, io.Discard).ParseFlags(strings.Fields(args))
		require.ErrorContains(t, err, want, args)
	}
	nets, err := clusterNetworks(" 10.244.0.0/16, 10.96.1.2/12 ")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12")}, nets)
	full, image, err := redisImage("localhost/clouddb-redis:7.0.15")
	require.NoError(t, err)
	require.Equal(t, []string{"7.0.15", "localhost/clouddb-redis:7.0.15"}, []string{full, image})
}

// TestK8sRedisImages: --k8s-redis-image repeats (or lists images separated by commas or
// spaces, as its environment twin does), one image per major.minor, the first the default
// version; every image reaches the driver's config and every version the API's list.
func TestK8sRedisImages(t *testing.T) {
	parse := func(t *testing.T, args ...string) (Config, error) {
		t.Helper()
		m := NewMain(io.Discard, io.Discard)
		err := m.ParseFlags(append([]string{"--driver", "kubernetes", "--data-dir", t.TempDir()}, args...))
		return m.Config, err
	}
	driverConfig := func(t *testing.T, c Config) (k8sdriver.Config, clouddb.RedisVersions) {
		t.Helper()
		kc, versions, err := kubernetesConfig(c, fake.NewClientset(), nil, nil, blob.Options{})
		require.NoError(t, err)
		_, err = k8sdriver.New(kc)
		require.NoError(t, err, "the driver takes the config")
		return kc, versions
	}

	// None given: the one default image.
	c, err := parse(t)
	require.NoError(t, err)
	require.Equal(t, []string{DefaultRedisImage}, c.RedisImages)
	kc, versions := driverConfig(t, c)
	require.Equal(t, clouddb.RedisVersions{Default: "7.0", Offered: []string{"7.0"}, Full: map[string]string{"7.0": "7.0.15"}}, versions)
	require.Equal(t, map[string]string{"7.0": "redis:7.0.15"}, kc.Images)
	require.Equal(t, "7.0", kc.DefaultVersion)

	// Several: the first given is the default (not the oldest), Offered is oldest first,
	// and the default image given no more is not added.
	several := clouddb.RedisVersions{Default: "7.2", Offered: []string{"7.0", "7.2", "8.0"},
		Full: map[string]string{"7.0": "7.0.12", "7.2": "7.2.4", "8.0": "8.0.2"}}
	severalImages := map[string]string{"7.0": "registry.example/redis:7.0", "7.2": "redis:7.2.4", "8.0": "registry.example:5000/redis:8.0.2"}
	severalFlags := []string{"redis:7.2.4", "7.0.12=registry.example/redis:7.0", "registry.example:5000/redis:8.0.2"}
	c, err = parse(t, "--k8s-redis-image", severalFlags[0], "--k8s-redis-image", severalFlags[1], "--k8s-redis-image="+severalFlags[2])
	require.NoError(t, err)
	require.Equal(t, severalFlags, c.RedisImages, "in the order given, the default replaced")
	kc, versions = driverConfig(t, c)
	require.Equal(t, several, versions)
	require.Equal(t, severalImages, kc.Images)
	require.Equal(t, "7.2", kc.DefaultVersion)

	// The environment twin carries several, separated by commas and/or spaces.
	t.Run("env", func(t *testing.T) {
		t.Setenv("CLOUDDB_K8S_REDIS_IMAGE", " redis:7.2.4,7.0.12=registry.example/redis:7.0 ,\tregistry.example:5000/redis:8.0.2\n")
		c, err = parse(t)
		require.NoError(t, err)
		require.Equal(t, severalFlags, c.RedisImages)
		kc, versions = driverConfig(t, c)
		require.Equal(t, several, versions)
		require.Equal(t, severalImages, kc.Images)
		// The command line wins over the twin, as a whole.
		c, err = parse(t, "--k8s-redis-image", "redis:7.4.1")
		require.NoError(t, err)
		require.Equal(t, []string{"redis:7.4.1"}, c.RedisImages)
		// The shipped manifest's value, one image.
		t.Setenv("CLOUDDB_K8S_REDIS_IMAGE", "redis:7.0.15")
		c, err = parse(t)
		require.NoError(t, err)
		require.Equal(t, []string{"redis:7.0.15"}, c.RedisImages)
		for _, bad := range []string{"", " , "} {
			t.Setenv("CLOUDDB_K8S_REDIS_IMAGE", bad)
			_, err = parse(t)
			require.EqualError(t, err, fmt.Sprintf("CLOUDDB_K8S_REDIS_IMAGE=%q: no image: give IMAGE or VERSION=IMAGE", bad))
		}
		t.Setenv("CLOUDDB_K8S_REDIS_IMAGE", "redis:7.2.4 registry.example/redis:7.2.5")
		_, err = parse(t)
		require.EqualError(t, err, "--k8s-redis-image redis:7.2.4 and registry.example/redis:7.2.5 are both Redis 7.2: give one image per major.minor version")
	})

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--k8s-redis-image", "redis:7.2.4", "--k8s-redis-image", "7.2=registry.example/redis:7.2"},
			"--k8s-redis-image redis:7.2.4 and 7.2=registry.example/redis:7.2 are both Redis 7.2: give one image per major.minor version"},
		{[]string{"--k8s-redis-image", "redis:7.0.15,redis:8.0.2,redis:7.0.11"},
			"--k8s-redis-image redis:7.0.15 and redis:7.0.11 are both Redis 7.0: give one image per major.minor version"},
		{[]string{"--k8s-redis-image", "redis:7.2.4", "--k8s-redis-image", "redis:6.2.14"},
			`--k8s-redis-image "redis:6.2.14": Redis 6.2.14 is older than 7.0, which the kubernetes driver needs`},
		{[]string{"--k8s-redis-image", "redis:7.2.4", "--k8s-redis-image", "redis"},
			`--k8s-redis-image "redis": name the Redis version, as VERSION=IMAGE or in the image's tag`},
	} {
		_, err = parse(t, tc.args...)
		require.EqualError(t, err, tc.want, tc.args)
	}
	_, err = parse(t, "--k8s-redis-image=")
	require.EqualError(t, err, `invalid value "" for flag -k8s-redis-image: no image: give IMAGE or VERSION=IMAGE`)
}
