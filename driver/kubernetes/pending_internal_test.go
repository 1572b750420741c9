package kubernetes

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"clouddb"
)

// TestPendingLoadUnroutes: while a database's data waits to be loaded into its new pod
// (the Secret's pending-load mark), its Service routes to no pod (the load's FLUSHALL
// would drop what clients wrote to the new pod before it) and the data operations wait
// (ErrServerStarting) rather than read or fill a pod the load will overwrite. The logic
// alone, on client-go's fake clientset: the conformance suite's TLS and persistence
// cases run the whole replacement on a real cluster.
func TestPendingLoadUnroutes(t *testing.T) {
	ctx := context.Background()
	const id = 7
	in := clouddb.Instance{DatabaseID: id, Port: 30007, Password: "p", MaxMemoryBytes: 64 << 20,
		EvictionPolicy: "noeviction", DataPersistence: "none", Shards: 1}
	client := fake.NewClientset(
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: Name(id), Namespace: "ns", UID: "sts-uid"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: Name(id), Namespace: "ns"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: selector(id)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: Name(id), Namespace: "ns",
			Annotations: map[string]string{annotationPendingLoad: filepath.Join(t.TempDir(), "gone.rdb")}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: nodePodName(id, 0), Namespace: "ns", Labels: labels(id)},
			Status: corev1.PodStatus{PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
	)
	d, err := New(Config{Client: client, Namespace: "ns", Images: map[string]string{"7.0": "redis"}, DefaultVersion: "7.0"})
	if err != nil {
		t.Fatal(err)
	}

	if _, err = d.internalEndpoint(ctx, id); !errors.Is(err, clouddb.ErrServerStarting) {
		t.Fatalf("a data operation while a load is pending: %v, want ErrServerStarting", err)
	}
	secret, err := client.CoreV1().Secrets("ns").Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods("ns").Get(ctx, nodePodName(id, 0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The file is gone here, so the load fails; the Service must not route meanwhile.
	if err = d.loadPending(ctx, in, pod, secret); err == nil {
		t.Fatal("loadPending of a missing file succeeded")
	}
	svc, err := client.CoreV1().Services("ns").Get(ctx, Name(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(svc.Spec.Selector, serviceSelector(id, true)) {
		t.Fatalf("the Service selects %v while the load is pending, want only a labelled primary (%v), which a one-node database has none of",
			svc.Spec.Selector, serviceSelector(id, true))
	}
	if pod.Labels[LabelRole] != "" {
		t.Fatal("the pod carries the primary's label")
	}
}

// TestPublicEndpointLookupsBounded: with LoadBalancer Services, the public endpoint of a
// database whose Service has no address yet is looked up at most once a while, however
// many API reads (a tenant's lists) ask for it; once it has one, it is read from memory.
func TestPublicEndpointLookupsBounded(t *testing.T) {
	ctx := context.Background()
	const id = 8
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: Name(id), Namespace: "ns", Labels: labels(id)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	client := fake.NewClientset(svc)
	d, err := New(Config{Client: client, Namespace: "ns", Images: map[string]string{"7.0": "redis"}, DefaultVersion: "7.0",
		ServiceType: corev1.ServiceTypeLoadBalancer})
	if err != nil {
		t.Fatal(err)
	}
	lookups := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "services" && (a.GetVerb() == "get" || a.GetVerb() == "list") {
				n++
			}
		}
		return n
	}
	for range 100 {
		if got := d.PublicEndpointOf(id, 12000); got != "" {
			t.Fatalf("public endpoint without an address = %q", got)
		}
	}
	if n := lookups(); n != 1 {
		t.Fatalf("%d lookups of the Service for 100 reads, want 1", n)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}}
	if _, err = client.CoreV1().Services("ns").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.ingress.Delete(id) // as a restarted clouddb: not seen yet
	for range 100 {
		if got := d.PublicEndpointOf(id, 12000); got != "192.0.2.7:12000" {
			t.Fatalf("public endpoint = %q", got)
		}
	}
	if n := lookups(); n != 2 {
		t.Fatalf("%d lookups of the Service, want 2", n)
	}
}
