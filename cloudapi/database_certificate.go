package cloudapi

import (
	"net/http"

	"clouddb"
)

// certificateView is the body of GET …/databases/{d}/certificate.
type certificateView struct {
	PublicCertificatePEMString string `json:"publicCertificatePEMString"`
}

// getDatabaseCertificate returns the CA that signs the databases' server certificates,
// the one a client trusts to connect over TLS. It answers for a database whose TLS is off
// too (Terraform's Active-Active data source reads it unconditionally), and 404 as the
// database's GET does.
func (s *Server) getDatabaseCertificate(r *http.Request, c *caller) (int, any, error) {
	if _, _, err := s.withDatabase(r, c); err != nil {
		return 0, nil, err
	}
	if s.CA == nil {
		return 0, nil, clouddb.Errorf(http.StatusNotImplemented, clouddb.ErrTypeNotImplemented, "this clouddb has no certificate authority: TLS is not available")
	}
	return http.StatusOK, certificateView{PublicCertificatePEMString: string(s.CA.CertificatePEM())}, nil
}

// certificatesUpdate is clientTlsCertificates in an update body. Unlike the other
// fields, whose null means "no change", its null means "no client certificates": the
// Terraform provider sends null for an empty list (wire reference §16.3).
type certificatesUpdate struct {
	set   bool // the key was in the body, null included
	certs tlsCertificates
}

func (u *certificatesUpdate) UnmarshalJSON(b []byte) error {
	u.set = true
	if string(b) == "null" {
		u.certs = tlsCertificates{}
		return nil
	}
	return u.certs.UnmarshalJSON(b)
}

// update is the field as the domain update takes it: nil when absent, else the list
// (empty to remove every certificate).
func (u certificatesUpdate) update() *[]string {
	if !u.set {
		return nil
	}
	certs := append([]string{}, u.certs...)
	return &certs
}

// tlsSecurity sets the TLS flags of a database's security view (wire reference §16.2):
// a client certificate alone turns TLS on, and both client-authentication flags say
// whether client certificates are stored. The certificates themselves are never shown.
func tlsSecurity(v *securityView, spec *clouddb.DatabaseSpec) {
	v.EnableTLS = spec.InstanceTLS() != nil
	v.TLSClientAuthentication = len(spec.ClientCertificates()) > 0
	v.SSLClientAuthentication = v.TLSClientAuthentication
}
