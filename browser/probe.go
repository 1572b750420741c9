package browser

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"clouddb"
	"clouddb/blob"
)

// Bounds of one conversation with a database.
const (
	dialTimeout = 3 * time.Second
	ioTimeout   = 5 * time.Second
	// testTimeout bounds a whole connection test (a cluster checks every node).
	testTimeout = 20 * time.Second
)

// found is what a connection test learns about the database.
type found struct {
	version string
	nodes   []node
	master  *endpoint
}

// dialer makes the clients of one connection record.
type dialer struct {
	tls      *tls.Config
	resolver *net.Resolver
	// username is the ACL user of the database's servers (not of a sentinel).
	username string
}

// newDialer prepares the TLS settings of c, with pair as the client certificate when it
// is not nil. The server's certificate is verified only with tls.verifyServerCert (see
// verifyServer); otherwise, like the tool's default, the transport is encrypted and, with
// a client pair, mutually authenticated by the server.
func newDialer(c *connection, pair *certificate, resolver *net.Resolver) (*dialer, error) {
	if !c.UseTLS {
		return &dialer{resolver: resolver, username: c.Username}, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if err := verifyServer(cfg, c); err != nil {
		return nil, err
	}
	if pair != nil {
		cert, err := tls.X509KeyPair([]byte(pair.CertPEM), []byte(pair.KeyPEM))
		if err != nil {
			return nil, fmt.Errorf("browser: certificate %d: %w", pair.ID, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &dialer{tls: cfg, resolver: resolver, username: c.Username}, nil
}

// dial connects to addr through the address guard of package blob (which checks the
// address each connection dials, so that a name, a cluster node or a sentinel's master
// cannot lead to a link-local or metadata address) and, with TLS, completes the handshake
// within the dial timeout, so that a server that does not speak TLS on that port shows
// as a TLS failure, not as a timeout.
func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := blob.Dial(ctx, network, addr, blob.Options{Timeout: dialTimeout, Resolver: d.resolver})
	if err != nil || d.tls == nil {
		return conn, err
	}
	cfg := d.tls.Clone()
	if host, _, _ := net.SplitHostPort(addr); net.ParseIP(host) == nil || !cfg.InsecureSkipVerify {
		cfg.ServerName = host // SNI, and the name the server's certificate is verified for
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, &handshakeError{err: err}
	}
	return tc, nil
}

// handshakeError is a TLS handshake that failed after the TCP connection was made.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string {
	msg := e.err.Error()
	if errors.Is(e.err, context.DeadlineExceeded) || errors.Is(e.err, os.ErrDeadlineExceeded) {
		msg = "no answer (is TLS enabled on that port?)"
	}
	return "TLS handshake: " + msg
}

func (e *handshakeError) Unwrap() error { return e.err }

// options are those of a client of one server: no retries, RESP2 (AUTH rather than
// HELLO), no client-side extras, bounded waits.
func (d *dialer) options(e endpoint, password string) *redis.Options {
	return &redis.Options{
		Addr:                     e.addr(),
		Username:                 d.username,
		Password:                 password,
		Dialer:                   d.dial,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		DialerRetries:            1,
		PoolSize:                 2,
		DialTimeout:              dialTimeout,
		ReadTimeout:              ioTimeout,
		WriteTimeout:             ioTimeout,
		ContextTimeoutEnabled:    true,
	}
}

func (e endpoint) addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// client returns a client of the database behind c: the server, the cluster (which
// follows redirections), or the master that c's sentinel names.
func (d *dialer) client(c *connection) redis.UniversalClient {
	switch c.Type {
	case typeCluster:
		addrs := make([]string, 0, len(c.SeedNodes))
		for _, e := range c.SeedNodes {
			addrs = append(addrs, e.addr())
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                    addrs,
			Username:                 c.Username,
			Password:                 c.Password,
			Dialer:                   d.dial,
			Protocol:                 2,
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			MaxRetries:               -1,
			DialerRetries:            1,
			PoolSize:                 2,
			DialTimeout:              dialTimeout,
			ReadTimeout:              ioTimeout,
			WriteTimeout:             ioTimeout,
			ContextTimeoutEnabled:    true,
		})
	case typeSentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            c.ServiceName,
			SentinelAddrs:         []string{endpoint{c.SentinelHost, c.SentinelPort}.addr()},
			SentinelUsername:      c.SentinelUsername,
			SentinelPassword:      c.SentinelPassword,
			Username:              c.Username,
			Password:              c.AuthPass,
			Dialer:                d.dial,
			Protocol:              2,
			DisableIdentity:       true,
			MaxRetries:            -1,
			DialerRetries:         1,
			PoolSize:              2,
			DialTimeout:           dialTimeout,
			ReadTimeout:           ioTimeout,
			WriteTimeout:          ioTimeout,
			ContextTimeoutEnabled: true,
		})
	}
	return redis.NewClient(d.options(endpoint{c.Host, c.Port}, c.Password))
}

// probe tests the connection c describes, with pair as the client certificate, and
// returns what it found, or a 424 error naming the cause.
func (s *Server) probe(ctx context.Context, c *connection, pair *certificate) (*found, error) {
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	d, err := newDialer(c, pair, s.resolver)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case typeCluster:
		return d.probeCluster(ctx, c)
	case typeSentinel:
		return d.probeSentinel(ctx, c)
	}
	return d.probeStandalone(ctx, c)
}

// loggedIn connects and authenticates, and checks that the server answers a PING. An ACL
// user whose rules do not grant PING (Redis Cloud's Read-Only rule is +@read) is logged
// in all the same: the server refused the command, not the credentials.
func loggedIn(ctx context.Context, cl *redis.Client) error {
	err := cl.Ping(ctx).Err()
	if err != nil && strings.HasPrefix(err.Error(), "NOPERM") {
		return nil
	}
	return err
}

// probeStandalone connects, authenticates and PINGs, then reads what the server is
// (detectMode): a cluster node makes c a CLUSTER record, a sentinel is refused.
func (d *dialer) probeStandalone(ctx context.Context, c *connection) (*found, error) {
	e := endpoint{c.Host, c.Port}
	cl := redis.NewClient(d.options(e, c.Password))
	defer cl.Close()
	if err := loggedIn(ctx, cl); err != nil {
		return nil, classify(err, "the database at "+e.addr(), c.UseTLS)
	}
	return d.detectMode(ctx, cl, c)
}

// probeCluster connects to the first seed node that answers, checks that the cluster
// serves, discovers its nodes and checks that each one answers.
func (d *dialer) probeCluster(ctx context.Context, c *connection) (*found, error) {
	seed, at, err := d.connectSeed(ctx, c)
	if err != nil {
		return nil, err
	}
	defer seed.Close()
	nodes, err := clusterNodes(ctx, seed, at, c.UseTLS)
	if err != nil {
		return nil, err
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
	)
	for _, n := range nodes {
		wg.Go(func() {
			e := endpoint{n.Host, n.Port}
			cl := redis.NewClient(d.options(e, c.Password))
			defer cl.Close()
			if err := loggedIn(ctx, cl); err != nil {
				mu.Lock()
				defer mu.Unlock()
				failures = append(failures, classify(err, n.Role+" "+e.addr(), c.UseTLS).Description)
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		slices.Sort(failures)
		return nil, failed(errClusterNodesUnreachable, "cannot connect to %d of the cluster's %d nodes: %s",
			len(failures), len(nodes), strings.Join(failures, "; "))
	}
	out := make([]node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.node)
	}
	return &found{version: serverVersion(ctx, seed), nodes: out}, nil
}

// connectSeed returns a client of the first seed node that answers. A seed that refuses
// the password or the TLS settings ends the search: the others share them.
func (d *dialer) connectSeed(ctx context.Context, c *connection) (*redis.Client, endpoint, error) {
	var causes []string
	for _, e := range c.SeedNodes {
		cl := redis.NewClient(d.options(e, c.Password))
		err := loggedIn(ctx, cl)
		if err == nil {
			return cl, e, nil
		}
		cl.Close()
		ce := classify(err, "seed node "+e.addr(), c.UseTLS)
		if ce.Type != errUnreachable {
			return nil, e, ce
		}
		causes = append(causes, ce.Description)
	}
	return nil, endpoint{}, failed(errUnreachable, "no seed node answered: %s", strings.Join(causes, "; "))
}

// clusterNode is a node of a cluster as CLUSTER NODES shows it.
type clusterNode struct {
	node
	slots bool
}

// clusterNodes checks that the cluster seed belongs to is serving and returns its nodes,
// primaries first. Nodes still in handshake or without an address are left out.
func clusterNodes(ctx context.Context, seed *redis.Client, at endpoint, useTLS bool) ([]clusterNode, error) {
	info, err := seed.ClusterInfo(ctx).Result()
	if err != nil {
		if strings.Contains(err.Error(), "cluster support disabled") {
			return nil, failed(errNotACluster, "seed node %s is not in cluster mode: register it as STANDALONE", at.addr())
		}
		return nil, classify(err, "seed node "+at.addr(), useTLS)
	}
	if state := infoField(info, "cluster_state"); state != "ok" {
		return nil, failed(errClusterStateNotOK, "the cluster is not serving: cluster_state is %q at seed node %s", state, at.addr())
	}
	text, err := seed.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, classify(err, "seed node "+at.addr(), useTLS)
	}
	nodes := parseClusterNodes(text, at.Host)
	if len(nodes) > maxClusterNodes {
		// Every node is dialled, with the record's password: a server that lists
		// thousands would make this tool scan ports for it.
		return nil, failed(errConnectionFailed, "seed node %s lists %d cluster nodes: at most %d are taken", at.addr(), len(nodes), maxClusterNodes)
	}
	return nodes, nil
}

// maxClusterNodes bounds the nodes a cluster record's seed may list (Redis Cluster's
// recommended maximum is 1000).
const maxClusterNodes = 1000

// parseClusterNodes reads the output of CLUSTER NODES. A node that does not know its own
// IP address yet shows an empty one: it is reached at seedHost.
func parseClusterNodes(text, seedHost string) []clusterNode {
	var out []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "handshake") || slices.Contains(flags, "noaddr") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], ",") // ip:port@cport[,hostname]
		addr, _, _ = strings.Cut(addr, "@")
		host, portText, err := net.SplitHostPort(addr)
		port, perr := strconv.Atoi(portText)
		if err != nil || perr != nil || port == 0 {
			continue
		}
		if host == "" {
			host = seedHost
		}
		role := "primary"
		if slices.Contains(flags, "slave") || slices.Contains(flags, "replica") {
			role = "replica"
		}
		out = append(out, clusterNode{node: node{Host: host, Port: port, Role: role}, slots: role == "primary" && len(f) > 8})
	}
	slices.SortFunc(out, func(a, b clusterNode) int {
		if a.Role != b.Role {
			return strings.Compare(a.Role, b.Role) // primary < replica
		}
		if c := strings.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		return a.Port - b.Port
	})
	return out
}

// probeSentinel asks the sentinel for the master named serviceName, then connects to
// that master with authPass.
func (d *dialer) probeSentinel(ctx context.Context, c *connection) (*found, error) {
	master, err := d.sentinelMaster(ctx, c)
	if err != nil {
		return nil, err
	}
	cl := redis.NewClient(d.options(master, c.AuthPass))
	defer cl.Close()
	if err := loggedIn(ctx, cl); err != nil {
		return nil, classify(err, fmt.Sprintf("master %q at %s", c.ServiceName, master.addr()), c.UseTLS)
	}
	return &found{version: serverVersion(ctx, cl), master: &master}, nil
}

// sentinelMaster asks c's sentinel, with sentinelPassword, for the address of the master
// named serviceName.
func (d *dialer) sentinelMaster(ctx context.Context, c *connection) (endpoint, error) {
	at := endpoint{c.SentinelHost, c.SentinelPort}
	what := "the sentinel at " + at.addr()
	sc := redis.NewSentinelClient(sentinelOptions(d.options(at, c.SentinelPassword), c))
	defer sc.Close()
	if err := sc.Ping(ctx).Err(); err != nil {
		return endpoint{}, classify(err, what, c.UseTLS)
	}
	addr, err := sc.GetMasterAddrByName(ctx, c.ServiceName).Result()
	switch {
	case errors.Is(err, redis.Nil) || (err == nil && len(addr) == 0):
		return endpoint{}, unknownMaster(ctx, sc, at, c.ServiceName, c.UseTLS)
	case err != nil && strings.Contains(strings.ToLower(err.Error()), "unknown command"):
		return endpoint{}, failed(errNotASentinel, "%s is not a sentinel: %s", at.addr(), firstLine(err.Error()))
	case err != nil:
		return endpoint{}, classify(err, what, c.UseTLS)
	}
	port, err := strconv.Atoi(addr[len(addr)-1])
	if len(addr) != 2 || err != nil {
		return endpoint{}, failed(errConnectionFailed, "%s gave an unreadable address for master %q: %q", what, c.ServiceName, addr)
	}
	return endpoint{Host: addr[0], Port: port}, nil
}

// serverVersion is the server's redis_version, or "" when INFO is not allowed.
func serverVersion(ctx context.Context, cl *redis.Client) string {
	info, err := cl.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	return infoField(info, "redis_version")
}

// infoField reads one field of an INFO or CLUSTER INFO reply.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// failed is a 424: the database, not the request, is at fault.
func failed(typ, format string, args ...any) *clouddb.Error {
	return clouddb.Errorf(http.StatusFailedDependency, typ, format, args...)
}

// classify turns a client error into a 424 naming its cause: authentication, TLS or
// certificate, unreachable, or another failure. what names the server ("seed node
// 127.0.0.1:7000").
func classify(err error, what string, useTLS bool) *clouddb.Error {
	msg := firstLine(err.Error())
	closed := errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
	switch {
	case errors.Is(err, blob.ErrForbiddenAddress):
		return failed(errAddressForbidden, "%s is at a forbidden address: %s", what, msg)
	case isAuthError(msg):
		return failed(errAuthFailed, "%s refused the credentials: %s", what, msg)
	case isVerifyError(err):
		return serverCertRejected(what, err)
	case isTLSError(err):
		return failed(errTLSFailed, "TLS with %s failed: %s (check tls.useTls, tls.clientAuth and the client certificate)", what, msg)
	case closed && useTLS:
		return failed(errTLSFailed, "TLS with %s failed: the server closed the connection (%s): does it require a client certificate, or refuse this one?", what, msg)
	case isUnreachable(err):
		return failed(errUnreachable, "cannot reach %s: %s", what, msg)
	case closed:
		return failed(errConnectionFailed, "%s closed the connection (%s): does it require TLS?", what, msg)
	}
	return failed(errConnectionFailed, "%s: %s", what, msg)
}

func isAuthError(msg string) bool {
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password") ||
		strings.Contains(msg, "without any password configured")
}

func isTLSError(err error) bool {
	var (
		handshake *handshakeError
		alert     tls.AlertError
		record    tls.RecordHeaderError
		verify    *tls.CertificateVerificationError
		unknown   x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
	)
	return errors.As(err, &handshake) || errors.As(err, &alert) || errors.As(err, &record) || errors.As(err, &verify) ||
		errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		strings.Contains(err.Error(), "tls: ")
}

func isUnreachable(err error) bool {
	var (
		op  *net.OpError
		dns *net.DNSError
		ne  net.Error
	)
	return (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// firstLine is the first line of a server's message, cut to maxReplyText bytes (on a
// rune boundary): a server's reply lines have no bound, and they go into answers, pages
// and logs.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) <= maxReplyText {
		return s
	}
	cut := maxReplyText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// maxReplyText bounds the text of a server's reply that an answer quotes.
const maxReplyText = 512
