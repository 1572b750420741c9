package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"clouddb"
)

// errAuth means the server answered but refused the password.
var errAuth = errors.New("password refused")

// errLoading means the server answered but is still loading its dataset.
var errLoading = fmt.Errorf("loading its dataset (%w)", clouddb.ErrServerStarting)

// errBusy means the server answered BUSY: it runs a script or function past
// busy-reply-threshold, and serves nothing else until it ends (see adopt).
var errBusy = errors.New("busy running a script")

// errNoPerm means the server refused a command to the user by its ACL rules.
var errNoPerm = errors.New("not permitted")

// newClient returns a client for one short conversation with a server: one connection,
// no retries, RESP2 (AUTH rather than HELLO), no client-side extras.
// cred is a user and password to authenticate with; an empty user is the default user
// (the clients' password).
type cred struct{ user, password string }

func (d *Driver) newClient(n node, port int, c cred) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:     d.internalAddr(n, port),
		Username: c.user,
		Password: c.password,
		// The address is chosen at each dial: a server gets its socket only once it has
		// started (see dialServer).
		Dialer:                   func(ctx context.Context, _, _ string) (net.Conn, error) { return d.dialServer(ctx, n, port) },
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		PoolSize:                 1,
		DialTimeout:              time.Second,
		// One dial per probe: go-redis would otherwise retry a refused dial five times,
		// 100ms apart, which the start-up wait below does better with its own backoff.
		DialerRetries: 1,
		// Its pipelines on its one connection: the dedicated pipeline pool dialled a
		// second connection, with 128 KiB buffers, for each conversation that
		// pipelines (a probe, a deep check). And small buffers: every reply clouddb
		// reads here is a few KiB at most (a longer one is read in steps), and at a
		// thousand servers checked every few seconds the default 32 KiB each were
		// most of what the collector had to sweep.
		PipelinePoolSize:      -1,
		ReadBufferSize:        4 << 10,
		WriteBufferSize:       4 << 10,
		ReadTimeout:           3 * time.Second,
		WriteTimeout:          3 * time.Second,
		ContextTimeoutEnabled: true,
	})
}

// dialServer opens the driver's own connection to the database's server: through its
// unix socket when it has one, else over TCP on port (a server started by an older
// clouddb has no socket until its next restart). A socket file that refuses the
// connection is a dead server's: TCP is tried then.
func (d *Driver) dialServer(ctx context.Context, n node, port int) (net.Conn, error) {
	nd := net.Dialer{Timeout: time.Second}
	sock := d.sockPath(n)
	if isSocket(sock) {
		conn, err := nd.DialContext(ctx, "unix", sock)
		if err == nil || port == 0 {
			return conn, err
		}
	}
	if port == 0 {
		return nil, fmt.Errorf("database %d: no unix socket at %s and no TCP port", n.db, sock)
	}
	return nd.DialContext(ctx, "tcp", net.JoinHostPort(d.connectHost, strconv.Itoa(port)))
}

// internalAddr is the address dialServer would try first: the socket's path or host:port.
func (d *Driver) internalAddr(n node, port int) string {
	if sock := d.sockPath(n); isSocket(sock) || port == 0 {
		return sock
	}
	return net.JoinHostPort(d.connectHost, strconv.Itoa(port))
}

// isSocket reports whether path is a unix socket (not a symlink to one).
func isSocket(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// probe opens an authenticated connection to the server of database id (through its
// socket, or on port), checks that it answers PING and that it is process pid (so a
// stranger on the port is not taken for ours), and returns the client. Errors wrap
// errAuth or errLoading when the server said so.
func (d *Driver) probe(ctx context.Context, n node, port int, cr cred, pid int) (*redis.Client, error) {
	c := d.newClient(n, port, cr)
	fail := func(err error) (*redis.Client, error) {
		c.Close()
		return nil, err
	}
	// One round trip: a start waits for it, and a deep check of each server every few
	// seconds adds up at a thousand.
	pipe := c.Pipeline()
	ping := pipe.Ping(ctx)
	infoCmd := pipe.Info(ctx, "server")
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	if err := ping.Err(); err != nil {
		return fail(classify(err))
	}
	info, err := infoCmd.Result()
	if err != nil {
		return fail(classify(err))
	}
	got := infoField(info, "process_id")
	if got != strconv.Itoa(pid) {
		return fail(fmt.Errorf("%s is served by process %s, not redis-server pid %d", d.internalAddr(n, port), got, pid))
	}
	return c, nil
}

// classify wraps the errors a caller acts on.
func classify(err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"),
		strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"):
		return fmt.Errorf("%w: %s", errAuth, firstLine(msg))
	case strings.HasPrefix(msg, "LOADING"):
		return fmt.Errorf("%w: %s", errLoading, firstLine(msg))
	case strings.HasPrefix(msg, "NOPERM"):
		return fmt.Errorf("%w: %s", errNoPerm, firstLine(msg))
	case strings.HasPrefix(msg, "BUSY"):
		return fmt.Errorf("%w: %s", errBusy, firstLine(msg))
	}
	return err
}

// busy reports whether err, from a server that was reached, is the server's being busy
// rather than a failure (see clouddb.ErrServerBusy): it answered BUSY, or a command's
// read or write timed out. A context's deadline (one of the driver's own waits, such as
// a cluster's forming, that ran out) is not: it is a net.Error that times out too.
func busy(err error) bool {
	if errors.Is(err, errBusy) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// infoField returns the value of one "name:value" line of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// settings are the live settings clouddb manages, as CONFIG GET/SET name them. The
// password is not one of them: it belongs to the default user's ACL rules.
func settings(c serverConfig) map[string]string {
	p := persistences[c.Persistence]
	s := map[string]string{
		"maxmemory":        strconv.FormatInt(c.MaxMemory, 10),
		"maxmemory-policy": c.Policy,
		"appendonly":       p.Appendonly,
		"appendfsync":      p.Appendfsync,
		"save":             p.Save,
		"bind":             c.Host,
		// The tenant's endpoint: the driver itself goes through the socket, so a server
		// off its port is brought back live, and TLS is turned on and off live.
		"port":     strconv.Itoa(c.Port),
		"tls-port": "0",
	}
	if c.TLS {
		s["port"], s["tls-port"] = "0", strconv.Itoa(c.Port)
		s["tls-cert-file"], s["tls-key-file"] = c.TLSFiles.Cert, c.TLSFiles.Key
		s["tls-client-cert-file"], s["tls-client-key-file"] = c.TLSFiles.ClientCert, c.TLSFiles.ClientKey
		s["tls-ca-cert-file"] = c.TLSCA
		s["tls-auth-clients"] = yesNo(c.TLSAuthClients)
		s["tls-replication"] = "yes"
		// A cluster's bus speaks TLS too, and its nodes announce their TLS ports.
		s["tls-cluster"] = yesNo(c.ClusterBus != 0)
	}
	for _, l := range limitSettings(c.MaxMemory) {
		s[l.Name] = l.Value
	}
	return s
}

// settingOrder lists the settings in the order CONFIG SET gets them.
// The certificate files come before the ports, so that a TLS port opens with them; the
// tls-* settings other than tls-port are compared only while TLS is on.
var settingOrder = []string{"tls-cert-file", "tls-key-file", "tls-client-cert-file", "tls-client-key-file",
	"tls-ca-cert-file", "tls-auth-clients", "tls-replication", "tls-cluster", "port", "tls-port", "maxmemory", "maxmemory-policy", "appendonly", "appendfsync", "save", "bind",
	"sanitize-dump-payload", "maxmemory-clients", "client-output-buffer-limit", "client-query-buffer-limit"}

// setOrder is settingOrder for a CONFIG SET towards want: the port that closes comes
// before the one that opens, so that TLS turns on and off on the same port (redis opens
// and closes the listeners in the order of the arguments).
func setOrder(want map[string]string) []string {
	if want["tls-port"] != "0" {
		return settingOrder
	}
	order := slices.Clone(settingOrder)
	i, j := slices.Index(order, "port"), slices.Index(order, "tls-port")
	order[i], order[j] = order[j], order[i]
	return order
}

// liveValue is setting name's value in a CONFIG GET reply, in the form settings gives
// it: of client-output-buffer-limit, which lists every client class, only the normal
// class is clouddb's.
func liveValue(got map[string]string, name string) string {
	if name == "client-output-buffer-limit" {
		return outputClass(got[name], "normal")
	}
	return got[name]
}

// Names of the ACL parts of a configuration, and of what clouddb did not set up, as
// applyLive and drifted report them.
const (
	changedPassword    = "password"
	changedRules       = "default user rules"
	changedUsers       = "foreign users"       // users clouddb did not make
	changedNamed       = "named users"         // the instance's users: added, redefined or deleted
	changedReplication = "foreign replication" // REPLICAOF other than a replica node's of its primary
	// Connections applyLive closed because they may have been opened, or put in a
	// state (MONITOR, a replica's stream), under rules clouddb did not give.
	closedDefault  = "default user's connections closed"
	closedInternal = "internal user's connections closed"
	// A named user whose password changed (or who could log in otherwise) loses the
	// connections opened before.
	closedNamed = "named users' connections closed"
)

// configGet is CONFIG GET of the managed settings (a few names, not "*").
func configGet(ctx context.Context) *redis.MapStringStringCmd {
	args := []any{"config", "get"}
	for _, name := range settingOrder {
		args = append(args, name)
	}
	return redis.NewMapStringStringCmd(ctx, args...)
}

// liveSettings reads the managed settings of the server behind c.
func liveSettings(ctx context.Context, c *redis.Client) (map[string]string, error) {
	cmd := configGet(ctx)
	if err := c.Process(ctx, cmd); err != nil {
		return nil, fmt.Errorf("CONFIG GET: %w", classify(err))
	}
	return cmd.Val(), nil
}

// primaryOf reads the reply of ROLE: "host port" of the master the server replicates
// from (REPLICAOF), "" for a master. clouddb makes only a replica node one (see node.go):
// its replicaOf copies through a client of its own, the primary staying a master.
func primaryOf(cmd *redis.Cmd) (string, error) {
	v, err := cmd.Slice()
	if err != nil {
		return "", fmt.Errorf("ROLE: %w", classify(err))
	}
	if len(v) == 0 {
		return "", errors.New("ROLE: empty reply")
	}
	switch role := fmt.Sprint(v[0]); {
	case role == "master":
		return "", nil
	case role == "slave" && len(v) >= 3:
		return fmt.Sprint(v[1], " ", v[2]), nil
	default:
		return role, nil // a sentinel, or a reply clouddb does not know: never the one wanted
	}
}

// usersAndRole reads, in one round trip, the server's ACL users and the master it
// replicates from, if any (see primaryOf).
func usersAndRole(ctx context.Context, c *redis.Client) ([]string, string, error) {
	pipe := c.Pipeline()
	users := redis.NewStringSliceCmd(ctx, "acl", "users")
	_ = pipe.Process(ctx, users)
	role := pipe.Do(ctx, "role")
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	if err := users.Err(); err != nil {
		return nil, "", fmt.Errorf("ACL USERS: %w", classify(err))
	}
	primary, err := primaryOf(role)
	return users.Val(), primary, err
}

// errUnruly means that users or replication clouddb did not set up came back every time
// it removed them: someone who may still administer the server is at work.
var errUnruly = errors.New("users or replication that clouddb did not set up keep coming back")

// inLineRounds bounds bringInLine's attempts.
const inLineRounds = 5

// bringInLine defines the default, internal and named users anew and deletes every other
// user (with it, redis closes its connections) and ends replication from a master
// (REPLICAOF NO ONE, the data stays), in one round trip, so that no user with rights
// clouddb did not give outlives it. A user or a REPLICAOF that someone who still had the
// rights made between clouddb's look and those commands shows at the next look, which
// does it again; after inLineRounds the error wraps errUnruly. It returns what it found
// wrong (changedUsers, changedReplication); a scratch user nobody can log in as, and a
// named user clouddb made (made: one the instance no longer wants), are deleted but not
// counted.
func bringInLine(ctx context.Context, c *redis.Client, want serverConfig, made map[string]bool) ([]string, error) {
	var wrong []string
	note := func(what string) {
		if !slices.Contains(wrong, what) {
			wrong = append(wrong, what)
		}
	}
	for round := 0; ; round++ {
		users, primary, err := usersAndRole(ctx, c)
		if err != nil {
			return wrong, err
		}
		foreign := foreignUsers(users, want.Users)
		// Replication clouddb did not set up; a cluster node's is the cluster's.
		replica := primary != want.Primary && want.ClusterBus == 0
		if round > 0 && len(foreign) == 0 && !replica {
			return wrong, nil
		}
		if round == inLineRounds {
			return wrong, fmt.Errorf("%w (still after %d attempts)", errUnruly, round)
		}
		for _, name := range foreign {
			if name == scratchUser {
				u, err := getUser(ctx, c, name)
				if err != nil {
					return wrong, fmt.Errorf("ACL GETUSER %s: %w", name, classify(err))
				}
				if !u.canLogIn() {
					continue // left over by clouddb itself: see scratchUser
				}
			}
			if made[name] {
				continue // clouddb's own, no longer wanted
			}
			note(changedUsers)
		}
		if replica {
			note(changedReplication)
		}
		// One round trip, not a MULTI: a server over its maxmemory refuses to queue any
		// command in a transaction, and a tenant can fill its database on purpose. A
		// tenant racing these commands is caught by the next round's read.
		p := c.Pipeline()
		cmds := []*redis.Cmd{p.Do(ctx, setUserArgs("default", defaultUser("#"+passwordHash(want.Password), want.ReadOnly, want.DefaultOff))...)}
		if want.InternalSecret != "" {
			cmds = append(cmds, p.Do(ctx, setUserArgs(internalUser, internalUserRules("#"+passwordHash(want.InternalSecret)))...))
		}
		for _, u := range want.Users {
			cmds = append(cmds, p.Do(ctx, setUserArgs(u.Name, userRules("#"+passwordHash(u.Password), u.Rule, want.ReadOnly))...))
		}
		if len(foreign) > 0 {
			args := []any{"acl", "deluser"}
			for _, name := range foreign {
				args = append(args, name)
			}
			cmds = append(cmds, p.Do(ctx, args...))
		}
		if replica {
			if host, port, ok := strings.Cut(want.Primary, " "); ok {
				cmds = append(cmds, p.Do(ctx, "replicaof", host, port))
			} else {
				cmds = append(cmds, p.Do(ctx, "replicaof", "no", "one"))
			}
		}
		_, _ = p.Exec(ctx) // each command's error is read below
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				what := strings.ToUpper(fmt.Sprint(cmd.Args()[0], " ", cmd.Args()[1]))
				if what == "ACL SETUSER" {
					what += fmt.Sprint(" ", cmd.Args()[2]) // a name; its password is a hash
				}
				return wrong, fmt.Errorf("%s: %w", what, classify(err))
			}
		}
	}
}

// applyLive sets the settings of want that differ on the running server, in one atomic
// CONFIG SET, defines the default, internal and named users anew (all idempotent),
// removes what clouddb did not set up and the named users it made that want no longer
// has (see bringInLine), and returns the names of what changed (never values), the
// default user and the named users as the server now describes them. Turning AOF on
// starts a rewrite; applyLive waits for it so the AOF holds the dataset (and redis
// accepts a shutdown) before it returns.
//
// When the server was not as clouddb leaves it (users it did not make, replication it did
// not set up, a default user with rules or passwords it did not give, an internal user
// with a password not clouddb's), whoever could log in may have opened connections that
// the new rules do not undo (MONITOR, a replica's stream, a subscription): applyLive
// closes the connections of the user concerned. A server as clouddb left it keeps them,
// a change of password or of replicaOf included. The default user's connections are also
// closed when it is turned off, and a named user's when clouddb did not make it or it
// could log in otherwise than with its password (which changed); a new rule applies to
// open connections at once.
func (d *Driver) applyLive(ctx context.Context, c *redis.Client, want serverConfig, made map[string]bool) ([]string, aclUser, map[string]knownUser, error) {
	got, err := liveSettings(ctx, c)
	if err != nil {
		return nil, aclUser{}, nil, err
	}
	wantSet := settings(want)
	args := []any{"config", "set"}
	var changed []string
	for _, name := range setOrder(wantSet) {
		if w, ok := wantSet[name]; ok && liveValue(got, name) != w {
			args = append(args, name, w)
			changed = append(changed, name)
		}
	}
	if len(changed) > 0 {
		if err = c.Do(ctx, args...).Err(); err != nil {
			return nil, aclUser{}, nil, fmt.Errorf("CONFIG SET %s: %w", strings.Join(changed, ", "), classify(err))
		}
	}
	// The ACL part. Redefining the users from scratch also brings a server started from
	// an older config file (requirepass, a default user with +@all) in line.
	before, err := getUser(ctx, c, "default")
	if err != nil {
		return nil, aclUser{}, nil, fmt.Errorf("ACL GETUSER default: %w", classify(err))
	}
	var beforeInternal aclUser
	if want.InternalSecret != "" {
		if beforeInternal, err = getUser(ctx, c, internalUser); err != nil {
			return nil, aclUser{}, nil, fmt.Errorf("ACL GETUSER %s: %w", internalUser, classify(err))
		}
	}
	beforeUsers, err := listUsers(ctx, c)
	if err != nil {
		return nil, aclUser{}, nil, err
	}
	wrong, err := bringInLine(ctx, c, want, made)
	if err != nil {
		return nil, aclUser{}, nil, err
	}
	after, err := getUser(ctx, c, "default")
	if err != nil {
		return nil, aclUser{}, nil, fmt.Errorf("ACL GETUSER default: %w", classify(err))
	}
	afterUsers, err := listUsers(ctx, c)
	if err != nil {
		return nil, aclUser{}, nil, err
	}
	if !slices.Equal(before.passwords, after.passwords) {
		changed = append(changed, changedPassword)
	}
	if before.rules != after.rules {
		changed = append(changed, changedRules)
	}
	changed = append(changed, wrong...)

	// Whether the tenant's connections may hold more than the rules now give. Its rules
	// of before are clouddb's if they are the server's form of the current ones or of
	// another kind clouddb gives (replicaOf turned on or off, the user turned on); one
	// password is the tenant's, several are not clouddb's doing. A user turned off keeps
	// its connections in redis: they are closed too.
	cut := len(wrong) > 0 || len(before.passwords) > 1 || slices.Contains(before.flags, "nopass") ||
		(want.DefaultOff && slices.Contains(before.flags, "on"))
	if !cut && before.rules != after.rules {
		cut = true
		for _, k := range [][2]bool{{!want.ReadOnly, want.DefaultOff}, {want.ReadOnly, !want.DefaultOff}, {!want.ReadOnly, !want.DefaultOff}} {
			other, err := normalRules(ctx, c, k[0], k[1])
			if err != nil {
				return nil, aclUser{}, nil, err
			}
			if before.rules == other {
				cut = false
				break
			}
		}
	}
	if cut {
		if err := c.Do(ctx, "client", "kill", "user", "default").Err(); err != nil {
			return nil, aclUser{}, nil, fmt.Errorf("CLIENT KILL USER default: %w", classify(err))
		}
		changed = append(changed, closedDefault)
	}
	if want.InternalSecret != "" &&
		(!slices.Equal(beforeInternal.passwords, []string{passwordHash(want.InternalSecret)}) || slices.Contains(beforeInternal.flags, "nopass")) {
		// Someone else could log in as clouddb's own user. This connection stays (SKIPME
		// is the default); clouddb's others, if any, connect again.
		if err := c.Do(ctx, "client", "kill", "user", internalUser).Err(); err != nil {
			return nil, aclUser{}, nil, fmt.Errorf("CLIENT KILL USER %s: %w", internalUser, classify(err))
		}
		changed = append(changed, closedInternal)
	}

	users, named, nerr := namedAfter(ctx, c, want, made, beforeUsers, afterUsers)
	if nerr != nil {
		return nil, aclUser{}, nil, nerr
	}
	changed = append(changed, named...)

	info, ierr := c.Info(ctx, "memory").Result()
	if ierr != nil {
		return nil, aclUser{}, nil, fmt.Errorf("INFO memory: %w", classify(ierr))
	}
	if scriptMemory(info) > scriptMemoryLimit(want.MaxMemory) {
		if err := c.Do(ctx, "script", "flush", "async").Err(); err != nil {
			return nil, aclUser{}, nil, fmt.Errorf("SCRIPT FLUSH: %w", classify(err))
		}
		changed = append(changed, changedScripts)
	}
	if got["appendonly"] != "yes" && wantSet["appendonly"] == "yes" {
		if err := d.waitAOFRewrite(ctx, c); err != nil {
			return changed, after, users, err
		}
	}
	return changed, after, users, nil
}

// namedAfter closes the connections of the named users that may have been opened in a
// way their new definition does not allow, given the server's users (ACL LIST lines, by
// name) before and after clouddb defined want's named users and deleted those it made
// (made) that want no longer has. A user clouddb did not make may hold what no rule
// undoes (a MONITOR); one that could log in otherwise than with its password (which
// changed) may have been opened with the old one. A deleted user's connections redis
// closed itself. It returns how the server now describes each wanted user (for drifted)
// and what changed (changedNamed, closedNamed).
func namedAfter(ctx context.Context, c *redis.Client, want serverConfig, made map[string]bool, before, after map[string]string) (map[string]knownUser, []string, error) {
	users := make(map[string]knownUser, len(want.Users))
	namedChanged, namedCut := false, false
	for _, u := range want.Users {
		users[u.Name] = knownUser{sig: userSig(u, want.ReadOnly), line: after[u.Name]}
		prior, existed := before[u.Name]
		if prior != after[u.Name] {
			namedChanged = true
		}
		if existed && (!made[u.Name] || !lineLogsIn(prior, passwordHash(u.Password))) {
			if err := c.Do(ctx, "client", "kill", "user", u.Name).Err(); err != nil {
				return nil, nil, fmt.Errorf("CLIENT KILL USER %s: %w", u.Name, classify(err))
			}
			namedCut = true
		}
	}
	for name := range made {
		if _, present := after[name]; !present && before[name] != "" {
			namedChanged = true // deleted: redis closed its connections
		}
	}
	var changed []string
	if namedChanged {
		changed = append(changed, changedNamed)
	}
	if namedCut {
		changed = append(changed, closedNamed)
	}
	return users, changed, nil
}

// applyUsers defines want's named users anew (read-only as want says) and deletes those
// clouddb made that want no longer has, in one round trip, then closes the connections
// namedAfter says must go. Nothing else of the server changes: the default and internal
// users, users clouddb did not make, settings, replication (see SetUsers).
func applyUsers(ctx context.Context, c *redis.Client, want serverConfig, made map[string]bool) (map[string]knownUser, []string, error) {
	before, err := listUsers(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	wanted := make(map[string]bool, len(want.Users))
	p := c.Pipeline()
	var cmds []*redis.Cmd
	for _, u := range want.Users {
		wanted[u.Name] = true
		cmds = append(cmds, p.Do(ctx, setUserArgs(u.Name, userRules("#"+passwordHash(u.Password), u.Rule, want.ReadOnly))...))
	}
	args := []any{"acl", "deluser"}
	for name := range made {
		if _, present := before[name]; present && !wanted[name] && !ourUser(name) {
			args = append(args, name)
		}
	}
	if len(args) > 2 {
		cmds = append(cmds, p.Do(ctx, args...))
	}
	if len(cmds) == 0 {
		return map[string]knownUser{}, nil, nil
	}
	_, _ = p.Exec(ctx) // each command's error is read below
	for _, cmd := range cmds {
		if cerr := cmd.Err(); cerr != nil {
			what := strings.ToUpper(fmt.Sprint(cmd.Args()[0], " ", cmd.Args()[1]))
			if what == "ACL SETUSER" {
				what += fmt.Sprint(" ", cmd.Args()[2]) // a name; its password is a hash
			}
			return nil, nil, fmt.Errorf("%s: %w", what, classify(cerr))
		}
	}
	after, err := listUsers(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	return namedAfter(ctx, c, want, made, before, after)
}

// listUsers reads ACL LIST: every user's line, by name.
func listUsers(ctx context.Context, c *redis.Client) (map[string]string, error) {
	lines, err := c.Do(ctx, "acl", "list").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("ACL LIST: %w", classify(err))
	}
	return aclList(lines), nil
}

// drifted compares the server behind c with want: the managed settings, the default
// user's password and, when known, its rules as the server described them after clouddb
// last set them, the named users (see usersDrift; known are those descriptions), that it
// has no other user but clouddb's (a scratch user nobody can log in as aside), that it is
// no replica, and that its EVAL scripts hold no more than scriptMemoryLimit. It returns
// the names of what differs. One round trip, and one more when a scratch user is there.
func drifted(ctx context.Context, c *redis.Client, want serverConfig, rules string, known map[string]knownUser) ([]string, error) {
	diff, _, _, err := inspect(ctx, c, want, &rules, known)
	return diff, err
}

// inspect is drifted that also returns the default user's rules and the users (ACL
// LIST, by name) as the server describes them; with rules nil, the default user's
// rules are not compared (they are learnt).
func inspect(ctx context.Context, c *redis.Client, want serverConfig, rules *string, known map[string]knownUser) ([]string, string, map[string]string, error) {
	pipe := c.Pipeline()
	cfg := configGet(ctx)
	_ = pipe.Process(ctx, cfg)
	def := pipe.Do(ctx, "acl", "getuser", "default")
	list := redis.NewStringSliceCmd(ctx, "acl", "list")
	_ = pipe.Process(ctx, list)
	role := pipe.Do(ctx, "role")
	mem := pipe.Info(ctx, "memory")
	_, _ = pipe.Exec(ctx) // each command keeps its own error
	if err := cfg.Err(); err != nil {
		return nil, "", nil, fmt.Errorf("CONFIG GET: %w", classify(err))
	}
	got := cfg.Val()
	wantSet := settings(want)
	var diff []string
	for _, name := range settingOrder {
		if w, ok := wantSet[name]; ok && liveValue(got, name) != w {
			diff = append(diff, name)
		}
	}
	u, err := parseUser(def.Result())
	if err != nil {
		return nil, "", nil, fmt.Errorf("ACL GETUSER default: %w", classify(err))
	}
	if !slices.Equal(u.passwords, []string{passwordHash(want.Password)}) {
		diff = append(diff, changedPassword)
	}
	if rules != nil && u.rules != *rules {
		diff = append(diff, changedRules)
	}
	if err = list.Err(); err != nil {
		return nil, "", nil, fmt.Errorf("ACL LIST: %w", classify(err))
	}
	live := aclList(list.Val())
	if usersDrift(live, want.Users, want.ReadOnly, known) {
		diff = append(diff, changedNamed)
	}
	names := make([]string, 0, len(live))
	for name := range live {
		names = append(names, name)
	}
	for _, name := range foreignUsers(names, want.Users) {
		if name == scratchUser {
			s, serr := getUser(ctx, c, name)
			if serr != nil {
				return nil, "", nil, fmt.Errorf("ACL GETUSER %s: %w", name, classify(serr))
			}
			if !s.canLogIn() {
				continue // left over by clouddb itself: see scratchUser
			}
		}
		diff = append(diff, changedUsers)
		break
	}
	primary, err := primaryOf(role)
	if err != nil {
		return nil, "", nil, err
	}
	if primary != want.Primary && want.ClusterBus == 0 {
		diff = append(diff, changedReplication)
	}
	if err = mem.Err(); err != nil {
		return nil, "", nil, fmt.Errorf("INFO memory: %w", classify(err))
	}
	if scriptMemory(mem.Val()) > scriptMemoryLimit(want.MaxMemory) {
		diff = append(diff, changedScripts)
	}
	return diff, u.rules, live, nil
}

// waitAOFRewrite waits, up to StartTimeout, until no AOF rewrite is running or scheduled.
func (d *Driver) waitAOFRewrite(ctx context.Context, c *redis.Client) error {
	ctx, cancel := context.WithTimeout(ctx, d.startTimeout)
	defer cancel()
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("waiting for the AOF rewrite: %w", err)
		}
		if infoField(info, "aof_rewrite_in_progress") == "0" && infoField(info, "aof_rewrite_scheduled") == "0" {
			if s := infoField(info, "aof_last_bgrewrite_status"); s != "" && s != "ok" {
				return fmt.Errorf("AOF rewrite failed: aof_last_bgrewrite_status:%s", s)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("AOF rewrite still running after %s", d.startTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
