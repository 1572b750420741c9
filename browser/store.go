package browser

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	moderncsqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"clouddb"
	"clouddb/sqlite"
)

//go:embed migration/*.sql
var migrationFS embed.FS

// store keeps certificates and connection records in the browser's own SQLite file, in
// WAL mode, with one writer connection whose transactions begin IMMEDIATE and a small
// pool of query-only readers. Secrets are sealed on the way in and opened on the way out.
type store struct {
	pools  *sqlite.Pools
	writer *sql.DB
	reader *sql.DB
	cipher *clouddb.Cipher
	now    func() time.Time
}

var (
	// errNameTaken is a unique violation on a certificate name.
	errNameTaken = errors.New("certificate name taken")
	// errCertificateGone is a connection that refers to a certificate that does not exist.
	errCertificateGone = errors.New("certificate does not exist")
)

func openStore(path string, cipher *clouddb.Cipher) (*store, error) {
	p, err := sqlite.OpenPools(path, migrationFS, max(2, runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, fmt.Errorf("browser: %w", err)
	}
	return &store{pools: p, writer: p.Writer, reader: p.Reader, cipher: cipher, now: func() time.Time { return time.Now().UTC() }}, nil
}

func (st *store) close() error { return st.pools.Close() }

// update runs fn in a write transaction and commits when it returns nil. A full disk or
// an unwritable file answers 507 or 503 (sqlite.StorageError), not a generic 500.
func (st *store) update(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := st.writer.BeginTx(ctx, nil)
	if err != nil {
		return sqlite.StorageError(err)
	}
	// After a commit the rollback is a no-op (sql.ErrTxDone); before, there is nothing to
	// do about its failure.
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return sqlite.StorageError(err)
	}
	return sqlite.StorageError(tx.Commit())
}

// constraint returns the extended SQLite result code of a constraint violation, or 0.
func constraint(err error) int {
	var se *moderncsqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return se.Code()
	}
	return 0
}

func (st *store) seal(plain string) string { return st.cipher.Seal(plain) }

func (st *store) open(sealed string) (string, error) {
	plain, err := st.cipher.Open(sealed)
	if err != nil {
		return "", fmt.Errorf("browser: %w", err)
	}
	return plain, nil
}

// certificate is a TLS client certificate/key pair.
type certificate struct {
	ID        int
	Name      string
	CertPEM   string
	KeyPEM    string
	CreatedAt time.Time
}

// certificates lists the pairs by id, without their bodies.
func (st *store) certificates(ctx context.Context) ([]certificate, error) {
	return listNamed(ctx, st, "certificates", func(id int, name string) certificate { return certificate{ID: id, Name: name} })
}

// listNamed lists the ids and names of table's rows, by id, as mk makes them. table is
// this package's constant.
func listNamed[T any](ctx context.Context, st *store, table string, mk func(id int, name string) T) ([]T, error) {
	rows, err := st.reader.QueryContext(ctx, `SELECT id, name FROM `+table+` ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var (
			id   int
			name string
		)
		if err := rows.Scan(&id, &name); err != nil {
			return nil, err
		}
		out = append(out, mk(id, name))
	}
	return out, rows.Err()
}

// certificate returns a pair with its opened bodies, or clouddb.ErrNotFound.
func (st *store) certificate(ctx context.Context, id int) (*certificate, error) {
	var (
		c       certificate
		created int64
	)
	err := st.reader.QueryRowContext(ctx, `SELECT id, name, cert, key, created_at FROM certificates WHERE id = ?`, id).
		Scan(&c.ID, &c.Name, &c.CertPEM, &c.KeyPEM, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, clouddb.ErrNotFound
	} else if err != nil {
		return nil, err
	}
	c.CreatedAt = time.UnixMicro(created).UTC()
	if c.CertPEM, err = st.open(c.CertPEM); err != nil {
		return nil, err
	}
	if c.KeyPEM, err = st.open(c.KeyPEM); err != nil {
		return nil, err
	}
	return &c, nil
}

// certificateNameTaken reports whether a pair already has the name.
func (st *store) certificateNameTaken(ctx context.Context, name string) (bool, error) {
	var n int
	err := st.reader.QueryRowContext(ctx, `SELECT COUNT(*) FROM certificates WHERE name = ?`, name).Scan(&n)
	return n > 0, err
}

// createCertificate stores c and sets its ID and CreatedAt; errNameTaken when the name is.
func (st *store) createCertificate(ctx context.Context, c *certificate) error {
	return st.update(ctx, func(tx *sql.Tx) error { return st.insertCertificate(ctx, tx, c) })
}

func (st *store) insertCertificate(ctx context.Context, tx *sql.Tx, c *certificate) error {
	c.CreatedAt = st.now().Truncate(time.Microsecond)
	res, err := tx.ExecContext(ctx, `INSERT INTO certificates (name, cert, key, created_at) VALUES (?, ?, ?, ?)`,
		c.Name, st.seal(c.CertPEM), st.seal(c.KeyPEM), c.CreatedAt.UnixMicro())
	if constraint(err) == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		return errNameTaken
	} else if err != nil {
		return err
	}
	id, err := res.LastInsertId()
	c.ID = int(id)
	return err
}

// deleteCertificate deletes a pair: clouddb.ErrNotFound when there is none, and a 409
// naming the connections that still use it.
func (st *store) deleteCertificate(ctx context.Context, id int) error {
	return st.deleteUnused(ctx, id, "certificates", "certificate_id", "certificate")
}

// deleteUnused deletes row id of table (a kind of certificate, what), which connections
// name in their column: clouddb.ErrNotFound when there is none, and a 409 naming the
// connections that still use it. table and column are this package's constants.
func (st *store) deleteUnused(ctx context.Context, id int, table, column, what string) error {
	return st.update(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM connections WHERE `+column+` = ? ORDER BY id`, id)
		if err != nil {
			return err
		}
		var users []string
		for rows.Next() {
			var cid int
			if err = rows.Scan(&cid); err != nil {
				rows.Close()
				return err
			}
			users = append(users, fmt.Sprint(cid))
		}
		rows.Close()
		if err = rows.Err(); err != nil {
			return err
		}
		if len(users) > 0 {
			return clouddb.Conflict(errCertificateInUse, "%s %d is used by connection %s: delete or change those first", what, id, strings.Join(users, ", "))
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE id = ?`, id)
		if err != nil {
			if constraint(err) != 0 {
				return clouddb.Conflict(errCertificateInUse, "%s %d is used by a connection", what, id)
			}
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

// endpoint is a host and port.
type endpoint struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// node is a cluster node found by the connection test.
type node struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	// Role is "primary" or "replica".
	Role string `json:"role"`
}

// settings are a connection record's non-secret fields, stored as JSON.
type settings struct {
	Host         string     `json:"host,omitempty"`
	Port         int        `json:"port,omitempty"`
	SeedNodes    []endpoint `json:"seedNodes,omitempty"`
	SentinelHost string     `json:"sentinelHost,omitempty"`
	SentinelPort int        `json:"sentinelPort,omitempty"`
	ServiceName  string     `json:"serviceName,omitempty"`
	UseTLS       bool       `json:"useTls,omitempty"`
	ClientAuth   bool       `json:"clientAuth,omitempty"`
	// VerifyServerCert and the usernames: see ca_certificate.go and username.go.
	VerifyServerCert bool   `json:"verifyServerCert,omitempty"`
	Username         string `json:"username,omitempty"`
	SentinelUsername string `json:"sentinelUsername,omitempty"`

	// What the connection test found.
	Version string    `json:"version,omitempty"`
	Nodes   []node    `json:"nodes,omitempty"`
	Master  *endpoint `json:"master,omitempty"`
}

// connection is a connection record.
type connection struct {
	ID   int
	Name string
	Type string
	settings
	// Secrets in clear: set on a record being created and by connectionWithSecrets.
	Password         string
	SentinelPassword string
	AuthPass         string
	// Whether each secret is set.
	HasPassword         bool
	HasSentinelPassword bool
	HasAuthPass         bool
	CertID              int
	CertName            string
	CreatedAt           time.Time
	LastConnection      time.Time

	// The CA certificate that verifies the server's, when the record has one; CACertPEM
	// is set by connectionWithSecrets, newCA on a record being created with an inline one.
	CACertID   int
	CACertName string
	CACertPEM  string
	newCA      *caCertificate
}

// createConnection stores c, and first newCert when it is not nil (c then refers to it),
// in one transaction; it sets the IDs and times. errNameTaken when newCert's name is
// taken, errCertificateGone when c refers to a pair that does not exist.
func (st *store) createConnection(ctx context.Context, c *connection, newCert *certificate) error {
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
		if err := st.insertNewCA(ctx, tx, c); err != nil {
			return err
		}
		var certID any
		if c.CertID != 0 {
			certID = c.CertID
		}
		var last any
		if !c.LastConnection.IsZero() {
			last = c.LastConnection.UnixMicro()
		}
		c.CreatedAt = st.now().Truncate(time.Microsecond)
		res, err := tx.ExecContext(ctx, `INSERT INTO connections
			(name, connection_type, config, password, sentinel_password, auth_pass, certificate_id, created_at, last_connection, ca_certificate_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.Name, c.Type, string(cfg), st.seal(c.Password), st.seal(c.SentinelPassword), st.seal(c.AuthPass),
			certID, c.CreatedAt.UnixMicro(), last, caRef(c))
		if constraint(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
			return errCertificateGone
		} else if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		c.ID = int(id)
		return err
	})
}

const connectionColumns = `c.id, c.name, c.connection_type, c.config, c.password <> '', c.sentinel_password <> '',
	c.auth_pass <> '', COALESCE(c.certificate_id, 0), COALESCE(k.name, ''), c.created_at, c.last_connection,
	COALESCE(c.ca_certificate_id, 0), COALESCE((SELECT a.name FROM ca_certificates a WHERE a.id = c.ca_certificate_id), '')`

// scanConnection scans connectionColumns, then the extra columns into extra.
func scanConnection(row interface{ Scan(...any) error }, extra ...any) (*connection, error) {
	var (
		c       connection
		cfg     string
		created int64
		last    sql.NullInt64
	)
	dest := append([]any{&c.ID, &c.Name, &c.Type, &cfg, &c.HasPassword, &c.HasSentinelPassword, &c.HasAuthPass,
		&c.CertID, &c.CertName, &created, &last, &c.CACertID, &c.CACertName}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(cfg), &c.settings); err != nil {
		return nil, fmt.Errorf("browser: connection %d: %w", c.ID, err)
	}
	c.CreatedAt = time.UnixMicro(created).UTC()
	if last.Valid {
		c.LastConnection = time.UnixMicro(last.Int64).UTC()
	}
	return &c, nil
}

// connections lists the records by id, without their secrets.
func (st *store) connections(ctx context.Context) ([]*connection, error) {
	rows, err := st.reader.QueryContext(ctx, `SELECT `+connectionColumns+`
		FROM connections c LEFT JOIN certificates k ON k.id = c.certificate_id ORDER BY c.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*connection{}
	for rows.Next() {
		c, err := scanConnection(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// connection returns a record without its secrets, or clouddb.ErrNotFound.
func (st *store) connection(ctx context.Context, id int) (*connection, error) {
	c, err := scanConnection(st.reader.QueryRowContext(ctx, `SELECT `+connectionColumns+`
		FROM connections c LEFT JOIN certificates k ON k.id = c.certificate_id WHERE c.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, clouddb.ErrNotFound
	}
	return c, err
}

// connectionWithSecrets returns a record with its secrets opened, and its certificate
// pair when it has one; clouddb.ErrNotFound when there is no such record.
func (st *store) connectionWithSecrets(ctx context.Context, id int) (*connection, *certificate, error) {
	var pw, spw, ap, certPEM, keyPEM, caPEM string
	c, err := scanConnection(st.reader.QueryRowContext(ctx, `SELECT `+connectionColumns+`,
		c.password, c.sentinel_password, c.auth_pass, COALESCE(k.cert, ''), COALESCE(k.key, ''),
		COALESCE((SELECT a.certificate FROM ca_certificates a WHERE a.id = c.ca_certificate_id), '')
		FROM connections c LEFT JOIN certificates k ON k.id = c.certificate_id WHERE c.id = ?`, id),
		&pw, &spw, &ap, &certPEM, &keyPEM, &caPEM)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, clouddb.ErrNotFound
	} else if err != nil {
		return nil, nil, err
	}
	for _, f := range []struct {
		dst    *string
		sealed string
	}{{&c.Password, pw}, {&c.SentinelPassword, spw}, {&c.AuthPass, ap}, {&certPEM, certPEM}, {&keyPEM, keyPEM}, {&c.CACertPEM, caPEM}} {
		if *f.dst, err = st.open(f.sealed); err != nil {
			return nil, nil, err
		}
	}
	if c.CertID == 0 {
		return c, nil, nil
	}
	return c, &certificate{ID: c.CertID, Name: c.CertName, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// deleteConnection deletes a record, or returns clouddb.ErrNotFound.
func (st *store) deleteConnection(ctx context.Context, id int) error {
	return st.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM connections WHERE id = ?`, id)
		if err != nil {
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
