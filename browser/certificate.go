package browser

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"clouddb"
)

// maxNameBytes caps certificate names.
const maxNameBytes = 500

func (s *Server) registerCertificateRoutes() {
	s.route("POST /api/tls-client-cert", s.createCertificate)
	s.route("GET /api/tls-client-cert", s.listCertificates)
	s.route("DELETE /api/tls-client-cert/{id}", s.deleteCertificate)
}

// certificateView is a pair as every response shows it: never its bodies.
type certificateView struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

func (s *Server) createCertificate(r *http.Request) (int, any, error) {
	body, err := readBody(r)
	if err != nil {
		return 0, nil, err
	}
	c, err := s.readPair(body)
	if err != nil {
		return 0, nil, err
	}
	if err := body.done(""); err != nil {
		return 0, nil, err
	}
	if err := s.store.createCertificate(r.Context(), c); errors.Is(err, errNameTaken) {
		return 0, nil, nameTaken(body.name("name"))
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"certificate": certificateView{ID: c.ID, Name: c.Name}}, nil
}

func (s *Server) listCertificates(r *http.Request) (int, any, error) {
	certs, err := s.store.certificates(r.Context())
	if err != nil {
		return 0, nil, err
	}
	views := make([]certificateView, 0, len(certs))
	for _, c := range certs {
		views = append(views, certificateView{ID: c.ID, Name: c.Name})
	}
	return http.StatusOK, map[string]any{"certificates": views}, nil
}

func (s *Server) deleteCertificate(r *http.Request) (int, any, error) {
	id, ok := pathID(r)
	if !ok {
		return 0, nil, certificateNotFound(r.PathValue("id"))
	}
	if err := s.store.deleteCertificate(r.Context(), id); errors.Is(err, clouddb.ErrNotFound) {
		return 0, nil, certificateNotFound(r.PathValue("id"))
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func certificateNotFound(id string) error {
	return clouddb.NotFound(errCertificateNotFound, "no TLS client certificate with id %s", id)
}

// nameTaken answers a pair name already in use as the tool does: 400 with its message,
// word for word (the field is in the body's "field").
func nameTaken(field string) error {
	return &fieldError{err: clouddb.Invalid(errCertificateNameTaken, "%s", msgClientCertNameTaken), field: field}
}

// pathID reads the {id} path value; ok is false when it cannot name a record.
func pathID(r *http.Request) (int, bool) {
	id, err := strconv.Atoi(r.PathValue("id"))
	return id, err == nil && id > 0
}

// readPair takes the name, cert and key fields of o (a POSTed pair or an inline new one)
// and checks them: a PEM certificate that is valid now, a PEM private key that matches
// it. The name's uniqueness is checked by the caller.
func (s *Server) readPair(o *object) (*certificate, error) {
	name, err := o.nonEmpty("name", true, maxNameBytes)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(name) == "" {
		return nil, invalid(o.name("name"), "must not be blank")
	}
	certText, _, err := o.str("cert", true)
	if err != nil {
		return nil, err
	}
	keyText, _, err := o.str("key", true)
	if err != nil {
		return nil, err
	}
	certPEM, leaf, err := parseCertificates(o.name("cert"), certText, s.now())
	if err != nil {
		return nil, err
	}
	keyPEM, err := parseKey(o.name("key"), keyText, leaf)
	if err != nil {
		return nil, err
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err != nil {
		return nil, fieldErr(http.StatusBadRequest, errKeyMalformed, o.name("key"), "not usable with the certificate: %v", err)
	}
	return &certificate{Name: name, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// parseCertificates reads a PEM certificate, optionally followed by its chain, and
// returns the blocks re-encoded (without surrounding text) and the first, which must be
// valid at now.
func parseCertificates(field, text string, now time.Time) (string, *x509.Certificate, error) {
	malformed := func(format string, args ...any) error {
		return fieldErr(http.StatusBadRequest, errCertificateMalformed, field, format, args...)
	}
	var (
		out   strings.Builder
		certs []*x509.Certificate
	)
	rest := []byte(text)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return "", nil, malformed("holds a %q PEM block; expected only CERTIFICATE blocks", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "", nil, malformed("certificate %d cannot be parsed: %v", len(certs)+1, err)
		}
		certs = append(certs, c)
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}))
	}
	if len(certs) == 0 {
		return "", nil, malformed("is not a PEM certificate: expected a PEM block of type CERTIFICATE")
	}
	leaf := certs[0]
	if now.After(leaf.NotAfter) {
		return "", nil, fieldErr(http.StatusBadRequest, errCertificateExpired, field, "the certificate expired on %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return "", nil, fieldErr(http.StatusBadRequest, errCertificateNotYetValid, field, "the certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return out.String(), leaf, nil
}

// parseKey reads a PEM private key (PKCS#8, PKCS#1 or SEC 1), refuses an encrypted one,
// checks that it matches the certificate's public key and returns it re-encoded.
func parseKey(field, text string, leaf *x509.Certificate) (string, error) {
	malformed := func(format string, args ...any) error {
		return fieldErr(http.StatusBadRequest, errKeyMalformed, field, format, args...)
	}
	rest := []byte(text)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return "", malformed("is not a PEM private key: expected a PEM block of type PRIVATE KEY")
		}
		if block.Type == "EC PARAMETERS" { // written by `openssl ecparam -genkey` before the key
			continue
		}
		if block.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
			return "", malformed("is encrypted; give the decrypted private key")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			return "", malformed("holds a %q PEM block; expected a private key", block.Type)
		}
		if err != nil {
			return "", malformed("the private key cannot be parsed: %v", err)
		}
		var pub crypto.PublicKey
		switch k := key.(type) {
		case *rsa.PrivateKey:
			pub = k.Public()
		case *ecdsa.PrivateKey:
			pub = k.Public()
		case ed25519.PrivateKey:
			pub = k.Public()
		default:
			return "", malformed("unsupported private key type %T", key)
		}
		certPub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !certPub.Equal(pub) {
			return "", fieldErr(http.StatusBadRequest, errKeyMismatch, field, "the private key does not match the certificate's public key")
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes})), nil
	}
}
