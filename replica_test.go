package clouddb_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

func TestParseReplicaSource(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want clouddb.ReplicaSource
	}{
		{"redis://user:p%40ss@10.0.0.5:6379", clouddb.ReplicaSource{Host: "10.0.0.5", Port: 6379, Username: "user", Password: "p@ss"}},
		{"redis://:secret@db.example:12000", clouddb.ReplicaSource{Host: "db.example", Port: 12000, Password: "secret"}},
		{"rediss://h:7000/", clouddb.ReplicaSource{Host: "h", Port: 7000, TLS: true}},
		{"127.0.0.1:10001", clouddb.ReplicaSource{Host: "127.0.0.1", Port: 10001, SameAccount: true}},
		{"[::1]:10001", clouddb.ReplicaSource{Host: "::1", Port: 10001, SameAccount: true}},
	} {
		got, err := clouddb.ParseReplicaSource("replicaOf[0]", tc.in)
		require.NoError(t, err, tc.in)
		tc.want.URI = tc.in
		require.Equal(t, tc.want, got)
	}
	for _, bad := range []string{"http://h:1", "redis://h", "redis://h:0", "redis://h:70000", "h", ":6379", "redis://h:1/2", "redis://h:1?x=y", "ftp://u:p@h:21"} {
		_, err := clouddb.ParseReplicaSource("replicaOf[0]", bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "replicaOf[0]", "the error names the field")
	}

	_, err := clouddb.ValidateReplicaOf([]string{"127.0.0.1:1", "redis://127.0.0.1:1"})
	require.ErrorContains(t, err, "twice")
	many := make([]string, clouddb.MaxReplicaSources+1)
	for i := range many {
		many[i] = "h:" + string(rune('1'+i%9)) + "0"
	}
	_, err = clouddb.ValidateReplicaOf(many)
	require.ErrorContains(t, err, "at most")
	srcs, err := clouddb.ValidateReplicaOf([]string{})
	require.NoError(t, err)
	require.Empty(t, srcs)
}
