package browser

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"clouddb"
)

// CA certificates verify the servers' TLS certificates: a connection with
// tls.verifyServerCert true checks the chain its server presents against the CA
// certificate of tls.caCert (or against the system's roots without one) and checks that
// the certificate was issued for the host dialled. They are stored like client pairs,
// sealed, and no response shows their bodies. As RedisInsight does, they are listed and
// deleted under /api/certificates/ca and created inline in a connection record
// (tls.caCert: {new: {name, certificate}}) or on their own (POST /api/certificates/ca);
// a record refers to a stored one by id (tls.caCert: {id}).

const (
	errCACertificateNotFound = "CA_CERTIFICATE_NOT_FOUND"
	errServerCertRejected    = "SERVER_CERTIFICATE_REJECTED"

	caCertField    = "tls.caCert"
	newCACertField = caCertField + ".new"
)

// errCANameTaken is a unique violation on a CA certificate name.
var errCANameTaken = errors.New("CA certificate name taken")

// caCertificate is a CA certificate (or bundle), PEM.
type caCertificate struct {
	ID        int
	Name      string
	CertPEM   string
	CreatedAt time.Time
}

func (s *Server) registerCACertificateRoutes() {
	s.route("POST /api/certificates/ca", s.createCACertificate)
	s.route("GET /api/certificates/ca", s.listCACertificates)
	s.route("DELETE /api/certificates/ca/{id}", s.deleteCACertificate)
}

func (s *Server) createCACertificate(r *http.Request) (int, any, error) {
	body, err := readBody(r)
	if err != nil {
		return 0, nil, err
	}
	ca, err := s.readCACertificate(body)
	if err != nil {
		return 0, nil, err
	}
	if err = body.done(" (a CA certificate has name and certificate)"); err != nil {
		return 0, nil, err
	}
	err = s.store.update(r.Context(), func(tx *sql.Tx) error { return s.store.insertCACertificate(r.Context(), tx, ca) })
	if errors.Is(err, errCANameTaken) {
		return 0, nil, caNameTaken(body.name("name"), ca.Name)
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, certificateView{ID: ca.ID, Name: ca.Name}, nil
}

// listCACertificates answers a bare array of {id, name}, as RedisInsight does.
func (s *Server) listCACertificates(r *http.Request) (int, any, error) {
	cas, err := s.store.caCertificates(r.Context())
	if err != nil {
		return 0, nil, err
	}
	views := make([]certificateView, 0, len(cas))
	for _, c := range cas {
		views = append(views, certificateView{ID: c.ID, Name: c.Name})
	}
	return http.StatusOK, views, nil
}

// deleteCACertificate refuses (409) to delete a CA certificate that a connection uses:
// RedisInsight detaches it instead, which would leave the connection verifying against
// the system's roots (and failing) without saying why.
func (s *Server) deleteCACertificate(r *http.Request) (int, any, error) {
	id, ok := pathID(r)
	if !ok {
		return 0, nil, caNotFound(r.PathValue("id"))
	}
	if err := s.store.deleteCACertificate(r.Context(), id); errors.Is(err, clouddb.ErrNotFound) {
		return 0, nil, caNotFound(r.PathValue("id"))
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func caNotFound(id string) error {
	return clouddb.NotFound(errCACertificateNotFound, "no CA certificate with id %s", id)
}

// caNameTaken is a 400, as RedisInsight answers ("This ca certificate name is already in
// use.").
func caNameTaken(field, name string) error {
	return fieldErr(http.StatusBadRequest, errCertificateNameTaken, field, "a CA certificate named %q already exists", name)
}

// readCACertificate takes the name and certificate fields of o (a POSTed CA certificate
// or an inline new one): a PEM certificate, optionally followed by more (a bundle), the
// first valid now. The name's uniqueness is checked by the caller.
func (s *Server) readCACertificate(o *object) (*caCertificate, error) {
	name, err := o.nonEmpty("name", true, maxNameBytes)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(name) == "" {
		return nil, invalid(o.name("name"), "must not be blank")
	}
	text, _, err := o.str("certificate", true)
	if err != nil {
		return nil, err
	}
	certPEM, _, err := parseCertificates(o.name("certificate"), text, s.now())
	if err != nil {
		return nil, err
	}
	return &caCertificate{Name: name, CertPEM: certPEM}, nil
}

// readServerVerification reads tls.verifyServerCert and tls.caCert of t into c: a CA
// certificate by id, or an inline new one (set as c.newCA, stored with the record).
func (s *Server) readServerVerification(t *object, c *connection) error {
	var err error
	if c.VerifyServerCert, err = t.boolean("verifyServerCert"); err != nil {
		return err
	}
	p, err := t.obj("caCert", false)
	if err != nil || p == nil {
		if err == nil && c.VerifyServerCert && !c.UseTLS {
			return invalid("tls.verifyServerCert", "requires tls.useTls to be true")
		}
		return err
	}
	switch hasID, hasNew := p.has("id"), p.has("new"); {
	case hasID && hasNew:
		return invalid(p.path, "give either id (an existing CA certificate) or new (one to add), not both")
	case hasID:
		if c.CACertID, _, err = p.integer("id", true, 1, math.MaxInt32); err != nil {
			return err
		}
	case hasNew:
		n, err := p.obj("new", true)
		if err != nil {
			return err
		}
		if c.newCA, err = s.readCACertificate(n); err != nil {
			return err
		}
		if err := n.done(" (a new CA certificate has name and certificate)"); err != nil {
			return err
		}
	default:
		return invalid(p.path, "must hold id (an existing CA certificate) or new (one to add)")
	}
	if err := p.done(" (caCert has id or new)"); err != nil {
		return err
	}
	switch {
	case c.VerifyServerCert && !c.UseTLS:
		return invalid("tls.verifyServerCert", "requires tls.useTls to be true")
	case !c.VerifyServerCert:
		// Refused rather than stored unused: a client would believe the server verified.
		return invalid(caCertField, "verifies the server's certificate only with tls.verifyServerCert true; set it, or leave caCert out")
	}
	return nil
}

// loadCA fills c's CA certificate before its connection test: the stored one its id
// names (a 400 naming tls.caCert.id when there is none), or the inline new one, whose
// name must be free (a 400 naming tls.caCert.new.name).
func (s *Server) loadCA(ctx context.Context, c *connection) error {
	switch {
	case c.newCA != nil:
		taken, err := s.store.caNameTaken(ctx, c.newCA.Name)
		if err != nil {
			return err
		} else if taken {
			return caNameTaken(newCACertField+".name", c.newCA.Name)
		}
		c.CACertPEM = c.newCA.CertPEM
	case c.CACertID != 0:
		ca, err := s.store.caCertificate(ctx, c.CACertID)
		if errors.Is(err, clouddb.ErrNotFound) {
			return caIDNotFound(c.CACertID)
		} else if err != nil {
			return err
		}
		c.CACertName, c.CACertPEM = ca.Name, ca.CertPEM
	}
	return nil
}

func caIDNotFound(id int) error {
	return fieldErr(http.StatusBadRequest, errCACertificateNotFound, caCertField+".id", "no CA certificate with id %d", id)
}

// caStoreError maps the store's errors about c's CA certificate, met while saving c, to
// answers; other errors are returned as they are.
func caStoreError(c *connection, err error) error {
	switch {
	case errors.Is(err, errCANameTaken):
		return caNameTaken(newCACertField+".name", c.newCA.Name)
	case errors.Is(err, errCAGone):
		return caIDNotFound(c.CACertID)
	}
	return err
}

// verifyServer sets cfg to verify the server's certificate when c asks for it: against
// c's CA certificate, or the system's roots without one. dial then names the host it
// dials as the server name, so the certificate must have been issued for it (a DNS name
// or an IP address SAN).
func verifyServer(cfg *tls.Config, c *connection) error {
	cfg.InsecureSkipVerify = !c.VerifyServerCert
	if !c.VerifyServerCert || c.CACertPEM == "" {
		return nil
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(c.CACertPEM)) {
		return fmt.Errorf("browser: CA certificate %d holds no certificate", c.CACertID)
	}
	cfg.RootCAs = roots
	return nil
}

// isVerifyError reports whether err is the server's certificate failing verification.
func isVerifyError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname)
}

// serverCertRejected is the 424 of a server whose certificate the CA certificate does not
// vouch for, or that was issued for another name.
func serverCertRejected(what string, err error) *clouddb.Error {
	return failed(errServerCertRejected, "the TLS certificate of %s is not trusted: %s (check tls.caCert, and that the certificate was issued for the host dialled)",
		what, firstLine(err.Error()))
}

// --- store ---

// errCAGone is a connection that refers to a CA certificate that does not exist.
var errCAGone = errors.New("CA certificate does not exist")

// caRef is the ca_certificate_id column of c.
func caRef(c *connection) any {
	if c.CACertID == 0 {
		return nil
	}
	return c.CACertID
}

// insertNewCA stores c's inline new CA certificate, if it has one, and makes c refer to
// it, or checks that the CA certificate c refers to still exists (errCAGone); it runs in
// the transaction that stores c.
func (st *store) insertNewCA(ctx context.Context, tx *sql.Tx, c *connection) error {
	if c.newCA == nil {
		if c.CACertID == 0 {
			return nil
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM ca_certificates WHERE id = ?`, c.CACertID).Scan(&n); err != nil {
			return err
		} else if n == 0 {
			return errCAGone
		}
		return nil
	}
	if err := st.insertCACertificate(ctx, tx, c.newCA); err != nil {
		return err
	}
	c.CACertID, c.CACertName = c.newCA.ID, c.newCA.Name
	return nil
}

// insertCACertificate stores ca and sets its ID and CreatedAt; errCANameTaken when the
// name is.
func (st *store) insertCACertificate(ctx context.Context, tx *sql.Tx, ca *caCertificate) error {
	ca.CreatedAt = st.now().Truncate(time.Microsecond)
	res, err := tx.ExecContext(ctx, `INSERT INTO ca_certificates (name, certificate, created_at) VALUES (?, ?, ?)`,
		ca.Name, st.seal(ca.CertPEM), ca.CreatedAt.UnixMicro())
	if constraint(err) == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		return errCANameTaken
	} else if err != nil {
		return err
	}
	id, err := res.LastInsertId()
	ca.ID = int(id)
	return err
}

// caCertificates lists the CA certificates by id, without their bodies.
func (st *store) caCertificates(ctx context.Context) ([]caCertificate, error) {
	return listNamed(ctx, st, "ca_certificates", func(id int, name string) caCertificate { return caCertificate{ID: id, Name: name} })
}

// caCertificate returns a CA certificate with its opened body, or clouddb.ErrNotFound.
func (st *store) caCertificate(ctx context.Context, id int) (*caCertificate, error) {
	var (
		c       caCertificate
		created int64
	)
	err := st.reader.QueryRowContext(ctx, `SELECT id, name, certificate, created_at FROM ca_certificates WHERE id = ?`, id).
		Scan(&c.ID, &c.Name, &c.CertPEM, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, clouddb.ErrNotFound
	} else if err != nil {
		return nil, err
	}
	c.CreatedAt = time.UnixMicro(created).UTC()
	if c.CertPEM, err = st.open(c.CertPEM); err != nil {
		return nil, err
	}
	return &c, nil
}

// caNameTaken reports whether a CA certificate already has the name.
func (st *store) caNameTaken(ctx context.Context, name string) (bool, error) {
	var n int
	err := st.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM ca_certificates WHERE name = ?`, name).Scan(&n)
	return n > 0, err
}

// deleteCACertificate deletes a CA certificate: clouddb.ErrNotFound when there is none,
// and a 409 naming the connections that still use it.
func (st *store) deleteCACertificate(ctx context.Context, id int) error {
	return st.deleteUnused(ctx, id, "ca_certificates", "ca_certificate_id", "CA certificate")
}
