package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
)

// TestStorageErrorClassifiesReadOnly: a write that SQLite refuses because the file cannot
// be written (here a connection opened read-only: SQLITE_READONLY, as a read-only disk
// gives) becomes clouddb.ErrStorageUnwritable, a 503 with a clear message, instead of a
// bare driver error that would answer 500; other errors stay as they are.
func TestStorageErrorClassifiesReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clouddb.db")
	db, err := sqlite.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	t.Cleanup(func() { ro.Close() })
	_, werr := ro.Exec(`CREATE TABLE t (x)`)
	require.Error(t, werr)
	require.NotErrorIs(t, werr, clouddb.ErrStorageUnwritable, "a bare driver error")

	err = sqlite.StorageError(werr)
	require.ErrorIs(t, err, clouddb.ErrStorageUnwritable)
	e := clouddb.AsError(err)
	require.NotNil(t, e)
	require.Equal(t, 503, e.Status)
	require.Equal(t, "STORAGE_UNAVAILABLE", e.Type)
	require.Contains(t, err.Error(), "readonly", "the driver's text stays for the operator's log")

	_, serr := ro.Exec(`SELEC 1`)
	require.Error(t, serr)
	require.Equal(t, serr, sqlite.StorageError(serr), "a syntax error is no storage failure")
}
