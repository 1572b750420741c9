package clouddb

import (
	"context"
	"errors"
	"io"
)

// Driver runs the data plane: for each database the nodes of its topology (see Instance:
// its shards, each a primary with zero or one replica), each a Redis server. Every method
// is idempotent, so the reconciler may call it again after a crash or a duplicate
// wake-up.
type Driver interface {
	// Ensure makes the database's nodes run with the instance's configuration: it adopts
	// running servers, starts stopped ones on their ports with their data, applies a
	// changed configuration to live servers without losing data, and fails a shard over
	// to its replica (on the same endpoint) when its primary is gone, before it starts
	// the dead node again as a replica. It returns once the servers answer an
	// authenticated PING. A server that is still starting or loading its data when Ensure
	// gives up is left running and the error wraps ErrServerStarting: a later Ensure
	// adopts it.
	Ensure(ctx context.Context, in Instance) error
	// Running reports whether every node of the instance is up, answers an authenticated
	// PING and plays its part; false tells the caller to Ensure.
	Running(ctx context.Context, in Instance) (bool, error)
	// Stop shuts the servers down cleanly, persisting as configured, and keeps their data.
	Stop(ctx context.Context, databaseID int) error
	// Remove stops the servers and deletes their data.
	Remove(ctx context.Context, databaseID int) error
	// Instances lists the databases the driver holds a server or data for, running or
	// not, so that the reconciler can remove what no database wants any more.
	Instances(ctx context.Context) ([]int, error)

	// Snapshot writes a consistent RDB snapshot of the live data of one shard (0 to
	// in.Shards-1; a backup has one part per shard) to w.
	Snapshot(ctx context.Context, in Instance, shard int, w io.Writer) (int64, error)
	// Load replaces the server's data with that of the RDB files, the parts of one
	// backup. Every file is checked first (ErrDataCorrupt, ErrDataTooLarge): on such a
	// failure the data is left as it was.
	Load(ctx context.Context, in Instance, files []string) error
	// CopyFrom replaces the server's data with every key of a live Redis server.
	CopyFrom(ctx context.Context, in Instance, src RedisEndpoint) error
}

// ACLChecker is a Driver that can verify ACL rules on real servers of every Redis version
// it offers, as DatabaseUser rules are applied (the denials clouddb adds included): a
// rule naming a command or category that one of those versions does not know is refused
// before any database gets it, since a database may run, or be upgraded to, any of them.
// CheckACLRules checks a batch at once (one throwaway server per version, not per rule)
// and refuses the first rule refused with an *Error of type
// ACL_REDIS_RULE_PATTERN_NOT_VALID made by ACLRuleRefused: it names the rule by its text
// and the word refused (ACLRuleRefusal reads them back). Any other error means the check
// could not be made.
type ACLChecker interface {
	CheckACLRules(ctx context.Context, rules []string) error
}

// StreamLoader is a Driver that can load an import while it downloads: LoadStream
// replaces the server's data with that of the one RDB file read from r, as Load does
// with a file (checked as it is read: ErrDataCorrupt, ErrDataTooLarge, and the data left
// as it was on failure). When reading r fails, that error is returned, wrapped.
type StreamLoader interface {
	LoadStream(ctx context.Context, in Instance, r io.Reader) error
}

// UserSetter is a Driver that can give a database's server its named users (the
// instance's Users, limited as the server now runs: read-only while it replicates)
// without the rest of Ensure: for a database that is not active (in error, or whose
// Ensure waits) and whose server may still run, so that a revoked or changed credential
// stops working there too. SetUsers changes nothing else, never starts a stopped server
// and answers nil when none runs (having written the users where the server would read
// them at its next start, if anywhere). An error means the running server may still have
// users of before.
type UserSetter interface {
	SetUsers(ctx context.Context, in Instance) error
}

// RedisEndpoint says how to reach and authenticate to a Redis server outside clouddb's
// control (an import or replication source).
type RedisEndpoint struct {
	Addr     string
	Username string
	Password string
	TLS      bool
	// SameAccount is set when the source was named as a database of the account the
	// data goes to (a bare host:port). A driver reads one of its own databases that asks
	// its clients for a certificate (mutual TLS) only then: with a password alone, another
	// account would read through clouddb's own certificate what its holder cannot.
	SameAccount bool
}

// Errors of data operations, which callers report as failure reasons.
var (
	ErrDataCorrupt = errors.New("the data is corrupt or not an RDB file")
	// ErrServerStarting: the server runs but does not serve yet (it loads its data).
	ErrServerStarting = errors.New("the server is still starting")
	ErrDataTooLarge   = errors.New("the data is larger than the database's memory limit")
	// ErrServerBusy: the server runs and holds its data but did not do what was asked in
	// time: it runs a tenant's long script (it answers BUSY), or the machine is too
	// loaded for it to answer within the driver's timeouts. Callers try again later.
	ErrServerBusy = errors.New("the server is busy")
)

// Instance is what the driver needs to run one database.
type Instance struct {
	DatabaseID      int
	Port            int
	Password        string
	MaxMemoryBytes  int64
	EvictionPolicy  string
	DataPersistence string
	// ReplicaOf lists the live sources the database follows; while there is any, the
	// server refuses client writes and takes the sources' data and changes.
	ReplicaOf []RedisEndpoint
	// RedisVersion is the major.minor of the Redis the server runs (one of the versions
	// the driver offers); empty means the driver's default.
	RedisVersion string
	// DefaultUserOff turns the default user off (enableDefaultUser: false): only the
	// named Users can log in.
	DefaultUserOff bool
	// Users are the ACL users the server has besides the default user, by name: the users
	// whose role binds a rule to this database. Any other user is removed.
	Users []DatabaseUser

	// The topology: Shards primaries (at least 1), each with a replica when Replication
	// is set. A replica takes over when its primary dies, and the endpoint (Port) stays
	// the same. More than one shard needs OSSCluster: there is no proxy that could hide
	// several shards behind one endpoint. OSSCluster makes the nodes a Redis Cluster that
	// announces, in CLUSTER SLOTS and CLUSTER SHARDS, addresses clients can reach; Port is
	// the node the endpoint names. MaxMemoryBytes is the whole database's: each shard
	// gets its share.
	Shards      int
	Replication bool
	OSSCluster  bool
	// TLS, when set, makes the database serve TLS only, with a server certificate from
	// the installation's CertificateAuthority.
	TLS *InstanceTLS
}

// InstanceTLS is how a database serves TLS.
type InstanceTLS struct {
	// ClientCertificates are PEM certificates; when there is any, a client must present
	// one of them (mutual TLS) and no other certificate is accepted.
	ClientCertificates []string
}

// CertificateAuthority is the installation's CA, made once and kept with its key sealed
// at rest: it issues the certificates databases serve TLS with, and those clouddb's own
// connections present to a database that asks for a client certificate.
type CertificateAuthority interface {
	// CertificatePEM is the CA certificate a client trusts to reach a TLS database.
	CertificatePEM() []byte
	// IssueServer issues a server certificate for hosts (DNS names or IP addresses).
	IssueServer(hosts []string) (certPEM, keyPEM []byte, err error)
	// IssueClient issues a client certificate clouddb's own connections present (between
	// the nodes of a database, and to it for backups and imports).
	IssueClient(name string) (certPEM, keyPEM []byte, err error)
}

// DatabaseUser is an ACL user of one database's server: the tenant's rule, to which the
// driver adds the denials of server administration every tenant user has.
type DatabaseUser struct {
	Name     string
	Password string
	Rule     string
}

// InstanceOf derives the driver's view of a database.
func InstanceOf(d *Database) Instance {
	policy := d.Spec.DataEvictionPolicy
	if policy == "" {
		policy = DefaultEvictionPolicy
	}
	persistence := d.Spec.DataPersistence
	if persistence == "" {
		persistence = DefaultDataPersistence
	}
	return Instance{
		DatabaseID:      d.ID,
		Port:            d.Port,
		Password:        d.Password,
		MaxMemoryBytes:  d.Spec.MaxMemoryBytes(),
		EvictionPolicy:  policy,
		DataPersistence: persistence,
		RedisVersion:    d.Spec.RedisVersion,
		DefaultUserOff:  d.Spec.EnableDefaultUser != nil && !*d.Spec.EnableDefaultUser,
		Shards:          d.Spec.NumberOfShards(),
		Replication:     d.Spec.Replication,
		OSSCluster:      d.Spec.SupportOSSClusterAPI,
		TLS:             d.Spec.InstanceTLS(),
	}
}
