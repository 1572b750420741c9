package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"clouddb"
	"clouddb/blob"
)

// Connection types.
const (
	typeStandalone = "STANDALONE"
	typeCluster    = "CLUSTER"
	typeSentinel   = "SENTINEL"
)

// maxHostBytes caps host names (a DNS name is at most 253 bytes).
const maxHostBytes = 255

func (s *Server) registerConnectionRoutes() {
	s.route("POST /api/db", s.createConnection)
	s.route("GET /api/db", s.listConnections)
	s.route("GET /api/db/{id}", s.getConnection)
	s.route("DELETE /api/db/{id}", s.deleteConnection)
}

// connectionView is a connection record as responses show it: secrets only as true where
// set, the certificate pair only as {id, name}.
type connectionView struct {
	ID               int                 `json:"id"`
	Name             string              `json:"name"`
	ConnectionType   string              `json:"connectionType"`
	Host             string              `json:"host,omitempty"`
	Port             int                 `json:"port,omitempty"`
	SeedNodes        []endpoint          `json:"seedNodes,omitempty"`
	SentinelHost     string              `json:"sentinelHost,omitempty"`
	SentinelPort     int                 `json:"sentinelPort,omitempty"`
	SentinelUsername string              `json:"sentinelUsername,omitempty"`
	SentinelPassword bool                `json:"sentinelPassword,omitempty"`
	SentinelMaster   *sentinelMasterView `json:"sentinelMaster,omitempty"`
	Username         string              `json:"username,omitempty"`
	Password         bool                `json:"password,omitempty"`
	TLS              tlsView             `json:"tls"`
	Nodes            []node              `json:"nodes,omitempty"`
	Master           *endpoint           `json:"master,omitempty"`
	Version          string              `json:"version,omitempty"`
	LastConnection   string              `json:"lastConnection,omitempty"`
	CreatedAt        string              `json:"createdAt"`
}

type sentinelMasterView struct {
	ServiceName string `json:"serviceName"`
	Username    string `json:"username,omitempty"`
	AuthPass    bool   `json:"authPass,omitempty"`
}

type tlsView struct {
	UseTLS                   bool             `json:"useTls"`
	ClientAuth               bool             `json:"clientAuth"`
	ClientCertificateKeyPair *certificateView `json:"clientCertificateKeyPair,omitempty"`
	VerifyServerCert         bool             `json:"verifyServerCert,omitempty"`
	CACert                   *certificateView `json:"caCert,omitempty"`
}

func viewOf(c *connection) connectionView {
	v := connectionView{
		ID:             c.ID,
		Name:           c.Name,
		ConnectionType: c.Type,
		Host:           c.Host,
		Port:           c.Port,
		SeedNodes:      c.SeedNodes,
		SentinelHost:   c.SentinelHost,
		SentinelPort:   c.SentinelPort,
		Password:       c.HasPassword,
		TLS:            tlsView{UseTLS: c.UseTLS, ClientAuth: c.ClientAuth},
		Nodes:          c.Nodes,
		Master:         c.Master,
		Version:        c.Version,
		CreatedAt:      c.CreatedAt.Format(time.RFC3339),
	}
	if c.Type == typeSentinel {
		v.SentinelPassword = c.HasSentinelPassword
		v.SentinelMaster = &sentinelMasterView{ServiceName: c.ServiceName, AuthPass: c.HasAuthPass}
	}
	if c.CertID != 0 {
		v.TLS.ClientCertificateKeyPair = &certificateView{ID: c.CertID, Name: c.CertName}
	}
	if !c.LastConnection.IsZero() {
		v.LastConnection = c.LastConnection.Format(time.RFC3339)
	}
	viewUsernames(&v, c)
	viewServerVerification(&v, c)
	return v
}

func (s *Server) createConnection(r *http.Request) (int, any, error) {
	ctx := r.Context()
	test, err := queryBool(r, "test", true)
	if err != nil {
		return 0, nil, err
	}
	body, err := readBody(r)
	if err != nil {
		return 0, nil, err
	}
	c, pair, err := s.readConnection(body)
	if err != nil {
		return 0, nil, err
	}

	// The pair to connect with: an existing one by id, or the inline new one, which is
	// stored only together with the record, after the test.
	var newPair *certificate
	switch {
	case c.CertID != 0:
		if pair, err = s.store.certificate(ctx, c.CertID); errors.Is(err, clouddb.ErrNotFound) {
			return 0, nil, pairNotFound(c.CertID)
		} else if err != nil {
			return 0, nil, err
		}
	case pair != nil:
		newPair = pair
		var taken bool
		if taken, err = s.store.certificateNameTaken(ctx, pair.Name); err != nil {
			return 0, nil, err
		} else if taken {
			return 0, nil, nameTaken(newPairField + ".name")
		}
	}
	if err = s.loadCA(ctx, c); err != nil {
		return 0, nil, err
	}

	if test {
		if err = s.checkHosts(ctx, c); err != nil {
			return 0, nil, err
		}
		var f *found
		if f, err = s.probe(ctx, c, pair); err != nil {
			if e := clouddb.AsError(err); e != nil {
				s.logger.Info("browser: connection test failed", "connectionType", c.Type, "error", e.Type, "message", e.Description)
			}
			return 0, nil, err
		}
		c.Version, c.Nodes, c.Master = f.version, f.nodes, f.master
		c.LastConnection = s.now()
	}

	switch err = s.store.createConnection(ctx, c, newPair); {
	case errors.Is(err, errNameTaken):
		return 0, nil, nameTaken(newPairField + ".name")
	case errors.Is(err, errCertificateGone):
		return 0, nil, pairNotFound(c.CertID)
	case err != nil:
		return 0, nil, caStoreError(c, err)
	}
	stored, err := s.store.connection(ctx, c.ID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, viewOf(stored), nil
}

const newPairField = "tls.clientCertificateKeyPair.new"

func pairNotFound(id int) error {
	return fieldErr(http.StatusBadRequest, errCertificateNotFound, "tls.clientCertificateKeyPair.id", "no TLS client certificate with id %d", id)
}

func (s *Server) listConnections(r *http.Request) (int, any, error) {
	conns, err := s.store.connections(r.Context())
	if err != nil {
		return 0, nil, err
	}
	views := make([]connectionView, 0, len(conns))
	for _, c := range conns {
		views = append(views, viewOf(c))
	}
	return http.StatusOK, map[string]any{"dbs": views}, nil
}

func (s *Server) getConnection(r *http.Request) (int, any, error) {
	c, err := s.findConnection(r.Context(), r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewOf(c), nil
}

func (s *Server) deleteConnection(r *http.Request) (int, any, error) {
	id, ok := pathID(r)
	if !ok {
		return 0, nil, connectionNotFound(r.PathValue("id"))
	}
	if err := s.store.deleteConnection(r.Context(), id); errors.Is(err, clouddb.ErrNotFound) {
		return 0, nil, connectionNotFound(r.PathValue("id"))
	} else if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func (s *Server) findConnection(ctx context.Context, r *http.Request) (*connection, error) {
	id, ok := pathID(r)
	if !ok {
		return nil, connectionNotFound(r.PathValue("id"))
	}
	c, err := s.store.connection(ctx, id)
	if errors.Is(err, clouddb.ErrNotFound) {
		return nil, connectionNotFound(r.PathValue("id"))
	}
	return c, err
}

func connectionNotFound(id string) error {
	return clouddb.NotFound(errConnectionNotFound, "no database connection with id %s", id)
}

// readConnection validates a POST /api/db body: the common fields, exactly the fields of
// its connectionType, and tls. It returns the record (with CertID set when the pair is
// given by id) and the inline new pair when there is one.
func (s *Server) readConnection(body *object) (*connection, *certificate, error) {
	c := &connection{}
	var err error
	if c.Name, _, err = body.str("name", true); err != nil {
		return nil, nil, err
	}
	if c.Type, _, err = body.str("connectionType", true); err != nil {
		return nil, nil, err
	}
	var allowed string
	switch c.Type {
	case typeStandalone:
		allowed = "host, port, username, password, tls"
		if c.Host, err = readHost(body, "host"); err != nil {
			return nil, nil, err
		}
		if c.Port, _, err = body.integer("port", true, 1, 65535); err != nil {
			return nil, nil, err
		}
		if c.Username, err = readUsername(body, "username"); err != nil {
			return nil, nil, err
		}
		if c.Password, _, err = body.str("password", false); err != nil {
			return nil, nil, err
		}
	case typeCluster:
		allowed = "seedNodes, username, password, tls"
		var items []json.RawMessage
		if items, _, err = body.array("seedNodes", true); err != nil {
			return nil, nil, err
		}
		if len(items) == 0 {
			return nil, nil, invalid("seedNodes", "must hold at least one node")
		}
		for i, raw := range items {
			var o *object
			if o, err = newObject(fmt.Sprintf("seedNodes[%d]", i), raw); err != nil {
				return nil, nil, err
			}
			var e endpoint
			if e.Host, err = readHost(o, "host"); err != nil {
				return nil, nil, err
			}
			if e.Port, _, err = o.integer("port", true, 1, 65535); err != nil {
				return nil, nil, err
			}
			if err = o.done(" (a seed node has host and port)"); err != nil {
				return nil, nil, err
			}
			c.SeedNodes = append(c.SeedNodes, e)
		}
		if c.Username, err = readUsername(body, "username"); err != nil {
			return nil, nil, err
		}
		if c.Password, _, err = body.str("password", false); err != nil {
			return nil, nil, err
		}
	case typeSentinel:
		allowed = "sentinelHost, sentinelPort, sentinelUsername, sentinelPassword, sentinelMaster, tls"
		if c.SentinelHost, err = readHost(body, "sentinelHost"); err != nil {
			return nil, nil, err
		}
		if c.SentinelPort, _, err = body.integer("sentinelPort", true, 1, 65535); err != nil {
			return nil, nil, err
		}
		if c.SentinelUsername, err = readUsername(body, "sentinelUsername"); err != nil {
			return nil, nil, err
		}
		if c.SentinelPassword, _, err = body.str("sentinelPassword", false); err != nil {
			return nil, nil, err
		}
		var m *object
		if m, err = body.obj("sentinelMaster", true); err != nil {
			return nil, nil, err
		}
		if c.ServiceName, err = m.nonEmpty("serviceName", true, maxHostBytes); err != nil {
			return nil, nil, err
		}
		if c.Username, err = readUsername(m, "username"); err != nil {
			return nil, nil, err
		}
		if c.AuthPass, _, err = m.str("authPass", false); err != nil {
			return nil, nil, err
		}
		if err = m.done(" (sentinelMaster has serviceName, username and authPass)"); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, invalid("connectionType", "must be one of STANDALONE, CLUSTER, SENTINEL")
	}
	pair, err := s.readTLS(body, c)
	if err != nil {
		return nil, nil, err
	}
	if err := body.done(fmt.Sprintf(" for connectionType %s (it takes name, connectionType, %s)", c.Type, allowed)); err != nil {
		return nil, nil, err
	}
	// A username without a password would not be sent (a client logs in with AUTH only
	// when it has a password): the connection would test as the default user.
	switch {
	case c.Type != typeSentinel && c.Username != "" && c.Password == "":
		return nil, nil, invalid("password", "is required with username")
	case c.SentinelUsername != "" && c.SentinelPassword == "":
		return nil, nil, invalid("sentinelPassword", "is required with sentinelUsername")
	case c.Type == typeSentinel && c.Username != "" && c.AuthPass == "":
		return nil, nil, invalid("sentinelMaster.authPass", "is required with sentinelMaster.username")
	}
	c.HasPassword, c.HasSentinelPassword, c.HasAuthPass = c.Password != "", c.SentinelPassword != "", c.AuthPass != ""
	return c, pair, nil
}

// readTLS reads the optional tls object into c, and returns the inline new pair when
// there is one.
func (s *Server) readTLS(body *object, c *connection) (*certificate, error) {
	t, err := body.obj("tls", false)
	if err != nil || t == nil {
		return nil, err
	}
	if c.UseTLS, err = t.boolean("useTls"); err != nil {
		return nil, err
	}
	if c.ClientAuth, err = t.boolean("clientAuth"); err != nil {
		return nil, err
	}
	p, err := t.obj("clientCertificateKeyPair", false)
	if err != nil {
		return nil, err
	}
	var pair *certificate
	if p != nil {
		switch hasID, hasNew := p.has("id"), p.has("new"); {
		case hasID && hasNew:
			return nil, invalid(p.path, "give either id (an existing pair) or new (a pair to add), not both")
		case hasID:
			if c.CertID, _, err = p.integer("id", true, 1, math.MaxInt32); err != nil {
				return nil, err
			}
		case hasNew:
			n, err := p.obj("new", true)
			if err != nil {
				return nil, err
			}
			if pair, err = s.readPair(n); err != nil {
				return nil, err
			}
			if err := n.done(" (a new pair has name, cert and key)"); err != nil {
				return nil, err
			}
		default:
			return nil, invalid(p.path, "must hold id (an existing pair) or new (a pair to add)")
		}
		if err := p.done(" (clientCertificateKeyPair has id or new)"); err != nil {
			return nil, err
		}
	}
	switch {
	case c.ClientAuth && !c.UseTLS:
		return nil, invalid("tls.clientAuth", "requires tls.useTls to be true")
	case c.ClientAuth && p == nil:
		return nil, invalid("tls.clientCertificateKeyPair", "is required when tls.clientAuth is true")
	case p != nil && !c.UseTLS:
		return nil, invalid("tls.clientCertificateKeyPair", "requires tls.useTls to be true")
	}
	if err := s.readServerVerification(t, c); err != nil {
		return nil, err
	}
	if err := t.done(" (tls has useTls, clientAuth, clientCertificateKeyPair, verifyServerCert and caCert)"); err != nil {
		return nil, err
	}
	return pair, nil
}

// readHost takes a required host name or IP address.
func readHost(o *object, field string) (string, error) {
	h, err := o.nonEmpty(field, true, maxHostBytes)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(h, " \t\r\n/?#@") || strings.ContainsFunc(h, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", invalid(o.name(field), "must be a host name or an IP address")
	}
	if err := blob.CheckHost(h); err != nil {
		return "", forbiddenHost(o.name(field), err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), nil
}

func forbiddenHost(field string, err error) error {
	return fieldErr(http.StatusBadRequest, errAddressForbidden, field, "must not be a link-local or cloud metadata address: %v", err)
}

// checkHosts resolves the host names c connects to first and refuses one that resolves
// to a forbidden address with a 400 naming its field. A name that does not resolve is
// left to the connection test, which says it is unreachable.
func (s *Server) checkHosts(ctx context.Context, c *connection) error {
	hosts := map[string]string{"host": c.Host, "sentinelHost": c.SentinelHost}
	for i, e := range c.SeedNodes {
		hosts[fmt.Sprintf("seedNodes[%d].host", i)] = e.Host
	}
	for field, h := range hosts {
		if h == "" {
			continue
		}
		if _, err := blob.Resolve(ctx, h, blob.Options{Timeout: dialTimeout, Resolver: s.resolver}); errors.Is(err, blob.ErrForbiddenAddress) {
			return forbiddenHost(field, err)
		}
	}
	return nil
}

// queryBool reads an optional boolean query parameter.
func queryBool(r *http.Request, name string, def bool) (bool, error) {
	switch v := r.URL.Query().Get(name); strings.ToLower(v) {
	case "":
		return def, nil
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	default:
		return false, invalid(name, "query parameter must be true or false, got %q", v)
	}
}
