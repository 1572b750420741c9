-- A subscription's maintenance windows and CIDR allow list. '{}' is what a subscription
-- has until they are set: automatic maintenance, an empty allow list.
ALTER TABLE subscriptions ADD COLUMN maintenance_windows jsonb NOT NULL DEFAULT '{}';
ALTER TABLE subscriptions ADD COLUMN cidr_allowlist jsonb NOT NULL DEFAULT '{}';
