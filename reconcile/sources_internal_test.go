package reconcile

import (
	"testing"

	"clouddb"
)

// A source named by its bare host:port is the account's own database: the driver gets
// its password and the mark that lets it read past the database's client certificate; a
// source named by URI (another account's, or another server) gets neither.
func TestDesiredInstanceSources(t *testing.T) {
	own := &clouddb.Database{ID: 2, AccountID: 7, Port: 10002, Password: "own-pw"}
	d := &clouddb.Database{ID: 1, AccountID: 7, Port: 10001, ReplicaOf: []string{
		"10.0.0.1:10002",
		"rediss://:other-pw@10.0.0.1:10003",
		"10.0.0.1:10009", // no such database: left out
	}}
	in, missing := desiredInstance(d, newIndex([]*clouddb.Database{own, d}), nil)
	want := []clouddb.RedisEndpoint{
		{Addr: "10.0.0.1:10002", Password: "own-pw", SameAccount: true},
		{Addr: "10.0.0.1:10003", Password: "other-pw", TLS: true},
	}
	if len(in.ReplicaOf) != len(want) {
		t.Fatalf("sources %+v, want %+v", in.ReplicaOf, want)
	}
	for i := range want {
		if in.ReplicaOf[i] != want[i] {
			t.Errorf("source %d = %+v, want %+v", i, in.ReplicaOf[i], want[i])
		}
	}
	if len(missing) != 1 || missing[0] != "10.0.0.1:10009" {
		t.Errorf("missing = %v, want the source that names no database", missing)
	}
}
