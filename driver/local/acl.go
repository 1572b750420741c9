package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// tenantRules are the ACL command rules of a database's default user, the one its
// tenant's password opens: the data-plane commands only, as Redis Cloud allows. @admin
// holds what administers the server (CONFIG, DEBUG, SHUTDOWN, REPLICAOF/SLAVEOF,
// SYNC/PSYNC/REPLCONF, MODULE, ACL writes and the ACL reads that list clouddb's own user,
// SAVE/BGSAVE/BGREWRITEAOF, FAILOVER, MONITOR, CLUSTER admin subcommands, CLIENT
// KILL/PAUSE/NO-EVICT, LATENCY/SLOWLOG RESET, PFDEBUG/PFSELFTEST); MIGRATE and
// RESTORE-ASKING move data to or from other servers without being @admin, and SCRIPT
// DEBUG forks a copy of the server for each debugging session. The harmless
// reads of @admin come back after it. The README's "What a tenant may do on its database"
// lists the same commands: keep them in step.
var tenantRules = []string{
	"+@all", "-@admin", "-migrate", "-restore-asking", "-script|debug",
	"+role", "+lastsave", "+client|list", "+client|unblock",
	"+slowlog|get", "+slowlog|len",
	"+latency|doctor", "+latency|graph", "+latency|histogram", "+latency|history", "+latency|latest",
}

// readOnlyRule denies the tenant every write, on a database that replicates from sources.
const readOnlyRule = "-@write"

// defaultUserRules are the rules that define the default user from scratch (reset), with
// pass as its password rule (">password" in a file, "#sha256" live).
func defaultUserRules(pass string, readOnly bool) []string {
	r := append([]string{"reset", "on", pass, "~*", "&*"}, tenantRules...)
	if readOnly {
		r = append(r, readOnlyRule)
	}
	return r
}

// internalUserRules define clouddb's own user: everything, since it administers the
// server (config, persistence, replication, shutdown).
func internalUserRules(pass string) []string {
	return []string{"reset", "on", pass, "~*", "&*", "+@all"}
}

// passwordHash is how ACL SETUSER takes and ACL GETUSER shows a password: the hex SHA-256.
// clouddb sends the hash, so the password itself never crosses the wire again.
func passwordHash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

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
// scratchUser, for a moment) is a stranger, which clouddb deletes.
func ourUser(name string) bool {
	return name == "default" || name == internalUser
}

// foreignUsers returns the names that are not ourUser, scratchUser among them.
func foreignUsers(names []string) []string {
	var out []string
	for _, n := range names {
		if !ourUser(n) {
			out = append(out, n)
		}
	}
	return out
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

// normalRules returns the default user's rules (without its password) in the normal form
// of the server behind c, by defining them on scratchUser and reading them back.
// A scratch user that someone can log in as is not clouddb's: normalRules leaves it, and
// fails, for Ensure to delete it and cut whatever its maker opened (see applyLive).
func normalRules(ctx context.Context, c *redis.Client, readOnly bool) (string, error) {
	prior, err := getUser(ctx, c, scratchUser)
	if err != nil {
		return "", fmt.Errorf("ACL GETUSER %s: %w", scratchUser, classify(err))
	}
	if prior.canLogIn() {
		return "", fmt.Errorf("ACL user %s, which someone can log in as, is not clouddb's", scratchUser)
	}
	rules := slices.DeleteFunc(defaultUserRules("", readOnly), func(r string) bool { return r == "" })
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
