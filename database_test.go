package clouddb_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
)

// TestMapSecrets: the backup destinations go through f in the copy, and the original,
// nested remoteBackup included, is left as it was.
func TestMapSecrets(t *testing.T) {
	s := clouddb.DatabaseSpec{Name: "d", PeriodicBackupPath: "s3://k:s@h/b",
		RemoteBackup: &clouddb.RemoteBackup{Active: true, StoragePath: "ftp://u:p@h/x"}}
	got, err := s.MapSecrets(func(v string) (string, error) { return strings.ToUpper(v), nil })
	require.NoError(t, err)
	require.Equal(t, "S3://K:S@H/B", got.PeriodicBackupPath)
	require.Equal(t, "FTP://U:P@H/X", got.RemoteBackup.StoragePath)
	require.Equal(t, "d", got.Name)
	require.Equal(t, "s3://k:s@h/b", s.PeriodicBackupPath, "the original is left as it was")
	require.Equal(t, "ftp://u:p@h/x", s.RemoteBackup.StoragePath, "its remoteBackup too")

	_, err = s.MapSecrets(func(string) (string, error) { return "", clouddb.ErrSealed })
	require.ErrorIs(t, err, clouddb.ErrSealed)
}
