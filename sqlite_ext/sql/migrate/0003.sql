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
-- Flow control (contract v1.2 §I): limits per queue and per limit_key,
-- and jobs' limit_key. Jobs scheduled ahead (v1.2 §H): the job state's
-- CHECK gains 'scheduled' — SQLite changes a constraint only by rebuilding
-- the table (as 0002 did; the AUTOINCREMENT counter is carried over) — and
-- pending jobs whose run_at lies ahead take it, out of alk_jobs_pending.
-- The rebuilt table also has the columns of job dependencies (v1.2 §J) and
-- the state 'blocked'.
CREATE TABLE alk_jobs_v3 (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  queue                 TEXT    NOT NULL,
  state                 TEXT    NOT NULL CHECK (state = 'pending' OR state = 'running' OR state = 'dead'
                                               OR state = 'completed' OR state = 'waiting'
                                               OR state = 'scheduled' OR state = 'blocked'
                                               OR state = 'parked'),
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
  prune_at              INTEGER,
  limit_key             TEXT,
  depends_on            TEXT,
  deps_left             INTEGER,
  dependents            INTEGER,
  errors                TEXT
);
INSERT INTO alk_jobs_v3 (id, queue, state, payload, priority, attempts, max_attempts,
  visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, claimed_by,
  claim_expires_at, expires_at, last_error, idempotency_key, group_key, completed_at, result, prune_at,
  errors)
SELECT id, queue,
  CASE WHEN state = 'pending' AND run_at > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
       THEN 'scheduled' ELSE state END,
  payload, priority, attempts, max_attempts,
  visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, claimed_by,
  claim_expires_at, expires_at, last_error, idempotency_key, group_key, completed_at, result, prune_at,
  -- earlier errors were not kept: an upgraded job starts with its last one
  CASE WHEN last_error IS NOT NULL
       THEN json_array(json_object('attempt', attempts, 'error', last_error, 'at', NULL)) END
FROM alk_jobs ORDER BY id;
DELETE FROM sqlite_sequence WHERE name = 'alk_jobs_v3';
INSERT INTO sqlite_sequence (name, seq) SELECT 'alk_jobs_v3', seq FROM sqlite_sequence WHERE name = 'alk_jobs';
DROP TABLE alk_jobs;
ALTER TABLE alk_jobs_v3 RENAME TO alk_jobs;

-- Every error a job met (alk_job_errors): each write of last_error (a
-- failed or retried attempt, a claim's or a sweep's expiry, a dependency
-- that died) appends {attempt, error, at}, the last 100 kept. Only
-- statements that set last_error carry this trigger, so claims, acks and
-- enqueues never run it; the history goes with the job's row.
CREATE TRIGGER alk_jobs_errors AFTER UPDATE OF last_error ON alk_jobs
FOR EACH ROW WHEN NEW.last_error IS NOT NULL
BEGIN
  UPDATE alk_jobs SET errors = json_insert(
      CASE WHEN json_array_length(coalesce(NEW.errors, '[]')) >= 100
           THEN json_remove(NEW.errors, '$[0]') ELSE coalesce(NEW.errors, '[]') END,
      '$[#]', json_object('attempt', NEW.attempts, 'error', NEW.last_error,
                          'at', strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))
   WHERE id = NEW.id;
END;

CREATE INDEX alk_jobs_pending
  ON alk_jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX alk_jobs_running
  ON alk_jobs (queue, claim_expires_at) WHERE state = 'running';
CREATE INDEX alk_jobs_dead ON alk_jobs (queue, id) WHERE state = 'dead';
CREATE INDEX alk_jobs_expiring
  ON alk_jobs (queue, expires_at) WHERE (state = 'pending' OR state = 'scheduled') AND expires_at IS NOT NULL;
CREATE INDEX alk_jobs_scheduled_due
  ON alk_jobs (queue, run_at) WHERE state = 'scheduled';
CREATE INDEX alk_jobs_scheduled
  ON alk_jobs (queue, priority DESC, run_at, id) WHERE state = 'scheduled';
CREATE INDEX alk_jobs_waiting
  ON alk_jobs (queue, group_key, id) WHERE state = 'waiting';
CREATE INDEX alk_jobs_blocked ON alk_jobs (queue, id) WHERE state = 'blocked';
CREATE INDEX alk_jobs_completed ON alk_jobs (queue, prune_at) WHERE state = 'completed';
CREATE INDEX alk_jobs_prune ON alk_jobs (prune_at) WHERE state = 'dead' AND prune_at IS NOT NULL;

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
-- Parked jobs (limit.rs), per key in claim order: what a job of the key
-- leaving 'running' puts back into claim order.
CREATE INDEX alk_jobs_parked
  ON alk_jobs (queue, limit_key, priority DESC, run_at, id) WHERE state = 'parked';
-- Keys whose jobs are parked at their rate (limit.rs): when the window
-- frees a slot. A limited claim of the queue asks whether one came due.
CREATE TABLE alk_parked_keys (
  queue     TEXT    NOT NULL,
  limit_key TEXT    NOT NULL,
  until     INTEGER NOT NULL,
  PRIMARY KEY (queue, limit_key)
) WITHOUT ROWID;

-- Job dependencies (v1.2 §J): the dependency rows and the jobs that ended
-- without an ack; jobs' columns depends_on, deps_left, dependents (above).
CREATE TABLE alk_job_deps (
  dep_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  PRIMARY KEY (dep_id, job_id)
) WITHOUT ROWID;
CREATE TABLE alk_job_ends (
  id       INTEGER PRIMARY KEY,
  ending   TEXT    NOT NULL,
  ended_at INTEGER NOT NULL
);
CREATE INDEX alk_job_ends_age ON alk_job_ends (ended_at);

UPDATE alk_meta SET value = '3' WHERE key = 'schema_version';
