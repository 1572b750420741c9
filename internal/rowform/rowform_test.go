package rowform_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/rowform"
)

// TestSpecAndSources: the stored spec holds neither the password nor the sources, and
// its backup destination only sealed; both read back as they were given.
func TestSpecAndSources(t *testing.T) {
	key, err := clouddb.ParseKey(clouddb.NewKey())
	require.NoError(t, err)
	c, err := clouddb.NewCipher(key)
	require.NoError(t, err)
	s := rowform.Sealer{C: c}
	d := &clouddb.Database{Spec: clouddb.DatabaseSpec{Name: "d", Password: "create-pw", ReplicaOf: []string{"redis://:src-pw@h:1"},
		PeriodicBackupPath: "s3://AK:backup-secret@h/b"}, ReplicaOf: []string{"redis://:src-pw@h:1"}}

	stored, err := s.Spec(d)
	require.NoError(t, err)
	for _, secret := range []string{"create-pw", "src-pw", "backup-secret"} {
		require.NotContains(t, stored, secret)
	}
	require.Empty(t, d.Spec.Password, "the create's password is dropped from the spec")
	var back clouddb.DatabaseSpec
	require.NoError(t, json.Unmarshal([]byte(stored), &back))
	require.NoError(t, s.OpenSpec(&back))
	require.Equal(t, "s3://AK:backup-secret@h/b", back.PeriodicBackupPath)

	sources, err := s.Sources(d.ReplicaOf)
	require.NoError(t, err)
	require.False(t, strings.Contains(sources, "src-pw"))
	plain, err := s.Open(sources)
	require.NoError(t, err)
	var got []string
	require.NoError(t, rowform.OpenSources(plain, &got))
	require.Equal(t, d.ReplicaOf, got)
	none, err := s.Sources(nil)
	require.NoError(t, err)
	require.Empty(t, none, "no sources is the empty string")
}
