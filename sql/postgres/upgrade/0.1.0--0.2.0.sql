-- alkstore 0.1.0 → 0.2.0: the schema changes of this step only. The
-- functions are then re-created from the current sources (the update script
-- and the plain SQL install append them; see manifest.toml).

-- 0.1.0 let every role call the alk_* functions (PUBLIC held EXECUTE);
-- from 0.2.0 only members of alkstore_user may. So that the upgrade keeps
-- working what worked, the roles that could call alk_enqueue are recorded
-- here, while 0.1.0's privileges still stand, and granted alkstore_user by
-- grants.sql at the end (with a warning naming them). PUBLIC stands for
-- every role that may log in to this database.
INSERT INTO alkstore.meta (key, value)
SELECT 'callers_before_upgrade', jsonb_agg(DISTINCT r.rolname)::text
  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a, pg_roles r
 WHERE p.proname = 'alk_enqueue' AND p.pronamespace = current_schema()::regnamespace
   AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
   AND CASE WHEN a.grantee = 0
            THEN r.rolcanlogin AND has_database_privilege(r.oid, current_database(), 'CONNECT')
            ELSE r.oid = a.grantee END
   AND NOT r.rolsuper AND r.oid <> p.proowner AND r.rolname NOT LIKE 'pg\_%'
HAVING count(*) > 0;

-- Schema 2: alk_version() and the install's version in alkstore.meta
-- (written by version.sql at the end of every install and upgrade).
UPDATE alkstore.meta SET value = '2' WHERE key = 'schema_version';

-- Expired wake-up registrations are cleaned up through an index.
CREATE INDEX waiters_expiry ON alkstore.waiters (expires_at);

-- Registrations made before this step hold no waiting lock (wake.sql), so
-- enqueuers read the table until the last of them has expired: at most
-- 300 s from now, v1.1's cap per call (§A3), which they now get too.
UPDATE alkstore.waiters SET expires_at = least(expires_at, clock_timestamp() + interval '300 seconds');
INSERT INTO alkstore.meta (key, value)
SELECT 'waiters_before_upgrade_until', extract(epoch FROM max(expires_at))::text
  FROM alkstore.waiters HAVING count(*) > 0
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- alk_claim and alk_outbox_claim are the claim itself now (queue.sql).
DROP FUNCTION alkstore.claim(text, text, integer);

-- Job features (contract v1.1 §C).
ALTER TABLE alkstore.queues
  ADD COLUMN retain_completed_ms bigint NOT NULL DEFAULT 0,
  ADD COLUMN retain_dead_ms bigint;
CREATE INDEX queues_retaining ON alkstore.queues (queue) WHERE retain_completed_ms > 0;
ALTER TYPE alkstore.queue_opts
  ADD ATTRIBUTE retain_completed_ms bigint,
  ADD ATTRIBUTE retain_dead_ms bigint;
ALTER TYPE alkstore.enqueue_opts
  ADD ATTRIBUTE idempotency_key text,
  ADD ATTRIBUTE idempotency_ttl_ms bigint,
  ADD ATTRIBUTE group_key text;

CREATE TABLE alkstore.paused (
  queue     text PRIMARY KEY,
  paused_at timestamptz NOT NULL
);

ALTER TABLE alkstore.jobs
  ADD COLUMN idempotency_key text,
  ADD COLUMN group_key text,
  ADD COLUMN completed_at timestamptz,
  ADD COLUMN result jsonb,
  ADD COLUMN prune_at timestamptz,
  -- The state is written only by alkstore's functions: a CHECK costs every
  -- writing statement a quarter of an INSERT (schema.sql).
  DROP CONSTRAINT jobs_state_check;
-- The claim index keys the queue by its name's hash (schema.sql).
DROP INDEX alkstore.jobs_pending;
CREATE INDEX jobs_pending ON alkstore.jobs (hashtextextended(queue, 0), priority DESC, run_at, id)
  INCLUDE (queue) WHERE state = 'pending';
CREATE STATISTICS alkstore.jobs_queue_key (dependencies) ON queue, (hashtextextended(queue, 0))
  FROM alkstore.jobs;
-- Now, not at autovacuum's next visit: plans made before would take each
-- queue for 0.5% of the table (schema.sql).
ANALYZE alkstore.jobs;
-- Keys that end in the id are never equal: no deduplication (schema.sql).
CREATE INDEX jobs_waiting ON alkstore.jobs (queue, group_key, id)
  WITH (deduplicate_items = off) WHERE state = 'waiting';
-- Dead and completed jobs share one index (schema.sql).
DROP INDEX alkstore.jobs_dead;
CREATE INDEX jobs_finished ON alkstore.jobs (queue, state, id)
  WITH (deduplicate_items = off) WHERE state IN ('dead', 'completed');
CREATE INDEX jobs_prune ON alkstore.jobs (prune_at) WHERE prune_at IS NOT NULL;
-- Claim expiries and job expiries share one index (schema.sql).
DROP INDEX alkstore.jobs_running, alkstore.jobs_expiring;
CREATE INDEX jobs_deadline ON alkstore.jobs
  (queue, (CASE WHEN state = 'running' THEN claim_expires_at ELSE expires_at END))
  WHERE state = 'running' OR (state = 'pending' AND expires_at IS NOT NULL);

CREATE TABLE alkstore.groups (
  queue     text    NOT NULL,
  group_key text    NOT NULL,
  jobs      integer NOT NULL,
  PRIMARY KEY (queue, group_key)
);

CREATE TABLE alkstore.idempotency (
  queue      text        NOT NULL,
  key        text        NOT NULL,
  job_id     bigint      NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (queue, key)
);
CREATE INDEX idempotency_expiry ON alkstore.idempotency (expires_at);

-- alk_ack gained an optional result: the two-argument form goes.
DROP FUNCTION alk_ack(bigint, text);

-- Schedules (contract v1.1 §F): last_run_at is the occurrence last
-- enqueued; a tick enqueues a due one only if it is later than that.
CREATE TABLE alkstore.schedules (
  name        text PRIMARY KEY,
  queue       text        NOT NULL,
  spec        jsonb       NOT NULL,
  payload     jsonb       NOT NULL,
  opts        jsonb,
  next_run_at timestamptz NOT NULL,
  last_run_at timestamptz
);
CREATE INDEX schedules_due ON alkstore.schedules (next_run_at);

-- Streams (contract v1.1 §E): events get an id at publish and an offset
-- after their publisher commits (published → events); streams keep a
-- retention. The old events take ids in offset order.
ALTER TABLE alkstore.streams
  ADD COLUMN retain_ms bigint,
  ADD COLUMN retain_events bigint,
  ADD COLUMN seq_started timestamptz,
  ADD COLUMN seq_xmax xid8,
  ADD COLUMN seq_xip xid8[];
CREATE TABLE alkstore.published (
  id         bigint      GENERATED ALWAYS AS IDENTITY,
  stream     text        NOT NULL,
  key        text,
  payload    jsonb       NOT NULL,
  created_at timestamptz NOT NULL,
  -- The publishing transaction (top level): the sequencing check finds
  -- new events by it, past the entries of events already moved.
  txid       xid8        NOT NULL DEFAULT pg_catalog.pg_current_xact_id()
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
CREATE INDEX published_stream ON alkstore.published (stream, txid, id);
ALTER TABLE alkstore.events ADD COLUMN id bigint;
UPDATE alkstore.events e SET id = n.id
  FROM (SELECT o.stream, o."offset", row_number() OVER (ORDER BY o.created_at, o.stream, o."offset") AS id
          FROM alkstore.events o) n
 WHERE e.stream = n.stream AND e."offset" = n."offset";
ALTER TABLE alkstore.events ALTER COLUMN id SET NOT NULL;
DO $$
BEGIN
  PERFORM pg_catalog.setval('alkstore.published_id_seq', coalesce(max(e.id), 0) + 1, false) FROM alkstore.events e;
END $$;
-- alk_read's rows gained the column id.
DROP FUNCTION alk_read(text, bigint, integer);

-- As schema.sql does for every table: explicit, owner-only privileges.
REVOKE ALL ON alkstore.paused, alkstore.groups, alkstore.idempotency, alkstore.schedules,
  alkstore.published FROM PUBLIC;
