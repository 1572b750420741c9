package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/pgtest"
)

// TestReadOnlyServerIsUnwritable: a server that refuses writes (a standby after a
// failover, or one set read-only: read_only_sql_transaction) fails writes with
// clouddb.ErrStorageUnwritable, a 503 with a clear message, not a bare driver error that
// would answer 500.
func TestReadOnlyServerIsUnwritable(t *testing.T) {
	url := pgtest.URL(t)
	ro := mustOpen(t, url)
	ctx := t.Context()
	// The database turns read-only for new sessions; ending the store's sessions makes
	// it reconnect into that.
	conn := rawConn(t, url)
	_, err := conn.Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
	err = ro.Update(ctx, func(tx clouddb.Tx) error {
		return tx.CreateAccount(ctx, &clouddb.Account{Name: "a", Plan: clouddb.PlanFlexible})
	})
	require.ErrorIs(t, err, clouddb.ErrStorageUnwritable)
	e := clouddb.AsError(err)
	require.NotNil(t, e)
	require.Equal(t, 503, e.Status)
	require.Contains(t, err.Error(), "read-only transaction", "the server's text stays for the operator's log")
}
