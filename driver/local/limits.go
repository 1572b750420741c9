package local

import (
	"strconv"
	"strings"

	"clouddb/internal/redisconf"
)

// The limits on what a tenant's clients may make the server hold beyond maxmemory are
// every driver's: see redisconf.LimitSettings.

const minScriptMemory = 64 << 20

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

// limitSettings are the settings that bound what a database's clients may make its
// server hold (see redisconf.LimitSettings).
var limitSettings = redisconf.LimitSettings

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
