-- alkstore 0.1.0 → 0.2.0: the schema changes of this step only. The
-- functions are then re-created from the current sources (the update script
-- and the plain SQL install append them; see scripts/lib/pg-sources.sh).

-- Schema 2: alk_version() and the install's version in alkstore.meta
-- (written by version.sql at the end of every install and upgrade).
UPDATE alkstore.meta SET value = '2' WHERE key = 'schema_version';

-- Expired wake-up registrations are cleaned up through an index.
CREATE INDEX waiters_expiry ON alkstore.waiters (expires_at);
