package local

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// errNoPerm means the server refused a command to the user by its ACL rules.
var errNoPerm = errors.New("not permitted")

// newClient returns a client for one short conversation with a server: one connection,
// no retries, RESP2 (AUTH rather than HELLO), no client-side extras.
// cred is a user and password to authenticate with; an empty user is the default user
// (the clients' password).
type cred struct{ user, password string }

func (d *Driver) newClient(port int, c cred) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                     net.JoinHostPort(d.connectHost, strconv.Itoa(port)),
		Username:                 c.user,
		Password:                 c.password,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		PoolSize:                 1,
		DialTimeout:              time.Second,
		// One dial per probe: go-redis would otherwise retry a refused dial five times,
		// 100ms apart, which the start-up wait below does better with its own backoff.
		DialerRetries:         1,
		ReadTimeout:           3 * time.Second,
		WriteTimeout:          3 * time.Second,
		ContextTimeoutEnabled: true,
	})
}

// probe opens an authenticated connection to the server on port, checks that it answers
// PING and that it is process pid (so a stranger on the port is not taken for ours), and
// returns the client. Errors wrap errAuth or errLoading when the server said so.
func (d *Driver) probe(ctx context.Context, port int, cr cred, pid int) (*redis.Client, error) {
	c := d.newClient(port, cr)
	fail := func(err error) (*redis.Client, error) {
		c.Close()
		return nil, err
	}
	if err := c.Ping(ctx).Err(); err != nil {
		return fail(classify(err))
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return fail(classify(err))
	}
	got := infoField(info, "process_id")
	if got != strconv.Itoa(pid) {
		return fail(fmt.Errorf("port %d is served by process %s, not redis-server pid %d", port, got, pid))
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
	}
	return err
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
	return map[string]string{
		"maxmemory":        strconv.FormatInt(c.MaxMemory, 10),
		"maxmemory-policy": c.Policy,
		"appendonly":       p.appendonly,
		"appendfsync":      p.appendfsync,
		"save":             p.save,
		"bind":             c.Host,
	}
}

// settingOrder lists the settings in the order CONFIG SET gets them.
var settingOrder = []string{"maxmemory", "maxmemory-policy", "appendonly", "appendfsync", "save", "bind"}

// Names of the ACL parts of a configuration, as applyLive and drifted report them.
const (
	changedPassword = "password"
	changedRules    = "default user rules"
)

// liveSettings reads the managed settings of the server behind c (a few names, not "*").
func liveSettings(ctx context.Context, c *redis.Client) (map[string]string, error) {
	args := []any{"config", "get"}
	for _, name := range settingOrder {
		args = append(args, name)
	}
	cmd := redis.NewMapStringStringCmd(ctx, args...)
	if err := c.Process(ctx, cmd); err != nil {
		return nil, fmt.Errorf("CONFIG GET: %w", classify(err))
	}
	return cmd.Val(), nil
}

// applyLive sets the settings of want that differ on the running server, in one atomic
// CONFIG SET, defines the default and internal users anew (both idempotent), and returns
// the names of what changed (never values) and the default user as the server now
// describes it. Turning AOF on starts a rewrite; applyLive waits for it so the AOF holds
// the dataset (and redis accepts a shutdown) before it returns.
func (d *Driver) applyLive(ctx context.Context, c *redis.Client, want serverConfig) ([]string, aclUser, error) {
	got, err := liveSettings(ctx, c)
	if err != nil {
		return nil, aclUser{}, err
	}
	wantSet := settings(want)
	args := []any{"config", "set"}
	var changed []string
	for _, name := range settingOrder {
		if got[name] != wantSet[name] {
			args = append(args, name, wantSet[name])
			changed = append(changed, name)
		}
	}
	if len(changed) > 0 {
		if err = c.Do(ctx, args...).Err(); err != nil {
			return nil, aclUser{}, fmt.Errorf("CONFIG SET %s: %w", strings.Join(changed, ", "), classify(err))
		}
	}
	// The ACL part. Redefining the users from scratch also brings a server started from
	// an older config file (requirepass, a default user with +@all) in line.
	before, err := getUser(ctx, c, "default")
	if err != nil {
		return nil, aclUser{}, fmt.Errorf("ACL GETUSER default: %w", classify(err))
	}
	if err = setUser(ctx, c, "default", defaultUserRules("#"+passwordHash(want.Password), want.ReadOnly)); err != nil {
		return nil, aclUser{}, fmt.Errorf("ACL SETUSER default: %w", classify(err))
	}
	if want.InternalSecret != "" {
		if err = setUser(ctx, c, internalUser, internalUserRules("#"+passwordHash(want.InternalSecret))); err != nil {
			return nil, aclUser{}, fmt.Errorf("ACL SETUSER %s: %w", internalUser, classify(err))
		}
	}
	after, err := getUser(ctx, c, "default")
	if err != nil {
		return nil, aclUser{}, fmt.Errorf("ACL GETUSER default: %w", classify(err))
	}
	if !slices.Equal(before.passwords, after.passwords) {
		changed = append(changed, changedPassword)
	}
	if before.rules != after.rules {
		changed = append(changed, changedRules)
	}
	if got["appendonly"] != "yes" && wantSet["appendonly"] == "yes" {
		if err := d.waitAOFRewrite(ctx, c); err != nil {
			return changed, after, err
		}
	}
	return changed, after, nil
}

// drifted compares the server behind c with want: the managed settings, the default
// user's password and, when known, its rules as the server described them after clouddb
// last set them. It returns the names of what differs.
func drifted(ctx context.Context, c *redis.Client, want serverConfig, rules string) ([]string, error) {
	got, err := liveSettings(ctx, c)
	if err != nil {
		return nil, err
	}
	wantSet := settings(want)
	var diff []string
	for _, name := range settingOrder {
		if got[name] != wantSet[name] {
			diff = append(diff, name)
		}
	}
	u, err := getUser(ctx, c, "default")
	if err != nil {
		return nil, fmt.Errorf("ACL GETUSER default: %w", classify(err))
	}
	if !slices.Equal(u.passwords, []string{passwordHash(want.Password)}) {
		diff = append(diff, changedPassword)
	}
	if u.rules != rules {
		diff = append(diff, changedRules)
	}
	return diff, nil
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
