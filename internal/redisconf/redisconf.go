// Package redisconf holds the pure pieces of a database server's configuration that every
// driver shares: the tenant's ACL rules and clouddb's own user, the persistence settings,
// the client memory limits, and the quoting of redis.conf arguments. A driver that runs
// servers elsewhere (driver/kubernetes) gives its tenants exactly what driver/local does.
package redisconf

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TenantRules are the ACL command rules of a database's default user, the one its
// tenant's password opens: the data-plane commands only, as Redis Cloud allows. @admin
// holds what administers the server (CONFIG, DEBUG, SHUTDOWN, REPLICAOF/SLAVEOF,
// SYNC/PSYNC/REPLCONF, MODULE, ACL writes and the ACL reads that list clouddb's own user,
// SAVE/BGSAVE/BGREWRITEAOF, FAILOVER, MONITOR, CLUSTER admin subcommands, CLIENT
// KILL/PAUSE/NO-EVICT, LATENCY/SLOWLOG RESET, PFDEBUG/PFSELFTEST); MIGRATE and
// RESTORE-ASKING move data to or from other servers without being @admin, and SCRIPT
// DEBUG forks a copy of the server for each debugging session. The harmless
// reads of @admin come back after it. The README's "What a tenant may do on its database"
// lists the same commands: keep them in step.
var TenantRules = []string{
	"+@all", "-@admin", "-migrate", "-restore-asking", "-script|debug",
	"+role", "+lastsave", "+client|list", "+client|unblock",
	"+slowlog|get", "+slowlog|len",
	"+latency|doctor", "+latency|graph", "+latency|histogram", "+latency|history", "+latency|latest",
}

// ReadOnlyRule denies the tenant every write, on a database that replicates from sources.
const ReadOnlyRule = "-@write"

// InternalUser is the ACL user clouddb itself works as (backups, imports, replication,
// live configuration changes): it may write while the default user may not, on a
// database that replicates.
const InternalUser = "clouddb-internal"

// DefaultUserRules are the rules that define the default user from scratch (reset), with
// pass as its password rule (">password" in a file, "#sha256" live).
func DefaultUserRules(pass string, readOnly bool) []string {
	r := append([]string{"reset", "on", pass, "~*", "&*"}, TenantRules...)
	if readOnly {
		r = append(r, ReadOnlyRule)
	}
	return r
}

// DefaultUser is DefaultUserRules with the user turned off when off (enableDefaultUser:
// false): its password stays, so turning it on again needs nothing else, but nobody can
// log in as it.
func DefaultUser(pass string, readOnly, off bool) []string {
	r := DefaultUserRules(pass, readOnly)
	if off {
		r[1] = "off"
	}
	return r
}

// UserDenials are what every named user is denied whatever its rule says: the "-" words
// of TenantRules, so that no rule gives a tenant's user the server's administration. The
// "+" words that follow them there are left out: they would widen a narrow rule (a
// Read-Only user has no CLIENT LIST).
var UserDenials = slices.DeleteFunc(slices.Clone(TenantRules), func(r string) bool { return !strings.HasPrefix(r, "-") })

// RuleWords are the words that give a named user its rights: every channel first, so that
// a resetchannels in the rule wins (pub/sub is permissive by default, as on Redis Cloud),
// the tenant's rule, the denials, MULTI, EXEC and DISCARD, which Redis Cloud always
// allows (the commands a transaction queues are still checked), and what a cluster
// client needs to find and follow an OSS Cluster's shards (in no category a rule such as
// Read-Only's +@read names; none of them changes the cluster).
func RuleWords(rule string) []string {
	w := append([]string{"allchannels"}, strings.Fields(rule)...)
	w = append(w, UserDenials...)
	return append(w, "+multi", "+exec", "+discard", "+cluster|slots", "+cluster|shards", "+cluster|nodes",
		"+cluster|info", "+cluster|myid", "+cluster|keyslot", "+readonly", "+readwrite", "+asking")
}

// UserRules define a named user from scratch, with pass as its only password rule
// ("#sha256": the password itself is never written anywhere). readOnly (the database
// replicates from sources) denies it every write last, whatever its rule gives, as it
// does the default user.
func UserRules(pass, rule string, readOnly bool) []string {
	r := append([]string{"reset", "on", pass}, RuleWords(rule)...)
	if readOnly {
		r = append(r, ReadOnlyRule)
	}
	return r
}

// InternalUserRules define clouddb's own user: everything, since it administers the
// server (config, persistence, replication, shutdown).
func InternalUserRules(pass string) []string {
	return []string{"reset", "on", pass, "~*", "&*", "+@all"}
}

// PasswordHash is how ACL SETUSER takes and ACL GETUSER shows a password: the hex SHA-256.
// clouddb sends the hash, so the password itself never crosses the wire again.
func PasswordHash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

// Persistence is how a DataPersistence value maps onto redis' settings.
type Persistence struct {
	Appendonly  string // "yes" or "no"
	Appendfsync string // "everysec" or "always"
	Save        string // "" (no snapshots) or "<seconds> <changes>"
}

// Directives are p's redis.conf lines, each a name and its arguments: save takes its
// points as separate arguments, and "" alone means no snapshots.
func (p Persistence) Directives() [][]string {
	save := []string{"save", ""}
	if p.Save != "" {
		save = append([]string{"save"}, strings.Fields(p.Save)...)
	}
	return [][]string{{"appendonly", p.Appendonly}, {"appendfsync", p.Appendfsync}, save}
}

// Persistences are the DataPersistence values clouddb offers.
var Persistences = map[string]Persistence{
	"none":                    {Appendonly: "no", Appendfsync: "everysec", Save: ""},
	"aof-every-1-second":      {Appendonly: "yes", Appendfsync: "everysec", Save: ""},
	"aof-every-write":         {Appendonly: "yes", Appendfsync: "always", Save: ""},
	"snapshot-every-1-hour":   {Appendonly: "no", Appendfsync: "everysec", Save: "3600 1"},
	"snapshot-every-6-hours":  {Appendonly: "no", Appendfsync: "everysec", Save: "21600 1"},
	"snapshot-every-12-hours": {Appendonly: "no", Appendfsync: "everysec", Save: "43200 1"},
}

// A tenant's connections may hold memory outside maxmemory: the replies a client asks
// for and does not read (output buffers, unlimited for normal clients by default), and
// the requests it sends (query buffers, 1 GB each by default), on as many connections as
// it likes. These settings bound them, scaled to the database's memory limit:
//
//   - maxmemory-clients: all the clients' buffers together at most a quarter of
//     maxmemory, and at least minClientMemory; past it redis disconnects the clients
//     that use the most (client eviction). The floor leaves room for the ~40 KB that
//     each busy connection takes (a reply buffer, a query buffer): some 1,600 at once.
//     clouddb's own connections that write large values (imports, replication into the
//     database, both RESTOREs) are exempt: they say CLIENT NO-EVICT, which tenants may
//     not.
//   - client-output-buffer-limit normal: one client's pending replies at most that much
//     too (hard), or a quarter of it for a minute (soft); past it redis disconnects it.
//     Replicas (clouddb's snapshots, replication from this database) and pub/sub keep
//     redis' defaults; tenants cannot become replicas.
//   - client-query-buffer-limit: one client's pending request (a value it sends, a
//     transaction it queues) at most the memory limit, between minQueryBuffer and 1 GB
//     (redis' default). Tenants meet maxmemory-clients first; this bound is the one on
//     clouddb's own exempt connections, which must be able to RESTORE any key that fits.
//
// So a tenant cannot write or read a value larger than about maxmemory-clients in one
// command, nor about half that on one connection (redis keeps a query buffer the size of
// the last large value a while): redis disconnects the client. Larger ones can be built
// piecewise (APPEND, RPUSH), and clouddb copies them whole.
//
// sanitize-dump-payload clients makes redis check every RESTORE payload from a client
// in depth before it uses it: a crafted payload that passes the checksum could otherwise
// corrupt the memory of the server. The check also covers clouddb's internal user, which
// RESTOREs what imports and the sources of replicaOf hold; those come from users too, so
// it does not skip it (skip-sanitize-payload). Only the server's own RDB and AOF files
// load unchecked.
const (
	minClientMemory   = 64 << 20
	minQueryBuffer    = 64 << 20
	maxQueryBuffer    = 1 << 30
	outputSoftSeconds = 60
)

// Setting is one CONFIG setting as CONFIG GET shows it.
type Setting struct{ Name, Value string }

// LimitSettings are the settings that bound what a database's clients may make its
// server hold, for a memory limit of maxMemory bytes, as a config file and CONFIG SET
// take them.
func LimitSettings(maxMemory int64) []Setting {
	clients := max(minClientMemory, maxMemory/4)
	query := min(max(minQueryBuffer, maxMemory), maxQueryBuffer)
	return []Setting{
		{"sanitize-dump-payload", "clients"},
		{"maxmemory-clients", strconv.FormatInt(clients, 10)},
		{"client-output-buffer-limit", fmt.Sprintf("normal %d %d %d", clients, clients/4, outputSoftSeconds)},
		{"client-query-buffer-limit", strconv.FormatInt(query, 10)},
	}
}

// Quote renders s as one double-quoted argument for redis' config parser (sdssplitargs).
// Only printable ASCII other than the quote and the backslash is written as is; every
// other byte, newlines included, is written as \xHH, so no value can end its line or its
// argument early and inject a directive.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > ' ' && c < 0x7f && c != '"' && c != '\\' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, `\x%02x`, c)
	}
	b.WriteByte('"')
	return b.String()
}
