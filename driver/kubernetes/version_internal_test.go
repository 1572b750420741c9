package kubernetes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"clouddb"
)

// TestServedVersion: the newest offered version the database's pods run; "" when none
// runs an image the driver offers (or no pod runs).
func TestServedVersion(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	d, err := New(Config{Client: cs, Namespace: "ns", Images: map[string]string{"7.0": "a", "7.2": "b"}, DefaultVersion: "7.0"})
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		v, serr := d.ServedVersion(ctx, clouddb.Instance{DatabaseID: 5})
		if serr != nil {
			t.Fatal(serr)
		}
		return v
	}
	if v := served(); v != "" {
		t.Fatalf("no pod: served %q", v)
	}
	for i, img := range []string{"gone", "a", "b"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: nodePodName(5, i), Namespace: "ns", Labels: labels(5)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: img}}}}
		if _, err = cs.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if want := []string{"", "7.0", "7.2"}[i]; served() != want {
			t.Fatalf("pods of images %v: served %q, want %q", []string{"gone", "a", "b"}[:i+1], served(), want)
		}
	}
}
