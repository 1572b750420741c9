-- Times are INTEGER microseconds since the Unix epoch, in UTC; NULL is the zero time.
-- Secret columns hold values sealed with clouddb.Cipher ('' when unset).
-- AUTOINCREMENT keeps ids from being reused after a delete.

CREATE TABLE certificates (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	name       TEXT    NOT NULL UNIQUE,
	cert       TEXT    NOT NULL, -- sealed PEM
	key        TEXT    NOT NULL, -- sealed PEM
	created_at INTEGER NOT NULL
);

-- config is the JSON of the record's non-secret settings and of what the connection test
-- discovered (server version, cluster nodes, sentinel master address).
CREATE TABLE connections (
	id                INTEGER PRIMARY KEY AUTOINCREMENT,
	name              TEXT    NOT NULL,
	connection_type   TEXT    NOT NULL,
	config            TEXT    NOT NULL,
	password          TEXT    NOT NULL DEFAULT '',
	sentinel_password TEXT    NOT NULL DEFAULT '',
	auth_pass         TEXT    NOT NULL DEFAULT '',
	certificate_id    INTEGER REFERENCES certificates (id),
	created_at        INTEGER NOT NULL,
	last_connection   INTEGER
);

CREATE INDEX connections_certificate_id ON connections (certificate_id);
