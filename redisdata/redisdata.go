// Package redisdata moves real data in and out of live redis-server processes: it takes
// consistent RDB snapshots over the replication protocol (backups), loads RDB files into
// throwaway servers so they can be checked and read (imports), copies every key of one
// server into another (imports from a live server, and the apply step of the two
// others), and keeps a database a continuous replica of one or several sources
// (replicaOf).
//
// Everything here talks to Redis over the network the way Redis itself or redis-cli
// would, so it works the same against a local process, a container or a remote host,
// and needs no access to a server's files. It knows nothing of clouddb's domain: callers
// resolve URIs, credentials and policy, and pass Endpoints.
package redisdata

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// ErrCorrupt is wrapped by the errors that mean the bytes given are not a loadable RDB
// file (truncated, bad checksum, wrong signature, unsupported version, bad payload), so
// that callers can report `file-corrupted` rather than a transient failure.
var ErrCorrupt = errors.New("RDB file is corrupt or not an RDB file")

// ErrAuth is wrapped by the errors that mean a server answered but refused the
// credentials, so that callers can report bad credentials rather than an outage.
var ErrAuth = errors.New("credentials refused")

// Endpoint says how to reach and authenticate to one Redis server.
type Endpoint struct {
	// Addr is host:port, or the path of a unix socket when it starts with "/".
	Addr string
	// Username is the ACL user; empty means the default user (AUTH <password>).
	Username string
	// Password is sent with AUTH when not empty.
	Password string
	// TLS, when not nil, makes the connection TLS with this configuration. An empty
	// ServerName is taken from Addr's host.
	TLS *tls.Config
	// Dial, when set, opens the connection ("tcp", or "unix" for a socket; TLS, if any,
	// runs over it): callers put their address policy here for servers that users point
	// them at.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// NoEvict makes every connection of the go-redis clients to this server say CLIENT
	// NO-EVICT ON first, so that the server's client memory limit (maxmemory-clients)
	// does not cut the large writes (a RESTORE of a big key) of a caller that
	// administers the server. The user needs CLIENT NO-EVICT; leave it off for servers
	// users point at.
	NoEvict bool
}

// String returns Addr only: an Endpoint is often logged or shown, and its password must
// never be.
func (e Endpoint) String() string { return e.Addr }

// network is "unix" for a socket path, else "tcp".
func (e Endpoint) network() string {
	if strings.HasPrefix(e.Addr, "/") {
		return "unix"
	}
	return "tcp"
}

// dialTimeout bounds every TCP (and TLS) connect, so an unreachable host fails in
// seconds rather than after the operating system's minutes.
const dialTimeout = 5 * time.Second

// dial opens a raw connection to e, for the parts that speak the replication protocol
// by hand.
func dial(ctx context.Context, e Endpoint) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}
	if e.Dial == nil {
		if e.TLS != nil {
			td := &tls.Dialer{NetDialer: d, Config: e.TLS}
			return td.DialContext(ctx, e.network(), e.Addr)
		}
		return d.DialContext(ctx, e.network(), e.Addr)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := e.Dial(ctx, e.network(), e.Addr)
	if err != nil || e.TLS == nil {
		return conn, err
	}
	cfg := e.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(e.Addr)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// client returns a go-redis client of logical database db of e. It runs RESP2 with no
// CLIENT SETINFO and no maintenance notifications, so that it needs no command beyond
// AUTH and SELECT that a restricted ACL user might be denied; it never retries, because
// a retried pipeline of RESTOREs or replicated writes could apply twice or in another
// order; and it honours context cancellation, so Stop and caller deadlines interrupt a
// blocked read.
func client(e Endpoint, db, poolSize int) *redis.Client {
	var onConnect func(context.Context, *redis.Conn) error
	if e.NoEvict {
		onConnect = func(ctx context.Context, cn *redis.Conn) error {
			if err := cn.Do(ctx, "client", "no-evict", "on").Err(); err != nil {
				return fmt.Errorf("CLIENT NO-EVICT ON: %w", classify(err))
			}
			return nil
		}
	}
	return redis.NewClient(&redis.Options{
		Addr:     e.Addr,
		Username: e.Username,
		Password: e.Password,
		DB:       db,
		// dial does TLS itself, so that Endpoint.Dial also covers TLS connections.
		Dialer:                   func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx, e) },
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		PoolSize:                 poolSize,
		DialTimeout:              dialTimeout,
		DialerRetries:            1,
		ReadTimeout:              30 * time.Second,
		WriteTimeout:             30 * time.Second,
		ContextTimeoutEnabled:    true,
		OnConnect:                onConnect,
	})
}

// classify wraps ErrAuth around the replies that mean the credentials were refused.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if isAuthError(err.Error()) {
		return &wrapped{sentinel: ErrAuth, err: err}
	}
	return err
}

func isAuthError(msg string) bool {
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password")
}

// wrapped is an error that reads as err and matches both err and sentinel with
// errors.Is, so that the server's own words reach the caller.
type wrapped struct {
	sentinel error
	err      error
}

func (w *wrapped) Error() string   { return w.sentinel.Error() + ": " + w.err.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.sentinel, w.err} }

// infoField returns the value of one "name:value" line of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// keyspace parses INFO keyspace into the number of keys of each logical database that
// has any ("db3:keys=10,expires=2,avg_ttl=0" → 3: 10).
func keyspace(info string) map[int]int64 {
	out := map[int]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "db") {
			continue
		}
		db, err := strconv.Atoi(name[2:])
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "keys="); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
					out[db] = n
				}
			}
		}
	}
	return out
}
