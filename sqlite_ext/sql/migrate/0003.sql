-- Schema 2 (alkstore 0.2.0) → 3 (0.3.0). Runs inside the transaction of the
-- first call that finds schema 2; the library records its version after it.
--
-- Stream retention counts from when an event became readable, not from
-- its publish (issue 34): a prune stamps the events it sees first. Events
-- already there count from created_at, as before.
-- Flow control (v1.2 §I): the limits and rate windows, and jobs' limit_key.

ALTER TABLE alk_events ADD COLUMN readable_at INTEGER;
ALTER TABLE alk_streams ADD COLUMN stamped_offset INTEGER NOT NULL DEFAULT 0;
UPDATE alk_streams SET stamped_offset = last_offset;
-- Flow control (contract v1.2 §I): limits per queue and per limit_key.
ALTER TABLE alk_jobs ADD COLUMN limit_key TEXT;
CREATE TABLE alk_queue_limits (
  queue           TEXT PRIMARY KEY,
  max_running     INTEGER,
  rate_max        INTEGER,
  rate_per_ms     INTEGER,
  key_max_running INTEGER,
  key_rate_max    INTEGER,
  key_rate_per_ms INTEGER,
  rate_count      INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE alk_claim_times (
  queue      TEXT    NOT NULL,
  limit_key  TEXT    NOT NULL,
  claimed_at INTEGER NOT NULL
);
CREATE INDEX alk_claim_times_window ON alk_claim_times (queue, limit_key, claimed_at);
CREATE INDEX alk_claim_times_age ON alk_claim_times (claimed_at);

UPDATE alk_meta SET value = '3' WHERE key = 'schema_version';
