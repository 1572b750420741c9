-- Data operations (backups, imports): a task may answer with a resource (the status of
-- the latest backup or import), and a database records the outcome of its latest ones.
ALTER TABLE tasks ADD COLUMN resource TEXT; -- JSON, NULL when the task has none
ALTER TABLE databases ADD COLUMN state TEXT NOT NULL DEFAULT '{}'; -- JSON DatabaseState
-- The sources a database replicates from (replicaOf): a JSON array of URIs, sealed like a
-- password because a URI may carry the source's credentials.
ALTER TABLE databases ADD COLUMN replica_of TEXT NOT NULL DEFAULT '';
