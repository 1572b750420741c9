package kubernetes_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"clouddb"
)

// applyManifest creates the objects of a multi-document YAML file in namespace ns.
func applyManifest(t *testing.T, ctx context.Context, path, ns string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.client
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: unexpected %T", path, obj)
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// TestRBAC runs the driver with the credentials of deploy/kubernetes/rbac.yaml's
// ServiceAccount alone (a token from the TokenRequest API): it does all its work in its
// namespace, and nothing outside it.
func TestRBAC(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 5*time.Minute)
	admin := cluster.client
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "clouddb-rbac-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	applyManifest(t, ctx, "../../deploy/kubernetes/rbac.yaml", ns.Name)
	tok, err := admin.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, "clouddb",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(cluster.config)
	cfg.BearerToken = tok.Status.Token
	sa, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		_, err := admin.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}

	d := newDriver(t, sa, ns.Name)
	in := instance(t, 201, "snapshot-every-1-hour")
	in.Replication = true // its primary is labelled (a patch of the pod)
	if err := d.Ensure(ctx, in); err != nil {
		t.Fatalf("Ensure with the Role's rights: %v", err)
	}
	if up, err := d.Running(ctx, in); err != nil || !up {
		t.Fatalf("Running = %v, %v", up, err)
	}
	// Its checker of ACL rules: a StatefulSet of its own, made and read with the same rights.
	if _, _, refused := clouddb.ACLRuleRefusal(d.CheckACLRules(ctx, []string{"+get ~*", "+nosuchcommand ~*"})); !refused {
		t.Fatalf("CheckACLRules with the Role's rights: %v", d.CheckACLRules(ctx, []string{"+get ~*", "+nosuchcommand ~*"}))
	}
	tenant := connect(t, d, in, "", in.Password)
	reachable(t, ctx, tenant)
	if err := tenant.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var rdb bytes.Buffer
	if _, err := d.Snapshot(ctx, in, 0, &rdb); err != nil || !bytes.HasPrefix(rdb.Bytes(), []byte("REDIS")) {
		t.Fatalf("Snapshot with the Role's rights: %v", err)
	}
	in.MaxMemoryBytes = 150 << 20 // a resize of the pod
	if err := d.Ensure(ctx, in); err != nil {
		t.Fatalf("Ensure of a new size with the Role's rights: %v", err)
	}
	in.TLS = &clouddb.InstanceTLS{} // its pods replaced one at a time (deleted)
	if err := d.Ensure(ctx, in); err != nil {
		t.Fatalf("Ensure of TLS turned on with the Role's rights: %v", err)
	}
	tenant = tlsClient(t, d.PublicEndpoint(in.Port), in.Password)
	if err := d.Stop(ctx, in.DatabaseID); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if ids, err := d.Instances(ctx); err != nil || !slices.Equal(ids, []int{in.DatabaseID}) {
		t.Fatalf("Instances = %v, %v", ids, err)
	}
	if err := d.Ensure(ctx, in); err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	// snapshot-every-1-hour: a clean shutdown saved the data.
	reachable(t, ctx, tenant)
	if got, err := tenant.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k after Stop and Ensure = %q, %v", got, err)
	}
	if err := d.Remove(ctx, in.DatabaseID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if ids, err := d.Instances(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("Instances after Remove = %v, %v", ids, err)
	}

	// Nothing outside its namespace, nor cluster-wide.
	if _, err := sa.CoreV1().Secrets(cluster.ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing the secrets of another namespace = %v, want forbidden", err)
	}
	if _, err := sa.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing the secrets of kube-system = %v, want forbidden", err)
	}
	if _, err := sa.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing namespaces = %v, want forbidden", err)
	}
	if _, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing nodes = %v, want forbidden", err)
	}
	// Nor, in its namespace, what the driver does not need.
	if _, err := sa.RbacV1().Roles(ns.Name).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing roles = %v, want forbidden", err)
	}
	if _, err := sa.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: redisImage}}}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a pod = %v, want forbidden", err)
	}
}
