package kubernetes

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"clouddb"
	"clouddb/internal/pki"
)

// TestConfigOfEachPod: a TLS change writes the Secret before the pods are replaced, and a
// pod that restarts meanwhile reads the redis.conf made for the files it mounts (a plain
// pod must not be told to load certificates it does not have, which would crash-loop it);
// once no pod reads the old one, it goes.
func TestConfigOfEachPod(t *testing.T) {
	ctx := context.Background()
	const id = 9
	ca, err := pki.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	d, err := New(Config{Client: client, Namespace: "ns", Images: map[string]string{"7.0": "redis"}, DefaultVersion: "7.0", CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	in := clouddb.Instance{DatabaseID: id, Port: 30009, Password: "p", MaxMemoryBytes: 64 << 20,
		EvictionPolicy: "noeviction", DataPersistence: "none", Shards: 1}
	sts, err := client.AppsV1().StatefulSets("ns").Create(ctx, d.statefulSet(in, "redis"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The running pod, made from the plain template.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: nodePodName(id, 0), Namespace: "ns", Labels: labels(id)},
		Spec: *sts.Spec.Template.Spec.DeepCopy()}
	if pod, err = client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err = d.applySecret(ctx, in, sts); err != nil {
		t.Fatal(err)
	}

	in.TLS = &clouddb.InstanceTLS{}
	secret, err := d.applySecret(ctx, in, sts)
	if err != nil {
		t.Fatal(err)
	}
	requireMountsNamed(t, secret.Data, configVolumeItems(&pod.Spec), false)
	items := configItems(in, secret.Data)
	requireMountsNamed(t, secret.Data, items, true)

	// The pod replaced by one of the new template: the plain config is read by no pod.
	want := d.statefulSet(in, "redis")
	withTLS(want, in, secret.Data)
	pod.Spec = want.Spec.Template.Spec
	if _, err = client.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if secret, err = d.applySecret(ctx, in, want); err != nil {
		t.Fatal(err)
	}
	if _, ok := secret.Data[keyConfig]; ok {
		t.Errorf("the secret keeps %s, which no pod reads", keyConfig)
	}
	requireMountsNamed(t, secret.Data, items, true)
}

// requireMountsNamed checks that the redis.conf a pod with these config volume items
// reads serves TLS or not, and names only files it mounts.
func requireMountsNamed(t *testing.T, data map[string][]byte, items []corev1.KeyToPath, tls bool) {
	t.Helper()
	var key string
	mounted := map[string]bool{}
	for _, it := range items {
		if it.Path == confFile {
			key = it.Key
		}
		mounted[confDir+"/"+it.Path] = true
	}
	conf, ok := data[key]
	if !ok {
		t.Fatalf("the secret has no %s, which the pod reads", key)
	}
	if got := strings.Contains(string(conf), "\ntls-port "); got != tls {
		t.Fatalf("the config %s of a pod (TLS %v) has a tls-port: %v", key, tls, got)
	}
	for _, line := range strings.Split(string(conf), "\n") {
		name, arg, _ := strings.Cut(line, " ")
		if strings.HasSuffix(name, "-file") && strings.HasPrefix(name, "tls-") && !mounted[strings.Trim(arg, `"`)] {
			t.Errorf("the config %s names %s, which the pod does not mount", key, arg)
		}
	}
}

// TestTLSUsable_CANearItsEnd: within pki.RenewBefore of the CA's end, a TLS database's
// material is usable and Ensure keeps it: new certificates would end no later (with the
// CA), so issuing them would only give the pods new files at every pass.
func TestTLSUsable_CANearItsEnd(t *testing.T) {
	ca, err := pki.NewEnding("test CA", time.Now().Add(pki.RenewBefore/3))
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{cfg: Config{CA: ca, NodeAddress: "127.0.0.1"}, ns: "ns", log: slog.New(slog.DiscardHandler)}
	in := clouddb.Instance{DatabaseID: 3, TLS: &clouddb.InstanceTLS{}}
	first := map[string][]byte{}
	if err = d.addTLSData(in, nil, first); err != nil {
		t.Fatal(err)
	}
	if !d.tlsUsable(in, first) {
		t.Fatal("certificates that end with the CA are not usable: Running is false at every pass")
	}
	again := map[string][]byte{}
	if err = d.addTLSData(in, first, again); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(first, again, bytes.Equal) {
		t.Fatal("Ensure issued new certificates for a database whose certificates end with the CA")
	}
}
