-- CA certificates that verify the servers' TLS certificates (tls.verifyServerCert), stored
-- like client pairs and referred to by connections. A connection's username needs no
-- column: it is not a secret and lives in the config JSON with the other settings.

CREATE TABLE ca_certificates (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	name        TEXT    NOT NULL UNIQUE,
	certificate TEXT    NOT NULL, -- sealed PEM
	created_at  INTEGER NOT NULL
);

ALTER TABLE connections ADD COLUMN ca_certificate_id INTEGER REFERENCES ca_certificates (id);

CREATE INDEX connections_ca_certificate_id ON connections (ca_certificate_id);
