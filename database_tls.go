package clouddb

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"strconv"
	"time"
)

// Task errors of client certificates (the Redis Cloud catalogue's codes).
const (
	ErrTypeDatabaseInvalidCert = "DATABASE_INVALID_CERT"
	ErrTypeDatabaseExpiredCert = "DATABASE_EXPIRED_CERT"
)

// ClientCertificates are the client certificates the database holds, set through either
// field: when there is any, clients must present one of them (mutual TLS).
func (s *DatabaseSpec) ClientCertificates() []string {
	var certs []string
	if s.ClientSSLCertificate != "" {
		certs = append(certs, s.ClientSSLCertificate)
	}
	return append(certs, s.ClientTLSCertificates...)
}

// validateTLS checks the client certificates' form: each value is one or more PEM
// CERTIFICATE blocks that parse, and nothing else (a private key is refused, so none is
// ever kept). The deprecated single field and the list do not mix.
func (s *DatabaseSpec) validateTLS() error {
	if s.ClientSSLCertificate != "" && len(s.ClientTLSCertificates) > 0 {
		return Invalid(ErrTypeInvalidField, "database: clientSslCertificate and clientTlsCertificates cannot both be set: clientSslCertificate is deprecated, put every certificate in clientTlsCertificates")
	}
	return checkCertificates(s.ClientSSLCertificate, s.ClientTLSCertificates, time.Time{})
}

// checkCertificates checks the client certificates of a request; a non-zero now also
// refuses those that have expired. Certificates already stored are not checked against
// the clock again: one that expires makes its clients fail, not the database's updates.
func checkCertificates(ssl string, list []string, now time.Time) error {
	if ssl != "" {
		if err := checkCertificate("clientSslCertificate", ssl, now); err != nil {
			return err
		}
	}
	for i, c := range list {
		if err := checkCertificate("clientTlsCertificates["+strconv.Itoa(i)+"]", c, now); err != nil {
			return err
		}
	}
	return nil
}

func checkCertificate(field, text string, now time.Time) error {
	rest := []byte(text)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return invalidCert(field, "holds a PEM block of type "+strconv.Quote(b.Type)+", not CERTIFICATE")
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return invalidCert(field, "is not an X.509 certificate")
		}
		if !now.IsZero() && now.After(c.NotAfter) {
			return Invalid(ErrTypeDatabaseExpiredCert, "Database certificate is expired: %s expired on %s", field, c.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	if n == 0 {
		return invalidCert(field, "is not a PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return invalidCert(field, "has text after its last PEM certificate")
	}
	return nil
}

func invalidCert(field, why string) *Error {
	return Invalid(ErrTypeDatabaseInvalidCert, "Database certificate is invalid: %s %s", field, why)
}

// validateTLS checks the client certificates an update sends.
func (u *DatabaseUpdate) validateTLS(now time.Time) error {
	var ssl string
	if u.ClientSSLCertificate != nil {
		ssl = *u.ClientSSLCertificate
	}
	var list []string
	if u.ClientTLSCertificates != nil {
		list = *u.ClientTLSCertificates
	}
	if ssl != "" && len(list) > 0 {
		return Invalid(ErrTypeInvalidField, "database: clientSslCertificate and clientTlsCertificates cannot both be set: clientSslCertificate is deprecated, put every certificate in clientTlsCertificates")
	}
	if err := checkCount("database", "clientTlsCertificates", len(list), MaxListLength); err != nil {
		return err
	}
	if err := checkLength("database", "clientSslCertificate", ssl, MaxCertificateLength); err != nil {
		return err
	}
	for i, c := range list {
		if err := checkLength("database", "clientTlsCertificates["+strconv.Itoa(i)+"]", c, MaxCertificateLength); err != nil {
			return err
		}
	}
	return checkCertificates(ssl, list, now)
}

// applyTLS merges the TLS fields of an update (the wire reference, §16):
//   - enableTls false while client certificates are stored turns mutual TLS off and
//     erases them;
//   - each certificate field replaces the client certificates as a whole:
//     clientSslCertificate "" and clientTlsCertificates [] or null (which the API layer
//     hands over as []) remove them, except a certificate the other field sends in the
//     same update (Terraform sends clientSslCertificate with clientTlsCertificates null).
func (u *DatabaseUpdate) applyTLS(s *DatabaseSpec) {
	if u.EnableTLS != nil {
		s.EnableTLS = *u.EnableTLS
		if !*u.EnableTLS {
			s.ClientSSLCertificate, s.ClientTLSCertificates = "", nil
		}
	}
	if u.ClientSSLCertificate != nil {
		s.ClientSSLCertificate, s.ClientTLSCertificates = *u.ClientSSLCertificate, nil
	}
	if u.ClientTLSCertificates != nil {
		s.ClientTLSCertificates = nil
		if list := *u.ClientTLSCertificates; len(list) > 0 {
			s.ClientTLSCertificates = append([]string(nil), list...)
		}
		if len(s.ClientTLSCertificates) > 0 || u.ClientSSLCertificate == nil {
			s.ClientSSLCertificate = ""
		}
	}
}
