-- Values the service keeps for itself, such as the check that its encryption key is the
-- one the stored secrets were sealed with.
CREATE TABLE settings (
	name  text PRIMARY KEY,
	value text NOT NULL
);
