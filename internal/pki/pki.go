// Package pki is the installation's certificate authority: the CA databases serve TLS
// with (clouddb.CertificateAuthority). It is internal because only clouddb's own packages
// make or read a CA (serve keeps it in the store, the drivers' tests make throwaway ones);
// its file formats are PEM and nothing else of it is an API.
//
// Everything is ECDSA P-256 through crypto/x509.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"

	"clouddb"
)

// Lifetimes. A leaf lives a year; its holder (the driver) issues a new one well before it
// ends.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	LeafLifetime = 365 * 24 * time.Hour
	// backdate covers clocks a little behind this one's.
	backdate = 5 * time.Minute
)

// ErrCAEnded is wrapped by the error of an issue by a CA whose end has passed.
var ErrCAEnded = errors.New("the installation's CA has ended")

// CA is a certificate authority with its private key.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
}

var _ clouddb.CertificateAuthority = (*CA)(nil)

// New makes a CA named name (its subject's common name).
func New(name string) (*CA, error) {
	return NewEnding(name, time.Now().Add(CALifetime))
}

// NewEnding is New, but the CA ends at notAfter (a time to come): one near its end, for
// the tests of what happens then.
func NewEnding(name string, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return Parse(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), mustKeyPEM(key))
}

// Parse reads a CA from its certificate and private key in PEM (as KeyPEM wrote it).
func Parse(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("CA certificate: not a CA")
	}
	b, _ := pem.Decode(keyPEM)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("CA key: not a PEM PRIVATE KEY")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("CA key: not the key of the CA certificate")
	}
	return &CA{cert: cert, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), key: key}, nil
}

// ParseCertificate reads the first certificate of a PEM text.
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM CERTIFICATE")
	}
	return x509.ParseCertificate(b.Bytes)
}

// NotAfter is when the CA ends: no certificate it issues outlives it.
func (ca *CA) NotAfter() time.Time { return ca.cert.NotAfter }

// CertificatePEM is the CA's certificate.
func (ca *CA) CertificatePEM() []byte { return append([]byte(nil), ca.certPEM...) }

// KeyPEM is the CA's private key (PKCS #8): a secret, to be sealed wherever it is kept.
func (ca *CA) KeyPEM() []byte { return mustKeyPEM(ca.key) }

// IssueServer issues a server certificate (extended key usage serverAuth only) for hosts:
// IP addresses become IP SANs, anything else DNS SANs.
func (ca *CA) IssueServer(hosts []string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("a server certificate needs at least one host")
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: hosts[0]}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl, time.Now().Add(LeafLifetime))
}

// Reissue issues a certificate like certPEM's (its subject, names and usage), with a new
// key, that ends at notAfter: one that has served most of its life looks so, for the
// tests of renewal.
func (ca *CA) Reissue(certPEM []byte, notAfter time.Time) (newCertPEM, keyPEM []byte, err error) {
	old, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, nil, err
	}
	return ca.issue(&x509.Certificate{Subject: old.Subject, DNSNames: old.DNSNames, IPAddresses: old.IPAddresses,
		ExtKeyUsage: old.ExtKeyUsage}, notAfter)
}

// IssueClient issues a client certificate (extended key usage clientAuth only: OpenSSL,
// and so redis, checks the purpose, so it cannot serve as a server's) named name.
func (ca *CA) IssueClient(name string) (certPEM, keyPEM []byte, err error) {
	return ca.issue(&x509.Certificate{Subject: pkix.Name{CommonName: name}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		time.Now().Add(LeafLifetime))
}

// issue issues tmpl, ending at notAfter (or the CA's end, if sooner).
func (ca *CA) issue(tmpl *x509.Certificate, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	if now.After(ca.cert.NotAfter) {
		// It would be expired already: an error says why, rather than files rewritten at
		// every Ensure that no client accepts.
		return nil, nil, fmt.Errorf("%w (%s): no certificate can be issued", ErrCAEnded, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = notAfter
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), mustKeyPEM(key), nil
}

// serial is a random 128-bit serial number, as RFC 5280 asks (positive, at most 20 bytes).
func serial() *big.Int {
	b := make([]byte, 16)
	rand.Read(b)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}

func mustKeyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// RenewBefore is how long before it ends a certificate the drivers issued is issued
// anew: LeafUsable then answers false.
const RenewBefore = 30 * 24 * time.Hour

// LeafUsable reports whether pair (a certificate and its key, which the caller parsed
// together, so that they match) can serve on: the CA whose PEM certificate is caPEM
// issued it for usage, it names every one of hosts, and it does not end within
// RenewBefore — unless it ends when the CA does, as every certificate issued within
// LeafLifetime of the CA's end does: one issued anew would end no later, so it serves
// until it ends (issuing anew would only churn every database's files in the CA's last
// RenewBefore).
func LeafUsable(pair tls.Certificate, caPEM []byte, usage x509.ExtKeyUsage, hosts []string) bool {
	_, ok := leafUsableAt(pair, caPEM, usage, hosts, time.Now())
	return ok
}

// LeafUsableUntil is LeafUsable, and when the certificate is usable, until when it stays
// so: RenewBefore before it ends, or its end if it ends when the CA does.
func LeafUsableUntil(pair tls.Certificate, caPEM []byte, usage x509.ExtKeyUsage, hosts []string) (time.Time, bool) {
	return leafUsableAt(pair, caPEM, usage, hosts, time.Now())
}

// leafUsableAt is LeafUsableUntil at time now.
func leafUsableAt(pair tls.Certificate, caPEM []byte, usage x509.ExtKeyUsage, hosts []string, now time.Time) (time.Time, bool) {
	if len(pair.Certificate) == 0 {
		return time.Time{}, false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return time.Time{}, false
	}
	for _, h := range hosts {
		if !Names(leaf, h) {
			return time.Time{}, false
		}
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return time.Time{}, false
	}
	opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now.Add(RenewBefore)}
	chains, err := leaf.Verify(opts)
	// Not verified then (if of the CA, for usage): it ends within RenewBefore, or the CA
	// does. It must verify now (an ended CA's certificates do not: nothing can renew
	// them).
	near := err != nil
	if near {
		opts.CurrentTime = now
		chains, err = leaf.Verify(opts)
	}
	if err != nil {
		return time.Time{}, false
	}
	if ca := chains[0][len(chains[0])-1]; !leaf.NotAfter.Before(ca.NotAfter) {
		return ca.NotAfter, true // it ends with the CA: issuing anew gives no later end
	}
	if near {
		return time.Time{}, false
	}
	return leaf.NotAfter.Add(-RenewBefore), true
}

// Names reports whether the certificate lists host among its SANs. A plain comparison,
// not VerifyHostname: a host name VerifyHostname finds malformed would otherwise have its
// certificate issued anew at every Ensure.
func Names(c *x509.Certificate, host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return slices.ContainsFunc(c.IPAddresses, ip.Equal)
	}
	return slices.ContainsFunc(c.DNSNames, func(n string) bool { return strings.EqualFold(n, host) })
}
