package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
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
)

// TestServe: clouddb serve --driver kubernetes, with only deploy/kubernetes/rbac.yaml's
// rights, provisions through its API and CLI: a database a client PINGs through its
// endpoint, a memory change applied live with the data kept, a backup, an import from
// another database, deletes that leave no object, and a shutdown of clouddb that leaves
// the databases running.
func TestServe(t *testing.T) {
	needCluster(t)
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
	var serveErr bytes.Buffer
	serve := exec.Command(bin, "serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--browser-listen", "",
		"--driver", "kubernetes", "--kubeconfig", kc, "--namespace", ns.Name, "--k8s-redis-image", redisImage,
		"--k8s-storage-class", storageClass, "--advertise-host", nodeIP, "--db-ports", "30100-30199",
		"--db-memory", "0", "--backup-dirs", backups)
	serve.Env = ownEnv()
	serve.Stderr = &serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = serve.Process.Kill()
			_ = serve.Wait()
		}
		if t.Failed() {
			t.Logf("clouddb serve's log:\n%s", serveErr.String())
		}
	})
	if err := poll(ctx, 60*time.Second, func() (bool, error) {
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
	db := cli("databases", "create", "--subscription", sub, "--name", "cache", "--memory-gb", "1", "--wait", "--field", "databaseId")
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

	// A backup to a local path, and an import of the live database into another one.
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
	db2 := cli("databases", "create", "--subscription", sub, "--name", "copy", "--memory-gb", "1", "--wait", "--field", "databaseId")
	db2ID, _ := strconv.Atoi(db2)
	typ := "redis"
	if err := api.Do(ctx, "POST", fmt.Sprintf("/subscriptions/%d/databases/%d/import", subID, db2ID),
		client.Import{SourceType: &typ, ImportFromURI: []string{"redis://:" + password + "@" + endpoint}}, &task); err != nil {
		t.Fatalf("import: %v", err)
	}
	if done := waitTask(t, ctx, api, task.ID); done.Status != "processing-completed" {
		t.Fatalf("import task = %s %s", done.Status, done.Raw)
	}
	c2 := redisClient(t, cli("databases", "get", "--subscription", sub, db2, "--field", "publicEndpoint"), "",
		cli("databases", "get", "--subscription", sub, db2, "--field", "security.password"))
	reachable(t, ctx, c2)
	if got, err := c2.Get(ctx, "greeting").Result(); err != nil || got != "hello" {
		t.Fatalf("GET on the imported database = %q, %v", got, err)
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
	if err := serve.Wait(); err != nil {
		t.Fatalf("clouddb serve after SIGTERM: %v", err)
	}
	stopped = true
	sts, stsErr := admin.AppsV1().StatefulSets(ns.Name).Get(ctx, left.Items[0].Name, metav1.GetOptions{})
	if stsErr != nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Fatalf("after clouddb's shutdown the database's statefulset is %v, %v; want it running", sts, stsErr)
	}
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
