package browser

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	sqlite3 "modernc.org/sqlite/lib"

	"clouddb"
)

// Managing saved records, as the tool does: PATCH /api/db/{id} changes some fields of a
// record, POST /api/db/test/{id} tests a saved record (with the same optional changes,
// which it does not save), GET /api/db/{id}/overview reads the database's figures from
// INFO (overview.go).

func (s *Server) registerRecordRoutes() {
	s.route("PATCH /api/db/{id}", s.patchConnection)
	s.route("POST /api/db/test/{id}", s.testConnection)
	s.route("GET /api/db/{id}/overview", s.overview)
}

// patchFields are the fields a PATCH or a test of a saved record may hold: those of a
// POST /api/db body.
var patchFields = []string{"name", "connectionType", "host", "port", "username", "password", "seedNodes", "sentinelHost",
	"sentinelPort", "sentinelUsername", "sentinelPassword", "sentinelMaster", "tls"}

// mergeRecord applies the changes of body to the saved record c (with its secrets) and
// validates the result as a POST /api/db body: a field given replaces the saved one, a
// null removes it, tls and sentinelMaster are merged field by field. When the
// connectionType changes, the saved fields of the old type are dropped (name and tls
// stay). It returns the merged record, its inline new pair if any, and whether a field
// of the connection (anything but name) differs from the saved record.
func (s *Server) mergeRecord(saved *connection, body *object) (*connection, *certificate, bool, error) {
	for f := range body.fields {
		if !slices.Contains(patchFields, f) {
			return nil, nil, false, invalid(f, "is not allowed (a record has name, connectionType, host, port, username, password, seedNodes, sentinelHost, sentinelPort, sentinelUsername, sentinelPassword, sentinelMaster and tls)")
		}
	}
	base := recordFields(saved)
	if raw, ok := body.fields["connectionType"]; ok {
		var typ string
		if json.Unmarshal(raw, &typ) != nil || typ != saved.Type {
			base = map[string]any{"name": base["name"], "tls": base["tls"]}
		}
	}
	merged := map[string]json.RawMessage{}
	for k, v := range base {
		if v == nil {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, nil, false, err
		}
		merged[k] = b
	}
	for k, v := range body.fields {
		switch {
		case isNull(v):
			delete(merged, k)
		case (k == "tls" || k == "sentinelMaster") && isObject(v) && isObject(merged[k]):
			var old, changes map[string]json.RawMessage
			if json.Unmarshal(merged[k], &old) != nil || json.Unmarshal(v, &changes) != nil {
				return nil, nil, false, invalid(k, "must be an object")
			}
			for f, fv := range changes {
				if isNull(fv) {
					delete(old, f)
				} else {
					old[f] = fv
				}
			}
			b, err := json.Marshal(old)
			if err != nil {
				return nil, nil, false, err
			}
			merged[k] = b
		default:
			merged[k] = v
		}
	}
	c, pair, err := s.readConnection(&object{fields: merged, taken: map[string]bool{}})
	if err != nil {
		return nil, nil, false, err
	}
	if err := secretsStay(saved, c, body); err != nil {
		return nil, nil, false, err
	}
	changed := pair != nil || c.Type != saved.Type || c.Host != saved.Host || c.Port != saved.Port ||
		!slices.Equal(c.SeedNodes, saved.SeedNodes) || c.SentinelHost != saved.SentinelHost ||
		c.SentinelPort != saved.SentinelPort || c.ServiceName != saved.ServiceName ||
		c.Password != saved.Password || c.SentinelPassword != saved.SentinelPassword || c.AuthPass != saved.AuthPass ||
		c.Username != saved.Username || c.SentinelUsername != saved.SentinelUsername ||
		c.UseTLS != saved.UseTLS || c.ClientAuth != saved.ClientAuth || c.CertID != saved.CertID ||
		c.VerifyServerCert != saved.VerifyServerCert || c.CACertID != saved.CACertID || c.newCA != nil
	return c, pair, changed, nil
}

// secretsStay refuses a change of a saved record's address (host, port, seed nodes,
// sentinel) that keeps a saved secret without giving it again: a saved password goes only
// to the server it was saved for, not to one a request names (a test of a saved record
// with changes would otherwise hand it to any server).
func secretsStay(saved, c *connection, body *object) error {
	moved := c.Type != saved.Type || c.Host != saved.Host || c.Port != saved.Port ||
		!slices.Equal(c.SeedNodes, saved.SeedNodes) || c.SentinelHost != saved.SentinelHost || c.SentinelPort != saved.SentinelPort
	if !moved {
		return nil
	}
	given := func(f string) bool { _, ok := body.fields[f]; return ok }
	again := "must be given again when the record's address changes: a saved secret goes only to the server it was saved for"
	switch {
	case saved.Password != "" && c.Password == saved.Password && !given("password"):
		return invalid("password", "%s", again)
	case saved.SentinelPassword != "" && c.SentinelPassword == saved.SentinelPassword && !given("sentinelPassword"):
		return invalid("sentinelPassword", "%s", again)
	case saved.AuthPass != "" && c.AuthPass == saved.AuthPass:
		var m map[string]json.RawMessage
		if raw, ok := body.fields["sentinelMaster"]; !ok || json.Unmarshal(raw, &m) != nil || m["authPass"] == nil {
			return invalid("sentinelMaster.authPass", "%s", again)
		}
	}
	return nil
}

// recordFields is a saved record as a POST /api/db body, secrets included.
func recordFields(c *connection) map[string]any {
	m := map[string]any{"name": c.Name, "connectionType": c.Type}
	str := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	switch c.Type {
	case typeStandalone:
		m["host"], m["port"] = c.Host, c.Port
		str("username", c.Username)
		str("password", c.Password)
	case typeCluster:
		m["seedNodes"] = c.SeedNodes
		str("username", c.Username)
		str("password", c.Password)
	case typeSentinel:
		m["sentinelHost"], m["sentinelPort"] = c.SentinelHost, c.SentinelPort
		str("sentinelUsername", c.SentinelUsername)
		str("sentinelPassword", c.SentinelPassword)
		master := map[string]any{"serviceName": c.ServiceName}
		if c.Username != "" {
			master["username"] = c.Username
		}
		if c.AuthPass != "" {
			master["authPass"] = c.AuthPass
		}
		m["sentinelMaster"] = master
	}
	if c.UseTLS || c.ClientAuth || c.CertID != 0 || c.VerifyServerCert || c.CACertID != 0 {
		t := map[string]any{"useTls": c.UseTLS, "clientAuth": c.ClientAuth}
		if c.CertID != 0 {
			t["clientCertificateKeyPair"] = map[string]any{"id": c.CertID}
		}
		// Server verification is kept as saved: a PATCH or a test that does not name it
		// must not connect without it.
		if c.VerifyServerCert {
			t["verifyServerCert"] = true
		}
		if c.CACertID != 0 {
			t["caCert"] = map[string]any{"id": c.CACertID}
		}
		m["tls"] = t
	}
	return m
}

// savedRecord loads the record the path names, with its secrets.
func (s *Server) savedRecord(ctx context.Context, r *http.Request) (*connection, error) {
	id, ok := pathID(r)
	if !ok {
		return nil, connectionNotFound(r.PathValue("id"))
	}
	c, _, err := s.store.connectionWithSecrets(ctx, id)
	if errors.Is(err, clouddb.ErrNotFound) {
		return nil, connectionNotFound(r.PathValue("id"))
	}
	return c, err
}

// pairFor returns the pair c connects with: the existing one it names, or newPair, whose
// name must be free.
func (s *Server) pairFor(ctx context.Context, c *connection, newPair *certificate) (*certificate, error) {
	switch {
	case newPair != nil:
		if taken, err := s.store.certificateNameTaken(ctx, newPair.Name); err != nil {
			return nil, err
		} else if taken {
			return nil, nameTaken(newPairField + ".name")
		}
		return newPair, nil
	case c.CertID != 0:
		pair, err := s.store.certificate(ctx, c.CertID)
		if errors.Is(err, clouddb.ErrNotFound) {
			return nil, pairNotFound(c.CertID)
		}
		return pair, err
	}
	return nil, nil
}

// test probes c after checking its hosts.
func (s *Server) test(ctx context.Context, c *connection, pair *certificate) (*found, error) {
	if err := s.checkHosts(ctx, c); err != nil {
		return nil, err
	}
	f, err := s.probe(ctx, c, pair)
	if e := clouddb.AsError(err); e != nil {
		s.logger.Info("browser: connection test failed", "id", c.ID, "connectionType", c.Type, "error", e.Type, "message", e.Description)
	}
	return f, err
}

// patchConnection changes some fields of a record. A change to a connection field tests
// the new connection first (unless ?test=false); a failed test changes nothing.
func (s *Server) patchConnection(r *http.Request) (int, any, error) {
	ctx := r.Context()
	test, err := queryBool(r, "test", true)
	if err != nil {
		return 0, nil, err
	}
	saved, err := s.savedRecord(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	body, err := readBody(r)
	if err != nil {
		return 0, nil, err
	}
	c, newPair, changed, err := s.mergeRecord(saved, body)
	if err != nil {
		return 0, nil, err
	}
	c.ID, c.CreatedAt = saved.ID, saved.CreatedAt
	c.Version, c.Nodes, c.Master, c.LastConnection = saved.Version, saved.Nodes, saved.Master, saved.LastConnection
	if c.newCA != nil {
		return 0, nil, invalid(newCACertField, "is not taken by PATCH: add the CA certificate first (POST /api/certificates/ca) and give its id")
	}
	if err = s.loadCA(ctx, c); err != nil {
		return 0, nil, err
	}
	if changed {
		var pair *certificate
		if pair, err = s.pairFor(ctx, c, newPair); err != nil {
			return 0, nil, err
		}
		// What was found about the old connection says nothing about the new one.
		c.Version, c.Nodes, c.Master = "", nil, nil
		if test {
			f, terr := s.test(ctx, c, pair)
			if terr != nil {
				return 0, nil, terr
			}
			c.Version, c.Nodes, c.Master, c.LastConnection = f.version, f.nodes, f.master, s.now()
		}
	}
	switch err = s.store.updateConnection(ctx, c, newPair); {
	case errors.Is(err, errNameTaken):
		return 0, nil, nameTaken(newPairField + ".name")
	case errors.Is(err, errCertificateGone):
		return 0, nil, pairNotFound(c.CertID)
	case errors.Is(err, clouddb.ErrNotFound):
		return 0, nil, connectionNotFound(r.PathValue("id"))
	case err != nil:
		return 0, nil, err
	}
	stored, err := s.store.connection(ctx, c.ID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewOf(stored), nil
}

// testView is what the test of a saved record found.
type testView struct {
	Version string    `json:"version,omitempty"`
	Nodes   []node    `json:"nodes,omitempty"`
	Master  *endpoint `json:"master,omitempty"`
}

// testConnection tests a saved record, with the changes of an optional body (the fields
// of a PATCH) applied but not saved: 200 with what it found, or the 424 of the test.
func (s *Server) testConnection(r *http.Request) (int, any, error) {
	ctx := r.Context()
	saved, err := s.savedRecord(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	body := &object{fields: map[string]json.RawMessage{}, taken: map[string]bool{}}
	if r.ContentLength != 0 {
		if body, err = readBody(r); err != nil {
			return 0, nil, err
		}
	}
	c, newPair, _, err := s.mergeRecord(saved, body)
	if err != nil {
		return 0, nil, err
	}
	c.ID = saved.ID
	if err = s.loadCA(ctx, c); err != nil {
		return 0, nil, err
	}
	var pair *certificate
	if newPair != nil {
		pair = newPair // tested, not stored: its name may be taken
	} else if pair, err = s.pairFor(ctx, c, nil); err != nil {
		return 0, nil, err
	}
	f, err := s.test(ctx, c, pair)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, testView{Version: f.version, Nodes: f.nodes, Master: f.master}, nil
}

// updateConnection replaces the record c.ID with c, and first stores newCert when it is
// not nil (c then refers to it), in one transaction. clouddb.ErrNotFound when the
// record is gone, errNameTaken and errCertificateGone as createConnection.
func (st *store) updateConnection(ctx context.Context, c *connection, newCert *certificate) error {
	cfg, err := json.Marshal(c.settings)
	if err != nil {
		return err
	}
	return st.update(ctx, func(tx *sql.Tx) error {
		if newCert != nil {
			if err := st.insertCertificate(ctx, tx, newCert); err != nil {
				return err
			}
			c.CertID = newCert.ID
		}
		var certID, caID, last any
		if c.CertID != 0 {
			certID = c.CertID
		}
		if c.CACertID != 0 {
			caID = c.CACertID
		}
		if !c.LastConnection.IsZero() {
			last = c.LastConnection.UnixMicro()
		}
		res, err := tx.ExecContext(ctx, `UPDATE connections SET name = ?, connection_type = ?, config = ?, password = ?,
			sentinel_password = ?, auth_pass = ?, certificate_id = ?, ca_certificate_id = ?, last_connection = ? WHERE id = ?`,
			c.Name, c.Type, string(cfg), st.seal(c.Password), st.seal(c.SentinelPassword), st.seal(c.AuthPass),
			certID, caID, last, c.ID)
		if constraint(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
			return errCertificateGone
		} else if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return clouddb.ErrNotFound
		}
		return nil
	})
}
