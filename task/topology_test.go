package task

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// TestFootprint: a database costs every server's maxmemory (its shard's share of the
// dataset, rounded up; a replica has its primary's) and every server's own footprint.
func TestFootprint(t *testing.T) {
	t.Parallel()
	const gib, mib = int64(1 << 30), int64(1 << 20)
	oss := func(ops int) *clouddb.Throughput { return &clouddb.Throughput{By: "operations-per-second", Value: ops} }
	cases := []struct {
		name string
		spec clouddb.DatabaseSpec
		want int64
	}{
		{"one server", clouddb.DatabaseSpec{DatasetSizeInGB: 1, ReplicaInMemoryLimit: true}, gib + 12*mib},
		{"with a replica", clouddb.DatabaseSpec{DatasetSizeInGB: 1, Replication: true, ReplicaInMemoryLimit: true}, 2 * (gib + 12*mib)},
		{"memoryLimitInGb with a replica", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true, ReplicaInMemoryLimit: true}, 2 * (gib/2 + 12*mib)},
		{"3 shards", clouddb.DatabaseSpec{DatasetSizeInGB: 1, SupportOSSClusterAPI: true, ThroughputMeasurement: oss(75000), ReplicaInMemoryLimit: true},
			3 * (357913942 + 12*mib)},
		{"3 shards with replicas: 6 servers", clouddb.DatabaseSpec{DatasetSizeInGB: 3, Replication: true, SupportOSSClusterAPI: true, ThroughputMeasurement: oss(75000), ReplicaInMemoryLimit: true},
			6 * (gib + 12*mib)},
		{"sized before replicas counted", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true}, 2 * (gib + 12*mib)},
		{"near 0", clouddb.DatabaseSpec{DatasetSizeInGB: 1e-10, ReplicaInMemoryLimit: true}, 12 * mib},
	}
	for _, c := range cases {
		require.Equal(t, c.want, footprint(&c.spec), c.name)
	}
}

// topologyFixture wraps budgetFixture (1 GiB for databases) with helpers to create and
// update databases through the engine.
type topologyFixture struct {
	t     *testing.T
	ctx   context.Context
	store *sqlite.DB
	e     *Engine
	sub   *clouddb.Subscription
}

func newTopologyFixture(t *testing.T) *topologyFixture {
	ctx, store, e, sub := budgetFixture(t)
	return &topologyFixture{t: t, ctx: ctx, store: store, e: e, sub: sub}
}

func (f *topologyFixture) create(spec clouddb.DatabaseSpec) *clouddb.Task {
	f.t.Helper()
	spec.Password = "pw"
	return runTask(f.t, f.ctx, f.store, f.e, &clouddb.Task{AccountID: f.sub.AccountID, SubscriptionID: f.sub.ID, CommandType: clouddb.CommandDatabaseCreate}, spec)
}

func (f *topologyFixture) mustCreate(spec clouddb.DatabaseSpec) int {
	f.t.Helper()
	got := f.create(spec)
	require.Equal(f.t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
	return got.ResourceID
}

func (f *topologyFixture) update(id int, u clouddb.DatabaseUpdate) *clouddb.Task {
	f.t.Helper()
	return runTask(f.t, f.ctx, f.store, f.e, &clouddb.Task{AccountID: f.sub.AccountID, SubscriptionID: f.sub.ID, DatabaseID: id, CommandType: clouddb.CommandDatabaseUpdate}, u)
}

func (f *topologyFixture) database(id int) *clouddb.Database {
	f.t.Helper()
	var d *clouddb.Database
	require.NoError(f.t, f.store.View(f.ctx, func(tx clouddb.Tx) error {
		var err error
		d, err = tx.Database(f.ctx, f.sub.AccountID, id)
		return err
	}))
	return d
}

func (f *topologyFixture) subscription() *clouddb.Subscription {
	f.t.Helper()
	var s *clouddb.Subscription
	require.NoError(f.t, f.store.View(f.ctx, func(tx clouddb.Tx) error {
		var err error
		s, err = tx.Subscription(f.ctx, f.sub.AccountID, f.sub.ID)
		return err
	}))
	return s
}

// A replicated database takes its dataset twice in the host budget, and a create past it
// fails, a dry run alike.
func TestBudgetCountsReplica(t *testing.T) {
	t.Parallel()
	f := newTopologyFixture(t)
	// 2 × (409.6 + 12) MiB = 843.2 MiB of 1024.
	id := f.mustCreate(clouddb.DatabaseSpec{Name: "replicated", DatasetSizeInGB: 0.4, Replication: true})
	d := f.database(id)
	require.True(t, d.Spec.ReplicaInMemoryLimit)
	require.Equal(t, int64(429496729), clouddb.InstanceOf(d).MaxMemoryBytes, "the dataset, not doubled")

	got := f.create(clouddb.DatabaseSpec{Name: "dry", DatasetSizeInGB: 0.1, Replication: true, DryRun: true})
	require.Equal(t, clouddb.TaskFailed, got.Status, "a dry run is refused like the create: 2 × 114.4 MiB more do not fit")
	require.Equal(t, clouddb.ErrTypeNoMemory, got.Error.Type)

	// memoryLimitInGb 0.2 with a replica is a 0.1 GB dataset twice: 228.8 MiB, too much.
	got = f.create(clouddb.DatabaseSpec{Name: "by-memory", MemoryLimitInGB: 0.2, Replication: true})
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, "database: this host keeps 1 GB of memory for databases (--db-memory), 0.823 GB of it is taken, and this database needs 0.223 GB",
		got.Error.Description)

	f.mustCreate(clouddb.DatabaseSpec{Name: "single", DatasetSizeInGB: 0.1})
}

// Turning replication on for a live database is refused, with the rule named, when the
// host budget cannot hold the replica; nothing changes, and a dry run is refused alike.
// Where the replica fits, the update goes through.
func TestReplicationOnRefusedOverBudget(t *testing.T) {
	t.Parallel()
	f := newTopologyFixture(t)
	big := f.mustCreate(clouddb.DatabaseSpec{Name: "big", DatasetSizeInGB: 0.45})    // 472.8 MiB
	small := f.mustCreate(clouddb.DatabaseSpec{Name: "small", DatasetSizeInGB: 0.1}) // 114.4 MiB
	before := f.database(big)

	on := true
	for _, dry := range []bool{false, true} {
		got := f.update(big, clouddb.DatabaseUpdate{Replication: &on, DryRun: dry})
		require.Equal(t, clouddb.TaskFailed, got.Status, "dry run %v", dry)
		require.Equal(t, clouddb.ErrTypeTopologyExceedsHostMemory, got.Error.Type)
		require.Equal(t, clouddb.StatusText(http.StatusConflict), got.Error.Status)
		require.Equal(t, "database: turning replication on (a replica beside each primary, with the same maxmemory) would run "+
			"2 servers (1 shard, each with a replica) of 0.45 GB maxmemory instead of 1 server (1 shard) of 0.45 GB maxmemory; "+
			"every server counts its maxmemory and 0.012 GB of its own, and this host keeps 1 GB of memory for databases (--db-memory), "+
			"0.112 GB of it is taken, and this database needs 0.923 GB", got.Error.Description)
	}
	after := f.database(big)
	require.Equal(t, before.Spec, after.Spec)
	require.Equal(t, before.Generation, after.Generation)

	got := f.update(small, clouddb.DatabaseUpdate{Replication: &on})
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
	require.True(t, f.database(small).Spec.Replication)
}

// Growing the shards adds servers, each with its own footprint: past the budget the
// update is refused with the rule named.
func TestShardGrowthRefused(t *testing.T) {
	t.Parallel()
	f := newTopologyFixture(t)
	id := f.mustCreate(clouddb.DatabaseSpec{Name: "cluster", DatasetSizeInGB: 0.8, SupportOSSClusterAPI: true,
		ThroughputMeasurement: &clouddb.Throughput{By: "operations-per-second", Value: 25000}})

	// clouddb does not reshard a live database: the shards stay as they are.
	got := f.update(id, clouddb.DatabaseUpdate{ThroughputMeasurement: &clouddb.Throughput{By: "number-of-shards", Value: 2}})
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, clouddb.ErrTypeTopologyChangeNotSupported, got.Error.Type)
	require.Contains(t, got.Error.Description, "throughputMeasurement asks for 2 shards and the database has 1")
	require.Equal(t, 1, f.database(id).Spec.NumberOfShards())
	// A throughput that keeps the shard count is a change like any other.
	got = f.update(id, clouddb.DatabaseUpdate{ThroughputMeasurement: &clouddb.Throughput{By: "operations-per-second", Value: 20000}})
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)

	// Past MaxShards the update is refused before anything else.
	got = f.update(id, clouddb.DatabaseUpdate{ThroughputMeasurement: &clouddb.Throughput{By: "operations-per-second", Value: 1_000_000}})
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, clouddb.ErrTypeInvalidShardsCount, got.Error.Type)
	require.Equal(t, "400 BAD_REQUEST", got.Error.Status)

	// Turning the OSS Cluster API off, and replicaOf into a cluster, are refused too.
	got = f.update(id, clouddb.DatabaseUpdate{SupportOSSClusterAPI: new(false)})
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, clouddb.ErrTypeTopologyChangeNotSupported, got.Error.Type)
	require.True(t, f.database(id).Spec.SupportOSSClusterAPI)
}

// Shards beyond the host budget are refused when the cluster is made.
func TestShardsOverBudgetRefusedAtCreate(t *testing.T) {
	t.Parallel()
	f := newTopologyFixture(t)
	f.mustCreate(clouddb.DatabaseSpec{Name: "other", DatasetSizeInGB: 0.1})
	// 8 shards: 819.2 + 8 × 12 MiB = 915.2, and 114.4: 1029.6 MiB of 1024.
	got := f.create(clouddb.DatabaseSpec{Name: "cluster", DatasetSizeInGB: 0.8, SupportOSSClusterAPI: true,
		ThroughputMeasurement: &clouddb.Throughput{By: "number-of-shards", Value: 8}})
	require.Equal(t, clouddb.TaskFailed, got.Status)
	require.Equal(t, clouddb.ErrTypeNoMemory, got.Error.Type)
	// 7 shards: 1017.6 MiB fits.
	got = f.create(clouddb.DatabaseSpec{Name: "cluster", DatasetSizeInGB: 0.8, SupportOSSClusterAPI: true,
		ThroughputMeasurement: &clouddb.Throughput{By: "number-of-shards", Value: 7}})
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
}

// A database stored with memoryLimitInGb and replication before memoryLimitInGb counted
// the replica keeps its maxmemory, and an update that does not grow it is not refused
// even though its replica now puts the host over budget; a create no longer fits.
func TestSizedBeforeReplicasKeepsMaxMemory(t *testing.T) {
	t.Parallel()
	f := newTopologyFixture(t)
	old := &clouddb.Database{AccountID: f.sub.AccountID, SubscriptionID: f.sub.ID, Status: clouddb.DatabaseActive, Port: 30000, Password: "pw",
		Spec: clouddb.DatabaseSpec{Name: "old", MemoryLimitInGB: 0.5, Replication: true}, Generation: 1}
	require.NoError(t, f.store.Update(f.ctx, func(tx clouddb.Tx) error { return tx.CreateDatabase(f.ctx, old) }))

	got := f.create(clouddb.DatabaseSpec{Name: "new", DatasetSizeInGB: 0.1})
	require.Equal(t, clouddb.TaskFailed, got.Status, "2 × (512 + 12) MiB are taken")
	require.Equal(t, clouddb.ErrTypeNoMemory, got.Error.Type)

	// Terraform re-sends the size on every PUT.
	on := true
	name := "renamed"
	got = f.update(old.ID, clouddb.DatabaseUpdate{Name: &name, MemoryLimitInGB: new(0.5), Replication: &on})
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
	d := f.database(old.ID)
	require.Equal(t, int64(1<<29), clouddb.InstanceOf(d).MaxMemoryBytes, "each server keeps 0.5 GB")
	memory, dataset := d.Spec.ShownSizes()
	require.Equal(t, []float64{0.5, 0.5}, []float64{memory, dataset}, "and reads back as before")

	// A smaller size is a new size: the current rule, and room again.
	got = f.update(old.ID, clouddb.DatabaseUpdate{MemoryLimitInGB: new(0.4)})
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
	require.Equal(t, int64(214748364), clouddb.InstanceOf(f.database(old.ID)).MaxMemoryBytes)
	f.mustCreate(clouddb.DatabaseSpec{Name: "new", DatasetSizeInGB: 0.1})
}

// The subscription's capacity counts every copy: a replicated 0.5 GB dataset fills a
// 1 GB subscription, and the next database resizes it.
func TestCapacityCountsReplica(t *testing.T) {
	t.Parallel()
	f := newTopologyFixture(t)
	f.e.MemoryLimit = 0 // no host budget: only the capacity is at stake
	f.sub.CapacityGB = 1
	require.NoError(t, f.store.Update(f.ctx, func(tx clouddb.Tx) error { return tx.UpdateSubscription(f.ctx, f.sub) }))

	f.mustCreate(clouddb.DatabaseSpec{Name: "replicated", DatasetSizeInGB: 0.5, Replication: true})
	s := f.subscription()
	require.Equal(t, clouddb.SubscriptionActive, s.Status)
	require.Equal(t, 1.0, s.CapacityGB)

	f.mustCreate(clouddb.DatabaseSpec{Name: "more", DatasetSizeInGB: 0.1})
	s = f.subscription()
	require.Equal(t, clouddb.SubscriptionPending, s.Status, "1.1 GB do not fit 1 GB: resized")
	require.Equal(t, 2.0, s.CapacityGB)
}

// A database stored before memoryLimitInGb counted the replica counts every copy in its
// subscription now, but an update that does not grow it does not resize the subscription.
func TestCapacityNotResizedForUnchangedDatabase(t *testing.T) {
	t.Parallel()
	f := newTopologyFixture(t)
	f.e.MemoryLimit = 0
	f.sub.CapacityGB = 1
	old := &clouddb.Database{AccountID: f.sub.AccountID, SubscriptionID: f.sub.ID, Status: clouddb.DatabaseActive, Port: 30000, Password: "pw",
		Spec: clouddb.DatabaseSpec{Name: "old", MemoryLimitInGB: 1, Replication: true}, Generation: 1}
	require.NoError(t, f.store.Update(f.ctx, func(tx clouddb.Tx) error {
		if err := tx.UpdateSubscription(f.ctx, f.sub); err != nil {
			return err
		}
		return tx.CreateDatabase(f.ctx, old)
	}))
	require.Equal(t, 2.0, old.Spec.SizeGB())

	name := "renamed"
	got := f.update(old.ID, clouddb.DatabaseUpdate{Name: &name})
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
	s := f.subscription()
	require.Equal(t, clouddb.SubscriptionActive, s.Status)
	require.Equal(t, 1.0, s.CapacityGB)

	// Growing it does resize: 2.5 GB (dataset 1.25 twice) past 1.
	got = f.update(old.ID, clouddb.DatabaseUpdate{MemoryLimitInGB: new(2.5)})
	require.Equal(t, clouddb.TaskCompleted, got.Status, "%+v", got.Error)
	s = f.subscription()
	require.Equal(t, clouddb.SubscriptionPending, s.Status)
	require.Equal(t, 3.0, s.CapacityGB)
}
