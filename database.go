package clouddb

import (
	"net/netip"
	"regexp"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// DatabaseStatus is a database's provisioning state.
type DatabaseStatus string

// Database states. A database being deleted is hidden from the API at once (a GET after
// its delete task completes answers 404) while the reconciler stops its server.
const (
	DatabasePending       DatabaseStatus = "pending"
	DatabaseActive        DatabaseStatus = "active"
	DatabaseChangePending DatabaseStatus = "active-change-pending"
	DatabaseDeleting      DatabaseStatus = "deleting"
	DatabaseError         DatabaseStatus = "error"
)

// Settled reports whether the database needs no more provisioning work.
func (s DatabaseStatus) Settled() bool { return s == DatabaseActive || s == DatabaseError }

// Database is one Redis server of a subscription.
type Database struct {
	ID             int
	SubscriptionID int
	AccountID      int
	Status         DatabaseStatus
	// StatusDetail says why the database is in error.
	StatusDetail string
	// Port is the port the server listens on; it is chosen in the processing phase and kept
	// for the life of the database.
	Port int
	// Password is the database's password (the spec's security.password).
	Password string
	// ReplicaOf lists the sources the database replicates from, as given (see
	// ReplicaSource); while it has any, the database refuses client writes.
	ReplicaOf []string
	Spec      DatabaseSpec
	// Generation counts changes to Spec or Password; the reconciler applies a generation and
	// settles the status only if no newer change arrived meanwhile.
	Generation int
	// State is what data operations left: the latest backup and import.
	State       DatabaseState
	ActivatedOn time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// DatabaseState is the outcome of a database's data operations.
type DatabaseState struct {
	Backup *OperationStatus `json:"backup,omitempty"`
	Import *OperationStatus `json:"import,omitempty"`
	// Upgrade is the latest Redis version upgrade asked for.
	Upgrade *UpgradeState `json:"upgrade,omitempty"`
}

// UpgradeState records a database's latest version upgrade: from which version to which,
// when it was asked for, and its own outcome, kept apart from the database's status so
// that a later, unrelated change neither fails nor reopens it.
type UpgradeState struct {
	From   string    `json:"from"`
	Target string    `json:"target"`
	Time   time.Time `json:"time"`
	// Generation is the database generation whose provisioning carries the upgrade: the
	// upgrade's own, or that of a change made before the upgrade went through (its
	// provisioning restarts the server on the new binary just the same).
	Generation int `json:"generation,omitempty"`
	// Status is UpgradeInProgress until Generation settles, then UpgradeDone or
	// UpgradeFailed. Empty in a record made before upgrades kept their own outcome.
	Status string `json:"status,omitempty"`
}

// Upgrade statuses, as GET …/upgrade reports them.
const (
	UpgradeInProgress = "in-progress"
	UpgradeDone       = "done"
	UpgradeFailed     = "failed"
)

// Settle records the outcome of the upgrade when generation, now settled with status,
// carries it; it reports whether the record changed. A settlement of an older
// generation, or of an upgrade already settled, changes nothing: a server that fails
// after its upgrade went through does not make the upgrade fail.
func (u *UpgradeState) Settle(generation int, status DatabaseStatus) bool {
	if u == nil || u.Status != UpgradeInProgress || generation < u.Generation {
		return false
	}
	switch status {
	case DatabaseActive:
		u.Status = UpgradeDone
	case DatabaseError:
		u.Status = UpgradeFailed
	default:
		return false
	}
	return true
}

// Carry moves an upgrade that has not gone through to generation, a new change of its
// database: that change's provisioning runs the server on the stored (target) version,
// so it carries the upgrade, which is in progress again even if it had failed.
func (u *UpgradeState) Carry(generation int) {
	if u == nil || u.Status == UpgradeDone || u.Status == "" {
		return
	}
	u.Generation, u.Status = generation, UpgradeInProgress
}

// OperationStatus is the status of a database's latest backup or import, as the API's
// backup and import status tasks report it.
type OperationStatus struct {
	// Status is in-progress, success or failed for a backup; importing, success or failed
	// for an import.
	Status string `json:"status"`
	// Time is when the operation last ended (or started, while in progress).
	Time time.Time `json:"time"`
	// FailureReason is a short code such as file-corrupted; empty on success.
	FailureReason       string `json:"failureReason,omitempty"`
	FailureReasonParams []Tag  `json:"failureReasonParams,omitempty"`
	// Location is where a backup was written.
	Location string `json:"location,omitempty"`
}

// Operation status values.
const (
	OperationInProgress = "in-progress"
	OperationImporting  = "importing"
	OperationSuccess    = "success"
	OperationFailed     = "failed"
)

// SizeGB is the memory the database takes, every copy of its data (see
// database_topology.go): what its subscription's capacity counts.
func (s *DatabaseSpec) SizeGB() float64 {
	return s.DatasetSizeGB() * float64(s.Copies())
}

// OpsPerShard is the throughput one shard is sized for: an OSS Cluster database gets one
// primary shard per OpsPerShard operations per second of its throughputMeasurement,
// rounded up (Redis Cloud publishes no formula; this is clouddb's).
const OpsPerShard = 25000

// MaxShards bounds the primary shards of one database (each is a redis-server, twice
// with replication, on the host's cores).
const MaxShards = 16

// NumberOfShards is the database's count of primary shards: 1 without the OSS Cluster
// API (no proxy hides shards behind one endpoint), else one per OpsPerShard operations
// per second (or the count itself when throughputMeasurement.by is number-of-shards),
// at least 1.
func (s *DatabaseSpec) NumberOfShards() int {
	if !s.SupportOSSClusterAPI || s.ThroughputMeasurement == nil {
		return 1
	}
	t := s.ThroughputMeasurement
	n := t.Value
	if t.By != throughputByShards {
		// Rounded up without t.Value+OpsPerShard-1, which a huge value would overflow.
		n = t.Value / OpsPerShard
		if t.Value%OpsPerShard > 0 {
			n++
		}
	}
	return max(n, 1)
}

// InstanceTLS is how the database serves TLS, nil when it does not. A client
// certificate turns TLS on even without enableTls (the legacy mTLS request).
func (s *DatabaseSpec) InstanceTLS() *InstanceTLS {
	certs := s.ClientCertificates()
	if !s.EnableTLS && len(certs) == 0 {
		return nil
	}
	return &InstanceTLS{ClientCertificates: certs}
}

// MaxMemoryBytes is the dataset's maxmemory: that of each server when there is one
// shard; the driver gives each shard its share.
func (s *DatabaseSpec) MaxMemoryBytes() int64 {
	return int64(s.DatasetSizeGB() * (1 << 30))
}

// MapSecrets returns a copy of s whose fields that may carry credentials (the backup
// destinations: s3://KEY:SECRET@…, ftp://user:password@…) went through f; s itself is
// left as it is. Stores seal those fields with it, and open them.
func (s DatabaseSpec) MapSecrets(f func(string) (string, error)) (DatabaseSpec, error) {
	out := s
	var err error
	if out.PeriodicBackupPath, err = f(s.PeriodicBackupPath); err != nil {
		return s, err
	}
	if b := s.RemoteBackup; b != nil {
		mapped := *b
		if mapped.StoragePath, err = f(b.StoragePath); err != nil {
			return s, err
		}
		out.RemoteBackup = &mapped
	}
	return out, nil
}

// DatabaseSpec is the configuration of a database as the caller asked for it. Fields are
// kept as sent so that they read back unchanged.
type DatabaseSpec struct {
	Name                                string        `json:"name"`
	Protocol                            string        `json:"protocol,omitempty"`
	MemoryLimitInGB                     float64       `json:"memoryLimitInGb,omitempty"`
	DatasetSizeInGB                     float64       `json:"datasetSizeInGb,omitempty"`
	SupportOSSClusterAPI                bool          `json:"supportOSSClusterApi,omitempty"`
	UseExternalEndpointForOSSClusterAPI bool          `json:"useExternalEndpointForOSSClusterApi,omitempty"`
	RespVersion                         string        `json:"respVersion,omitempty"`
	DataPersistence                     string        `json:"dataPersistence,omitempty"`
	DataEvictionPolicy                  string        `json:"dataEvictionPolicy,omitempty"`
	Replication                         bool          `json:"replication,omitempty"`
	ThroughputMeasurement               *Throughput   `json:"throughputMeasurement,omitempty"`
	AverageItemSizeInBytes              int           `json:"averageItemSizeInBytes,omitempty"`
	RAMPercentage                       int           `json:"ramPercentage,omitempty"`
	SourceIPs                           []string      `json:"sourceIp,omitempty"`
	ClientSSLCertificate                string        `json:"clientSslCertificate,omitempty"`
	ClientTLSCertificates               []string      `json:"clientTlsCertificates,omitempty"`
	EnableTLS                           bool          `json:"enableTls,omitempty"`
	EnableDefaultUser                   *bool         `json:"enableDefaultUser,omitempty"`
	Alerts                              []Alert       `json:"alerts,omitempty"`
	Modules                             []Module      `json:"modules,omitempty"`
	PeriodicBackupPath                  string        `json:"periodicBackupPath,omitempty"`
	RemoteBackup                        *RemoteBackup `json:"remoteBackup,omitempty"`
	QueryPerformanceFactor              string        `json:"queryPerformanceFactor,omitempty"`
	RedisVersion                        string        `json:"redisVersion,omitempty"`
	AutoMinorVersionUpgrade             bool          `json:"autoMinorVersionUpgrade,omitempty"`
	RegexRules                          []string      `json:"regexRules,omitempty"`
	Tags                                []Tag         `json:"tags,omitempty"`
	Port                                int           `json:"port,omitempty"`
	// Quantity is only meaningful in a subscription's creation plan: that many databases
	// are made, the first named Name and the others Name-2, Name-3, ...
	Quantity int `json:"quantity,omitempty"`
	// Password and ReplicaOf are only carried in a create command; a stored database
	// keeps them in Database.Password and Database.ReplicaOf, which are sealed at rest.
	Password  string   `json:"password,omitempty"`
	ReplicaOf []string `json:"replicaOf,omitempty"`
	// DryRun is only carried in a create command: the request is checked and priced,
	// and nothing is made. A stored database never has it.
	DryRun bool `json:"dryRun,omitempty"`
	// ReplicaInMemoryLimit is set by the processing phase on every database made or
	// resized since memoryLimitInGb counts the replica (see DatasetSizeGB); never taken
	// from a request.
	ReplicaInMemoryLimit bool `json:"replicaInMemoryLimit,omitempty"`
}

// Throughput is the throughputMeasurement object.
type Throughput struct {
	By    string `json:"by"`
	Value int    `json:"value"`
}

// Alert is a database alert setting.
type Alert struct {
	Name  string `json:"name"`
	Value int    `json:"value"`
}

// Module is a Redis module enabled on a database.
type Module struct {
	Name string `json:"name"`
}

// RemoteBackup is the remoteBackup request object.
type RemoteBackup struct {
	Active      bool   `json:"active"`
	Interval    string `json:"interval,omitempty"`
	TimeUTC     string `json:"timeUTC,omitempty"`
	StorageType string `json:"storageType,omitempty"`
	StoragePath string `json:"storagePath,omitempty"`
}

// DatabaseUpdate is the body of a database update. Nil fields mean "no change"; an empty
// slice means "clear".
type DatabaseUpdate struct {
	Name                                *string       `json:"name,omitempty"`
	MemoryLimitInGB                     *float64      `json:"memoryLimitInGb,omitempty"`
	DatasetSizeInGB                     *float64      `json:"datasetSizeInGb,omitempty"`
	SupportOSSClusterAPI                *bool         `json:"supportOSSClusterApi,omitempty"`
	UseExternalEndpointForOSSClusterAPI *bool         `json:"useExternalEndpointForOSSClusterApi,omitempty"`
	RespVersion                         *string       `json:"respVersion,omitempty"`
	DataPersistence                     *string       `json:"dataPersistence,omitempty"`
	DataEvictionPolicy                  *string       `json:"dataEvictionPolicy,omitempty"`
	Replication                         *bool         `json:"replication,omitempty"`
	ThroughputMeasurement               *Throughput   `json:"throughputMeasurement,omitempty"`
	RAMPercentage                       *int          `json:"ramPercentage,omitempty"`
	SourceIPs                           *[]string     `json:"sourceIp,omitempty"`
	ClientSSLCertificate                *string       `json:"clientSslCertificate,omitempty"`
	ClientTLSCertificates               *[]string     `json:"clientTlsCertificates,omitempty"`
	EnableTLS                           *bool         `json:"enableTls,omitempty"`
	EnableDefaultUser                   *bool         `json:"enableDefaultUser,omitempty"`
	Alerts                              *[]Alert      `json:"alerts,omitempty"`
	PeriodicBackupPath                  *string       `json:"periodicBackupPath,omitempty"`
	RemoteBackup                        *RemoteBackup `json:"remoteBackup,omitempty"`
	QueryPerformanceFactor              *string       `json:"queryPerformanceFactor,omitempty"`
	AutoMinorVersionUpgrade             *bool         `json:"autoMinorVersionUpgrade,omitempty"`
	RegexRules                          *[]string     `json:"regexRules,omitempty"`
	Password                            *string       `json:"password,omitempty"`
	// ReplicaOf is the complete desired list of sources; nil (or JSON null) means no
	// change, an empty list removes every source.
	ReplicaOf *[]string `json:"replicaOf,omitempty"`
	// DryRun checks and prices the update without making it.
	DryRun bool `json:"dryRun,omitempty"`
}

// Enumerations of database fields.
var (
	DataPersistenceValues = []string{"none", "aof-every-1-second", "aof-every-write", "snapshot-every-1-hour", "snapshot-every-6-hours", "snapshot-every-12-hours"}
	EvictionPolicies      = []string{"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "noeviction"}
	throughputKinds       = []string{"operations-per-second", "number-of-shards"}
	respVersions          = []string{"resp2", "resp3"}
	alertNames            = []string{"dataset-size", "datasets-size", "throughput-higher-than", "throughput-lower-than", "latency", "syncsource-error", "syncsource-lag", "connections-limit"}
	backupIntervals       = []string{"every-24-hours", "every-12-hours", "every-6-hours", "every-4-hours", "every-2-hours", "every-1-hours"}
	storageTypes          = []string{"ftp", "aws-s3", "azure-blob-storage", "google-blob-storage"}
	databaseName          = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
	timeOfDay             = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
)

// Limits of database fields.
const (
	MaxDatabaseNameLength = MaxNameLength
	MaxDatabaseSizeGB     = 1024
	MaxPasswordLength     = 128
	// MinDatabaseSizeGB is the smallest size a database may have: a smaller one would
	// become a maxmemory that rounds towards 0 bytes, which redis reads as "no limit".
	MinDatabaseSizeGB = 0.1
	// MaxSourceIPs bounds sourceIp, as the real API does for a Pro database.
	MaxSourceIPs = 32
)

// DefaultSourceIPs is the sourceIp a new database gets when its create names none: any
// address, or the private ranges (RFC 1918 and the carrier-grade NAT range) when its
// subscription blocks public access. The list is kept and shown; clouddb, whose servers
// share one host's network, does not enforce it.
func DefaultSourceIPs(publicEndpointAccess bool) []string {
	if publicEndpointAccess {
		return []string{"0.0.0.0/0"}
	}
	return []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"}
}

// DefaultBackupInterval is the interval of periodic backups when none is given.
const DefaultBackupInterval = "every-24-hours"

// DefaultDataPersistence and DefaultEvictionPolicy apply when a create leaves them unset.
const (
	DefaultDataPersistence = "none"
	DefaultEvictionPolicy  = "volatile-lru"
)

// ValidateCreate checks a database create body (a password is required).
func (s *DatabaseSpec) ValidateCreate() error {
	if err := s.validate(true); err != nil {
		return err
	}
	return checkCertificates(s.ClientSSLCertificate, s.ClientTLSCertificates, time.Now())
}

// PlanNames returns the names of the databases a creation-plan entry makes.
func (s *DatabaseSpec) PlanNames() []string {
	n := max(s.Quantity, 1)
	names := []string{s.Name}
	for i := 2; i <= n; i++ {
		names = append(names, s.Name+"-"+strconv.Itoa(i))
	}
	return names
}

func (s *DatabaseSpec) validate(needPassword bool) error {
	if err := ValidateDatabaseName(s.Name); err != nil {
		return err
	}
	if s.Protocol != "" && s.Protocol != "redis" {
		if s.Protocol == "memcached" && s.SupportOSSClusterAPI {
			return Invalid(ErrTypeMemcachedNoOSSCluster, "database: a memcached database cannot use the OSS Cluster API (and clouddb runs only Redis servers)")
		}
		if s.Protocol == "memcached" {
			return Invalid(ErrTypeNotImplemented, "database: protocol memcached is not supported by clouddb; every database is a Redis server")
		}
		return Invalid(ErrTypeInvalidField, "database: protocol must be redis")
	}
	if s.MemoryLimitInGB == 0 && s.DatasetSizeInGB == 0 {
		return Invalid(ErrTypeDatabaseInvalidSize, "database: memoryLimitInGb or datasetSizeInGb is required")
	}
	if err := validateSize("memoryLimitInGb", s.MemoryLimitInGB); err != nil {
		return err
	}
	if err := validateSize("datasetSizeInGb", s.DatasetSizeInGB); err != nil {
		return err
	}
	if needPassword && s.Password == "" {
		return Invalid(ErrTypeDatabaseNoPassword, "database: password is required")
	}
	if s.Password != "" {
		if err := ValidatePassword(s.Password); err != nil {
			return err
		}
	}
	if _, err := ValidateReplicaOf(s.ReplicaOf); err != nil {
		return err
	}
	if s.Port != 0 && (s.Port < 1 || s.Port > 65535) {
		return Invalid(ErrTypeInvalidField, "database: port must be between 1 and 65535")
	}
	if s.AverageItemSizeInBytes < 0 {
		return Invalid(ErrTypeInvalidField, "database: averageItemSizeInBytes must not be negative")
	}
	return s.validateCommon()
}

// validateCommon checks the fields a create and an update share, on the merged spec.
func (s *DatabaseSpec) validateCommon() error {
	if err := s.validateLimits(); err != nil {
		return err
	}
	if s.DataPersistence != "" && !oneOf(s.DataPersistence, DataPersistenceValues) {
		return Invalid(ErrTypeInvalidField, "database: dataPersistence must be one of %v", DataPersistenceValues)
	}
	if s.DataEvictionPolicy != "" && !oneOf(s.DataEvictionPolicy, EvictionPolicies) {
		return Invalid(ErrTypeInvalidField, "database: dataEvictionPolicy must be one of %v", EvictionPolicies)
	}
	if s.RespVersion != "" && !oneOf(s.RespVersion, respVersions) {
		return Invalid(ErrTypeInvalidField, "database: respVersion must be one of %v", respVersions)
	}
	if t := s.ThroughputMeasurement; t != nil {
		if !oneOf(t.By, throughputKinds) {
			return Invalid(ErrTypeInvalidField, "database: throughputMeasurement.by must be one of %v", throughputKinds)
		}
		if t.Value < 0 {
			return Invalid(ErrTypeInvalidField, "database: throughputMeasurement.value must not be negative")
		}
	}
	if s.RAMPercentage < 0 || s.RAMPercentage > 100 {
		return Invalid(ErrTypeInvalidField, "database: ramPercentage must be between 0 and 100")
	}
	for i, ip := range s.SourceIPs {
		if _, err := netip.ParsePrefix(ip); err != nil {
			return Invalid(ErrTypeInvalidField, "database: sourceIp[%d] %q is not a CIDR block", i, ip)
		}
	}
	for i, a := range s.Alerts {
		if !oneOf(a.Name, alertNames) {
			return Invalid(ErrTypeInvalidField, "database: alerts[%d].name must be one of %v", i, alertNames)
		}
		if a.Value < 0 {
			return Invalid(ErrTypeInvalidField, "database: alerts[%d].value must not be negative", i)
		}
	}
	if len(s.Modules) > 0 {
		return Invalid(ErrTypeNotImplemented, "database: module %q is not available: clouddb runs plain Redis servers (GET /database-modules lists none)", s.Modules[0].Name)
	}
	if err := s.validateTLS(); err != nil {
		return err
	}
	if b := s.RemoteBackup; b != nil && b.Active {
		if b.Interval != "" && !oneOf(b.Interval, backupIntervals) {
			return Invalid(ErrTypeInvalidField, "database: remoteBackup.interval must be one of %v", backupIntervals)
		}
		if b.TimeUTC != "" && !timeOfDay.MatchString(b.TimeUTC) {
			return Invalid(ErrTypeInvalidField, "database: remoteBackup.timeUTC must be HH:MM")
		}
		if b.StorageType != "" && !oneOf(b.StorageType, storageTypes) {
			return Invalid(ErrTypeInvalidField, "database: remoteBackup.storageType must be one of %v", storageTypes)
		}
	}
	return s.validateTopology()
}

// validateSize checks a size that is given; 0 is "not given" (the create rules say which
// one is required).
// validateLimits bounds the free text and the lists a database keeps (see text.go).
func (s *DatabaseSpec) validateLimits() error {
	const db = "database"
	if err := checkText(db, "queryPerformanceFactor", s.QueryPerformanceFactor, MaxShortText); err != nil {
		return err
	}
	if err := checkText(db, "redisVersion", s.RedisVersion, MaxShortText); err != nil {
		return err
	}
	if err := checkCount(db, "sourceIp", len(s.SourceIPs), MaxSourceIPs); err != nil {
		return err
	}
	if err := checkCount(db, "alerts", len(s.Alerts), MaxListLength); err != nil {
		return err
	}
	if err := checkLength(db, "clientSslCertificate", s.ClientSSLCertificate, MaxCertificateLength); err != nil {
		return err
	}
	if err := checkCount(db, "clientTlsCertificates", len(s.ClientTLSCertificates), MaxListLength); err != nil {
		return err
	}
	for i, c := range s.ClientTLSCertificates {
		if err := checkLength(db, "clientTlsCertificates["+strconv.Itoa(i)+"]", c, MaxCertificateLength); err != nil {
			return err
		}
	}
	if err := checkLength(db, "periodicBackupPath", s.PeriodicBackupPath, MaxURLLength); err != nil {
		return err
	}
	if b := s.RemoteBackup; b != nil {
		if err := checkLength(db, "remoteBackup.storagePath", b.StoragePath, MaxURLLength); err != nil {
			return err
		}
	}
	if err := checkCount(db, "regexRules", len(s.RegexRules), MaxRegexRules); err != nil {
		return err
	}
	for i, r := range s.RegexRules {
		if err := checkText(db, "regexRules["+strconv.Itoa(i)+"]", r, MaxRegexRuleLength); err != nil {
			return err
		}
	}
	return ValidateTags(db, "tags", s.Tags)
}

func validateSize(field string, v float64) error {
	if v != 0 && !(v >= MinDatabaseSizeGB && v <= MaxDatabaseSizeGB) {
		return sizeError(field)
	}
	return nil
}

func sizeError(field string) error {
	return Invalid(ErrTypeDatabaseInvalidSize, "database: %s must be at least %g and at most %d (GB)", field, MinDatabaseSizeGB, MaxDatabaseSizeGB)
}

// ValidateDatabaseName checks the naming rule: letters, digits and hyphens, 1 to 40.
func ValidateDatabaseName(name string) error {
	if name == "" {
		return Invalid(ErrTypeDatabaseInvalidName, "database: name is required")
	}
	if utf8.RuneCountInString(name) > MaxDatabaseNameLength {
		return Invalid(ErrTypeDatabaseInvalidName, "database: name must be at most %d characters", MaxDatabaseNameLength)
	}
	if !databaseName.MatchString(name) {
		return Invalid(ErrTypeDatabaseInvalidName, "database: name %q may only contain letters, digits and hyphens", name)
	}
	return nil
}

// ValidatePassword checks a database password: 1 to 128 printable characters, no spaces.
func ValidatePassword(p string) error {
	if len(p) > MaxPasswordLength {
		return Invalid(ErrTypeInvalidField, "database: password must be at most %d characters", MaxPasswordLength)
	}
	for _, r := range p {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return Invalid(ErrTypeInvalidField, "database: password may only contain printable characters without spaces")
		}
	}
	return nil
}

// Validate checks an update body on its own.
func (u *DatabaseUpdate) Validate() error {
	if u.Name != nil {
		if err := ValidateDatabaseName(*u.Name); err != nil {
			return err
		}
	}
	if u.MemoryLimitInGB != nil && (*u.MemoryLimitInGB == 0 || validateSize("memoryLimitInGb", *u.MemoryLimitInGB) != nil) {
		return sizeError("memoryLimitInGb")
	}
	if u.DatasetSizeInGB != nil && (*u.DatasetSizeInGB == 0 || validateSize("datasetSizeInGb", *u.DatasetSizeInGB) != nil) {
		return sizeError("datasetSizeInGb")
	}
	if u.Password != nil {
		if *u.Password == "" {
			return Invalid(ErrTypeInvalidField, "database: password must not be empty")
		}
		if err := ValidatePassword(*u.Password); err != nil {
			return err
		}
	}
	return u.validateTLS(time.Now())
}

// Apply merges u into d (spec and password) and validates the result.
func (u *DatabaseUpdate) Apply(d *Database) error {
	s := &d.Spec
	setS := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setB := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setS(&s.Name, u.Name)
	u.applySizes(s)
	setB(&s.SupportOSSClusterAPI, u.SupportOSSClusterAPI)
	setB(&s.UseExternalEndpointForOSSClusterAPI, u.UseExternalEndpointForOSSClusterAPI)
	setS(&s.RespVersion, u.RespVersion)
	setS(&s.DataPersistence, u.DataPersistence)
	setS(&s.DataEvictionPolicy, u.DataEvictionPolicy)
	setB(&s.Replication, u.Replication)
	if u.ThroughputMeasurement != nil {
		s.ThroughputMeasurement = u.ThroughputMeasurement
	}
	if u.RAMPercentage != nil {
		s.RAMPercentage = *u.RAMPercentage
	}
	if u.SourceIPs != nil {
		s.SourceIPs = *u.SourceIPs
	}
	u.applyTLS(s)
	if u.EnableDefaultUser != nil {
		v := *u.EnableDefaultUser
		s.EnableDefaultUser = &v
	}
	if u.Alerts != nil {
		s.Alerts = *u.Alerts
	}
	setS(&s.PeriodicBackupPath, u.PeriodicBackupPath)
	if u.RemoteBackup != nil {
		s.RemoteBackup = u.RemoteBackup
	}
	setS(&s.QueryPerformanceFactor, u.QueryPerformanceFactor)
	setB(&s.AutoMinorVersionUpgrade, u.AutoMinorVersionUpgrade)
	if u.RegexRules != nil {
		s.RegexRules = *u.RegexRules
	}
	setS(&d.Password, u.Password)
	if u.ReplicaOf != nil {
		if _, err := ValidateReplicaOf(*u.ReplicaOf); err != nil {
			return err
		}
		d.ReplicaOf = *u.ReplicaOf
	}
	return s.validateCommon()
}

// Import source types.
var ImportSourceTypes = []string{"http", "redis", "ftp", "aws-s3", "azure-blob-storage", "google-blob-storage"}

// MaxImportURIs bounds the parts of one import.
const MaxImportURIs = 100

// ImportRequest is the body of a database import.
type ImportRequest struct {
	SourceType    string   `json:"sourceType"`
	ImportFromURI []string `json:"importFromUri"`
}

// Validate checks the request on its own; the task checks each URI against its type.
func (r *ImportRequest) Validate() error {
	if r.SourceType == "" {
		return Invalid(ErrTypeInvalidField, "import: sourceType is required, one of %v", ImportSourceTypes)
	}
	if !oneOf(r.SourceType, ImportSourceTypes) {
		return Invalid(ErrTypeInvalidField, "import: sourceType must be one of %v", ImportSourceTypes)
	}
	if len(r.ImportFromURI) == 0 {
		return Invalid(ErrTypeInvalidField, "import: importFromUri needs at least one URI")
	}
	if len(r.ImportFromURI) > MaxImportURIs {
		return Invalid(ErrTypeInvalidField, "import: importFromUri may list at most %d URIs", MaxImportURIs)
	}
	if r.SourceType == "redis" && len(r.ImportFromURI) != 1 {
		return Invalid(ErrTypeInvalidField, "import: a redis import takes exactly one URI, redis://user:password@host:port")
	}
	for i, u := range r.ImportFromURI {
		if u == "" {
			return Invalid(ErrTypeInvalidField, "import: importFromUri[%d] is empty", i)
		}
		if err := checkLength("import", "importFromUri["+strconv.Itoa(i)+"]", u, MaxURLLength); err != nil {
			return err
		}
	}
	return nil
}
