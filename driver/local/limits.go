package local

import (
	"fmt"
	"strconv"
	"strings"
)

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
// corrupt the memory of a server that runs as clouddb's own OS user. The check also
// covers clouddb's internal user, which RESTOREs what imports and the sources of
// replicaOf hold; those come from users too, so it does not skip it
// (skip-sanitize-payload). Only the server's own RDB and AOF files load unchecked.
const (
	minClientMemory   = 64 << 20
	minScriptMemory   = 64 << 20
	minQueryBuffer    = 64 << 20
	maxQueryBuffer    = 1 << 30
	outputSoftSeconds = 60
)

// The scripts a tenant runs with EVAL stay cached in the server, each compiled into its
// Lua interpreter, whose memory maxmemory does not count: 100,000 distinct scripts took
// a 100 MB database's server to 294 MB of RSS in 4.5 s, and nothing in redis 7.0 bounds
// it. Past scriptMemoryLimit (the cache and the interpreter together) clouddb empties the
// cache (SCRIPT FLUSH), as the periodic check finds it: a client's EVALSHA of a flushed
// script answers NOSCRIPT, and clients send the script again with EVAL, as they do after
// any restart. Functions (FUNCTION LOAD) are the tenant's data and are not touched.
func scriptMemoryLimit(maxMemory int64) int64 { return max(minScriptMemory, maxMemory/4) }

// scriptMemory is the memory of the EVAL scripts in an INFO memory reply.
func scriptMemory(info string) int64 {
	vm, _ := strconv.ParseInt(infoField(info, "used_memory_vm_eval"), 10, 64)
	cache, _ := strconv.ParseInt(infoField(info, "used_memory_scripts_eval"), 10, 64)
	return vm + cache
}

// changedScripts names the emptied script cache, as applyLive and drifted report it.
const changedScripts = "script cache"

// setting is one CONFIG setting as CONFIG GET shows it.
type setting struct{ name, value string }

// limitSettings are the settings that bound what a database's clients may make its
// server hold, for a memory limit of maxMemory bytes, as a config file and CONFIG SET
// take them.
func limitSettings(maxMemory int64) []setting {
	clients := max(minClientMemory, maxMemory/4)
	query := min(max(minQueryBuffer, maxMemory), maxQueryBuffer)
	return []setting{
		{"sanitize-dump-payload", "clients"},
		{"maxmemory-clients", strconv.FormatInt(clients, 10)},
		{"client-output-buffer-limit", fmt.Sprintf("normal %d %d %d", clients, clients/4, outputSoftSeconds)},
		{"client-query-buffer-limit", strconv.FormatInt(query, 10)},
	}
}

// outputClass returns the "<class> <hard> <soft> <seconds>" part of a CONFIG GET
// client-output-buffer-limit value, or "".
func outputClass(v, class string) string {
	f := strings.Fields(v)
	for i := 0; i+3 < len(f); i += 4 {
		if f[i] == class {
			return strings.Join(f[i:i+4], " ")
		}
	}
	return ""
}
