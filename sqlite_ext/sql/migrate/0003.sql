-- Schema 2 (alkstore 0.2.0) → 3 (0.3.0). Runs inside the transaction of the
-- first call that finds schema 2; the library records its version after it.
--
-- Stream retention counts from when an event became readable, not from
-- its publish (issue 34): a prune stamps the events it sees first. Events
-- already there count from created_at, as before.

ALTER TABLE alk_events ADD COLUMN readable_at INTEGER;
ALTER TABLE alk_streams ADD COLUMN stamped_offset INTEGER NOT NULL DEFAULT 0;
UPDATE alk_streams SET stamped_offset = last_offset;
UPDATE alk_meta SET value = '3' WHERE key = 'schema_version';
