-- A subscription's maintenance windows and CIDR allow list, as JSON. '{}' is what a
-- subscription has until they are set: automatic maintenance, an empty allow list.
ALTER TABLE subscriptions ADD COLUMN maintenance_windows TEXT NOT NULL DEFAULT '{}';
ALTER TABLE subscriptions ADD COLUMN cidr_allowlist TEXT NOT NULL DEFAULT '{}';
