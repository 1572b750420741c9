package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/sqlite"
	"clouddb/storetest"
)

// mustOpen opens a store at path and closes it when the test ends.
func mustOpen(tb testing.TB, path string, opts ...sqlite.Option) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(path, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) clouddb.Store {
		return mustOpen(t, filepath.Join(t.TempDir(), "clouddb.db"))
	})
}

// TestStoreSealed runs the conformance suite with secrets sealed: sealing must be
// invisible to callers.
func TestStoreSealed(t *testing.T) {
	storetest.Run(t, func(t *testing.T) clouddb.Store {
		return mustOpen(t, filepath.Join(t.TempDir(), "clouddb.db"), sqlite.WithCipher(testCipher(t)))
	})
}

func testCipher(t *testing.T) *clouddb.Cipher {
	key, err := clouddb.ParseKey(clouddb.NewKey())
	require.NoError(t, err)
	c, err := clouddb.NewCipher(key)
	require.NoError(t, err)
	return c
}

// TestSecretsAreSealedOnDisk writes known secrets, then searches the database file and
// its WAL for them and finds nothing; reading through the store returns them intact.
func TestSecretsAreSealedOnDisk(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "clouddb.db")
	c := testCipher(t)
	db := mustOpen(t, path, sqlite.WithCipher(c))
	secrets := []string{"Db-Password-7f3a9c", "AKIA-KEY-ID-5b1e", "aws-secret-key-2c8d", "console-pw-9e4f", "payload-secret-0a6b", "source-pw-3d7e",
		"backup-secret-4c2a", "remote-secret-8e1f", "Acl-User-Pw-6b9d!"}
	var dbID, caID, userID int
	var taskID string
	require.NoError(t, db.Update(ctx, func(tx clouddb.Tx) error {
		a := &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible}
		require.NoError(t, tx.CreateAccount(ctx, a))
		s := &clouddb.Subscription{AccountID: a.ID, Name: "s", Status: clouddb.SubscriptionActive}
		require.NoError(t, tx.CreateSubscription(ctx, s))
		d := &clouddb.Database{AccountID: a.ID, SubscriptionID: s.ID, Port: 10000, Password: secrets[0], Spec: clouddb.DatabaseSpec{Name: "d", PeriodicBackupPath: "s3://AKIA:" + secrets[6] + "@127.0.0.1:9000/b",
			RemoteBackup: &clouddb.RemoteBackup{Active: true, StorageType: "ftp", StoragePath: "ftp://u:" + secrets[7] + "@127.0.0.1/x"}},
			ReplicaOf: []string{"redis://user:" + secrets[5] + "@10.1.2.3:6379"}}
		require.NoError(t, tx.CreateDatabase(ctx, d))
		ca := &clouddb.CloudAccount{AccountID: a.ID, Name: "c", Provider: "AWS", AccessKeyID: secrets[1], AccessSecretKey: secrets[2], ConsolePassword: secrets[3]}
		require.NoError(t, tx.CreateCloudAccount(ctx, ca))
		tk := &clouddb.Task{AccountID: a.ID, CommandType: clouddb.CommandDatabaseCreate, Payload: []byte(`{"password":"` + secrets[4] + `"}`)}
		require.NoError(t, tx.CreateTask(ctx, tk))
		u := &clouddb.ACLUser{AccountID: a.ID, Name: "u", RoleID: 1, Password: secrets[8], Status: clouddb.ACLPending}
		require.NoError(t, tx.CreateACLUser(ctx, u))
		dbID, caID, taskID, userID = d.ID, ca.ID, tk.ID, u.ID
		return nil
	}))

	for _, file := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, s := range secrets {
			require.NotContains(t, string(b), s, "%s holds a secret in plain text", filepath.Base(file))
		}
	}

	require.NoError(t, db.View(ctx, func(tx clouddb.Tx) error {
		d, err := tx.Database(ctx, 0, dbID)
		require.NoError(t, err)
		require.Equal(t, secrets[0], d.Password)
		require.Equal(t, "s3://AKIA:"+secrets[6]+"@127.0.0.1:9000/b", d.Spec.PeriodicBackupPath)
		require.Equal(t, "ftp://u:"+secrets[7]+"@127.0.0.1/x", d.Spec.RemoteBackup.StoragePath)
		require.Equal(t, []string{"redis://user:" + secrets[5] + "@10.1.2.3:6379"}, d.ReplicaOf)
		ca, err := tx.CloudAccount(ctx, 0, caID)
		require.NoError(t, err)
		require.Equal(t, []string{secrets[1], secrets[2], secrets[3]}, []string{ca.AccessKeyID, ca.AccessSecretKey, ca.ConsolePassword})
		tk, err := tx.Task(ctx, 0, taskID)
		require.NoError(t, err)
		require.Contains(t, string(tk.Payload), secrets[4])
		u, err := tx.ACLUser(ctx, 0, userID)
		require.NoError(t, err)
		require.Equal(t, secrets[8], u.Password)
		return nil
	}))

	// The same file opened with another key cannot read the secrets: it fails loudly
	// instead of handing out garbage.
	db.Close()
	other := mustOpen(t, path, sqlite.WithCipher(testCipher(t)))
	err := other.View(ctx, func(tx clouddb.Tx) error {
		_, err := tx.Database(ctx, 0, dbID)
		return err
	})
	require.ErrorIs(t, err, clouddb.ErrSealed)
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
