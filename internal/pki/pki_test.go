package pki_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"clouddb/internal/pki"
)

func TestCA(t *testing.T) {
	t.Parallel()
	ca, err := pki.New("clouddb test CA")
	require.NoError(t, err)
	again, err := pki.Parse(ca.CertificatePEM(), ca.KeyPEM())
	require.NoError(t, err)
	require.Equal(t, ca.CertificatePEM(), again.CertificatePEM())
	caCert, err := pki.ParseCertificate(ca.CertificatePEM())
	require.NoError(t, err)
	require.True(t, caCert.IsCA)
	require.WithinDuration(t, time.Now().Add(pki.CALifetime), caCert.NotAfter, time.Minute)

	other, err := pki.New("other")
	require.NoError(t, err)
	_, err = pki.Parse(ca.CertificatePEM(), other.KeyPEM())
	require.ErrorContains(t, err, "not the key of the CA certificate")

	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	certPEM, keyPEM, err := ca.IssueServer([]string{"127.0.0.1", "localhost", "db.example"})
	require.NoError(t, err)
	_, err = tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	leaf, err := pki.ParseCertificate(certPEM)
	require.NoError(t, err)
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, leaf.ExtKeyUsage)
	require.Equal(t, "127.0.0.1", leaf.IPAddresses[0].String())
	require.Equal(t, []string{"localhost", "db.example"}, leaf.DNSNames)
	require.WithinDuration(t, time.Now().Add(pki.LeafLifetime), leaf.NotAfter, time.Minute)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "db.example"})
	require.NoError(t, err)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.Error(t, err, "a server certificate is no client certificate")

	certPEM, _, err = ca.IssueClient("clouddb-internal")
	require.NoError(t, err)
	cl, err := pki.ParseCertificate(certPEM)
	require.NoError(t, err)
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cl.ExtKeyUsage)
	_, err = cl.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	_, err = cl.Verify(x509.VerifyOptions{Roots: roots})
	require.Error(t, err, "a client certificate is no server certificate")

	_, _, err = ca.IssueServer(nil)
	require.Error(t, err)
}

// TestLeafUsable: a certificate serves on while the CA issued it for the usage and it
// names every host asked; another CA's, another usage's or one missing a host does not.
func TestLeafUsable(t *testing.T) {
	ca, err := pki.New("clouddb test CA")
	require.NoError(t, err)
	other, err := pki.New("another CA")
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.IssueServer([]string{"db.example", "10.0.0.1"})
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)

	require.True(t, pki.LeafUsable(pair, ca.CertificatePEM(), x509.ExtKeyUsageServerAuth, []string{"DB.example", "10.0.0.1"}))
	require.False(t, pki.LeafUsable(pair, ca.CertificatePEM(), x509.ExtKeyUsageServerAuth, []string{"10.0.0.2"}), "a host it does not name")
	require.False(t, pki.LeafUsable(pair, other.CertificatePEM(), x509.ExtKeyUsageServerAuth, nil), "another CA")
	require.False(t, pki.LeafUsable(pair, ca.CertificatePEM(), x509.ExtKeyUsageClientAuth, nil), "another usage")
	require.False(t, pki.LeafUsable(tls.Certificate{}, ca.CertificatePEM(), x509.ExtKeyUsageServerAuth, nil), "no certificate")
}

// Reissue: the same names and usage, a new key and serial, the end asked for; one ending
// within RenewBefore is not usable, so the drivers renew it.
func TestReissue(t *testing.T) {
	ca, err := pki.New("clouddb test CA")
	require.NoError(t, err)
	certPEM, _, err := ca.IssueServer([]string{"db.example", "10.0.0.1"})
	require.NoError(t, err)
	end := time.Now().Add(pki.RenewBefore / 3).Truncate(time.Second)
	nearPEM, keyPEM, err := ca.Reissue(certPEM, end)
	require.NoError(t, err)
	old, err := pki.ParseCertificate(certPEM)
	require.NoError(t, err)
	near, err := pki.ParseCertificate(nearPEM)
	require.NoError(t, err)
	require.Equal(t, old.DNSNames, near.DNSNames)
	require.True(t, old.IPAddresses[0].Equal(near.IPAddresses[0]))
	require.Equal(t, old.ExtKeyUsage, near.ExtKeyUsage)
	require.NotEqual(t, old.SerialNumber, near.SerialNumber)
	require.True(t, near.NotAfter.Equal(end), "ends %v, want %v", near.NotAfter, end)
	pair, err := tls.X509KeyPair(nearPEM, keyPEM)
	require.NoError(t, err)
	require.False(t, pki.LeafUsable(pair, ca.CertificatePEM(), x509.ExtKeyUsageServerAuth, []string{"db.example"}), "it ends within RenewBefore")
	_, _, err = ca.Reissue([]byte("not PEM"), end)
	require.Error(t, err)
}

// TestLeafUsable_CANearItsEnd: within RenewBefore of the CA's end, a certificate that
// ends when the CA does (as any issued now does) is usable until then, for its usage and
// hosts as always: issuing it anew would give no later end, only new files for every
// database at every pass. One that ends before the CA does is renewed as ever. Once the
// CA has ended, none of its certificates is usable.
func TestLeafUsable_CANearItsEnd(t *testing.T) {
	end := time.Now().Add(pki.RenewBefore / 3).Truncate(time.Second)
	ca, err := pki.NewEnding("clouddb test CA", end)
	require.NoError(t, err)
	require.True(t, ca.NotAfter().Equal(end), "the CA ends %v, want %v", ca.NotAfter(), end)
	caPEM := ca.CertificatePEM()
	usable := func(certPEM, keyPEM []byte, usage x509.ExtKeyUsage, hosts []string) (time.Time, bool) {
		t.Helper()
		pair, perr := tls.X509KeyPair(certPEM, keyPEM)
		require.NoError(t, perr)
		until, ok := pki.LeafUsableUntil(pair, caPEM, usage, hosts)
		require.Equal(t, ok, pki.LeafUsable(pair, caPEM, usage, hosts))
		return until, ok
	}

	certPEM, keyPEM, err := ca.IssueServer([]string{"db.example", "10.0.0.1"})
	require.NoError(t, err)
	leaf, err := pki.ParseCertificate(certPEM)
	require.NoError(t, err)
	require.True(t, leaf.NotAfter.Equal(end), "a new certificate ends %v, with the CA at %v", leaf.NotAfter, end)
	until, ok := usable(certPEM, keyPEM, x509.ExtKeyUsageServerAuth, []string{"db.example", "10.0.0.1"})
	require.True(t, ok, "a certificate ending with the CA is usable")
	require.True(t, until.Equal(end), "usable until %v, want the CA's end %v", until, end)
	_, ok = usable(certPEM, keyPEM, x509.ExtKeyUsageServerAuth, []string{"10.0.0.2"})
	require.False(t, ok, "a host it does not name")
	_, ok = usable(certPEM, keyPEM, x509.ExtKeyUsageClientAuth, nil)
	require.False(t, ok, "another usage")
	other, err := pki.NewEnding("another CA", end)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	require.False(t, pki.LeafUsable(pair, other.CertificatePEM(), x509.ExtKeyUsageServerAuth, nil), "another CA")

	clientPEM, clientKey, err := ca.IssueClient("clouddb-internal")
	require.NoError(t, err)
	until, ok = usable(clientPEM, clientKey, x509.ExtKeyUsageClientAuth, nil)
	require.True(t, ok, "a client certificate ending with the CA is usable")
	require.True(t, until.Equal(end), "usable until %v, want %v", until, end)

	// Ending before the CA (within RenewBefore): renewing it gives a later end.
	nearPEM, nearKey, err := ca.Reissue(certPEM, end.Add(-time.Hour))
	require.NoError(t, err)
	_, ok = usable(nearPEM, nearKey, x509.ExtKeyUsageServerAuth, []string{"db.example"})
	require.False(t, ok, "a certificate ending before the CA, within RenewBefore, is renewed")

	// At the CA's end the certificate still verifies; a second later neither it nor
	// the CA does.
	_, ok = pki.LeafUsableAt(pair, caPEM, x509.ExtKeyUsageServerAuth, []string{"db.example"}, end)
	require.True(t, ok, "at the CA's very end")
	_, ok = pki.LeafUsableAt(pair, caPEM, x509.ExtKeyUsageServerAuth, []string{"db.example"}, end.Add(time.Second))
	require.False(t, ok, "the CA has ended")
}

// TestLeafUsable_Until: a certificate of a CA far from its end is usable until
// RenewBefore before its own end, and no longer at that time's next second.
func TestLeafUsable_Until(t *testing.T) {
	ca, err := pki.New("clouddb test CA")
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.IssueServer([]string{"db.example"})
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	leaf, err := pki.ParseCertificate(certPEM)
	require.NoError(t, err)
	until, ok := pki.LeafUsableUntil(pair, ca.CertificatePEM(), x509.ExtKeyUsageServerAuth, []string{"db.example"})
	require.True(t, ok)
	require.True(t, until.Equal(leaf.NotAfter.Add(-pki.RenewBefore)), "usable until %v, want %v", until, leaf.NotAfter.Add(-pki.RenewBefore))
	_, ok = pki.LeafUsableAt(pair, ca.CertificatePEM(), x509.ExtKeyUsageServerAuth, nil, until)
	require.True(t, ok, "at its deadline")
	_, ok = pki.LeafUsableAt(pair, ca.CertificatePEM(), x509.ExtKeyUsageServerAuth, nil, until.Add(time.Second))
	require.False(t, ok, "after its deadline")
}

// TestIssue_CAEnded: a CA whose end has passed issues nothing, and says why: a
// certificate it made would be expired already, and a driver would issue one at every
// pass.
func TestIssue_CAEnded(t *testing.T) {
	ca, err := pki.NewEnding("ended CA", time.Now().Add(-time.Minute))
	require.NoError(t, err)
	_, _, err = ca.IssueServer([]string{"localhost"})
	require.ErrorIs(t, err, pki.ErrCAEnded)
	_, _, err = ca.IssueClient("c")
	require.ErrorIs(t, err, pki.ErrCAEnded)
}
