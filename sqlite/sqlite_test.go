package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
	"clouddb/storetest"
)

// mustOpen opens a store at path and closes it when the test ends.
func mustOpen(tb testing.TB, path string) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(path)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) clouddb.Store {
		return mustOpen(t, filepath.Join(t.TempDir(), "clouddb.db"))
	})
}

// rawQuery reads the file with a connection of its own, as another process would.
func rawQuery(t *testing.T, path, query string, scan func(*sql.Rows) error) {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer raw.Close()
	rows, err := raw.Query(query)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		require.NoError(t, scan(rows))
	}
	require.NoError(t, rows.Err())
}

func TestReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "clouddb.db")
	migrations := func() map[string]int64 {
		m := map[string]int64{}
		rawQuery(t, path, `SELECT name, applied_at FROM migrations`, func(rows *sql.Rows) error {
			var name string
			var at int64
			err := rows.Scan(&name, &at)
			m[name] = at
			return err
		})
		return m
	}

	db, err := sqlite.Open(path)
	require.NoError(t, err)
	a := &clouddb.Account{Name: "A", Plan: clouddb.PlanFlexible}
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error { return tx.CreateAccount(ctx, a) }))
	require.NoError(t, db.Close())
	applied := migrations()
	require.Contains(t, applied, "migration/0001_init.sql")

	time.Sleep(2 * time.Millisecond) // a re-run would record a later time
	db = mustOpen(t, path)
	require.Equal(t, applied, migrations(), "reopening applies no migration again")
	require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
		got, err := tx.Account(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, a, got)
		return nil
	}))
}

func TestWAL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "clouddb.db")
	mustOpen(t, path)
	var mode string
	rawQuery(t, path, `PRAGMA journal_mode`, func(rows *sql.Rows) error { return rows.Scan(&mode) })
	require.Equal(t, "wal", mode)
}

func TestNow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := mustOpen(t, filepath.Join(t.TempDir(), "clouddb.db"))
	at := time.Date(2030, 1, 2, 3, 4, 5, 678_901_234, time.FixedZone("X", -3600))
	db.Now = func() time.Time { return at }

	a := &clouddb.Account{Name: "A", Plan: clouddb.PlanFlexible}
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error { return tx.CreateAccount(ctx, a) }))
	want := at.UTC().Truncate(time.Microsecond)
	require.Equal(t, want, a.CreatedAt, "timestamps are UTC, to the microsecond")
	require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
		got, err := tx.Account(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, want, got.CreatedAt)
		return nil
	}))
}

func TestOpenRejectsNonFile(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro"} {
		_, err := sqlite.Open(path)
		require.Error(t, err, path)
	}
}
