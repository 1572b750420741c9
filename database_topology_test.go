package clouddb_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestDatabaseMemory pins how memoryLimitInGb and datasetSizeInGb map to the dataset (the
// maxmemory of the primaries together, and of the replicas together), to what the
// subscription's capacity counts (SizeGB: every copy) and to what a GET shows.
func TestDatabaseMemory(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	cases := []struct {
		name                     string
		spec                     clouddb.DatabaseSpec
		dataset, size            float64
		shownMemory, shownDatset float64
		maxMemory                int64
		servers                  int
	}{
		{"dataset alone", clouddb.DatabaseSpec{DatasetSizeInGB: 1, ReplicaInMemoryLimit: true}, 1, 1, 1, 1, gib, 1},
		{"dataset with a replica", clouddb.DatabaseSpec{DatasetSizeInGB: 1, Replication: true, ReplicaInMemoryLimit: true}, 1, 2, 2, 1, gib, 2},
		{"memory alone", clouddb.DatabaseSpec{MemoryLimitInGB: 1, ReplicaInMemoryLimit: true}, 1, 1, 1, 1, gib, 1},
		{"memory with a replica", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true, ReplicaInMemoryLimit: true}, 0.5, 1, 1, 0.5, gib / 2, 2},
		{"memory 0.3 with a replica reads back exactly", clouddb.DatabaseSpec{MemoryLimitInGB: 0.3, Replication: true, ReplicaInMemoryLimit: true}, 0.15, 0.3, 0.3, 0.15, 161061273, 2},
		{"both: kept as sent, the dataset decides", clouddb.DatabaseSpec{MemoryLimitInGB: 0.5, DatasetSizeInGB: 0.25, ReplicaInMemoryLimit: true}, 0.25, 0.25, 0.5, 0.25, gib / 4, 1},
		{"sharded with replicas", clouddb.DatabaseSpec{DatasetSizeInGB: 3, Replication: true, SupportOSSClusterAPI: true,
			ThroughputMeasurement: &clouddb.Throughput{By: "operations-per-second", Value: 75000}, ReplicaInMemoryLimit: true}, 3, 6, 6, 3, 3 * gib, 6},
		// Stored before memoryLimitInGb counted the replica: every server keeps the
		// maxmemory it had, and the GET shows what it showed then.
		{"before: memory with a replica", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true}, 1, 2, 1, 1, gib, 2},
		{"before: both with a replica", clouddb.DatabaseSpec{MemoryLimitInGB: 1, DatasetSizeInGB: 0.25, Replication: true}, 1, 2, 1, 0.25, gib, 2},
		{"before: dataset with a replica (same rule)", clouddb.DatabaseSpec{DatasetSizeInGB: 1, Replication: true}, 1, 2, 2, 1, gib, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.dataset, c.spec.DatasetSizeGB())
			require.Equal(t, c.size, c.spec.SizeGB())
			memory, dataset := c.spec.ShownSizes()
			require.Equal(t, c.shownMemory, memory, "memoryLimitInGb shown")
			require.Equal(t, c.shownDatset, dataset, "datasetSizeInGb shown")
			require.Equal(t, c.maxMemory, c.spec.MaxMemoryBytes())
			require.Equal(t, c.servers, c.spec.Servers())
		})
	}
}

// TestNumberOfShards pins the shard formula: one shard without the OSS Cluster API, else
// one per OpsPerShard operations per second, rounded up, or the count given, at least 1.
func TestNumberOfShards(t *testing.T) {
	t.Parallel()
	ops := func(v int) *clouddb.Throughput { return &clouddb.Throughput{By: "operations-per-second", Value: v} }
	shards := func(v int) *clouddb.Throughput { return &clouddb.Throughput{By: "number-of-shards", Value: v} }
	cases := []struct {
		name string
		oss  bool
		t    *clouddb.Throughput
		want int
	}{
		{"no cluster API, high throughput", false, ops(1_000_000), 1},
		{"no cluster API, shards asked", false, shards(4), 1},
		{"no throughput", true, nil, 1},
		{"0 ops", true, ops(0), 1},
		{"1 op", true, ops(1), 1},
		{"one shard's worth", true, ops(clouddb.OpsPerShard), 1},
		{"one op more", true, ops(clouddb.OpsPerShard + 1), 2},
		{"the most", true, ops(clouddb.MaxShards * clouddb.OpsPerShard), clouddb.MaxShards},
		{"past the most", true, ops(clouddb.MaxShards*clouddb.OpsPerShard + 1), clouddb.MaxShards + 1},
		{"no overflow", true, ops(math.MaxInt), math.MaxInt/clouddb.OpsPerShard + 1},
		{"0 shards", true, shards(0), 1},
		{"5 shards", true, shards(5), 5},
		{"the default throughput", true, func() *clouddb.Throughput { d := clouddb.DefaultThroughput(); return &d }(), 1},
	}
	for _, c := range cases {
		spec := clouddb.DatabaseSpec{SupportOSSClusterAPI: c.oss, ThroughputMeasurement: c.t}
		require.Equal(t, c.want, spec.NumberOfShards(), c.name)
	}
}

// validSpec is a create body clouddb accepts, for the rules below to break one at a time.
func validSpec(f func(*clouddb.DatabaseSpec)) clouddb.DatabaseSpec {
	s := clouddb.DatabaseSpec{Name: "d", DatasetSizeInGB: 1, Password: "pw", ReplicaInMemoryLimit: true}
	f(&s)
	return s
}

// TestTopologyRules: each rule of replication and clustering refuses with its catalogued
// code, and what it allows passes.
func TestTopologyRules(t *testing.T) {
	t.Parallel()
	custom := []string{`(?<tag>.*)`}
	cases := []struct {
		name string
		f    func(*clouddb.DatabaseSpec)
		typ  string // "" = accepted
	}{
		{"external endpoint without the cluster API", func(s *clouddb.DatabaseSpec) { s.UseExternalEndpointForOSSClusterAPI = true },
			clouddb.ErrTypeExternalEndpointNoCluster},
		{"external endpoint with the cluster API", func(s *clouddb.DatabaseSpec) {
			s.UseExternalEndpointForOSSClusterAPI, s.SupportOSSClusterAPI = true, true
		}, ""},
		{"custom rules with the cluster API", func(s *clouddb.DatabaseSpec) { s.SupportOSSClusterAPI, s.RegexRules = true, custom },
			clouddb.ErrTypeOSSClusterCustomRegex},
		{"default rules with the cluster API", func(s *clouddb.DatabaseSpec) {
			s.SupportOSSClusterAPI, s.RegexRules = true, append([]string(nil), clouddb.DefaultRegexRules...)
		}, ""},
		{"custom rules without the cluster API", func(s *clouddb.DatabaseSpec) { s.RegexRules = custom }, ""},
		{"too many shards by throughput", func(s *clouddb.DatabaseSpec) {
			s.SupportOSSClusterAPI = true
			s.ThroughputMeasurement = &clouddb.Throughput{By: "operations-per-second", Value: clouddb.MaxShards*clouddb.OpsPerShard + 1}
		}, clouddb.ErrTypeInvalidShardsCount},
		{"the most shards by throughput", func(s *clouddb.DatabaseSpec) {
			s.SupportOSSClusterAPI = true
			s.ThroughputMeasurement = &clouddb.Throughput{By: "operations-per-second", Value: clouddb.MaxShards * clouddb.OpsPerShard}
		}, ""},
		{"a huge throughput", func(s *clouddb.DatabaseSpec) {
			s.SupportOSSClusterAPI = true
			s.ThroughputMeasurement = &clouddb.Throughput{By: "operations-per-second", Value: math.MaxInt}
		}, clouddb.ErrTypeInvalidShardsCount},
		{"too many shards by count", func(s *clouddb.DatabaseSpec) {
			s.SupportOSSClusterAPI = true
			s.ThroughputMeasurement = &clouddb.Throughput{By: "number-of-shards", Value: clouddb.MaxShards + 1}
		}, clouddb.ErrTypeInvalidShardsCount},
		{"shards asked without the cluster API run as one", func(s *clouddb.DatabaseSpec) {
			s.ThroughputMeasurement = &clouddb.Throughput{By: "number-of-shards", Value: clouddb.MaxShards + 1}
		}, ""},
		{"memory too small for a replica", func(s *clouddb.DatabaseSpec) { s.DatasetSizeInGB, s.MemoryLimitInGB, s.Replication = 0, 0.1, true },
			clouddb.ErrTypeDatabaseInvalidSize},
		{"memory enough for a replica", func(s *clouddb.DatabaseSpec) { s.DatasetSizeInGB, s.MemoryLimitInGB, s.Replication = 0, 0.2, true }, ""},
		{"memcached with the cluster API", func(s *clouddb.DatabaseSpec) { s.Protocol, s.SupportOSSClusterAPI = "memcached", true },
			clouddb.ErrTypeMemcachedNoOSSCluster},
	}
	for _, c := range cases {
		spec := validSpec(c.f)
		err := spec.ValidateCreate()
		if c.typ == "" {
			require.NoError(t, err, c.name)
			continue
		}
		e := clouddb.AsError(err)
		require.NotNil(t, e, "%s: %v", c.name, err)
		require.Equal(t, 400, e.Status, c.name)
		require.Equal(t, c.typ, e.Type, c.name)
	}

	spec := validSpec(func(s *clouddb.DatabaseSpec) {
		s.SupportOSSClusterAPI = true
		s.ThroughputMeasurement = &clouddb.Throughput{By: "operations-per-second", Value: 500000}
	})
	require.Equal(t, "database: throughputMeasurement asks for 20 shards, and a database has at most 16 (with the OSS Cluster API, one shard per 25000 operations per second, rounded up, or the value itself with by number-of-shards): at most 400000 operations per second",
		spec.ValidateCreate().(*clouddb.Error).Description)
}

// TestUpdateSizes: the sizes an update gives replace the stored ones (one alone makes
// the other derived again); a database stored before memoryLimitInGb counted the replica
// keeps its maxmemory until an update gives it a size it does not already show.
func TestUpdateSizes(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	yes, no := true, false
	cases := []struct {
		name                 string
		spec                 clouddb.DatabaseSpec
		u                    clouddb.DatabaseUpdate
		dataset              float64
		shownMemory, shownDS float64
		current              bool
	}{
		{"replication off keeps memoryLimitInGb", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true, ReplicaInMemoryLimit: true},
			clouddb.DatabaseUpdate{Replication: &no}, 1, 1, 1, true},
		{"replication on keeps datasetSizeInGb", clouddb.DatabaseSpec{DatasetSizeInGB: 1, ReplicaInMemoryLimit: true},
			clouddb.DatabaseUpdate{Replication: &yes}, 1, 2, 1, true},
		{"memory replaces the dataset", clouddb.DatabaseSpec{DatasetSizeInGB: 1, Replication: true, ReplicaInMemoryLimit: true},
			clouddb.DatabaseUpdate{MemoryLimitInGB: f(4)}, 2, 4, 2, true},
		{"dataset replaces both", clouddb.DatabaseSpec{MemoryLimitInGB: 0.5, DatasetSizeInGB: 0.25, ReplicaInMemoryLimit: true},
			clouddb.DatabaseUpdate{DatasetSizeInGB: f(1)}, 1, 1, 1, true},
		{"before: the same memory re-sent", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true},
			clouddb.DatabaseUpdate{MemoryLimitInGB: f(1), Replication: &yes}, 1, 1, 1, false},
		{"before: the dataset shown re-sent", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true},
			clouddb.DatabaseUpdate{DatasetSizeInGB: f(1)}, 1, 1, 1, false},
		{"before: replication turned on", clouddb.DatabaseSpec{MemoryLimitInGB: 1},
			clouddb.DatabaseUpdate{Replication: &yes}, 1, 1, 1, false},
		{"before: a new memory", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true},
			clouddb.DatabaseUpdate{MemoryLimitInGB: f(3)}, 1.5, 3, 1.5, true},
		{"before: a new dataset", clouddb.DatabaseSpec{MemoryLimitInGB: 1, Replication: true},
			clouddb.DatabaseUpdate{DatasetSizeInGB: f(0.5)}, 0.5, 1, 0.5, true},
	}
	for _, c := range cases {
		d := &clouddb.Database{Spec: c.spec}
		d.Spec.Name = "d"
		require.NoError(t, c.u.Apply(d), c.name)
		require.Equal(t, c.dataset, d.Spec.DatasetSizeGB(), c.name)
		memory, dataset := d.Spec.ShownSizes()
		require.Equal(t, c.shownMemory, memory, c.name)
		require.Equal(t, c.shownDS, dataset, c.name)
		require.Equal(t, c.current, d.Spec.ReplicaInMemoryLimit, c.name)
	}

	// The rules hold on the merged spec: an update cannot turn the cluster API off under
	// an external endpoint, nor leave a replica too small a dataset.
	d := &clouddb.Database{Spec: validSpec(func(s *clouddb.DatabaseSpec) {
		s.SupportOSSClusterAPI, s.UseExternalEndpointForOSSClusterAPI = true, true
	})}
	err := (&clouddb.DatabaseUpdate{SupportOSSClusterAPI: &no}).Apply(d)
	require.Equal(t, clouddb.ErrTypeExternalEndpointNoCluster, clouddb.AsError(err).Type)
	d = &clouddb.Database{Spec: validSpec(func(s *clouddb.DatabaseSpec) { s.DatasetSizeInGB, s.MemoryLimitInGB = 0, 0.1 })}
	err = (&clouddb.DatabaseUpdate{Replication: &yes}).Apply(d)
	require.Equal(t, clouddb.ErrTypeDatabaseInvalidSize, clouddb.AsError(err).Type)
}
