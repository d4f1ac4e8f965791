-- alkstore 0.2.0 → 0.3.0: the schema changes of this step only. The
-- functions, the name guard and the grants are then re-created from the
-- current sources (the update script and the plain SQL install append
-- them; see manifest.toml).

-- Schema 3.
UPDATE alkstore.meta SET value = '3' WHERE key = 'schema_version';

-- Stream retention counts from when an event became readable (issue 34):
-- the sequencer stamps it. Events of before keep counting from created_at.
-- No default: adding the column rewrites nothing.
ALTER TABLE alkstore.events ADD COLUMN readable_at timestamptz;
CREATE INDEX events_unstamped ON alkstore.events (stream) WHERE readable_at = 'infinity';

-- Waiting locks are taken per bucket of names now (wake.sql), so a session
-- registered before this step holds a lock that enqueuers no longer try:
-- they read the registrations until the last of them has expired, at most
-- 300 s from now, as after the upgrade to 0.2.0. (Sessions re-registering
-- take the bucket's lock; the setting alkstore.wake3 is new, so no session
-- skips that check on a setting made by the old code.)
UPDATE alkstore.waiters SET expires_at = least(expires_at, clock_timestamp() + interval '300 seconds');
INSERT INTO alkstore.meta (key, value)
SELECT 'waiters_before_upgrade_until', extract(epoch FROM max(expires_at))::text
  FROM alkstore.waiters HAVING count(*) > 0
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- Readers no longer give offsets; sequencers do (contract v1.2 §K:
-- stream.sql). The functions readers called are gone; alk_sequence and the
-- functions it calls take their place.
DROP FUNCTION IF EXISTS alkstore.sequence_all();
DROP FUNCTION IF EXISTS alkstore.sequence(text);
DROP FUNCTION IF EXISTS alkstore.sequence_locked(text);

-- Strict commit order for stream offsets (v1.2 §L): a ticket drawn while
-- the publishing transaction commits (stream.sql, alkstore.ticket). The
-- events published before this step keep the order 0.2.0 would have given
-- them: by transaction id, ahead of every later one. (ALTER TABLE waits
-- for the publishers in progress: none publishes the old way after it.)
ALTER TABLE alkstore.published ADD COLUMN tx_first boolean NOT NULL DEFAULT false,
                               ADD COLUMN ticket bigint;
CREATE SEQUENCE alkstore.commit_ticket;
UPDATE alkstore.published p SET ticket = t.ticket
  FROM (SELECT d.txid, dense_rank() OVER (ORDER BY d.txid) AS ticket
          FROM (SELECT DISTINCT q.txid FROM alkstore.published q) d) t
 WHERE p.txid = t.txid;
SELECT pg_catalog.setval('alkstore.commit_ticket', coalesce(max(p.ticket), 0) + 1, false)
  FROM alkstore.published p;

-- Flow control (contract v1.2 §I): limits per queue and per limit_key
-- (limit.sql). No default on the new column: adding it rewrites nothing.
ALTER TABLE alkstore.jobs ADD COLUMN limit_key text;
ALTER TYPE alkstore.enqueue_opts ADD ATTRIBUTE limit_key text;
CREATE TABLE alkstore.queue_limits (
  queue           text PRIMARY KEY,
  max_running     integer,
  rate_max        integer,
  rate_per_ms     bigint,
  key_max_running integer,
  key_rate_max    integer,
  key_rate_per_ms bigint,
  claimed_at      timestamptz,
  rate_count      integer NOT NULL DEFAULT 0
);
CREATE TABLE alkstore.claim_times (
  queue      text        NOT NULL,
  limit_key  text        NOT NULL,
  claimed_at timestamptz NOT NULL
);
CREATE INDEX claim_times_window ON alkstore.claim_times (queue, limit_key, claimed_at);
CREATE INDEX claim_times_age ON alkstore.claim_times (claimed_at);
REVOKE ALL ON alkstore.queue_limits, alkstore.claim_times FROM PUBLIC;

-- Jobs scheduled ahead (contract v1.2 §H: ahead.sql): pending jobs whose
-- run_at lies ahead become 'scheduled', out of jobs_pending. (The job
-- table's new indexes are made with the table, rebuilt at the end of this
-- step.)
UPDATE alkstore.jobs SET state = 'scheduled' WHERE state = 'pending' AND run_at > clock_timestamp();

-- Job dependencies (contract v1.2 §J: deps.sql). No defaults on the new
-- columns: adding them rewrites nothing.
ALTER TABLE alkstore.jobs ADD COLUMN depends_on bigint[], ADD COLUMN deps_left integer,
                          ADD COLUMN dependents boolean;
ALTER TYPE alkstore.enqueue_opts ADD ATTRIBUTE depends_on bigint[];
CREATE TABLE alkstore.job_deps (
  dep_id bigint NOT NULL,
  job_id bigint NOT NULL,
  PRIMARY KEY (dep_id, job_id)
);
CREATE TABLE alkstore.job_ends (
  id       bigint      PRIMARY KEY,
  ending   text        NOT NULL,
  ended_at timestamptz NOT NULL
);
CREATE INDEX job_ends_age ON alkstore.job_ends (ended_at);
REVOKE ALL ON alkstore.job_deps, alkstore.job_ends FROM PUBLIC;

-- Every error a job meets (alk_job_errors), from now on: a job's earlier
-- errors were not kept, so an upgraded job starts with its last_error.
ALTER TABLE alkstore.jobs ADD COLUMN errors jsonb;
UPDATE alkstore.jobs SET errors = jsonb_build_array(jsonb_build_object(
         'attempt', attempts, 'error', last_error, 'at', NULL))
 WHERE last_error IS NOT NULL;

-- Jobs parked behind their key's running limit (contract v1.2 §I,
-- limit.sql): none exist before this version.
CREATE TABLE alkstore.parked (
  id        bigint      PRIMARY KEY,
  queue     text        NOT NULL,
  limit_key text        NOT NULL,
  priority  integer     NOT NULL,
  run_at    timestamptz NOT NULL
);
CREATE INDEX parked_order ON alkstore.parked (queue, limit_key, priority DESC, run_at, id);
CREATE TABLE alkstore.parked_keys (
  queue     text        NOT NULL,
  limit_key text        NOT NULL,
  until     timestamptz NOT NULL,
  PRIMARY KEY (queue, limit_key)
);
REVOKE ALL ON alkstore.parked, alkstore.parked_keys FROM PUBLIC;

-- The job table, partitioned by slot (schema.sql, rotate.sql; issue 35):
-- rebuilt, every job copied into the cold slot (claimed there as before;
-- jobs written from now on go to the hot slots). ALTER EXTENSION UPDATE
-- holds the table's exclusive lock for the copy: on a large table, prune
-- or purge first (README, "Upgrades").
ALTER TABLE alkstore.jobs RENAME TO jobs_0_2;
ALTER SEQUENCE alkstore.jobs_id_seq RENAME TO jobs_0_2_id_seq;
DROP FUNCTION IF EXISTS alkstore.job_json(alkstore.jobs_0_2);
DROP FUNCTION IF EXISTS alkstore.waiting_for(alkstore.jobs_0_2);
DO $rename$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT c.relname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = 'alkstore.jobs_0_2'::regclass LOOP
    EXECUTE format('ALTER INDEX alkstore.%I RENAME TO %I', r.relname, r.relname || '_0_2');
  END LOOP;
  FOR r IN SELECT x.stxname FROM pg_catalog.pg_statistic_ext x WHERE x.stxrelid = 'alkstore.jobs_0_2'::regclass LOOP
    EXECUTE format('DROP STATISTICS alkstore.%I', r.stxname);
  END LOOP;
END $rename$;
CREATE TABLE alkstore.jobs (
  id                    bigint GENERATED ALWAYS AS IDENTITY,
  queue                 text        NOT NULL,
  state                 text        NOT NULL,
  payload               jsonb       NOT NULL,
  priority              integer     NOT NULL,
  attempts              integer     NOT NULL,
  max_attempts          integer     NOT NULL,
  visibility_timeout_ms bigint      NOT NULL,
  backoff_base_ms       bigint      NOT NULL,
  backoff_max_ms        bigint      NOT NULL,
  run_at                timestamptz NOT NULL,
  created_at            timestamptz NOT NULL,
  claimed_by            text,
  claim_expires_at      timestamptz,
  expires_at            timestamptz,
  last_error            text,
  idempotency_key       text,
  group_key             text,
  completed_at          timestamptz,
  result                jsonb,
  prune_at              timestamptz,
  limit_key             text,
  depends_on            bigint[],
  deps_left             integer,
  dependents            boolean,
  errors                jsonb,
  slot                  smallint    NOT NULL DEFAULT 2,
  PRIMARY KEY (id, slot)
) PARTITION BY LIST (slot);
CREATE TABLE alkstore.jobs_slot0 PARTITION OF alkstore.jobs FOR VALUES IN (0)
  WITH (autovacuum_vacuum_insert_threshold = -1, autovacuum_vacuum_scale_factor = 0,
        autovacuum_vacuum_threshold = 50000);
CREATE TABLE alkstore.jobs_slot1 PARTITION OF alkstore.jobs FOR VALUES IN (1)
  WITH (autovacuum_vacuum_insert_threshold = -1, autovacuum_vacuum_scale_factor = 0,
        autovacuum_vacuum_threshold = 50000);
CREATE TABLE alkstore.jobs_cold PARTITION OF alkstore.jobs FOR VALUES IN (2);
CREATE TABLE alkstore.rotation (
  slot     smallint    PRIMARY KEY,
  round    bigint      NOT NULL,
  empty_at timestamptz NOT NULL
);
CREATE INDEX jobs_pending ON alkstore.jobs (hashtextextended(queue, 0), priority DESC, run_at, id)
  INCLUDE (queue) WHERE state = 'pending';
CREATE STATISTICS alkstore.jobs_queue_key (dependencies) ON queue, (hashtextextended(queue, 0))
  FROM alkstore.jobs_cold;
CREATE STATISTICS alkstore.jobs_queue_key0 (dependencies) ON queue, (hashtextextended(queue, 0))
  FROM alkstore.jobs_slot0;
CREATE STATISTICS alkstore.jobs_queue_key1 (dependencies) ON queue, (hashtextextended(queue, 0))
  FROM alkstore.jobs_slot1;
CREATE INDEX jobs_deadline ON alkstore.jobs
  (queue, (CASE WHEN state = 'running' THEN claim_expires_at ELSE expires_at END))
  WHERE state = 'running' OR (state IN ('pending', 'scheduled') AND expires_at IS NOT NULL);
CREATE INDEX jobs_scheduled_due ON alkstore.jobs (queue, run_at) WHERE state = 'scheduled';
CREATE INDEX jobs_scheduled ON alkstore.jobs (hashtextextended(queue, 0), priority DESC, run_at, id)
  INCLUDE (queue) WHERE state = 'scheduled';
CREATE INDEX jobs_finished ON alkstore.jobs (queue, state, id)
  WITH (deduplicate_items = off) WHERE state IN ('dead', 'completed');
CREATE INDEX jobs_waiting ON alkstore.jobs (queue, group_key, id)
  WITH (deduplicate_items = off) WHERE state IN ('waiting', 'blocked');
CREATE INDEX jobs_prune ON alkstore.jobs (prune_at) WHERE prune_at IS NOT NULL;
REVOKE ALL ON alkstore.jobs, alkstore.jobs_slot0, alkstore.jobs_slot1, alkstore.jobs_cold,
              alkstore.rotation FROM PUBLIC;
INSERT INTO alkstore.jobs (id, queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, claimed_by, claim_expires_at, expires_at, last_error, idempotency_key, group_key, completed_at, result, prune_at, limit_key, depends_on, deps_left, dependents, errors, slot)
OVERRIDING SYSTEM VALUE
SELECT id, queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, claimed_by, claim_expires_at, expires_at, last_error, idempotency_key, group_key, completed_at, result, prune_at, limit_key, depends_on, deps_left, dependents, errors, 2 FROM alkstore.jobs_0_2;
SELECT pg_catalog.setval('alkstore.jobs_id_seq', s.last_value, s.is_called) FROM alkstore.jobs_0_2_id_seq s;
-- On the extension, the old table and its sequence leave the extension
-- first, and with that the list of tables whose rows pg_dump dumps
-- (backup.sql registers the new ones).
DO $members$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'alkstore') THEN
    ALTER EXTENSION alkstore DROP SEQUENCE alkstore.jobs_0_2_id_seq;
    ALTER EXTENSION alkstore DROP TABLE alkstore.jobs_0_2;
  END IF;
END $members$;
DROP TABLE alkstore.jobs_0_2;
