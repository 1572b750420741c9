package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"clouddb"
	"clouddb/internal/redisconf"
)

// configHere is a pod's redis.conf made to run on this machine: the pod's data directory
// is not this machine's (the command line gives the directory).
func configHere(conf []byte) []byte {
	return bytes.ReplaceAll(conf, []byte("dir \"/data\"\n"), nil)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestReplicationOnAfterRestart: a cluster node's server that restarted after Ensure read
// it (without persistence: empty, yet still its shard's primary) does not get the
// replication user turned on by that Ensure, although its client reconnects by itself:
// its replica, which refused to follow the empty server, would resync from it and lose
// every key. On a local redis-server, not a cluster.
func TestReplicationOnAfterRestart(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server")
	}
	port, bus := freePort(t), freePort(t)
	dir := t.TempDir()
	const internal = "internal-secret"
	in := clouddb.Instance{
		DatabaseID: 1, Password: "pw1", MaxMemoryBytes: 64 << 20, EvictionPolicy: "volatile-lru",
		DataPersistence: "none", Shards: 1, OSSCluster: true, Replication: true,
	}
	conf, err := renderConfig(in, internal)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "redis.conf")
	if err = os.WriteFile(path, configHere(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	start := func() {
		cmd = exec.Command(bin, path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--cluster-port", strconv.Itoa(bus))
		if serr := cmd.Start(); serr != nil {
			t.Fatal(serr)
		}
	}
	start()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Username: redisconf.InternalUser, Password: internal,
		DisableIdentity: true, MaxRetries: -1, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up := func() {
		t.Helper()
		for c.Ping(ctx).Err() != nil {
			if ctx.Err() != nil {
				t.Fatal("redis-server did not start")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	up()
	replOn := func() bool {
		t.Helper()
		flags, gerr := c.Do(ctx, "acl", "getuser", clusterReplUser).Result()
		if gerr != nil {
			t.Fatal(gerr)
		}
		return userOn(flags)
	}
	d := &Driver{log: slog.New(slog.DiscardHandler)}
	m := &clusterMember{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Status: corev1.PodStatus{PodIP: "127.0.0.1"}}, port: port, c: c}
	if err = m.read(ctx); err != nil {
		t.Fatal(err)
	}
	if m.replOn {
		t.Fatalf("%s is on at the server's start", clusterReplUser)
	}
	if err = d.replicationOn(ctx, in, []*clusterMember{m}); err != nil || !replOn() {
		t.Fatalf("replicationOn on the server read = %v (on: %v), want nil and on", err, replOn())
	}

	// The server restarts (the kubelet) after Ensure read it.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	start()
	up()
	err = d.replicationOn(ctx, in, []*clusterMember{m})
	if !errors.Is(err, errNodeRestarted) || !errors.Is(err, clouddb.ErrServerStarting) {
		t.Errorf("replicationOn on a server started since it was read = %v, want errNodeRestarted and ErrServerStarting", err)
	}
	if replOn() {
		t.Fatalf("%s is on on a server that restarted after Ensure read it", clusterReplUser)
	}
}
