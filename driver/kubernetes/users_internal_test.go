package kubernetes

import (
	"strings"
	"testing"

	"clouddb"
)

// SetUsers' redis.conf is the one Ensure would write with the new users, whatever else
// the instance it is given says: only the user lines change.
func TestWithUsers(t *testing.T) {
	t.Run("one server", func(t *testing.T) { testWithUsers(t, false) })
	// A cluster node's replication user stays: replicas log in as it.
	t.Run("cluster node", func(t *testing.T) { testWithUsers(t, true) })
}

func testWithUsers(t *testing.T, cluster bool) {
	in := clouddb.Instance{DatabaseID: 3, OSSCluster: cluster, Shards: 2, Password: "pw", MaxMemoryBytes: 64 << 20, EvictionPolicy: "noeviction", DataPersistence: "none",
		Users: []clouddb.DatabaseUser{{Name: "default2", Password: "a", Rule: "+@read ~*"}, {Name: "bob", Password: "b", Rule: "+@all ~*"}}}
	conf, err := renderConfig(in, "internal")
	if err != nil {
		t.Fatal(err)
	}
	next := in
	next.Users = []clouddb.DatabaseUser{{Name: "carol", Password: "c", Rule: "+get ~k"}}
	next.ReplicaOf = []clouddb.RedisEndpoint{{Addr: "example.com:6379"}} // read-only users
	want, err := renderConfig(next, "internal")
	if err != nil {
		t.Fatal(err)
	}
	other := next
	other.Password, other.MaxMemoryBytes = "other", 1<<30 // not SetUsers' to change
	got := withUsers(conf, other)
	// The default user's line is in's (its password, not read-only): the rest is next's.
	wantText := string(want)
	inDefault, nextDefault := lineOf(t, string(conf), `user "default" `), lineOf(t, wantText, `user "default" `)
	if cluster {
		lineOf(t, string(got), `user "`+clusterReplUser+`" `)
	}
	if g, w := string(got), strings.Replace(wantText, nextDefault, inDefault, 1); g != w {
		t.Fatalf("withUsers:\n%s\nwant:\n%s", g, w)
	}
}

func lineOf(t *testing.T, text, prefix string) string {
	t.Helper()
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no line %q", prefix)
	return ""
}
