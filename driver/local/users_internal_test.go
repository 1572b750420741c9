package local

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestUserRules: a named user gets its rule between every channel and the denials of
// server administration (tenantRules' "-" words, none of its "+" words), then MULTI,
// EXEC and DISCARD and what a cluster client needs to follow an OSS Cluster's shards,
// and on a database that replicates every write denied last; the password only as its
// hash.
func TestUserRules(t *testing.T) {
	require.Equal(t, []string{"-@admin", "-migrate", "-restore-asking", "-script|debug"}, userDenials)
	hash := "#" + passwordHash("Secret.pw1")
	require.Equal(t, []string{"reset", "on", hash, "allchannels", "+@all", "~*",
		"-@admin", "-migrate", "-restore-asking", "-script|debug", "+multi", "+exec", "+discard",
		"+cluster|slots", "+cluster|shards", "+cluster|nodes", "+cluster|info", "+cluster|myid", "+cluster|keyslot",
		"+readonly", "+readwrite", "+asking"},
		userRules(hash, "+@all  ~*", false))
	require.Equal(t, append(userRules(hash, "+@all  ~*", false), "-@write"), userRules(hash, "+@all  ~*", true))
	require.Equal(t, "off", defaultUser(">pw", false, true)[1])
	require.Equal(t, defaultUserRules(">pw", true), defaultUser(">pw", true, false))
}

// TestConfigUsers: the config file defines the named users with their passwords' hashes
// and the default user off when it is; it reads back their names and the default user's
// state.
func TestConfigUsers(t *testing.T) {
	want := serverConfig{
		Port: 6380, Host: "127.0.0.1", Password: "tenant", MaxMemory: 1 << 30, Policy: "allkeys-lru",
		Persistence: "none", InternalSecret: "internal", DefaultOff: true,
		Users: []clouddb.DatabaseUser{{Name: "ro", Password: "Read.0nly", Rule: "+@read ~*"}, {Name: "a\"b", Password: "x\ny", Rule: "+@all"}},
	}
	data, err := want.render(7, "/data/7")
	require.NoError(t, err)
	require.NotContains(t, string(data), "Read.0nly")
	require.NotContains(t, string(data), "x\ny")
	var users [][]string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		args, serr := splitArgs(line)
		require.NoError(t, serr, line)
		if len(args) > 1 && args[0] == "user" {
			users = append(users, args[1:])
		}
	}
	require.Equal(t, [][]string{
		append([]string{"default"}, defaultUser(">tenant", false, true)...),
		append([]string{internalUser}, internalUserRules(">internal")...),
		append([]string{"ro"}, userRules("#"+passwordHash("Read.0nly"), "+@read ~*", false)...),
		append([]string{"a\"b"}, userRules("#"+passwordHash("x\ny"), "+@all", false)...),
	}, users)
	got, err := parseConfig(data)
	require.NoError(t, err)
	require.True(t, got.DefaultOff)
	require.Equal(t, []clouddb.DatabaseUser{{Name: "ro"}, {Name: "a\"b"}}, got.Users)
	got.Users, want.Users = nil, nil
	require.Equal(t, want, got)
}

// TestUsersDrift: the deep check's comparison of named users.
func TestUsersDrift(t *testing.T) {
	u := clouddb.DatabaseUser{Name: "ro", Password: "Read.0nly", Rule: "+@read ~*"}
	h := passwordHash(u.Password)
	line := "user ro on sanitize-payload #" + h + " ~* &* -@all +@read"
	wanted := []clouddb.DatabaseUser{u}
	require.False(t, usersDrift(map[string]string{"ro": line}, wanted, false, nil))
	require.True(t, usersDrift(map[string]string{}, wanted, false, nil), "missing")
	require.True(t, usersDrift(map[string]string{"ro": strings.Replace(line, " on ", " off ", 1)}, wanted, false, nil), "off")
	require.True(t, usersDrift(map[string]string{"ro": line + " #" + passwordHash("other")}, wanted, false, nil), "a second password")
	require.True(t, usersDrift(map[string]string{"ro": "user ro on nopass ~* &* +@all"}, wanted, false, nil), "nopass")
	known := map[string]knownUser{"ro": {sig: userSig(u, false), line: line}}
	require.False(t, usersDrift(map[string]string{"ro": line}, wanted, false, known))
	require.True(t, usersDrift(map[string]string{"ro": line + " +set"}, wanted, false, known), "other rules")
	// The same user read-only (its database replicates) is another definition.
	require.NotEqual(t, userSig(u, false), userSig(u, true))
	require.False(t, usersDrift(map[string]string{"ro": line + " -@write"}, wanted, true, known))
	ro := clouddb.Instance{DatabaseID: 1, Users: wanted}
	rw := ro
	rw.ReplicaOf = []clouddb.RedisEndpoint{{Addr: "127.0.0.1:1"}}
	require.NotEqual(t, usersKey(ro), usersKey(rw), "turning replicaOf on or off calls for a new deep check")
	// What clouddb learnt of another definition says nothing of this one.
	known["ro"] = knownUser{sig: "old", line: "user ro on #old"}
	require.False(t, usersDrift(map[string]string{"ro": line}, wanted, false, known))
	// A name is no flag nor password.
	require.False(t, lineLogsIn("user on off #"+h, h))
	require.False(t, lineLogsIn("user #"+h+" off", h))
	require.Equal(t, []string{"x", "clouddb-scratch"}, foreignUsers([]string{"default", "ro", "x", "clouddb-internal", "clouddb-scratch"}, wanted))
}
