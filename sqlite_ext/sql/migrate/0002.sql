-- Schema 1 (alkstore 0.1.0) → 2 (0.2.0). Runs inside the transaction of the
-- first call that finds schema 1; the library records its version after it.
--
-- Schema 2 is where alk_version() reports the schema and alk_meta records
-- the library version that last migrated it, and adds the job features of
-- contract v1.1 §C: retention options, pauses, ordered groups, idempotency
-- keys, completed jobs and their results; and the stream changes of §E.

ALTER TABLE alk_queues ADD COLUMN retain_completed_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE alk_queues ADD COLUMN retain_dead_ms INTEGER;

CREATE TABLE alk_paused (
  queue     TEXT PRIMARY KEY,
  paused_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The job state's CHECK gains two states: SQLite changes a constraint only
-- by rebuilding the table. The AUTOINCREMENT counter is carried over, so no
-- id handed out before is ever reused.
CREATE TABLE alk_jobs_v2 (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  queue                 TEXT    NOT NULL,
  state                 TEXT    NOT NULL CHECK (state = 'pending' OR state = 'running' OR state = 'dead'
                                               OR state = 'completed' OR state = 'waiting'),
  payload               TEXT    NOT NULL,
  priority              INTEGER NOT NULL,
  attempts              INTEGER NOT NULL,
  max_attempts          INTEGER NOT NULL,
  visibility_timeout_ms INTEGER NOT NULL,
  backoff_base_ms       INTEGER NOT NULL,
  backoff_max_ms        INTEGER NOT NULL,
  run_at                INTEGER NOT NULL,
  created_at            INTEGER NOT NULL,
  claimed_by            TEXT,
  claim_expires_at      INTEGER,
  expires_at            INTEGER,
  last_error            TEXT,
  idempotency_key       TEXT,
  group_key             TEXT,
  completed_at          INTEGER,
  result                TEXT,
  prune_at              INTEGER
);
INSERT INTO alk_jobs_v2 (id, queue, state, payload, priority, attempts, max_attempts,
  visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, claimed_by,
  claim_expires_at, expires_at, last_error)
SELECT id, queue, state, payload, priority, attempts, max_attempts,
  visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, claimed_by,
  claim_expires_at, expires_at, last_error
FROM alk_jobs ORDER BY id;
DELETE FROM sqlite_sequence WHERE name = 'alk_jobs_v2';
INSERT INTO sqlite_sequence (name, seq) SELECT 'alk_jobs_v2', seq FROM sqlite_sequence WHERE name = 'alk_jobs';
DROP TABLE alk_jobs;
ALTER TABLE alk_jobs_v2 RENAME TO alk_jobs;

CREATE INDEX alk_jobs_pending
  ON alk_jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX alk_jobs_running
  ON alk_jobs (queue, claim_expires_at) WHERE state = 'running';
CREATE INDEX alk_jobs_dead ON alk_jobs (queue, id) WHERE state = 'dead';
CREATE INDEX alk_jobs_expiring
  ON alk_jobs (queue, expires_at) WHERE state = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX alk_jobs_waiting
  ON alk_jobs (queue, group_key, id) WHERE state = 'waiting';
CREATE INDEX alk_jobs_completed ON alk_jobs (queue, prune_at) WHERE state = 'completed';
CREATE INDEX alk_jobs_prune ON alk_jobs (prune_at) WHERE state = 'dead' AND prune_at IS NOT NULL;

CREATE TABLE alk_groups (
  queue     TEXT    NOT NULL,
  group_key TEXT    NOT NULL,
  jobs      INTEGER NOT NULL,
  PRIMARY KEY (queue, group_key)
) WITHOUT ROWID;

CREATE TABLE alk_idempotency (
  queue      TEXT    NOT NULL,
  key        TEXT    NOT NULL,
  job_id     INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (queue, key)
) WITHOUT ROWID;
CREATE INDEX alk_idempotency_expiry ON alk_idempotency (expires_at);

-- Schedules (contract v1.1 §F): last_run_at is the occurrence last
-- enqueued; a tick enqueues a due one only if it is later than that.
CREATE TABLE alk_schedules (
  name        TEXT PRIMARY KEY,
  queue       TEXT    NOT NULL,
  spec        TEXT    NOT NULL,
  payload     TEXT    NOT NULL,
  opts        TEXT,
  next_run_at INTEGER NOT NULL,
  last_run_at INTEGER
) WITHOUT ROWID;
CREATE INDEX alk_schedules_due ON alk_schedules (next_run_at);

-- Streams (contract v1.1 §E): the last offset of each stream is kept apart
-- from its events (pruning must not hand an offset out again), and event
-- ids become AUTOINCREMENT (a rebuild, ids kept).
CREATE TABLE alk_streams (
  stream        TEXT PRIMARY KEY,
  last_offset   INTEGER NOT NULL,
  retain_ms     INTEGER,
  retain_events INTEGER
) WITHOUT ROWID;
INSERT INTO alk_streams (stream, last_offset)
SELECT stream, max("offset") FROM alk_events GROUP BY stream;

CREATE TABLE alk_events_v2 (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  stream     TEXT    NOT NULL,
  "offset"   INTEGER NOT NULL,
  key        TEXT,
  payload    TEXT    NOT NULL,
  created_at INTEGER NOT NULL,
  UNIQUE (stream, "offset")
);
INSERT INTO alk_events_v2 (id, stream, "offset", key, payload, created_at)
SELECT id, stream, "offset", key, payload, created_at FROM alk_events ORDER BY id;
DROP TABLE alk_events;
ALTER TABLE alk_events_v2 RENAME TO alk_events;

UPDATE alk_meta SET value = '2' WHERE key = 'schema_version';
