package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"clouddb"
	"clouddb/internal/aclcheck"
	"clouddb/internal/redisconf"
)

// The tenant's rules and clouddb's own user are the same on every driver: see
// internal/redisconf.
var (
	tenantRules       = redisconf.TenantRules
	userDenials       = redisconf.UserDenials
	defaultUserRules  = redisconf.DefaultUserRules
	defaultUser       = redisconf.DefaultUser
	userRules         = redisconf.UserRules
	internalUserRules = redisconf.InternalUserRules
	passwordHash      = redisconf.PasswordHash
)

// readOnlyRule denies the tenant every write, on a database that replicates from sources.
const readOnlyRule = redisconf.ReadOnlyRule

// setUser runs ACL SETUSER name rules.
func setUser(ctx context.Context, c *redis.Client, name string, rules []string) error {
	return c.Do(ctx, setUserArgs(name, rules)...).Err()
}

// setUserArgs are the words of ACL SETUSER name rules.
func setUserArgs(name string, rules []string) []any {
	args := make([]any, 0, len(rules)+3)
	args = append(args, "acl", "setuser", name)
	for _, r := range rules {
		args = append(args, r)
	}
	return args
}

// ourUser reports whether clouddb made the user: the default user, whose rules it sets
// and whose password is the tenant's, and its own. Any other user of a server (but
// scratchUser, for a moment, and the named users the instance wants) is a stranger, which
// clouddb deletes.
func ourUser(name string) bool {
	return name == "default" || name == internalUser
}

// foreignUsers returns the names that are neither ourUser nor wanted, scratchUser among
// them.
func foreignUsers(names []string, wanted []clouddb.DatabaseUser) []string {
	var out []string
	for _, n := range names {
		if !ourUser(n) && !slices.ContainsFunc(wanted, func(u clouddb.DatabaseUser) bool { return u.Name == n }) {
			out = append(out, n)
		}
	}
	return out
}

// aclList reads the reply of ACL LIST: each user's line ("user NAME flags #hash… rules"),
// by name. User names have no spaces (ACL SETUSER refuses them).
func aclList(lines []string) map[string]string {
	m := make(map[string]string, len(lines))
	for _, l := range lines {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "user" {
			m[f[1]] = l
		}
	}
	return m
}

// lineLogsIn reports whether a user's ACL LIST line lets in exactly one password, the one
// whose hash is given, and no other way: the user is on, has no nopass and that single
// password.
func lineLogsIn(line, hash string) bool {
	var on bool
	var passwords []string
	words := strings.Fields(line)
	if len(words) < 2 {
		return false
	}
	for _, w := range words[2:] { // after "user NAME"
		switch {
		case w == "on":
			on = true
		case w == "nopass":
			return false
		case strings.HasPrefix(w, "#"):
			passwords = append(passwords, w[1:])
		}
	}
	return on && slices.Equal(passwords, []string{hash})
}

// knownUser is a named user as its server described it (its ACL LIST line) right after
// clouddb defined it with the password, rule and read-only state that sig stands for.
type knownUser struct {
	sig  string
	line string
}

// userSig identifies a named user's definition; it holds the password's hash only.
func userSig(u clouddb.DatabaseUser, readOnly bool) string {
	return fmt.Sprintf("%s %t %s", passwordHash(u.Password), readOnly, u.Rule)
}

// usersDrift compares the named users of a server (its ACL LIST, by name) with the wanted
// ones, read-only or not: each must be there, logging in with its password only, and,
// when clouddb knows how the server described it after defining it the same way,
// described so still.
func usersDrift(live map[string]string, wanted []clouddb.DatabaseUser, readOnly bool, known map[string]knownUser) bool {
	for _, u := range wanted {
		line, ok := live[u.Name]
		if !ok || !lineLogsIn(line, passwordHash(u.Password)) {
			return true
		}
		if k, ok := known[u.Name]; ok && k.sig == userSig(u, readOnly) && k.line != line {
			return true
		}
	}
	return false
}

// aclUser is what ACL GETUSER says of a user: its password hashes, and the rest of its
// definition (flags, commands, keys, channels, selectors) in the server's own normal form,
// which is not the form the rules were given in: it is compared with what the same
// server answered after clouddb set the rules.
type aclUser struct {
	passwords []string
	flags     []string // also in rules
	rules     string
}

// canLogIn reports whether anyone can log in as the user: it is on and has a password
// or needs none. A user that does not exist (the zero aclUser) cannot.
func (u aclUser) canLogIn() bool {
	return slices.Contains(u.flags, "on") && (len(u.passwords) > 0 || slices.Contains(u.flags, "nopass"))
}

// getUser reads a user's definition; a user that does not exist reads as zero.
func getUser(ctx context.Context, c *redis.Client, name string) (aclUser, error) {
	return parseUser(c.Do(ctx, "acl", "getuser", name).Result())
}

// parseUser reads the reply of ACL GETUSER.
func parseUser(v any, err error) (aclUser, error) {
	if err == redis.Nil {
		return aclUser{}, nil
	}
	if err != nil {
		return aclUser{}, err
	}
	var fields []any
	switch t := v.(type) {
	case []any:
		fields = t
	case map[any]any: // RESP3
		for k, val := range t {
			fields = append(fields, k, val)
		}
	default:
		return aclUser{}, fmt.Errorf("ACL GETUSER: unexpected reply %T", v)
	}
	var u aclUser
	parts := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		name := fmt.Sprint(fields[i])
		if name == "passwords" {
			if l, ok := fields[i+1].([]any); ok {
				for _, p := range l {
					u.passwords = append(u.passwords, fmt.Sprint(p))
				}
			}
			continue
		}
		if l, ok := fields[i+1].([]any); ok && name == "flags" {
			for _, f := range l {
				u.flags = append(u.flags, fmt.Sprint(f))
			}
		}
		parts[name] = fmt.Sprint(fields[i+1])
	}
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%s;", n, parts[n])
	}
	u.rules = b.String()
	return u, nil
}

// scratchUser is a user that exists only for a moment, to learn how a server writes the
// default user's rules; it has no password, so nobody can log in as it meanwhile. Only
// normalRules makes it, and only while it holds the database's lock (in Running and in
// Ensure), so whoever else holds the lock and finds it finds one left over (by a failed
// ACL DELUSER or a crash), which it may delete.
const scratchUser = "clouddb-scratch"

// normalRules returns the default user's rules (without its password), read-only or not,
// on or off, in the normal form of the server behind c, by defining them on scratchUser
// and reading them back.
// A scratch user that someone can log in as is not clouddb's: normalRules leaves it, and
// fails, for Ensure to delete it and cut whatever its maker opened (see applyLive).
func normalRules(ctx context.Context, c *redis.Client, readOnly, off bool) (string, error) {
	prior, err := getUser(ctx, c, scratchUser)
	if err != nil {
		return "", fmt.Errorf("ACL GETUSER %s: %w", scratchUser, classify(err))
	}
	if prior.canLogIn() {
		return "", fmt.Errorf("ACL user %s, which someone can log in as, is not clouddb's", scratchUser)
	}
	rules := slices.DeleteFunc(defaultUser("", readOnly, off), func(r string) bool { return r == "" })
	if err = setUser(ctx, c, scratchUser, rules); err != nil {
		return "", fmt.Errorf("ACL SETUSER %s: %w", scratchUser, classify(err))
	}
	u, err := getUser(ctx, c, scratchUser)
	if derr := c.Do(ctx, "acl", "deluser", scratchUser).Err(); err == nil && derr != nil {
		err = derr
	}
	if err != nil {
		return "", fmt.Errorf("ACL GETUSER %s: %w", scratchUser, classify(err))
	}
	return u.rules, nil
}

// validateUsers checks the instance's named users: a name clouddb.ValidateACLUserName
// accepts (the API's rule: printable ASCII without spaces, default and clouddb-* reserved
// whatever their case), each once; a password; a rule of the tenant's kind
// (clouddb.ValidateACLRule: nothing that defines a user, no selector). Errors name the
// user, never its password.
func validateUsers(in clouddb.Instance) error {
	seen := make(map[string]bool, len(in.Users))
	for _, u := range in.Users {
		if err := clouddb.ValidateACLUserName(u.Name); err != nil {
			return fmt.Errorf("database %d: ACL user %q: %w", in.DatabaseID, u.Name, err)
		}
		switch {
		case seen[u.Name]:
			return fmt.Errorf("database %d: ACL user %q is listed twice", in.DatabaseID, u.Name)
		case u.Password == "":
			return fmt.Errorf("database %d: ACL user %q: a password is required", in.DatabaseID, u.Name)
		}
		if err := clouddb.ValidateACLRule(u.Rule); err != nil {
			return fmt.Errorf("database %d: ACL user %q: %w", in.DatabaseID, u.Name, err)
		}
		seen[u.Name] = true
	}
	return nil
}

// usersKey identifies the instance's named users, whether they are read-only (the
// database replicates) and whether its default user is off, for the deep check's record
// of what it vouched for; it holds no password.
func usersKey(in clouddb.Instance) string {
	h := sha256.New()
	readOnly := len(in.ReplicaOf) > 0
	fmt.Fprintf(h, "%v %v\n", in.DefaultUserOff, readOnly)
	for _, u := range in.Users {
		fmt.Fprintf(h, "%s\n%s\n", u.Name, userSig(u, readOnly))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// madeUsers are the named users clouddb defined on the database's server, as far as it
// knows: those its config file lists and those it defined since this Driver started.
// Deleting one of them is no sign of a stranger (see bringInLine).
func (d *Driver) madeUsers(n node) map[string]bool {
	made := map[string]bool{}
	if c, ok, err := d.readConfig(n); err == nil && ok {
		for _, u := range c.Users {
			made[u.Name] = true
		}
	}
	d.mu.Lock()
	for name := range d.users[n] {
		made[name] = true
	}
	d.mu.Unlock()
	return made
}

var _ clouddb.UserSetter = (*Driver)(nil)

// SetUsers gives the database's server the instance's named users and nothing else, for
// a database the reconciler does not Ensure (in error, or whose Ensure waits) while its
// server may still run: a password changed, a user deleted or a database taken out of a
// role must stop working there too. Under the database's lock it defines the users anew
// on the running server, as clouddb's internal user, deletes those clouddb made that the
// instance no longer has, closes the connections Ensure would close (a changed password's,
// a stranger's of the same name), and rewrites the users in the config file. The named
// users are read-only as the server runs (its default user's rules say whether it
// replicates): replication is Ensure's to change. The default user, the settings and any
// user clouddb did not make are left alone.
//
// A server that does not run is not started: its config file, if any, gets the users,
// and clouddb starts it only through Ensure, which defines them anyway. SetUsers then
// answers nil.
func (d *Driver) SetUsers(ctx context.Context, in clouddb.Instance) error {
	id := in.DatabaseID
	if id <= 0 {
		return fmt.Errorf("database id %d: must be positive", id)
	}
	if err := validateUsers(in); err != nil {
		return err
	}
	unlock, err := d.lockUnlessImporting(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	// Both nodes: a replica serves reads to the same users.
	for _, n := range d.nodes(id) {
		if err := d.setUsersOn(ctx, in, n); err != nil {
			return err
		}
	}
	return nil
}

// setUsersOn is SetUsers for node n's server.
func (d *Driver) setUsersOn(ctx context.Context, in clouddb.Instance, n node) error {
	id := in.DatabaseID
	conf, ok, err := d.readConfig(n)
	if err != nil {
		return fmt.Errorf("database %d: %w", id, err)
	}
	pid := d.livePid(n)
	if !ok {
		if pid != 0 {
			return fmt.Errorf("database %d: redis-server pid %d runs without a %s to reach it with", id, pid, confFile)
		}
		return nil // never started: Ensure gives it its users
	}
	want := conf
	want.Users = in.Users
	if pid == 0 {
		if werr := d.writeConfig(n, want); werr != nil {
			return fmt.Errorf("database %d: write %s: %w", id, confFile, werr)
		}
		return nil
	}
	if conf.InternalSecret == "" {
		return fmt.Errorf("database %d: redis-server pid %d has no internal user to set its users with", id, pid)
	}
	c, err := d.probe(ctx, n, conf.Port, cred{internalUser, conf.InternalSecret}, pid)
	if err != nil {
		return fmt.Errorf("database %d: reach redis-server pid %d to set its users: %w", id, pid, err)
	}
	defer c.Close()
	users, changed, err := applyUsers(ctx, c, want, d.madeUsers(n))
	if err != nil {
		return fmt.Errorf("database %d: set users: %w", id, err)
	}
	d.mu.Lock()
	d.users[n] = users
	d.mu.Unlock()
	// After the server, as in reconfigure: a crash in between leaves users the next
	// SetUsers or Ensure defines again.
	if err := d.writeConfig(n, want); err != nil {
		return fmt.Errorf("database %d: write %s: %w", id, confFile, err)
	}
	if len(changed) > 0 {
		d.log.Info("applied named users to running redis-server", keyDatabase, id, keyPid, pid, keyChanged, changed)
	}
	return nil
}

var _ clouddb.ACLChecker = (*Driver)(nil)

// CheckACLRules verifies rules, composed as named users get them, on a throwaway server of
// each binary the driver offers (see aclcheck.Checker): one server per binary for the
// whole batch, and verdicts remembered, so that a rule costs one check per binary and
// process.
func (d *Driver) CheckACLRules(ctx context.Context, rules []string) error {
	return d.aclChecker().Check(ctx, rules)
}

// checkRulesOn verifies rules on the binary bin only, as CheckACLRules does on each
// binary. Before an upgrade, it tells whether the target version takes the users a
// database has.
func (d *Driver) checkRulesOn(ctx context.Context, bin string, rules []string) error {
	return d.aclChecker().CheckOn(ctx, bin, rules)
}

// aclChecker checks rules on the binaries by version, one throwaway server of this
// Driver at a time.
func (d *Driver) aclChecker() *aclcheck.Checker {
	return &aclcheck.Checker{
		Versions: d.bins,
		Key:      binaryKey,
		Verdicts: verdicts,
		Run: func(ctx context.Context, bin string, rules []string) (map[string]aclcheck.Verdict, error) {
			select {
			case d.ruleCheck <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			defer func() { <-d.ruleCheck }()
			return d.runCheck(ctx, bin, rules)
		},
	}
}

// verdicts are the rule verdicts of this process. A verdict depends on the binary alone
// (the words added to a rule are clouddb's own), so the memory is the process's, keyed by
// the binary as it is on disk (see binaryKey) and the rule.
var verdicts = aclcheck.NewCache(aclcheck.MaxVerdicts)

// binaryKey identifies a binary file by its path, size and modification time, so that a
// binary replaced in place (a package upgrade) is asked again; false when it cannot be
// read (the check itself then fails).
func binaryKey(bin string) (string, bool) {
	st, err := os.Stat(bin)
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("%s\x00%d\x00%d\x00", bin, st.Size(), st.ModTime().UnixNano()), true
}

// runCheck starts a throwaway server of bin, reachable only through a unix socket in a
// private temporary directory, defines the rules on it (aclcheck.Define), and kills it
// (no data, nothing to save). It returns a verdict for each rule; an error means the
// check could not be made.
func (d *Driver) runCheck(ctx context.Context, bin string, rules []string) (map[string]aclcheck.Verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, d.startTimeout)
	defer cancel()
	name := filepath.Base(bin)
	// The system's temporary directory, not the data dir: a socket's path is limited to
	// about 100 bytes.
	dir, err := os.MkdirTemp("", "clouddb-aclcheck-")
	if err != nil {
		return nil, fmt.Errorf("check ACL rules: %w", err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "redis.sock")
	conf := strings.Join([]string{
		"port 0",
		"unixsocket " + quote(sock),
		"unixsocketperm 700",
		"dir " + quote(dir),
		`save ""`,
		"appendonly no",
		`logfile ""`,
		"daemonize no",
		"always-show-logo no",
		"",
	}, "\n")
	confPath := filepath.Join(dir, "redis.conf")
	if err = os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("check ACL rules: %w", err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, confPath)
	cmd.Dir = dir
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = checkProcAttr()
	// The parent-death signal follows the thread that started the server: this goroutine
	// keeps that thread until the server is reaped, so that no other goroutine can end
	// the thread (by exiting while locked to it) and the server with it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err = cmd.Start(); err != nil {
		return nil, fmt.Errorf("check ACL rules: start %s: %w", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	// Wait for the socket with plain dials: a go-redis pool whose dial failed waits a
	// second before it dials again.
	for wait := time.Millisecond; ; wait = min(wait*2, 50*time.Millisecond) {
		var dialer net.Dialer
		conn, derr := dialer.DialContext(ctx, "unix", sock)
		if derr == nil {
			conn.Close()
			break
		}
		select {
		case <-exited:
			last := strings.TrimSpace(out.String())
			if i := strings.LastIndexByte(last, '\n'); i >= 0 {
				last = last[i+1:]
			}
			return nil, fmt.Errorf("check ACL rules: %s exited at start-up: %s", name, last)
		case <-ctx.Done():
			return nil, fmt.Errorf("check ACL rules: %s did not answer within %s", name, d.startTimeout)
		case <-time.After(wait):
		}
	}
	c := redis.NewClient(&redis.Options{
		Network:                  "unix",
		Addr:                     sock,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		PoolSize:                 1,
		ContextTimeoutEnabled:    true,
	})
	defer c.Close()
	verdict, err := aclcheck.Define(ctx, c, rules)
	if err != nil {
		return nil, fmt.Errorf("check ACL rules: %s: %w", name, err)
	}
	return verdict, nil
}
