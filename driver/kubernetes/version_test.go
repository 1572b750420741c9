package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"clouddb/driver/kubernetes"
)

// standInImage tags the test image anew as the image of Redis 7.2 (the same server: what
// the driver does with a version is to run its image) and returns that tag. Once a run:
// two tags at once race in containerd.
func standInImage(t *testing.T, ctx context.Context) string {
	t.Helper()
	if containerd == "" {
		t.Fatal("CLOUDDB_K8S_CONTAINERD is not set: scripts/k8s-test-cluster.sh sets it")
	}
	standIn.once.Do(func() {
		out, err := exec.CommandContext(ctx, "ctr", "-a", containerd, "-n", "k8s.io", "images", "tag", "--force", redisImage, standInRef).CombinedOutput()
		if err != nil {
			standIn.err = fmt.Errorf("ctr images tag: %v: %s", err, out)
		}
	})
	if standIn.err != nil {
		t.Fatal(standIn.err)
	}
	return standInRef
}

const standInRef = "localhost/clouddb-redis:7.2-stand-in"

var standIn struct {
	once sync.Once
	err  error
}

// offering is a driver that offers Redis 7.2 too, as img; with a start timeout of its
// own when not 0.
func offering(t *testing.T, img string, startTimeout time.Duration) *kubernetes.Driver {
	t.Helper()
	return newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) {
		c.Images = map[string]string{redisVersion: redisImage, "7.2": img}
		if startTimeout != 0 {
			c.StartTimeout = startTimeout
		}
	})
}

// requireServedThroughout stops the writer w, whose every acknowledged write c must
// read, and fails when it went more than 10 s without one during what.
func requireServedThroughout(t *testing.T, ctx context.Context, w *writer, c redis.Cmdable, what string) {
	t.Helper()
	acked, gap := w.stop()
	t.Logf("%s: %d writes acknowledged meanwhile, the longest time without one %v", what, acked, gap.Round(time.Millisecond))
	requireKeys(t, ctx, c, "w", acked)
	if gap > 10*time.Second {
		t.Fatalf("no write acknowledged for %v during %s", gap, what)
	}
}

// TestUpgrade: a database's new Redis version is a new image, which a running pod cannot
// take: Running is false, and Ensure replaces its pods with pods of the new image, the
// data kept (a replicated database one node at a time, a writer served throughout; one
// node saved and loaded; a cluster that has neither replicas nor persistence rebuilt,
// see TestClusterUpgrade for those that do). Going back to the older version is refused,
// the pods left as they run.
func TestUpgrade(t *testing.T) {
	needCluster(t)
	t.Parallel()
	newImage := standInImage(t, ctxFor(t, time.Minute))
	for _, tc := range []struct {
		name       string
		id         int
		replicated bool
		cluster    bool
	}{{"one node", 190, false, false}, {"replicated", 191, true, false}, {"cluster", 192, false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 5*time.Minute)
			d := offering(t, newImage, 0)
			in := instance(t, tc.id, "none")
			in.Replication, in.OSSCluster = tc.replicated, tc.cluster
			t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
			ensureRunning(t, ctx, d, in)
			names := nodeNames(in)
			lives := podLives(t, ctx, names)
			// A one-shard cluster's node 0 serves every slot: a plain client will do.
			c := connect(t, d, in, "", in.Password)
			reachable(t, ctx, c)
			if tc.replicated {
				writeAcked(t, ctx, c, "k", 100)
			} else {
				for i := range 100 {
					if err := c.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}

			// A tenant's function library is its data too (a pod's data saved and loaded).
			lib := "#!lua name=tenantlib\nredis.register_function('tenantfn', function() return 'ok' end)"
			if err := c.FunctionLoad(ctx, lib).Err(); err != nil {
				t.Fatal(err)
			}

			in.RedisVersion = "7.2"
			if up, err := d.Running(ctx, in); err != nil || up {
				t.Fatalf("Running on pods of the older version = %v, %v; want false (Ensure replaces them)", up, err)
			}
			var w *writer
			if tc.replicated {
				w = startWriter(t, connect(t, d, in, "", in.Password))
			}
			ensureRunning(t, ctx, d, in)
			for name, life := range lives {
				p := podNamed(t, ctx, name)
				if string(p.UID) == life[0] || p.Spec.Containers[0].Image != newImage {
					t.Fatalf("pod %s after the upgrade: uid %s (was %s), image %s; want a new pod of %s", name, p.UID, life[0], p.Spec.Containers[0].Image, newImage)
				}
			}
			c = connect(t, d, in, "", in.Password)
			reachable(t, ctx, c)
			requireKeys(t, ctx, c, "k", 100)
			if v, err := c.FCall(ctx, "tenantfn", nil).Text(); err != nil || v != "ok" {
				t.Fatalf("the tenant's function after the upgrade: FCALL = %q, %v", v, err)
			}
			if w != nil {
				requireServedThroughout(t, ctx, w, c, "the upgrade")
			}

			// Back to the older version: refused, nothing replaced.
			lives = podLives(t, ctx, names)
			down := in
			down.RedisVersion = redisVersion
			if err := d.Ensure(ctx, down); !errors.Is(err, kubernetes.ErrNotSupported) {
				t.Fatalf("Ensure back to Redis %s = %v, want ErrNotSupported", redisVersion, err)
			}
			requireSameLives(t, ctx, lives, "downgrade refused")
			if up, err := d.Running(ctx, in); err != nil || !up {
				t.Fatalf("Running after a refused downgrade = %v, %v", up, err)
			}
		})
	}
}

// TestClusterUpgrade: a cluster with replicas, or with persistence, changes version in
// place: each node's container restarts on the new image in its pod (its identity and
// volume kept), a replicated shard's replica first, then its primary once it handed the
// shard over; every key is kept, and a replicated cluster serves a writer throughout.
func TestClusterUpgrade(t *testing.T) {
	needCluster(t)
	t.Parallel()
	newImage := standInImage(t, ctxFor(t, time.Minute))
	for _, tc := range []struct {
		name        string
		id          int
		replicated  bool
		persistence string
	}{{"replicated", 193, true, "none"}, {"persistent", 194, false, "aof-every-1-second"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 5*time.Minute)
			d := offering(t, newImage, 0)
			in := instance(t, tc.id, tc.persistence)
			in.OSSCluster, in.Replication = true, tc.replicated
			t.Cleanup(func() { _ = d.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
			ensureRunning(t, ctx, d, in)
			cc := clusterClient(d, in)
			defer cc.Close()
			for i := range 100 {
				if err := cc.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(1500 * time.Millisecond) // appendfsync everysec
			names := nodeNames(in)
			lives := podLives(t, ctx, names)

			in.RedisVersion = "7.2"
			if up, err := d.Running(ctx, in); err != nil || up {
				t.Fatalf("Running on pods of the older version = %v, %v; want false", up, err)
			}
			var w *writer
			if tc.replicated {
				w = startWriter(t, clusterClient(d, in))
			}
			ensureRunning(t, ctx, d, in)
			for name, life := range lives {
				p := podNamed(t, ctx, name)
				if string(p.UID) != life[0] || strconv.Itoa(int(restarts(p))) == life[1] || p.Spec.Containers[0].Image != newImage {
					t.Fatalf("pod %s after the upgrade: uid %s (was %s), %d restarts (was %s), image %s; want its server restarted in place on %s",
						name, p.UID, life[0], restarts(p), life[1], p.Spec.Containers[0].Image, newImage)
				}
			}
			cc2 := clusterClient(d, in)
			defer cc2.Close()
			requireKeys(t, ctx, cc2, "k", 100)
			if w != nil {
				requireServedThroughout(t, ctx, w, cc2, "the upgrade")
			}
			if up, err := d.Running(ctx, in); err != nil || !up {
				t.Fatalf("Running after the upgrade = %v, %v", up, err)
			}
		})
	}
}

// TestClusterBadImage: a cluster node moved onto an image that cannot run (an
// operator's typo, an image not pulled) is moved back onto its image at once: Ensure says
// why, and the cluster serves every key; once the image is corrected it moves onto it.
// A one-node database's new pod of such an image, which never ran, is replaced by one of
// the corrected image, the data kept.
func TestClusterBadImage(t *testing.T) {
	needCluster(t)
	t.Parallel()
	good := standInImage(t, ctxFor(t, time.Minute))
	for _, tc := range []struct {
		name    string
		id      int
		cluster bool
	}{{"cluster", 195, true}, {"one node", 196, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t, 5*time.Minute)
			bad := offering(t, "localhost/clouddb-no-such-image:7.2", 20*time.Second)
			in := instance(t, tc.id, "aof-every-1-second")
			in.OSSCluster = tc.cluster
			t.Cleanup(func() { _ = bad.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
			ensureRunning(t, ctx, bad, in)
			var c redis.Cmdable = connect(t, bad, in, "", in.Password)
			if tc.cluster {
				cc := clusterClient(bad, in)
				defer cc.Close()
				c = cc
			}
			for i := range 20 {
				if err := c.Set(ctx, "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(1500 * time.Millisecond) // appendfsync everysec

			in.RedisVersion = "7.2"
			err := bad.Ensure(ctx, in)
			t.Logf("Ensure onto an image that cannot run: %v", err)
			if err == nil || !strings.Contains(err.Error(), "ErrImageNeverPull") {
				t.Fatalf("Ensure onto an image that cannot run = %v, want an error saying why", err)
			}
			if tc.cluster {
				p := podNamed(t, ctx, kubernetes.Name(in.DatabaseID)+"-0")
				if p.Spec.Containers[0].Image != redisImage {
					t.Fatalf("pod image %s after the failed move, want it back on %s", p.Spec.Containers[0].Image, redisImage)
				}
				down := in
				down.RedisVersion = redisVersion
				ensureRunning(t, ctx, bad, down)
				requireKeys(t, ctx, c, "k", 20)
			}

			fixed := offering(t, good, 0)
			ensureRunning(t, ctx, fixed, in)
			if p := podNamed(t, ctx, kubernetes.Name(in.DatabaseID)+"-0"); p.Spec.Containers[0].Image != good {
				t.Fatalf("pod image %s once the image was corrected, want %s", p.Spec.Containers[0].Image, good)
			}
			if tc.cluster {
				cc2 := clusterClient(fixed, in)
				defer cc2.Close()
				c = cc2
			} else {
				c = connect(t, fixed, in, "", in.Password)
				reachable(t, ctx, c.(*redis.Client))
			}
			requireKeys(t, ctx, c, "k", 20)
		})
	}
}
