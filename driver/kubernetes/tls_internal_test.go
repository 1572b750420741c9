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
// once no pod reads the old one, it goes. A TLS pod mounts the whole Secret: its
// redis.conf names the files of the Secret's certificates, which are there under those
// names, and only they (new client certificates: new files, the old ones gone); TLS
// turned off keeps them for it while it runs.
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
	plain := pod.Spec
	if _, err = d.applySecret(ctx, in, sts); err != nil {
		t.Fatal(err)
	}

	in.TLS = &clouddb.InstanceTLS{}
	secret, err := d.applySecret(ctx, in, sts)
	if err != nil {
		t.Fatal(err)
	}
	requireReadsItsFiles(t, secret.Data, &plain, false)
	want := d.statefulSet(in, "redis")
	withTLS(want, in)
	requireReadsItsFiles(t, secret.Data, &want.Spec.Template.Spec, true)

	// The pod replaced by one of the new template: the plain config is read by no pod.
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
	requireReadsItsFiles(t, secret.Data, &pod.Spec, true)
	before := maps.Clone(secret.Data)

	// New client certificates: the same pod takes new files; those of before go.
	certPEM, _, err := ca.IssueClient("tenant")
	if err != nil {
		t.Fatal(err)
	}
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{string(certPEM)}}
	if secret, err = d.applySecret(ctx, in, want); err != nil {
		t.Fatal(err)
	}
	requireReadsItsFiles(t, secret.Data, &pod.Spec, true)
	if !strings.Contains(string(secret.Data[keyLiveConfig]), "\ntls-auth-clients \"yes\"") {
		t.Errorf("the config after client certificates were given does not require them:\n%s", secret.Data[keyLiveConfig])
	}
	oldCA := tlsPath(keyTLSCA, before[keyTLSCA])
	if _, ok := secret.Data[oldCA]; ok || oldCA == tlsPath(keyTLSCA, secret.Data[keyTLSCA]) {
		t.Errorf("the CA bundle of before (%s) is still in the secret, or the new one has its name", oldCA)
	}

	// TLS off, the TLS pod still running: its config and files stay; the next pod's is plain.
	in.TLS = nil
	next := d.statefulSet(in, "redis")
	withTLS(next, in)
	if secret, err = d.applySecret(ctx, in, next); err != nil {
		t.Fatal(err)
	}
	requireReadsItsFiles(t, secret.Data, &pod.Spec, true)
	requireReadsItsFiles(t, secret.Data, &next.Spec.Template.Spec, false)
}

// requireReadsItsFiles checks that the redis.conf the pod (spec) reads is in the Secret's
// data, serves TLS or not, and names only files the pod mounts.
func requireReadsItsFiles(t *testing.T, data map[string][]byte, spec *corev1.PodSpec, tls bool) {
	t.Helper()
	m, ok := podMount(spec)
	if !ok {
		t.Fatal("the pod has no config volume")
	}
	mounted := map[string]bool{}
	for _, it := range m.items {
		mounted[confDir+"/"+it.Path] = true
	}
	if m.whole {
		for k := range data {
			mounted[confDir+"/"+k] = true
		}
	}
	var conf string
	for _, arg := range spec.Containers[0].Command {
		if strings.HasPrefix(arg, confDir+"/") {
			conf = arg
			break
		}
	}
	if !mounted[conf] {
		t.Fatalf("the pod reads %q, which it does not mount", conf)
	}
	key := strings.TrimPrefix(conf, confDir+"/")
	for _, it := range m.items {
		if it.Path == key {
			key = it.Key
		}
	}
	text := string(data[key])
	if got := strings.Contains(text, "\ntls-port "); got != tls {
		t.Fatalf("the config %s of a pod (TLS %v) has a tls-port: %v", key, tls, got)
	}
	files := 0
	for _, line := range strings.Split(text, "\n") {
		name, arg, _ := strings.Cut(line, " ")
		if strings.HasSuffix(name, "-file") && strings.HasPrefix(name, "tls-") {
			files++
			if !mounted[strings.Trim(arg, `"`)] {
				t.Errorf("the config %s names %s, which the pod does not mount", key, arg)
			}
		}
	}
	if tls && files != len(tlsKeys) {
		t.Errorf("the config %s names %d TLS files, want %d", key, files, len(tlsKeys))
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
	if err = d.addTLSData(context.Background(), in, nil, first); err != nil {
		t.Fatal(err)
	}
	if !d.secretTLSUsable(context.Background(), in, &corev1.Secret{Data: first}) {
		t.Fatal("certificates that end with the CA are not usable: Running is false at every pass")
	}
	again := map[string][]byte{}
	if err = d.addTLSData(context.Background(), in, first, again); err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(first, again, bytes.Equal) {
		t.Fatal("Ensure issued new certificates for a database whose certificates end with the CA")
	}
}

// TestSecretTLSUsable: Running's verdict on a Secret's certificates is kept for the
// Secret's version until the certificates would need renewal: a new version of the
// Secret is judged anew, as is the same one past that time.
func TestSecretTLSUsable(t *testing.T) {
	ca, err := pki.New("test CA")
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{cfg: Config{CA: ca, NodeAddress: "127.0.0.1"}, ns: "ns", log: slog.New(slog.DiscardHandler)}
	in := clouddb.Instance{DatabaseID: 4, TLS: &clouddb.InstanceTLS{}}
	data := map[string][]byte{}
	if err = d.addTLSData(context.Background(), in, nil, data); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: "1"}, Data: data}
	if !d.secretTLSUsable(context.Background(), in, secret) {
		t.Fatal("fresh certificates: not usable")
	}
	v, _ := d.tlsChecks.Load(in.DatabaseID)
	if until := v.(tlsCheck).until; until.Before(time.Now().Add(pki.LeafLifetime - pki.RenewBefore - time.Hour)) {
		t.Fatalf("kept until %v: not the certificates' renewal time", until)
	}

	// The server certificate near its end, in a new version of the Secret: judged anew.
	near := maps.Clone(data)
	if near[keyTLSCert], near[keyTLSKey], err = ca.Reissue(data[keyTLSCert], time.Now().Add(pki.RenewBefore/2)); err != nil {
		t.Fatal(err)
	}
	if d.secretTLSUsable(context.Background(), in, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: "2"}, Data: near}) {
		t.Fatal("a new version of the secret with a certificate near its end: usable")
	}
	// The same version judged usable before, past the time its verdict held: judged anew.
	d.tlsChecks.Store(in.DatabaseID, tlsCheck{version: "u/3", until: time.Now().Add(-time.Second)})
	if d.secretTLSUsable(context.Background(), in, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: "3"}, Data: near}) {
		t.Fatal("a verdict past its time was kept")
	}
	// Client certificates of the instance changed: the CA bundle differs, whatever was kept.
	if !d.secretTLSUsable(context.Background(), in, secret) {
		t.Fatal("the first version again: not usable")
	}
	in.TLS = &clouddb.InstanceTLS{ClientCertificates: []string{string(data[keyTLSClientCert])}}
	if d.secretTLSUsable(context.Background(), in, secret) {
		t.Fatal("a CA bundle without the instance's client certificates: usable")
	}
}
