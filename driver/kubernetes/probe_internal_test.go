package kubernetes

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"clouddb"
	"clouddb/internal/redisconf"
	"clouddb/internal/redistest"
)

// TestReadinessProbe runs the pods' readiness probe, as the kubelet does, against real
// servers: Ready only while the server holds its data.
func TestReadinessProbe(t *testing.T) {
	const pass = "probe-secret"
	dir := t.TempDir()
	start := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		sock := filepath.Join(dir, name+".sock")
		args = append([]string{"--port", "0", "--unixsocket", sock, "--unixsocketperm", "700", "--dir", dir,
			"--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0", "--dbfilename", name + ".rdb",
			"--user", "default", "off", "--user", redisconf.InternalUser}, append(redisconf.InternalUserRules(">"+pass), args...)...)
		cmd := exec.Command(redistest.Real(t), args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		for range 100 {
			if _, err := os.Stat(sock); err == nil {
				return sock
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("server %s does not listen on %s", name, sock)
		return ""
	}
	// probe runs the probe's command on sock with the password: nil when it passes.
	probe := func(sock, password string) error {
		c := readinessProbe().Exec.Command
		for i, a := range c {
			if a == socketPath {
				c[i] = sock
			}
		}
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Env = append(os.Environ(), envProbeAuth+"="+password)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace(string(out)))
		}
		return nil
	}
	cli := func(t *testing.T, sock string, args ...string) {
		t.Helper()
		out, err := exec.Command("redis-cli", append([]string{"-e", "-s", sock, "--user", redisconf.InternalUser, "--pass", pass, "--no-auth-warning"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v: %s", args, err, out)
		}
	}
	ready := func(t *testing.T, sock string, want bool, why string) {
		t.Helper()
		if !want {
			// Not Ready, and staying so.
			for range 5 {
				if err := probe(sock, pass); err == nil {
					t.Fatalf("%s: the probe passes, want not ready", why)
				}
				time.Sleep(100 * time.Millisecond)
			}
			return
		}
		// A replica's first sync takes a moment: Ready within 10 s.
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if err = probe(sock, pass); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("%s: probe = %v, want ready", why, err)
		}
	}

	primary := start(t, "primary")
	ready(t, primary, true, "a primary")
	if err := probe(primary, "wrong"); err == nil {
		t.Fatal("the probe passes with a wrong password")
	}
	cli(t, primary, "set", "k", "v")

	replica := start(t, "replica")
	cli(t, replica, "replicaof", "127.0.0.1", "1")
	ready(t, replica, false, "a replica whose primary does not answer")
	// Its primary on TCP, for the replica to reach.
	port := freePort(t)
	cli(t, primary, "config", "set", "port", strconv.Itoa(port))
	cli(t, primary, "config", "set", "bind", "127.0.0.1")
	cli(t, replica, "config", "set", "masteruser", redisconf.InternalUser)
	cli(t, replica, "config", "set", "masterauth", pass)
	cli(t, replica, "replicaof", "127.0.0.1", strconv.Itoa(port))
	ready(t, replica, true, "a replica in sync")

	node := start(t, "node", "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))
	ready(t, node, false, "a cluster node that serves no slot")
	cli(t, node, "cluster", "addslotsrange", "0", "16383")
	ready(t, node, true, "a cluster node with slots")
	// A replicated cluster's primary as it restarts: serving its slots (its nodes.conf
	// kept), refusing writes until Ensure opens them.
	cli(t, node, "config", "set", "min-replicas-to-write", "1")
	ready(t, node, false, "a restarted replicated cluster primary, not yet confirmed")
	cli(t, node, "config", "set", "min-replicas-to-write", "0")
	ready(t, node, true, "a replicated cluster primary that Ensure confirmed")
}

// TestNotReadySaysWhy: a wait for a pod that runs but is not Ready ends with the
// kubelet's report of its last failed readiness probe, not another pod's, nor an older
// report.
func TestNotReadySaysWhy(t *testing.T) {
	const id = 9
	started := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: nodePodName(id, 0), Namespace: "ns", UID: "pod-uid"},
		Status: corev1.PodStatus{PodIP: "10.0.0.9", Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "redis", Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}}}
	at := func(s int) metav1.Time { return metav1.NewTime(time.Unix(1_700_000_000+int64(s), 0)) }
	event := func(name string, uid types.UID, reason, msg string, when int) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod.Name, UID: uid}, Reason: reason, Message: msg, LastTimestamp: at(when)}
	}
	client := fake.NewClientset(pod,
		event("e1", pod.UID, "Unhealthy", "Readiness probe failed: NOTREADY an older report\n", 1),
		event("e2", pod.UID, "Unhealthy", "Readiness probe failed: NOTREADY a replica whose link to its primary is down\n", 3),
		event("e3", "another-pod", "Unhealthy", "Readiness probe failed: NOTREADY another pod's\n", 5),
		event("e4", pod.UID, "Pulled", "Container image already present", 6),
	)
	d, err := New(Config{Client: client, Namespace: "ns", Images: map[string]string{"7.0": "redis"}, DefaultVersion: "7.0",
		StartTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.waitServing(context.Background(), id, 0)
	if !errors.Is(err, clouddb.ErrServerStarting) {
		t.Fatalf("waitServing = %v, want ErrServerStarting", err)
	}
	if want := "Readiness probe failed: NOTREADY a replica whose link to its primary is down"; !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("waitServing = %v, want it to end with %q", err, want)
	}
}
