package clouddb

import "slices"

// Replication, shards and memory.
//
// A database holds a dataset of DatasetSizeGB: with the OSS Cluster API it is split
// across NumberOfShards primaries, and with replication every primary has a replica of
// the same maxmemory. As in the real API, memoryLimitInGb counts every copy
// (memoryLimitInGb = 2 × datasetSizeInGb with replication) and datasetSizeInGb one. A
// request may give either (Terraform gives exactly one): the one given is kept as sent
// and reads back as sent, the other is derived from it. When a request gives both, both
// are kept as sent and datasetSizeInGb decides the dataset.

// DefaultReplication is the replication of a database whose create leaves the field out.
// The real API defaults to true; clouddb keeps false, because a replica doubles the memory
// a database takes on the one host every server runs on. (The field is a plain bool in
// DatabaseSpec, so an absent one decodes to this value.)
const DefaultReplication = false

// DefaultRegexRules are the hashing rules of the standard policy, by ordinal: the key's
// hash tag when it has one, else the whole key. Terraform maps exactly this pair to an
// empty hashing_policy.
var DefaultRegexRules = []string{`.*\{(?<tag>.*)\}.*`, `(?<tag>.*)`}

// Error types of replication and clustering, as the real API catalogues them.
const (
	ErrTypeInvalidShardsCount        = "DATABASE_INVALID_SHARDS_COUNT"
	ErrTypeExternalEndpointNoCluster = "DATABASE_EXTERNAL_ENDPOINT_WITHOUT_OSS_CLUSTER"
	ErrTypeOSSClusterCustomRegex     = "DATABASE_OSS_CLUSTER_CUSTOM_REGEX_NOT_SUPPORTED"
	ErrTypeMemcachedNoOSSCluster     = "DATABASE_MEMCACHED_NOT_SUPPORT_OSS_CLUSTER_API"
)

// ErrTypeTopologyExceedsHostMemory is clouddb's own (the real API has no host to fill):
// a change that adds servers to a database (a replica, shards) does not fit the memory
// the host keeps for databases.
const ErrTypeTopologyExceedsHostMemory = "DATABASE_TOPOLOGY_EXCEEDS_HOST_MEMORY"

// The throughputMeasurement.by values.
const (
	defaultThroughputBy = "operations-per-second"
	throughputByShards  = "number-of-shards"
)

// DefaultThroughput is the throughputMeasurement a database created without one shows:
// what one shard is sized for, so that it agrees with NumberOfShards (1).
func DefaultThroughput() Throughput {
	return Throughput{By: defaultThroughputBy, Value: OpsPerShard}
}

// Copies is how many servers hold each shard's data: the primary, and its replica with
// replication.
func (s *DatabaseSpec) Copies() int {
	if s.Replication {
		return 2
	}
	return 1
}

// Servers is the number of redis-server processes the database runs.
func (s *DatabaseSpec) Servers() int { return s.NumberOfShards() * s.Copies() }

// DatasetSizeGB is the data the database holds: the maxmemory of its primaries together
// (each shard has its share), and of its replicas together.
func (s *DatabaseSpec) DatasetSizeGB() float64 {
	if s.sizedBeforeReplicas() {
		// Every server keeps the maxmemory it had, so that the replica the database now
		// runs does not halve what it holds. Its first update that gives it another
		// size moves it to the current rule (see DatabaseUpdate.applySizes).
		return s.MemoryLimitInGB
	}
	if s.DatasetSizeInGB > 0 {
		return s.DatasetSizeInGB
	}
	return s.MemoryLimitInGB / float64(s.Copies())
}

// sizedBeforeReplicas reports whether the database was stored with a memoryLimitInGb
// before that counted the replica: its memoryLimitInGb was then each server's maxmemory.
// (One sized by datasetSizeInGb alone means the same under both rules.)
func (s *DatabaseSpec) sizedBeforeReplicas() bool {
	return !s.ReplicaInMemoryLimit && s.MemoryLimitInGB > 0
}

// ShownSizes are the memoryLimitInGb and datasetSizeInGb a GET shows: each as sent, the
// one not sent derived from the other. Dividing or multiplying by 1 or 2 is exact in
// floating point, so a size sent alone reads back bit for bit. A database stored before
// memoryLimitInGb counted the replica shows what it showed then.
func (s *DatabaseSpec) ShownSizes() (memoryLimitGB, datasetSizeGB float64) {
	d := s.DatasetSizeGB()
	memoryLimitGB, datasetSizeGB = s.MemoryLimitInGB, s.DatasetSizeInGB
	if memoryLimitGB == 0 {
		memoryLimitGB = d * float64(s.Copies())
	}
	if datasetSizeGB == 0 {
		datasetSizeGB = d
	}
	return memoryLimitGB, datasetSizeGB
}

// UseCurrentSizeRule marks a spec made now: memoryLimitInGb counts the replica. Every
// database created since replicas run has it; see DatasetSizeGB for those before.
func (s *DatabaseSpec) UseCurrentSizeRule() { s.ReplicaInMemoryLimit = true }

// applySizes merges the sizes an update gives: the ones given replace both stored ones,
// so that one given alone makes the other derived from it again. A database stored
// before memoryLimitInGb counted the replica keeps its sizes, and the maxmemory they gave
// it, when the update only repeats what it shows (Terraform re-sends the size on every
// PUT): only a new size moves it to the current rule.
func (u *DatabaseUpdate) applySizes(s *DatabaseSpec) {
	if u.MemoryLimitInGB == nil && u.DatasetSizeInGB == nil {
		return
	}
	if s.sizedBeforeReplicas() {
		memory, dataset := s.ShownSizes()
		if (u.MemoryLimitInGB == nil || *u.MemoryLimitInGB == memory) && (u.DatasetSizeInGB == nil || *u.DatasetSizeInGB == dataset) {
			return
		}
	}
	s.MemoryLimitInGB, s.DatasetSizeInGB = 0, 0
	if u.MemoryLimitInGB != nil {
		s.MemoryLimitInGB = *u.MemoryLimitInGB
	}
	if u.DatasetSizeInGB != nil {
		s.DatasetSizeInGB = *u.DatasetSizeInGB
	}
	s.UseCurrentSizeRule()
}

// IsDefaultRegexRules reports whether rules are the standard policy's: none, or exactly
// DefaultRegexRules.
func IsDefaultRegexRules(rules []string) bool {
	return len(rules) == 0 || slices.Equal(rules, DefaultRegexRules)
}

// validateTopology checks replication, clustering and the dataset they leave, on the
// merged spec, as the processing phase does for every other database rule.
func (s *DatabaseSpec) validateTopology() error {
	if s.UseExternalEndpointForOSSClusterAPI && !s.SupportOSSClusterAPI {
		// false is always accepted: the provider sends it on every PUT.
		return Invalid(ErrTypeExternalEndpointNoCluster,
			"database: useExternalEndpointForOSSClusterApi is only valid with supportOSSClusterApi: true")
	}
	if s.SupportOSSClusterAPI && !IsDefaultRegexRules(s.RegexRules) {
		return Invalid(ErrTypeOSSClusterCustomRegex,
			"database: the OSS Cluster API works only with the standard hashing policy: regexRules must be empty or exactly the default pair %q", DefaultRegexRules)
	}
	if n := s.NumberOfShards(); n > MaxShards {
		return Invalid(ErrTypeInvalidShardsCount,
			"database: throughputMeasurement asks for %d shards, and a database has at most %d (with the OSS Cluster API, one shard per %d operations per second, rounded up, or the value itself with by %s): at most %d operations per second",
			n, MaxShards, OpsPerShard, throughputByShards, MaxShards*OpsPerShard)
	}
	if s.ReplicaInMemoryLimit && s.DatasetSizeInGB == 0 && s.MemoryLimitInGB > 0 && s.DatasetSizeGB() < MinDatabaseSizeGB {
		return Invalid(ErrTypeDatabaseInvalidSize,
			"database: memoryLimitInGb %g leaves a dataset of %g GB with replication (memoryLimitInGb = 2 × datasetSizeInGb), and a dataset must be at least %g GB",
			s.MemoryLimitInGB, s.DatasetSizeGB(), MinDatabaseSizeGB)
	}
	return nil
}

// ErrTypeTopologyChangeNotSupported is clouddb's own: a change of a live database's
// topology that clouddb cannot make without losing data or its endpoint (resharding,
// taking the OSS Cluster API off, removing a cluster's replicas), and replicaOf into a
// cluster.
const ErrTypeTopologyChangeNotSupported = "DATABASE_TOPOLOGY_CHANGE_NOT_SUPPORTED"

// CheckReplicaOfTopology refuses replicaOf sources for an OSS Cluster database: clouddb
// copies a source's stream into one server.
func (s *DatabaseSpec) CheckReplicaOfTopology(replicaOf []string) error {
	if s.SupportOSSClusterAPI && len(replicaOf) > 0 {
		return Invalid(ErrTypeTopologyChangeNotSupported,
			"database: replicaOf is not supported with supportOSSClusterApi: true: clouddb copies a source into one server, not across shards")
	}
	return nil
}

// CheckTopologyChange refuses the changes of a live database's topology, from old to s,
// that clouddb does not make: the number of shards of an OSS Cluster database (there is
// no resharding), the OSS Cluster API turned on or off, and replication turned off on a
// cluster. Replication on or off without the OSS Cluster API, and on for a cluster, are
// made live.
func CheckTopologyChange(old, s *DatabaseSpec) error {
	oldShards := 1
	if old.SupportOSSClusterAPI {
		oldShards = old.NumberOfShards()
	}
	switch {
	case !old.SupportOSSClusterAPI && s.SupportOSSClusterAPI:
		return Invalid(ErrTypeTopologyChangeNotSupported,
			"database: supportOSSClusterApi cannot be turned on for a live database (its server would restart as a cluster node): create a database with it and import a backup")
	case old.SupportOSSClusterAPI && !s.SupportOSSClusterAPI:
		return Invalid(ErrTypeTopologyChangeNotSupported,
			"database: supportOSSClusterApi cannot be turned off for a live database (its data is spread over a cluster's shards): create a database without it and import a backup")
	case s.SupportOSSClusterAPI && s.NumberOfShards() != oldShards:
		return Invalid(ErrTypeTopologyChangeNotSupported,
			"database: throughputMeasurement asks for %d shards and the database has %d: clouddb does not reshard a live database (one shard per %d operations per second); create a database with the new throughput and import a backup",
			s.NumberOfShards(), oldShards, OpsPerShard)
	case old.SupportOSSClusterAPI && old.Replication && !s.Replication:
		return Invalid(ErrTypeTopologyChangeNotSupported,
			"database: replication cannot be turned off for a live OSS Cluster database")
	}
	return nil
}
