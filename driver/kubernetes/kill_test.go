package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb/driver/kubernetes"
)

// servingPod is the name of the one pod the database's Service routes to, as its
// EndpointSlices say.
func servingPod(t *testing.T, ctx context.Context, ns string, id int) string {
	t.Helper()
	slices, err := cluster.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + kubernetes.Name(id),
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				names = append(names, e.TargetRef.Name)
			}
		}
	}
	if len(names) != 1 {
		t.Fatalf("the service of database %d routes to %v, want one pod", id, names)
	}
	return names[0]
}

// killServer ends the redis-server of the pod as a crash would (SIGKILL: no shutdown,
// nothing saved), and returns once the process is gone. The kubelet then restarts the
// container in the same pod. The test cluster runs on this machine, so the pod's
// processes are this machine's, found by the pod's cgroup.
func killServer(t *testing.T, ctx context.Context, ns, podName string) {
	t.Helper()
	pid := serverPid(t, ctx, ns, podName)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (pod %s): %v", pid, podName, err)
	}
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		// Gone once reaped by its container's shim (a zombie still has its /proc/<pid>).
		err := syscall.Kill(pid, 0)
		return errors.Is(err, syscall.ESRCH), nil
	}); err != nil {
		t.Fatalf("the killed redis-server %d of pod %s is still there: %v", pid, podName, err)
	}
}

// serverPid is the pid, on this machine, of the pod's redis-server.
func serverPid(t *testing.T, ctx context.Context, ns, podName string) int {
	t.Helper()
	p, err := cluster.client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(p.UID)
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, dir := range procs {
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "redis-server" {
			continue
		}
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		// The cgroupfs driver names the pod pod<uid>, the systemd one pod<uid with _>.
		if err != nil || !bytes.Contains(cg, []byte("pod"+uid)) && !bytes.Contains(cg, []byte("pod"+strings.ReplaceAll(uid, "-", "_"))) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("pod %s: %d redis-server processes on this machine (%v), want one: the test cluster must run here, and the tests as root", podName, len(pids), pids)
	}
	return pids[0]
}
