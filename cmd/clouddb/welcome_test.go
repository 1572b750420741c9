package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"clouddb/sqlite"
)

// TestWelcome_GivenSecretNotPrinted: a first start whose secret was given
// (CLOUDDB_BOOTSTRAP_SECRET_KEY, from a Kubernetes Secret say) does not print it in the
// welcome, which goes to a log; the export line names the variable instead. A secret
// clouddb made is printed, once: nobody else knows it.
func TestWelcome_GivenSecretNotPrinted(t *testing.T) {
	const given = "given-secret-0123456789abcdef"
	t.Setenv("CLOUDDB_BOOTSTRAP_API_KEY", "given-key")
	t.Setenv("CLOUDDB_BOOTSTRAP_SECRET_KEY", given)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "clouddb.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	dir := t.TempDir()
	creds, err := bootstrap(context.Background(), db, dir)
	require.NoError(t, err)
	require.NotNil(t, creds)
	require.Equal(t, given, creds.SecretKey)

	var out bytes.Buffer
	m := &Main{Config: Config{DataDir: dir}, Addr: "127.0.0.1:8080", stdout: &out}
	m.printWelcome(creds)
	require.NotContains(t, out.String(), given)
	require.Contains(t, out.String(), "export CLOUDDB_API_KEY=given-key\n")
	require.Contains(t, out.String(), `export CLOUDDB_API_SECRET_KEY="$CLOUDDB_BOOTSTRAP_SECRET_KEY"`)

	out.Reset()
	made := &credentials{APIKey: "k", SecretKey: "made-secret-0123456789"}
	m.printWelcome(made)
	require.Contains(t, out.String(), "export CLOUDDB_API_SECRET_KEY=made-secret-0123456789\n")
}
