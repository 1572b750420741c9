package local

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb"
	"clouddb/internal/pki"
)

// TestTLSCurrent_Deadline: tlsCurrent remembers until when a database's files stay
// usable, pki.RenewBefore before the first of them ends, and checks them again once that
// time has come (as it does when their stat changes, see TestTLS_RenewedNearItsEnd): a
// certificate that came near its end while nothing touched its file then needs renewal.
func TestTLSCurrent_Deadline(t *testing.T) {
	ca, err := pki.New("test CA")
	require.NoError(t, err)
	d, err := New(Config{Dir: t.TempDir(), Host: "127.0.0.1", CA: ca})
	require.NoError(t, err)
	const id = 1
	require.NoError(t, makeDir(d.dbDir(id)))
	require.NoError(t, d.prepareTLS(clouddb.Instance{DatabaseID: id, TLS: &clouddb.InstanceTLS{}}))
	start := time.Now()
	require.True(t, d.tlsCurrent(id))
	c := d.tlsChecks[id]
	require.WithinRange(t, c.until, start.Add(pki.LeafLifetime-pki.RenewBefore-time.Hour), time.Now().Add(pki.LeafLifetime-pki.RenewBefore))

	// The server certificate is, unknown to the cache, one near its end (its stat as
	// remembered): trusted until the remembered deadline, renewed once it has come.
	f := d.tlsFiles[id]
	nearEndInPlace(t, ca, f.Cert, f.Key)
	c.stat, err = stampTLS(f)
	require.NoError(t, err)
	c.at = time.Now().Add(-time.Hour)
	d.tlsChecks[id] = c
	require.True(t, d.tlsCurrent(id), "before its deadline the check is not made again")
	c = d.tlsChecks[id]
	c.until = time.Now().Add(-time.Second)
	d.tlsChecks[id] = c
	require.False(t, d.tlsCurrent(id), "at its deadline it is")
	require.NotContains(t, d.tlsChecks, id)

	// prepareTLS (Ensure) issues a new one, which is current.
	require.NoError(t, d.prepareTLS(clouddb.Instance{DatabaseID: id, TLS: &clouddb.InstanceTLS{}}))
	require.NotEqual(t, f.Cert, d.tlsFiles[id].Cert)
	require.Equal(t, f.ClientCert, d.tlsFiles[id].ClientCert, "the client certificate is kept")
	require.True(t, d.tlsCurrent(id))
}

// TestTLSCurrent_CANearItsEnd: within pki.RenewBefore of the CA's end, the files of a
// database are current, and stay so until the CA ends, and Ensure keeps them: new ones
// would end no later, so issuing them would only rewrite files and reload the server at
// every pass.
func TestTLSCurrent_CANearItsEnd(t *testing.T) {
	end := time.Now().Add(pki.RenewBefore / 3).Truncate(time.Second)
	ca, err := pki.NewEnding("test CA", end)
	require.NoError(t, err)
	d, err := New(Config{Dir: t.TempDir(), Host: "127.0.0.1", CA: ca})
	require.NoError(t, err)
	const id = 1
	in := clouddb.Instance{DatabaseID: id, TLS: &clouddb.InstanceTLS{}}
	require.NoError(t, makeDir(d.dbDir(id)))
	require.NoError(t, d.prepareTLS(in))
	f := d.tlsFiles[id]
	require.True(t, d.tlsCurrent(id), "certificates ending with the CA need no renewal")
	require.True(t, d.tlsChecks[id].until.Equal(end), "current until %v, want the CA's end %v", d.tlsChecks[id].until, end)
	require.NoError(t, d.prepareTLS(in))
	require.Equal(t, f, d.tlsFiles[id], "Ensure keeps the files")
}

// nearEndInPlace overwrites a server certificate and its key with one of ca, for the
// same names, ending within pki.RenewBefore.
func nearEndInPlace(t *testing.T, ca *pki.CA, certPath, keyPath string) {
	t.Helper()
	data, err := os.ReadFile(certPath)
	require.NoError(t, err)
	cert, key, err := ca.Reissue(data, time.Now().Add(pki.RenewBefore/3))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyPath, key, 0o600))
	require.NoError(t, os.WriteFile(certPath, cert, 0o600))
}
