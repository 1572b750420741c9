package kubernetes_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb/cloudapi/client"
	"clouddb/driver/kubernetes"
	"clouddb/internal/pgtest"
)

// TestServe: clouddb serve --driver kubernetes --store postgres://…, with only
// deploy/kubernetes/rbac.yaml's rights, provisions through its API and CLI: a persistent
// database a client PINGs through its endpoint, a memory change applied live with the
// data kept, a backup whose file an import loads into another database, an import from
// the live database, a killed pod healed with its data while clouddb reports the database
// active, an upgrade to the other Redis version it offers (a stand-in image) with the
// data kept, deletes that leave no object, and a shutdown of clouddb that leaves the
// databases running.
func TestServe(t *testing.T) {
	needCluster(t)
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the clouddb binary")
	}
	ctx := ctxFor(t, 8*time.Minute)
	dir := t.TempDir()
	bin := filepath.Join(dir, "clouddb")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "clouddb/cmd/clouddb")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// A namespace with the shipped RBAC, and a kubeconfig with its ServiceAccount's token.
	admin := cluster.client
	ns, nsErr := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clouddb-serve-"}}, metav1.CreateOptions{})
	if nsErr != nil {
		t.Fatal(nsErr)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	applyManifest(t, ctx, "../../deploy/kubernetes/rbac.yaml", ns.Name)
	tok, tokErr := admin.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, "clouddb",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	ca := cluster.config.CAData
	if len(ca) == 0 {
		var caErr error
		if ca, caErr = os.ReadFile(cluster.config.CAFile); caErr != nil {
			t.Fatal(caErr)
		}
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: clouddb, user: {token: %s}}]
contexts: [{name: c, context: {cluster: c, user: clouddb}}]
current-context: c
`, cluster.config.Host, base64.StdEncoding.EncodeToString(ca), tok.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}

	data, backups := filepath.Join(dir, "data"), filepath.Join(dir, "backups")
	newImage := standInImage(t, ctx)
	var serveErr bytes.Buffer
	serve := exec.Command(bin, "serve", "--store", postgresStore(t), "--data-dir", data, "--listen", "127.0.0.1:0", "--browser-listen", "",
		"--driver", "kubernetes", "--kubeconfig", kc, "--namespace", ns.Name, "--k8s-redis-image", redisImage,
		"--k8s-redis-image", "7.2.4="+newImage,
		"--k8s-storage-class", storageClass, "--advertise-host", nodeIP, "--db-ports", "30100-30199",
		"--db-memory", "0", "--backup-dirs", backups)
	// A store shared by replicas takes its sealing key from the environment.
	serve.Env = append(ownEnv(), "CLOUDDB_ENCRYPTION_KEY="+encryptionKey(t))
	serve.Stderr = &serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	// exited closes when it has, waitErr then says how.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = serve.Wait(); close(exited) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = serve.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("clouddb serve's log:\n%s", serveErr.String())
		}
	})
	if err := poll(ctx, 60*time.Second, func() (bool, error) {
		select {
		case <-exited:
			stopped = true
			return false, fmt.Errorf("it exited: %v", waitErr)
		default:
		}
		_, err := os.Stat(filepath.Join(data, "api-url"))
		return err == nil, nil
	}); err != nil {
		t.Fatalf("clouddb serve did not start: %v", err)
	}

	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(args, "--data-dir", data, "--quiet")...)
		cmd.Env = ownEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("clouddb %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	sub := cli("subscriptions", "create", "--name", "e2e", "--wait", "--field", "id")
	db := cli("databases", "create", "--subscription", sub, "--name", "cache", "--memory-gb", "1", "--persistence", "aof-every-1-second", "--wait", "--field", "databaseId")
	dbID, _ := strconv.Atoi(db)
	endpoint := cli("databases", "get", "--subscription", sub, db, "--field", "publicEndpoint")
	password := cli("databases", "get", "--subscription", sub, db, "--field", "security.password")
	if want := kubernetes.Name(dbID) + "." + ns.Name + ".svc:6379"; cli("databases", "get", "--subscription", sub, db, "--field", "privateEndpoint") != want {
		t.Fatalf("privateEndpoint, want %s", want)
	}
	if !strings.HasPrefix(endpoint, nodeIP+":301") {
		t.Fatalf("publicEndpoint %s, want the node's address and a port of --db-ports", endpoint)
	}
	c := redisClient(t, endpoint, "", password)
	reachable(t, ctx, c)
	if err := c.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Memory 1 -> 2 GB, live: same pod, same data.
	before := podIn(t, ctx, ns.Name, dbID)
	cli("databases", "update", "--subscription", sub, db, "--memory-gb", "2", "--wait")
	secret, secretErr := admin.CoreV1().Secrets(ns.Name).Get(ctx, kubernetes.Name(dbID), metav1.GetOptions{})
	if secretErr != nil {
		t.Fatal(secretErr)
	}
	internal := redisClient(t, endpoint, "clouddb-internal", string(secret.Data["internal-password"]))
	if v, err := internal.ConfigGet(ctx, "maxmemory").Result(); err != nil || v["maxmemory"] != strconv.Itoa(2<<30) {
		t.Fatalf("maxmemory after the update = %v, %v; want %d", v, err, 2<<30)
	}
	if after := podIn(t, ctx, ns.Name, dbID); after.UID != before.UID || limitOf(after) <= 2<<30 {
		t.Fatalf("after the update: pod %s (was %s), memory limit %d", after.UID, before.UID, limitOf(after))
	}
	if got, err := c.Get(ctx, "greeting").Result(); err != nil || got != "hello" {
		t.Fatalf("GET after the update = %q, %v", got, err)
	}

	// A backup to a local path; its file, served over HTTP, imported into another
	// database: the keys written before the backup and none written after.
	const keys = 200
	pipe := c.Pipeline()
	for i := range keys {
		pipe.Set(ctx, fmt.Sprintf("key:%d", i), fmt.Sprintf("value-%d", i), 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	creds := struct{ APIKey, SecretKey string }{}
	if b, err := os.ReadFile(filepath.Join(data, "credentials.json")); err != nil || json.Unmarshal(b, &creds) != nil {
		t.Fatalf("credentials.json: %v", err)
	}
	url, urlErr := os.ReadFile(filepath.Join(data, "api-url"))
	if urlErr != nil {
		t.Fatal(urlErr)
	}
	api := client.New(strings.TrimSpace(string(url)), creds.APIKey, creds.SecretKey)
	subID, _ := strconv.Atoi(sub)
	var task client.Task
	if err := api.Do(ctx, "POST", fmt.Sprintf("/subscriptions/%d/databases/%d/backup", subID, dbID), map[string]string{"adhocBackupPath": backups}, &task); err != nil {
		t.Fatalf("backup: %v", err)
	}
	done := waitTask(t, ctx, api, task.ID)
	var backup struct{ Status, Location string }
	if err := json.Unmarshal(done.Response.Resource, &backup); err != nil || backup.Status != "success" {
		t.Fatalf("backup = %s, %v", done.Response.Resource, err)
	}
	if b, err := os.ReadFile(backup.Location); err != nil || !bytes.HasPrefix(b, []byte("REDIS")) {
		t.Fatalf("the backup file %s: %v", backup.Location, err)
	}
	if err := c.Set(ctx, "after-backup", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	db2 := cli("databases", "create", "--subscription", sub, "--name", "copy", "--memory-gb", "1", "--wait", "--field", "databaseId")
	db2ID, _ := strconv.Atoi(db2)
	c2 := redisClient(t, cli("databases", "get", "--subscription", sub, db2, "--field", "publicEndpoint"), "",
		cli("databases", "get", "--subscription", sub, db2, "--field", "security.password"))
	reachable(t, ctx, c2)
	if err := c2.Set(ctx, "replaced", "by the import", 0).Err(); err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(backup.Location))))
	t.Cleanup(web.Close)
	importFrom := func(typ, uri string) {
		t.Helper()
		if err := api.Do(ctx, "POST", fmt.Sprintf("/subscriptions/%d/databases/%d/import", subID, db2ID),
			client.Import{SourceType: &typ, ImportFromURI: []string{uri}}, &task); err != nil {
			t.Fatalf("import from %s: %v", typ, err)
		}
		if imported := waitTask(t, ctx, api, task.ID); imported.Status != "processing-completed" {
			t.Fatalf("import from %s: task = %s %s", typ, imported.Status, imported.Raw)
		}
	}
	importFrom("http", web.URL+"/"+filepath.Base(backup.Location))
	if n, err := c2.DBSize(ctx).Result(); err != nil || n != keys+1 {
		t.Fatalf("DBSIZE after the backup's import = %d, %v; want %d (the keys and greeting)", n, err, keys+1)
	}
	for _, k := range []string{"greeting", "key:0", fmt.Sprintf("key:%d", keys-1)} {
		want := must(c.Get(ctx, k).Result())
		if got, err := c2.Get(ctx, k).Result(); err != nil || got != want {
			t.Fatalf("GET %s on the imported database = %q, %v; want %q", k, got, err, want)
		}
	}
	// The live database itself, through its public endpoint, as a tenant names it.
	importFrom("redis", "redis://:"+password+"@"+endpoint)
	if n, err := c2.DBSize(ctx).Result(); err != nil || n != keys+2 {
		t.Fatalf("DBSIZE after the live import = %d, %v; want %d", n, err, keys+2)
	}
	if got, err := c2.Get(ctx, "after-backup").Result(); err != nil || got != "x" {
		t.Fatalf("GET after-backup on the imported database = %q, %v", got, err)
	}

	// The persistent database's pod killed: Kubernetes brings it back on its volume, with
	// the data, and clouddb reports the database active throughout (no error it would
	// have to be told to clear).
	time.Sleep(1500 * time.Millisecond) // appendfsync everysec
	killed := podIn(t, ctx, ns.Name, dbID)
	if err := admin.CoreV1().Pods(ns.Name).Delete(ctx, killed.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	seen := map[string]int{}
	status := func() string {
		t.Helper()
		d, err := api.GetDatabase(ctx, subID, dbID)
		if err != nil {
			t.Fatalf("GET the database: %v", err)
		}
		seen[d.Status]++
		return d.Status
	}
	if err := poll(ctx, 90*time.Second, func() (bool, error) {
		status()
		p, err := admin.CoreV1().Pods(ns.Name).Get(ctx, killed.Name, metav1.GetOptions{})
		return err == nil && p.UID != killed.UID && ready(p) && c.Ping(ctx).Err() == nil, nil
	}); err != nil {
		t.Fatalf("the killed pod did not come back: %v", err)
	}
	t.Logf("the killed pod was back, ready and reachable in %v", time.Since(start).Round(time.Millisecond))
	// Long enough for the reconciler's supervision (every second) to have seen the new pod.
	for range 10 {
		status()
		time.Sleep(200 * time.Millisecond)
	}
	if len(seen) != 1 || seen["active"] == 0 {
		t.Fatalf("the database's statuses while its pod was killed and after: %v; want only active", seen)
	}
	// Connections to the killed pod are still pooled: dropped by the first failed command.
	reachable(t, ctx, c)
	reachable(t, ctx, internal)
	if n, err := c.DBSize(ctx).Result(); err != nil || n != keys+2 {
		t.Fatalf("DBSIZE after the pod was killed = %d, %v; want %d", n, err, keys+2)
	}
	if got, err := c.Get(ctx, "after-backup").Result(); err != nil || got != "x" {
		t.Fatalf("GET after-backup after the pod was killed = %q, %v", got, err)
	}
	if v, err := internal.ConfigGet(ctx, "maxmemory").Result(); err != nil || v["maxmemory"] != strconv.Itoa(2<<30) {
		t.Fatalf("maxmemory of the new pod = %v, %v; want %d", v, err, 2<<30)
	}

	// An upgrade to the other version offered: the pod runs its image, the data kept.
	before = podIn(t, ctx, ns.Name, dbID)
	if err := api.Do(ctx, "POST", fmt.Sprintf("/subscriptions/%d/databases/%d/upgrade", subID, dbID), map[string]string{"targetRedisVersion": "7.2"}, &task); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if done = waitTask(t, ctx, api, task.ID); done.Status != "processing-completed" {
		t.Fatalf("upgrade task = %s %s", done.Status, done.Raw)
	}
	// The task is done once the upgrade is under way; the reconciler then rolls the pod.
	if _, err := api.WaitForDatabaseStatus(ctx, subID, dbID, "active"); err != nil {
		t.Fatalf("the database after its upgrade's task: %v", err)
	}
	var upgraded struct{ Status, RedisVersion, RedisVersionCompliance string }
	if err := api.Do(ctx, "GET", fmt.Sprintf("/subscriptions/%d/databases/%d", subID, dbID), nil, &upgraded); err != nil ||
		upgraded.Status != "active" || upgraded.RedisVersion != "7.2" || upgraded.RedisVersionCompliance != "7.2.4" {
		t.Fatalf("the database after its upgrade = %+v, %v; want active, 7.2, 7.2.4", upgraded, err)
	}
	if after := podIn(t, ctx, ns.Name, dbID); after.UID == before.UID || after.Spec.Containers[0].Image != newImage {
		t.Fatalf("after the upgrade: pod %s (was %s), image %s", after.UID, before.UID, after.Spec.Containers[0].Image)
	}
	reachable(t, ctx, c)
	if n, err := c.DBSize(ctx).Result(); err != nil || n != keys+2 {
		t.Fatalf("DBSIZE after the upgrade = %d, %v; want %d", n, err, keys+2)
	}

	// Deletes remove every object; a shutdown of clouddb leaves the others running.
	cli("databases", "delete", "--subscription", sub, db, "--wait")
	cli("databases", "delete", "--subscription", sub, db2, "--wait")
	for _, id := range []int{dbID, db2ID} {
		if err := poll(ctx, 60*time.Second, func() (bool, error) { return len(labelledIn(t, ctx, ns.Name, id)) == 0, nil }); err != nil {
			t.Fatalf("objects of database %d left after its delete: %v", id, labelledIn(t, ctx, ns.Name, id))
		}
	}
	left, listErr := admin.AppsV1().StatefulSets(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelManagedBy + "=clouddb"})
	if listErr != nil || len(left.Items) != 1 {
		t.Fatalf("statefulsets left = %v, %v; want the subscription's first database's", left, listErr)
	}
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if <-exited; waitErr != nil {
		t.Fatalf("clouddb serve after SIGTERM: %v", waitErr)
	}
	sts, stsErr := admin.AppsV1().StatefulSets(ns.Name).Get(ctx, left.Items[0].Name, metav1.GetOptions{})
	if stsErr != nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Fatalf("after clouddb's shutdown the database's statefulset is %v, %v; want it running", sts, stsErr)
	}
}

// postgresStore is the URL of an empty PostgreSQL database for clouddb's store: a
// database of its own on TEST_DATABASE_URL's server, or a throwaway cluster of this
// machine's PostgreSQL (pgtest.Start) stopped when the test ends. Not pgtest.URL's shared
// cluster: it would need pgtest.Main in TestMain to be stopped.
func postgresStore(t *testing.T) string {
	t.Helper()
	if os.Getenv(pgtest.EnvURL) != "" {
		return pgtest.URL(t)
	}
	url, stop, err := pgtest.Start()
	if err != nil {
		t.Fatalf("clouddb's store: %v", err)
	}
	t.Cleanup(stop)
	return url
}

// encryptionKey is a CLOUDDB_ENCRYPTION_KEY: 32 random bytes in base64.
func encryptionKey(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// ownEnv is the environment without CLOUDDB_* variables: clouddb reads its flags' twins
// there (and the test cluster's CLOUDDB_K8S_* would be some).
func ownEnv() []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "CLOUDDB_") {
			out = append(out, e)
		}
	}
	return out
}

func waitTask(t *testing.T, ctx context.Context, api *client.Client, id string) *client.Task {
	t.Helper()
	task, err := api.WaitForTask(ctx, id)
	if err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	if task.Response == nil {
		t.Fatalf("task %s has no response: %s", id, task.Raw)
	}
	return task
}

func podIn(t *testing.T, ctx context.Context, ns string, id int) *corev1.Pod {
	t.Helper()
	p, err := cluster.client.CoreV1().Pods(ns).Get(ctx, kubernetes.Name(id)+"-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
