package kubernetes_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"clouddb"
	"clouddb/driver/kubernetes"
)

// TestUnschedulable: a database too large for any node waits (ErrServerStarting, with the
// scheduler's reason), not an error for good: the reconciler tries again. Made smaller,
// it runs: its pod that was never scheduled, made with the old size, is replaced.
func TestUnschedulable(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx := ctxFor(t, 3*time.Minute)
	impatient := newDriverWith(t, cluster.client, cluster.ns, func(c *kubernetes.Config) { c.StartTimeout = 3 * time.Second })
	in := instance(t, 170, "none")
	in.MaxMemoryBytes = 1 << 40 // 1 TiB: no node of the test cluster has it
	t.Cleanup(func() { _ = impatient.Remove(ctxFor(t, time.Minute), in.DatabaseID) })
	err := impatient.Ensure(ctx, in)
	if !errors.Is(err, clouddb.ErrServerStarting) || !strings.Contains(err.Error(), "nschedulable") {
		t.Fatalf("Ensure of a database no node can hold = %v, want ErrServerStarting saying it is unschedulable", err)
	}
	if up, rerr := impatient.Running(ctx, in); up {
		t.Fatalf("Running = %v, %v; want false", up, rerr)
	}

	in.MaxMemoryBytes = 100 << 20
	ensureRunning(t, ctx, newDriver(t, cluster.client, cluster.ns), in)
	if err := connect(t, impatient, in, "", in.Password).Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}
