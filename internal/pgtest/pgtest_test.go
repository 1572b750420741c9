package pgtest_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"clouddb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestURL: each call gives a separate, empty, writable database.
func TestURL(t *testing.T) {
	ctx := t.Context()
	a, b := pgtest.URL(t), pgtest.URL(t)
	require.NotEqual(t, a, b)
	ca, err := pgx.Connect(ctx, a)
	require.NoError(t, err)
	defer ca.Close(ctx)
	_, err = ca.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
	require.NoError(t, err)
	cb, err := pgx.Connect(ctx, b)
	require.NoError(t, err)
	defer cb.Close(ctx)
	var n int
	require.NoError(t, cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n))
	require.Zero(t, n, "the second database does not see the first one's table")
}
