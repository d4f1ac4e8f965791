-- alkstore schema for SQLite, version 3 (alkstore 0.3.0): what a fresh database
-- gets. A database of an older version is brought here by sql/sqlite/migrate/.
-- Run idempotently on first use (or by SELECT alk_init()). Internal: only the
-- alk_* functions are API. Times are integer epoch milliseconds; durations
-- integer milliseconds.

CREATE TABLE IF NOT EXISTS alk_meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

-- Per-queue options; a queue never configured has no row and uses defaults.
CREATE TABLE IF NOT EXISTS alk_queues (
  queue                 TEXT PRIMARY KEY,
  visibility_timeout_ms INTEGER NOT NULL,
  max_attempts          INTEGER NOT NULL,
  backoff_base_ms       INTEGER NOT NULL,
  backoff_max_ms        INTEGER NOT NULL,
  retain_completed_ms   INTEGER NOT NULL DEFAULT 0,  -- 0: acked jobs are deleted
  retain_dead_ms        INTEGER                      -- NULL: dead jobs are kept
) WITHOUT ROWID;

-- Paused queues (outboxes by backing queue): claims on them return nothing.
CREATE TABLE IF NOT EXISTS alk_paused (
  queue     TEXT PRIMARY KEY,
  paused_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Jobs of every queue. AUTOINCREMENT so that the id of a committed job is
-- never reused, even after the highest one is acked (deleted).
CREATE TABLE IF NOT EXISTS alk_jobs (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  queue                 TEXT    NOT NULL,
  -- 'waiting': pending (as every function reports it) behind its group's
  -- head; only heads are in alk_jobs_pending, so claims never read past
  -- them. 'blocked': pending (as reported) waiting for the jobs it depends
  -- on (v1.2 §J, deps.rs). 'scheduled': pending (as reported) with a run_at ahead when it
  -- was written, also outside alk_jobs_pending, so claims never step over
  -- it (contract v1.2 §H); alk_sweep makes it pending when it comes due,
  -- and claims take it before that. 'parked': pending (as reported), stepped
  -- over by a claim because its limit_key was at its running limit, out of
  -- alk_jobs_pending until the key has room (limit.rs). ORs, not IN (…):
  -- an IN list costs a temporary table per write.
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
  prune_at              INTEGER, -- completed or dead: when alk_prune may delete it
  limit_key             TEXT,    -- the partition its per-key limits count in (v1.2 §I)
  depends_on            TEXT,    -- the JSON array of jobs it runs after (v1.2 §J, deps.rs)
  deps_left             INTEGER, -- how many of them are not acked yet (its alk_job_deps rows)
  dependents            INTEGER, -- 1 once a job named it in depends_on
  errors                TEXT     -- every error it met, oldest first, JSON (alk_job_errors)
);

-- Every error a job met (alk_job_errors): each write of last_error (a
-- failed or retried attempt, a claim's or a sweep's expiry, a dependency
-- that died) appends {attempt, error, at}, the last 100 kept. Only
-- statements that set last_error carry this trigger, so claims, acks and
-- enqueues never run it; the history goes with the job's row.
CREATE TRIGGER IF NOT EXISTS alk_jobs_errors AFTER UPDATE OF last_error ON alk_jobs
FOR EACH ROW WHEN NEW.last_error IS NOT NULL
BEGIN
  UPDATE alk_jobs SET errors = json_insert(
      CASE WHEN json_array_length(coalesce(NEW.errors, '[]')) >= 100
           THEN json_remove(NEW.errors, '$[0]') ELSE coalesce(NEW.errors, '[]') END,
      '$[#]', json_object('attempt', NEW.attempts, 'error', NEW.last_error,
                          'at', strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))
   WHERE id = NEW.id;
END;

-- Claim order among runnable jobs. Partial: dead jobs are not in it and
-- acked jobs are deleted, so claim cost does not grow with history.
CREATE INDEX IF NOT EXISTS alk_jobs_pending
  ON alk_jobs (queue, priority DESC, run_at, id) WHERE state = 'pending';
-- Running jobs by claim expiry: finding expired claims costs one seek
-- however many jobs are running.
CREATE INDEX IF NOT EXISTS alk_jobs_running
  ON alk_jobs (queue, claim_expires_at) WHERE state = 'running';
-- Dead jobs, for stats and inspection without reading the rest.
CREATE INDEX IF NOT EXISTS alk_jobs_dead ON alk_jobs (queue, id) WHERE state = 'dead';
-- Pending (and scheduled) jobs with an expiry, for the claim-time and
-- alk_sweep dead-lettering.
CREATE INDEX IF NOT EXISTS alk_jobs_expiring
  ON alk_jobs (queue, expires_at) WHERE (state = 'pending' OR state = 'scheduled') AND expires_at IS NOT NULL;

-- Jobs scheduled ahead: by when they come due (a claim's probe, alk_sweep)
-- and in claim order (a claim reads each priority's due ones in turn).
CREATE INDEX IF NOT EXISTS alk_jobs_scheduled_due
  ON alk_jobs (queue, run_at) WHERE state = 'scheduled';
CREATE INDEX IF NOT EXISTS alk_jobs_scheduled
  ON alk_jobs (queue, priority DESC, run_at, id) WHERE state = 'scheduled';
-- Jobs waiting behind their group's head, next-in-line first.
CREATE INDEX IF NOT EXISTS alk_jobs_waiting
  ON alk_jobs (queue, group_key, id) WHERE state = 'waiting';
-- Jobs waiting for their dependencies (v1.2 §J), for stats, listings and
-- alk_sweep's expiry. (Not in alk_jobs_waiting: SQLite uses a partial
-- index only for queries that repeat its WHERE term as written.)
CREATE INDEX IF NOT EXISTS alk_jobs_blocked ON alk_jobs (queue, id) WHERE state = 'blocked';
-- Completed jobs, for stats and, per queue, for alk_prune. One index only:
-- an ack that keeps the job writes one index entry more than one that
-- deletes it.
CREATE INDEX IF NOT EXISTS alk_jobs_completed ON alk_jobs (queue, prune_at) WHERE state = 'completed';
-- Dead jobs with a retention, in the order alk_prune deletes them.
CREATE INDEX IF NOT EXISTS alk_jobs_prune ON alk_jobs (prune_at) WHERE state = 'dead' AND prune_at IS NOT NULL;

-- Ordered groups (contract v1.1 §C2): live jobs per group (see queue.rs).
CREATE TABLE IF NOT EXISTS alk_groups (
  queue     TEXT    NOT NULL,
  group_key TEXT    NOT NULL,
  jobs      INTEGER NOT NULL,
  PRIMARY KEY (queue, group_key)
) WITHOUT ROWID;

-- Job dependencies (contract v1.2 §J, deps.rs): one row per job and a
-- dependency of it not acked yet, found from the dependency when it ends.
CREATE TABLE IF NOT EXISTS alk_job_deps (
  dep_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  PRIMARY KEY (dep_id, job_id)
) WITHOUT ROWID;
-- Jobs whose rows are gone though they were never acked (cancelled,
-- purged, dead and pruned), kept for DEPENDENCY_MEMORY_MS: an id whose row
-- is gone counts as acked unless it is here (deps.rs).
CREATE TABLE IF NOT EXISTS alk_job_ends (
  id       INTEGER PRIMARY KEY,
  ending   TEXT    NOT NULL, -- 'dead' or 'cancelled'
  ended_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS alk_job_ends_age ON alk_job_ends (ended_at);

-- Flow control (contract v1.2 §I, limit.rs): the limits of the queues that
-- have any. A queue without limits has no row, and its claims read no more
-- than that. Claims run under SQLite's one writer: each counts what the
-- last one claimed.
CREATE TABLE IF NOT EXISTS alk_queue_limits (
  queue           TEXT PRIMARY KEY,
  max_running     INTEGER,
  rate_max        INTEGER,
  rate_per_ms     INTEGER,
  key_max_running INTEGER,
  key_rate_max    INTEGER,
  key_rate_per_ms INTEGER,
  -- The queue's claim times in alk_claim_times (limit_key ''): a claim
  -- reads this count, not the rows.
  rate_count      INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
-- The claims of each rate window: the queue's ('' as limit_key) and each
-- key's. A claim deletes the times that left its window before it counts,
-- so a window holds at most its rate_max rows; alk_prune deletes what idle
-- keys and removed limits left.
CREATE TABLE IF NOT EXISTS alk_claim_times (
  queue      TEXT    NOT NULL,
  limit_key  TEXT    NOT NULL,
  claimed_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS alk_claim_times_window ON alk_claim_times (queue, limit_key, claimed_at);
CREATE INDEX IF NOT EXISTS alk_claim_times_age ON alk_claim_times (claimed_at);
-- Parked jobs (limit.rs), per key in claim order: what a job of the key
-- leaving 'running' puts back into claim order.
CREATE INDEX IF NOT EXISTS alk_jobs_parked
  ON alk_jobs (queue, limit_key, priority DESC, run_at, id) WHERE state = 'parked';
-- Keys whose jobs are parked at their rate (limit.rs): when the window
-- frees a slot. A limited claim of the queue asks whether one came due.
CREATE TABLE IF NOT EXISTS alk_parked_keys (
  queue     TEXT    NOT NULL,
  limit_key TEXT    NOT NULL,
  until     INTEGER NOT NULL,
  PRIMARY KEY (queue, limit_key)
) WITHOUT ROWID;

-- Idempotency keys (contract v1.1 §C1), kept apart from the jobs: a key
-- holds for its TTL even after its job was acked and deleted.
CREATE TABLE IF NOT EXISTS alk_idempotency (
  queue      TEXT    NOT NULL,
  key        TEXT    NOT NULL,
  job_id     INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (queue, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS alk_idempotency_expiry ON alk_idempotency (expires_at);

-- Schedules (contract v1.1 §F): last_run_at is the occurrence last
-- enqueued; a tick enqueues a due one only if it is later than that.
CREATE TABLE IF NOT EXISTS alk_schedules (
  name        TEXT PRIMARY KEY,
  queue       TEXT    NOT NULL,
  spec        TEXT    NOT NULL,
  payload     TEXT    NOT NULL,
  opts        TEXT,
  next_run_at INTEGER NOT NULL,
  last_run_at INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS alk_schedules_due ON alk_schedules (next_run_at);

-- Streams (contract v1.1 §E): the last offset handed out, which outlives
-- pruned events, and the stream's retention. A publish takes the next
-- offset under SQLite's one writer: dense, and a rollback gives it back.
CREATE TABLE IF NOT EXISTS alk_streams (
  stream        TEXT PRIMARY KEY,
  last_offset   INTEGER NOT NULL,
  retain_ms     INTEGER,
  retain_events INTEGER,
  -- Events up to this offset have readable_at set (or count from their
  -- created_at: those of before schema 3); see alk_events.
  stamped_offset INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Stream events. AUTOINCREMENT: an event id is never handed out twice,
-- even after the newest events were pruned.
CREATE TABLE IF NOT EXISTS alk_events (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  stream     TEXT    NOT NULL,
  "offset"   INTEGER NOT NULL,
  key        TEXT,
  payload    TEXT    NOT NULL,
  created_at INTEGER NOT NULL,
  -- A time by which the event had become readable (its transaction had
  -- committed): stamped by the first prune that sees it, and what
  -- retain_s counts from. NULL: not stamped yet, or from before schema 3.
  readable_at INTEGER,
  UNIQUE (stream, "offset")
);

CREATE TABLE IF NOT EXISTS alk_offsets (
  stream     TEXT    NOT NULL,
  consumer   TEXT    NOT NULL,
  "offset"   INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (stream, consumer)
) WITHOUT ROWID;

-- Notifications: listeners read rows newer than the last id they saw after
-- a wake-up; rows older than a few minutes are pruned by alk_notify.
CREATE TABLE IF NOT EXISTS alk_notifications (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  channel    TEXT    NOT NULL,
  payload    TEXT    NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS alk_notifications_channel ON alk_notifications (channel, id);

-- Leases. A row outlives its release so the next token is always larger.
CREATE TABLE IF NOT EXISTS alk_locks (
  name       TEXT PRIMARY KEY,
  owner      TEXT,
  token      INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;

INSERT OR IGNORE INTO alk_meta (key, value) VALUES ('schema_version', '3');
