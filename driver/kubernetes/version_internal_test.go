package kubernetes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"clouddb"
)

// TestCheckUpgrade: an upgrade is refused before it is accepted only for a cluster that
// could not restart on the new image with its data (no replicas, no persistence).
func TestCheckUpgrade(t *testing.T) {
	d, err := New(Config{Client: fake.NewClientset(), Namespace: "ns", Images: map[string]string{"7.0": "a", "7.2": "b"}, DefaultVersion: "7.0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                      string
		cluster, replicated, keep bool
		refused                   bool
	}{
		{"one node", false, false, false, false},
		{"replicated", false, true, false, false},
		{"cluster", true, false, false, true},
		{"replicated cluster", true, true, false, false},
		{"persistent cluster", true, false, true, false},
	} {
		in := clouddb.Instance{DatabaseID: 1, OSSCluster: c.cluster, Replication: c.replicated, DataPersistence: "none", Shards: 1}
		if c.keep {
			in.DataPersistence = "aof-every-1-second"
		}
		if err := d.CheckUpgrade(in, "7.2"); (err != nil) != c.refused {
			t.Errorf("%s: CheckUpgrade = %v, want refused %v", c.name, err, c.refused)
		}
	}
}

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
