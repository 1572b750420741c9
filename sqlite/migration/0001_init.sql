-- Times are INTEGER microseconds since the Unix epoch, in UTC; NULL is the zero time.
-- Nested domain structs are JSON text; what is filtered, ordered or unique is a column.
-- AUTOINCREMENT keeps ids from being reused after a delete: a database id names its data
-- directory and clients may still hold old ids.

CREATE TABLE accounts (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	name       TEXT    NOT NULL,
	plan       TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id    INTEGER NOT NULL REFERENCES accounts (id),
	name          TEXT    NOT NULL,
	key           TEXT    NOT NULL UNIQUE,
	secret_digest BLOB    NOT NULL,
	role          TEXT    NOT NULL,
	created_at    INTEGER NOT NULL
);

CREATE INDEX api_keys_account_id ON api_keys (account_id);

CREATE TABLE payment_methods (
	id                    INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id            INTEGER NOT NULL REFERENCES accounts (id),
	type                  TEXT    NOT NULL,
	credit_card_ends_with INTEGER NOT NULL,
	name_on_card          TEXT    NOT NULL,
	expiration_month      INTEGER NOT NULL,
	expiration_year       INTEGER NOT NULL
);

CREATE INDEX payment_methods_account_id ON payment_methods (account_id);

-- account_id 0 is the internal cloud account, visible to every account, so it has no
-- foreign key.
CREATE TABLE cloud_accounts (
	id                INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id        INTEGER NOT NULL,
	name              TEXT    NOT NULL,
	provider          TEXT    NOT NULL,
	status            TEXT    NOT NULL,
	access_key_id     TEXT    NOT NULL,
	access_secret_key TEXT    NOT NULL,
	console_username  TEXT    NOT NULL,
	console_password  TEXT    NOT NULL,
	sign_in_login_url TEXT    NOT NULL,
	generation        INTEGER NOT NULL,
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL
);

CREATE INDEX cloud_accounts_account_id ON cloud_accounts (account_id);

CREATE TABLE subscriptions (
	id                                 INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id                         INTEGER NOT NULL REFERENCES accounts (id),
	name                               TEXT    NOT NULL,
	status                             TEXT    NOT NULL,
	deployment_type                    TEXT    NOT NULL,
	payment_method_id                  INTEGER NOT NULL,
	payment_method                     TEXT    NOT NULL,
	memory_storage                     TEXT    NOT NULL,
	public_endpoint_access             INTEGER NOT NULL,
	persistent_storage_encryption_type TEXT    NOT NULL,
	redis_version                      TEXT    NOT NULL,
	deletion_grace_period              TEXT    NOT NULL,
	cloud_providers                    TEXT    NOT NULL, -- JSON []CloudProvider
	capacity_gb                        REAL    NOT NULL,
	generation                         INTEGER NOT NULL,
	created_at                         INTEGER NOT NULL,
	updated_at                         INTEGER NOT NULL
);

CREATE INDEX subscriptions_account_id ON subscriptions (account_id);

-- A subscription cannot be deleted while database rows still point at it.
CREATE TABLE databases (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	subscription_id INTEGER NOT NULL REFERENCES subscriptions (id),
	account_id      INTEGER NOT NULL REFERENCES accounts (id),
	name            TEXT    NOT NULL,
	status          TEXT    NOT NULL,
	status_detail   TEXT    NOT NULL,
	port            INTEGER NOT NULL,
	password        TEXT    NOT NULL,
	spec            TEXT    NOT NULL, -- JSON DatabaseSpec
	generation      INTEGER NOT NULL,
	activated_on    INTEGER,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL
);

-- A name is free again as soon as its database is being deleted.
CREATE UNIQUE INDEX databases_subscription_name ON databases (subscription_id, name)
	WHERE status <> 'deleting';
-- A port stays taken until the row is gone: the server may still be stopping. Port 0 is
-- "none chosen yet".
CREATE UNIQUE INDEX databases_port ON databases (port) WHERE port <> 0;
CREATE INDEX databases_account_id ON databases (account_id, id);

-- seq is the submission order; id is the public task id.
CREATE TABLE tasks (
	seq              INTEGER PRIMARY KEY AUTOINCREMENT,
	id               TEXT    NOT NULL UNIQUE,
	account_id       INTEGER NOT NULL REFERENCES accounts (id),
	api_key_name     TEXT    NOT NULL,
	command_type     TEXT    NOT NULL,
	status           TEXT    NOT NULL,
	subscription_id  INTEGER NOT NULL,
	database_id      INTEGER NOT NULL,
	cloud_account_id INTEGER NOT NULL,
	payload          BLOB,
	resource_id      INTEGER NOT NULL,
	error            TEXT, -- JSON TaskError
	lease_owner      TEXT    NOT NULL,
	lease_expires_at INTEGER,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL
);

-- One task in progress per account, enforced by the store itself so that the rule holds
-- whatever the workers do.
CREATE UNIQUE INDEX tasks_account_in_progress ON tasks (account_id)
	WHERE status = 'processing-in-progress';
-- What the claim query scans, in submission order.
CREATE INDEX tasks_claimable ON tasks (seq)
	WHERE status IN ('received', 'processing-in-progress');
CREATE INDEX tasks_updated_at ON tasks (updated_at);
CREATE INDEX tasks_account_updated_at ON tasks (account_id, updated_at);

CREATE TABLE log_entries (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id   INTEGER NOT NULL REFERENCES accounts (id),
	time         INTEGER NOT NULL,
	originator   TEXT    NOT NULL,
	api_key_name TEXT    NOT NULL,
	resource     TEXT    NOT NULL,
	resource_id  INTEGER NOT NULL,
	type         TEXT    NOT NULL,
	description  TEXT    NOT NULL
);

CREATE INDEX log_entries_account_id ON log_entries (account_id, id);
