package clouddb

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// MaxReplicaSources bounds the sources of one database.
const MaxReplicaSources = 10

// ReplicaSource is one element of a database's replicaOf: a live Redis server whose data
// the database copies and then follows.
type ReplicaSource struct {
	// URI is the source as the caller gave it; it reads back unchanged.
	URI      string
	Host     string
	Port     int
	Username string
	Password string
	TLS      bool
	// SameAccount is set for a bare "host:port": a database of the same account, whose
	// password clouddb supplies.
	SameAccount bool
}

// Addr is host:port.
func (s ReplicaSource) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// ParseReplicaSource reads a replicaOf element: redis://[user:password@]host:port,
// rediss://… for TLS, or host:port for a database of the same account.
func ParseReplicaSource(field, s string) (ReplicaSource, error) {
	bad := func(rule string) error {
		return Invalid(ErrTypeInvalidField, "database: %s %q: %s", field, s, rule)
	}
	src := ReplicaSource{URI: s}
	hostport := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return src, bad("not a URI")
		}
		switch u.Scheme {
		case "redis":
		case "rediss":
			src.TLS = true
		default:
			return src, bad("the scheme must be redis or rediss")
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
			return src, bad("must be <scheme>://<user>:<password>@<host>:<port> with nothing after the port")
		}
		if u.User != nil {
			src.Username = u.User.Username()
			src.Password, _ = u.User.Password()
		}
		hostport = u.Host
	} else {
		src.SameAccount = true
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" {
		return src, bad("needs a host and a port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return src, bad("the port must be between 1 and 65535")
	}
	src.Host, src.Port = host, n
	return src, nil
}

// ResolveSources turns sources into endpoints. A same-account source (host:port) takes
// the password of the account's database on that port; it fails with a 404 error when
// there is none.
func ResolveSources(ctx context.Context, tx Tx, accountID int, uris []string) ([]RedisEndpoint, error) {
	srcs, err := ValidateReplicaOf(uris)
	if err != nil {
		return nil, err
	}
	var byPort map[int]*Database
	out := make([]RedisEndpoint, 0, len(srcs))
	for i, s := range srcs {
		ep := RedisEndpoint{Addr: s.Addr(), Username: s.Username, Password: s.Password, TLS: s.TLS, SameAccount: s.SameAccount}
		if s.SameAccount {
			if byPort == nil {
				dbs, _, err := tx.Databases(ctx, DatabaseFilter{AccountID: accountID, ExcludeDeleting: true})
				if err != nil {
					return nil, err
				}
				byPort = make(map[int]*Database, len(dbs))
				for _, d := range dbs {
					byPort[d.Port] = d
				}
			}
			d := byPort[s.Port]
			if d == nil {
				return nil, NotFound(ErrTypeDatabaseNotFound, "database: source %d %q names no database of this account", i, s.URI)
			}
			ep.Password = d.Password
		}
		out = append(out, ep)
	}
	return out, nil
}

// ValidateReplicaOf checks a complete replicaOf list.
func ValidateReplicaOf(uris []string) ([]ReplicaSource, error) {
	if len(uris) > MaxReplicaSources {
		return nil, Invalid(ErrTypeInvalidField, "database: replicaOf may list at most %d sources", MaxReplicaSources)
	}
	seen := map[string]bool{}
	out := make([]ReplicaSource, 0, len(uris))
	for i, u := range uris {
		if err := checkLength("database", "replicaOf["+strconv.Itoa(i)+"]", u, MaxURLLength); err != nil {
			return nil, err
		}
		src, err := ParseReplicaSource("replicaOf["+strconv.Itoa(i)+"]", u)
		if err != nil {
			return nil, err
		}
		if seen[src.Addr()] {
			return nil, Invalid(ErrTypeInvalidField, "database: replicaOf lists %s twice", src.Addr())
		}
		seen[src.Addr()] = true
		out = append(out, src)
	}
	return out, nil
}
