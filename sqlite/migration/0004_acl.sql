-- ACL rules, roles and users (the API's /acl/redisRules, /acl/roles and /acl/users).
--
-- The default rules every account has are rows of account 0 with ids 1 to 3, seeded here
-- with the text of clouddb.DefaultACLRules (the double space of Full-Access included);
-- their times are NULL, the zero time the Go values carry. A rule is a default one exactly
-- when its account_id is 0, so there is no column for it and no foreign key to accounts.
-- Inserting ids 1 to 3 moves AUTOINCREMENT's sequence to 3: created rules follow them.
--
-- Names are unique in an account; the store also refuses an account's rule the name of a
-- default rule. A role holds its rules as JSON ([]ACLRoleRule, kept as written: null for
-- none); a user names its role by id, with no foreign key: whether a role that users hold
-- may be deleted is the task layer's rule, not the store's. A user's password is sealed.

CREATE TABLE acl_rules (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id INTEGER NOT NULL,
	name       TEXT    NOT NULL,
	acl        TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	generation INTEGER NOT NULL,
	created_at INTEGER,
	updated_at INTEGER
);

CREATE UNIQUE INDEX acl_rules_account_name ON acl_rules (account_id, name);

INSERT INTO acl_rules (id, account_id, name, acl, status, generation) VALUES
	(1, 0, 'Full-Access', '+@all  ~*', 'active', 1),
	(2, 0, 'Read-Write', '+@all -@dangerous ~*', 'active', 1),
	(3, 0, 'Read-Only', '+@read ~*', 'active', 1);

CREATE TABLE acl_roles (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id INTEGER NOT NULL REFERENCES accounts (id),
	name       TEXT    NOT NULL,
	rules      TEXT    NOT NULL, -- JSON []ACLRoleRule
	status     TEXT    NOT NULL,
	generation INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);

CREATE UNIQUE INDEX acl_roles_account_name ON acl_roles (account_id, name);

CREATE TABLE acl_users (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id INTEGER NOT NULL REFERENCES accounts (id),
	name       TEXT    NOT NULL,
	role_id    INTEGER NOT NULL,
	password   TEXT    NOT NULL, -- sealed
	status     TEXT    NOT NULL,
	generation INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);

CREATE UNIQUE INDEX acl_users_account_name ON acl_users (account_id, name);
