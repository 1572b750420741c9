package kubernetes_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"clouddb/cloudapi/client"
)

// The test cluster's PostgreSQL image (scripts/k8s-test-cluster.sh makes it of this
// machine's server) and the socket of its containerd, which TestDeploy loads clouddb's
// image into: there is no registry.
var (
	postgresImage = os.Getenv("CLOUDDB_K8S_POSTGRES_IMAGE")
	containerd    = os.Getenv("CLOUDDB_K8S_CONTAINERD")
)

// TestDeploy applies deploy/kubernetes/ (rbac.yaml, clouddb.yaml) as a user would, with
// the images swapped for local ones: clouddb, built from this checkout as the Dockerfile
// builds it (the binary and redis-server), and PostgreSQL. Through clouddb's API, on its
// Service's NodePort, it creates a subscription and a database that a client PINGs.
//
// What differs from the manifest, because of the test cluster, not of clouddb:
//   - no cluster DNS: the store URL names PostgreSQL's Service by its ClusterIP;
//   - the API server listens on 127.0.0.1 only, which no pod network reaches: clouddb's
//     pod uses the host's network and KUBERNETES_SERVICE_HOST/PORT name that address
//     (the token and CA are the ServiceAccount's, mounted as in any cluster); its API
//     port is then a free port of this host;
//   - the redis image is the test cluster's;
//   - the databases' ports and the API's NodePort are ones no other test here uses;
//   - clouddb's data claim is bound to a volume the test makes of a host directory owned
//     by clouddb's user: the test cluster's provisioner makes hostPath volumes, which
//     ignore the pod's fsGroup.
func TestDeploy(t *testing.T) {
	needCluster(t)
	t.Parallel()
	if testing.Short() {
		t.Skip("builds clouddb's image and runs it in the cluster")
	}
	if postgresImage == "" || containerd == "" {
		t.Fatal("CLOUDDB_K8S_POSTGRES_IMAGE or CLOUDDB_K8S_CONTAINERD is not set: scripts/k8s-test-cluster.sh sets them, and makes the PostgreSQL image of this machine's server (apt-get install postgresql)")
	}
	ctx := ctxFor(t, 4*time.Minute)
	start := time.Now()
	image, bin := clouddbImage(t, ctx)
	t.Logf("clouddb's image %s built and loaded in %v", image, time.Since(start).Round(time.Millisecond))
	applied := time.Now()

	admin := cluster.client
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clouddb-deploy-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	applyManifest(t, ctx, "../../deploy/kubernetes/rbac.yaml", ns.Name)

	objs := manifestObjects(t, "../../deploy/kubernetes/clouddb.yaml")
	pgSvc := find[*corev1.Service](t, objs, "clouddb-postgres")
	pgSvc, err = admin.CoreV1().Services(ns.Name).Create(ctx, pgSvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apiKey, secretKey := password(t), password(t)
	pgPassword := password(t)
	if _, err = admin.CoreV1().Secrets(ns.Name).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "clouddb"},
		StringData: map[string]string{
			"postgres-password":    pgPassword,
			"store":                "postgres://clouddb:" + pgPassword + "@" + pgSvc.Spec.ClusterIP + ":5432/clouddb?sslmode=disable",
			"encryption-key":       encryptionKey(t),
			"bootstrap-api-key":    apiKey,
			"bootstrap-secret-key": secretKey,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pg := find[*appsv1.StatefulSet](t, objs, "clouddb-postgres")
	swapImage(t, &pg.Spec.Template.Spec, "postgres", postgresImage)
	if _, err = admin.AppsV1().StatefulSets(ns.Name).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// clouddb's first start needs its store (it then retries, but after a crash loop's
	// back-off): the test waits rather than pay that.
	if err = poll(ctx, 60*time.Second, func() (bool, error) {
		p, getErr := admin.CoreV1().Pods(ns.Name).Get(ctx, "clouddb-postgres-0", metav1.GetOptions{})
		return getErr == nil && ready(p), nil
	}); err != nil {
		t.Fatalf("PostgreSQL is not ready: %v\n%s", err, podReport(t, ns.Name))
	}
	t.Logf("PostgreSQL ready %v after the manifest was applied", time.Since(applied).Round(time.Millisecond))

	dataDir := ownedHostDir(t, 999)
	pv, err := admin.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns.Name + "-clouddb-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dataDir}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns.Name, Name: "clouddb-data"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	claim := find[*corev1.PersistentVolumeClaim](t, objs, "clouddb-data")
	claim.Spec.StorageClassName, claim.Spec.VolumeName = ptr(""), pv.Name
	if _, err = admin.CoreV1().PersistentVolumeClaims(ns.Name).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dep := find[*appsv1.Deployment](t, objs, "clouddb")
	pod := &dep.Spec.Template.Spec
	swapImage(t, pod, "clouddb", image)
	apiPort := freeHostPort(t)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(cluster.config.Host, "https://"))
	if err != nil {
		t.Fatalf("the API server's address %s: %v", cluster.config.Host, err)
	}
	pod.HostNetwork = true
	c := &pod.Containers[0]
	c.Ports[0].ContainerPort = int32(apiPort)
	c.Args = replaceArg(t, c.Args, "--listen=", "--listen=0.0.0.0:"+strconv.Itoa(apiPort))
	for i := range c.Env {
		if c.Env[i].Name == "CLOUDDB_K8S_REDIS_IMAGE" {
			c.Env[i].Value = redisImage // the test cluster's, made without a registry
		}
	}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: host}, corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: port},
		corev1.EnvVar{Name: "CLOUDDB_DB_PORTS", Value: "32700-32767"})
	if _, err = admin.AppsV1().Deployments(ns.Name).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apiSvc := find[*corev1.Service](t, objs, "clouddb")
	apiSvc.Spec.Ports[0].NodePort = 30090
	if _, err = admin.CoreV1().Services(ns.Name).Create(ctx, apiSvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// clouddb Ready: it answers /readyz, so its store and its cluster answered it.
	if err = poll(ctx, 90*time.Second, func() (bool, error) {
		pods, listErr := admin.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=clouddb"})
		return listErr == nil && len(pods.Items) == 1 && ready(&pods.Items[0]), nil
	}); err != nil {
		t.Fatalf("clouddb is not ready: %v\n%s", err, podReport(t, ns.Name))
	}
	t.Logf("clouddb ready %v after the manifest was applied", time.Since(applied).Round(time.Millisecond))
	// Its data directory is the claim's, which clouddb's user writes.
	if fi, serr := os.Stat(filepath.Join(dataDir, "k8s-pending")); serr != nil || !fi.IsDir() {
		t.Fatalf("clouddb made no k8s-pending directory on its data claim: %v", serr)
	}

	// A user of the API, through the Service's NodePort, with the CLI: once kube-proxy
	// routes the new Service's port (a moment after the pod is ready; longer on a busy
	// machine), which refuses connections until then.
	url := "http://" + net.JoinHostPort(nodeIP, "30090")
	if err = poll(ctx, 30*time.Second, func() (bool, error) {
		conn, dialErr := net.DialTimeout("tcp", net.JoinHostPort(nodeIP, "30090"), 2*time.Second)
		if dialErr != nil {
			return false, nil
		}
		return true, conn.Close()
	}); err != nil {
		t.Fatalf("the API's NodePort 30090 is not routed: %v\n%s", err, podReport(t, ns.Name))
	}
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(args, "--url", url, "--api-key", apiKey, "--api-secret-key", secretKey, "--quiet")...)
		cmd.Env = ownEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, cliErr := cmd.Output()
		if cliErr != nil {
			t.Fatalf("clouddb %s: %v\n%s\n%s", strings.Join(args, " "), cliErr, stderr.String(), podReport(t, ns.Name))
		}
		return strings.TrimSpace(string(out))
	}
	subID, _ := strconv.Atoi(cli("subscriptions", "create", "--name", "deployed", "--wait", "--field", "id"))
	dbID, _ := strconv.Atoi(cli("databases", "create", "--subscription", strconv.Itoa(subID), "--name", "first", "--memory-gb", "0.1", "--wait", "--field", "databaseId"))
	db, err := client.New(url, apiKey, secretKey).GetDatabase(ctx, subID, dbID)
	if err != nil || db.Status != "active" {
		t.Fatalf("database %d: %+v, %v", dbID, db, err)
	}
	if !strings.HasPrefix(db.PublicEndpoint, nodeIP+":327") {
		t.Fatalf("publicEndpoint %s, want the node's address (the pod's hostIP) and a port of --db-ports", db.PublicEndpoint)
	}
	rc := redisClient(t, db.PublicEndpoint, "", db.Security.Password)
	reachable(t, ctx, rc)
	if err = rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := labelledIn(t, ctx, ns.Name, db.ID); len(got) != 4 {
		t.Fatalf("the database's objects in clouddb's namespace: %v; want its statefulset, pod, service and secret", got)
	}
	t.Logf("a database created through the deployed clouddb, PINGed %v after the manifest was applied", time.Since(applied).Round(time.Millisecond))
}

// ownedHostDir is a new directory of this host owned by uid (and gid), removed at the
// end of the test.
func ownedHostDir(t *testing.T, uid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "clouddb-deploy-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err = os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// manifestObjects decodes a multi-document YAML file.
func manifestObjects(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, obj)
	}
	return out
}

// find is the object of type T named name.
func find[T metav1.Object](t *testing.T, objs []any, name string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.(T); ok && v.GetName() == name {
			return v
		}
	}
	var zero T
	t.Fatalf("the manifest has no %T %s", zero, name)
	return zero
}

func swapImage(t *testing.T, pod *corev1.PodSpec, container, image string) {
	t.Helper()
	for i := range pod.Containers {
		if pod.Containers[i].Name == container {
			pod.Containers[i].Image, pod.Containers[i].ImagePullPolicy = image, corev1.PullNever
			return
		}
	}
	t.Fatalf("no container %s", container)
}

func replaceArg(t *testing.T, args []string, prefix, arg string) []string {
	t.Helper()
	for i, a := range args {
		if strings.HasPrefix(a, prefix) {
			args[i] = arg
			return args
		}
	}
	t.Fatalf("no argument %s… in %v", prefix, args)
	return nil
}

func freeHostPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// podReport is the namespace's pods, their state and their last log lines, for a failure.
func podReport(t *testing.T, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := cluster.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		st, _ := json.Marshal(p.Status.ContainerStatuses)
		fmt.Fprintf(&b, "pod %s: %s %s\n", p.Name, p.Status.Phase, st)
		logs, err := cluster.client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr(int64(30))}).DoRaw(ctx)
		if err != nil {
			logs = []byte(err.Error())
		}
		fmt.Fprintf(&b, "%s\n", logs)
	}
	return b.String()
}

// clouddbImage builds clouddb, makes an image of it and of this machine's redis-server,
// with the libraries they link (the Dockerfile's base image gives redis-server and clouddb
// is static there: a static build here would rebuild every package, minutes, where this
// one reuses the build cache), loads it into the test cluster's containerd and returns
// its name and the binary. The tag is the layer's digest: an unchanged build is the same
// image.
func clouddbImage(t *testing.T, ctx context.Context) (image, bin string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "clouddb")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "clouddb/cmd/clouddb").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("clouddb's image needs this machine's redis-server: %v", err)
	}
	files := map[string]string{"/usr/bin/clouddb": bin, "/usr/bin/redis-server": redis}
	for _, b := range []string{bin, redis} {
		out, err := exec.CommandContext(ctx, "ldd", b).Output()
		if err != nil {
			continue // static
		}
		for _, lib := range regexp.MustCompile(`/\S+`).FindAllString(string(out), -1) {
			files[lib] = lib
		}
	}
	dirs := map[string]bool{"/etc": true, "/tmp": true, "/var/lib/clouddb": true}
	for name := range files {
		dirs[filepath.Dir(name)] = true
	}
	for d := range dirs {
		for p := filepath.Dir(d); p != "/"; p = filepath.Dir(p) {
			dirs[p] = true
		}
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	// Parents before their children: sorted paths.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		mode := int64(0o755)
		if d == "/tmp" || d == "/var/lib/clouddb" {
			mode = 0o1777
		}
		must0(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: mode}))
	}
	add := func(name string, mode int64, body []byte) {
		must0(t, tw.WriteHeader(&tar.Header{Name: name[1:], Mode: mode, Size: int64(len(body))}))
		_, err := tw.Write(body)
		must0(t, err)
	}
	add("/etc/passwd", 0o644, []byte("root:x:0:0::/root:/bin/false\nclouddb:x:999:999::/var/lib/clouddb:/bin/false\n"))
	add("/etc/group", 0o644, []byte("root:x:0:\nclouddb:x:999:\n"))
	for _, name := range slices.Sorted(maps.Keys(files)) {
		b, err := os.ReadFile(files[name]) // through symlinks, as cp -L
		must0(t, err)
		add(name, 0o755, b)
	}
	must0(t, tw.Close())
	return loadImage(t, ctx, dir, "localhost/clouddb", layer.Bytes(), []string{"/usr/bin/clouddb"}), bin
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// loadImage writes a one-layer `docker save` archive (as the script's mkimage) and
// imports it into the test cluster's containerd.
func loadImage(t *testing.T, ctx context.Context, dir, repo string, layer []byte, entrypoint []string) string {
	t.Helper()
	sum := sha256.Sum256(layer)
	digest := hex.EncodeToString(sum[:])
	ref := repo + ":" + digest[:12]
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/usr/bin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + digest}},
	})
	must0(t, err)
	csum := sha256.Sum256(config)
	cname := hex.EncodeToString(csum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": cname, "RepoTags": []string{ref}, "Layers": []string{digest + "/layer.tar"}}})
	must0(t, err)
	archive := filepath.Join(dir, "image.tar")
	f, err := os.Create(archive)
	must0(t, err)
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		body []byte
	}{{"manifest.json", manifest}, {cname, config}, {digest + "/layer.tar", layer}} {
		must0(t, tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body))}))
		_, err = tw.Write(e.body)
		must0(t, err)
	}
	must0(t, tw.Close())
	must0(t, f.Close())
	if out, err := exec.CommandContext(ctx, "ctr", "-a", containerd, "-n", "k8s.io", "images", "import", archive).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
	return ref
}
