-- alkstore on PostgreSQL: the internal schema.
--
-- The tables live in schema "alkstore", which no application role can use:
-- the alk_* functions (SECURITY DEFINER, search_path pinned) are the only
-- way in. Times are timestamptz; durations are integer milliseconds, as on
-- SQLite, so both engines stamp and report identical values.

CREATE SCHEMA alkstore;
REVOKE ALL ON SCHEMA alkstore FROM PUBLIC;

CREATE TABLE alkstore.meta (
  key   text PRIMARY KEY,
  value text NOT NULL
);
INSERT INTO alkstore.meta (key, value) VALUES ('schema_version', '3');

-- Per-queue options; a queue never configured has no row and uses defaults.
CREATE TABLE alkstore.queues (
  queue                 text PRIMARY KEY,
  visibility_timeout_ms bigint  NOT NULL,
  max_attempts          integer NOT NULL,
  backoff_base_ms       bigint  NOT NULL,
  backoff_max_ms        bigint  NOT NULL,
  retain_completed_ms   bigint  NOT NULL DEFAULT 0,  -- 0: acked jobs are deleted
  retain_dead_ms        bigint                       -- NULL: dead jobs are kept
);
-- The queues that keep acked jobs, usually none: alk_ack_batch asks whether
-- there is any before it looks up each job's queue (queue.sql).
CREATE INDEX queues_retaining ON alkstore.queues (queue) WHERE retain_completed_ms > 0;

-- Paused queues (outboxes by backing queue): claims on them return nothing.
CREATE TABLE alkstore.paused (
  queue     text PRIMARY KEY,
  paused_at timestamptz NOT NULL
);

-- Partitioned by slot (rotate.sql, docs/decisions.md "The reshape, built"):
-- jobs written due go to the hot slot of the 3 s they are written in (0 or
-- 1, by the clock), every other job (scheduled ahead, waiting, blocked,
-- dead) to the cold slot (2), and finished jobs are moved there later, by
-- a delete and an insert, never by an UPDATE of slot (which would make a
-- concurrent claim fail with 40001). A hot slot whose jobs are all gone is
-- truncated: its index entries go at once, where deleted ones would stay
-- while any transaction holds back vacuum, and claims walk them. Two hot
-- slots, not more: a statement that finds jobs by id or in claim order
-- opens every partition, each with its indexes.
--
-- Statements by a set of ids. A truncation resets the slot's statistics
-- and makes every session plan its job statements again while the slot is
-- empty: for "id = ANY (…)" PostgreSQL then reads that slot whole rather
-- than by its primary key, and keeps doing so as the slot refills. Every
-- function that runs such a statement on jobs carries enable_seqscan = off
-- (alk_claim, alk_ack_batch, alk_purge, alk_prune, groups_done, make_due,
-- sweep_candidates, sweep_end, unpark_first; claim_limited and park run
-- inside alk_claim), and the
-- extension's library sets it while its statements are planned again
-- (pg_ext/src/statements.rs). A statement by one id plans the key anyway.
-- rotation.rs checks every function's body for such a statement.
CREATE TABLE alkstore.jobs (
  id                    bigint GENERATED ALWAYS AS IDENTITY,
  queue                 text        NOT NULL,
  -- 'pending', 'running', 'dead', 'completed', 'waiting' (pending, as
  -- every function reports it, behind its group's head; only heads are in
  -- jobs_pending, so claims never read past them), 'blocked' (pending, as
  -- reported, waiting for the jobs it depends on: deps.sql), 'scheduled' (pending,
  -- as reported, written with a run_at ahead: kept out of jobs_pending so
  -- that claims never step over it — contract v1.2 §H; alk_sweep makes it
  -- pending when it comes due, and claims take it before that) or 'parked'
  -- (pending, as reported, stepped over by a claim because its limit_key
  -- was at its running limit: out of jobs_pending until the key has room —
  -- limit.sql). Written only by
  -- alkstore's functions, and without a CHECK: PostgreSQL re-reads and
  -- plans a CHECK on every statement that writes the table, which cost a
  -- quarter of an INSERT's instructions (docs/decisions.md).
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
  prune_at              timestamptz, -- completed or dead: when alk_prune may delete it
  limit_key             text,        -- the partition its per-key limits count in (v1.2 §I)
  depends_on            bigint[],    -- the jobs it runs after (v1.2 §J, deps.sql), as given
  deps_left             integer,     -- how many of them are not acked yet (its job_deps rows)
  dependents            boolean,     -- true once a job named it in depends_on
  errors                jsonb,       -- every error it met, oldest first: each write of
                                     -- last_error also writes alkstore.push_error (alk_job_errors)
  slot                  smallint    NOT NULL DEFAULT 2, -- its partition (above; written by
                                    -- alkstore's functions, cold unless said); never updated
  PRIMARY KEY (id, slot)
) PARTITION BY LIST (slot);
-- Autovacuum on a hot slot only once 50,000 rows are dead, and never for
-- rows inserted: a truncation takes their place, and a vacuum of the slot
-- holds a lock that the truncation's request gives up on (under a held
-- horizon autovacuum went over the hot slots every minute, removing
-- nothing, and kept them from being truncated: docs/benchmarks.md).
CREATE TABLE alkstore.jobs_slot0 PARTITION OF alkstore.jobs FOR VALUES IN (0)
  WITH (autovacuum_vacuum_insert_threshold = -1, autovacuum_vacuum_scale_factor = 0,
        autovacuum_vacuum_threshold = 50000);
CREATE TABLE alkstore.jobs_slot1 PARTITION OF alkstore.jobs FOR VALUES IN (1)
  WITH (autovacuum_vacuum_insert_threshold = -1, autovacuum_vacuum_scale_factor = 0,
        autovacuum_vacuum_threshold = 50000);
CREATE TABLE alkstore.jobs_cold PARTITION OF alkstore.jobs FOR VALUES IN (2);
-- The rotation's marks (rotate.sql): a hot slot seen empty, in which round
-- of the clock and when. Not backed up: a restore starts without marks.
CREATE TABLE alkstore.rotation (
  slot     smallint    PRIMARY KEY,
  round    bigint      NOT NULL,
  empty_at timestamptz NOT NULL
);


-- Claim order among runnable jobs. Partial: dead jobs are not in it and
-- acked jobs are deleted, so claim cost does not grow with history.
-- The queue is keyed by its name's 64-bit hash: with a text first key
-- every later key is read the slow way (its offset depends on the name's
-- length), and a claim checks the whole leaf it lands on. Queries repeat
-- the key as written here and recheck the name, which the index carries
-- (INCLUDE) so that counts and the queue listing stay index-only. Names
-- whose hashes collide share a range of the index: still correct
-- (docs/decisions.md). No deduplication: with INCLUDE there is none.
CREATE INDEX jobs_pending ON alkstore.jobs (hashtextextended(queue, 0), priority DESC, run_at, id)
  INCLUDE (queue) WHERE state = 'pending';
-- Statistics on that key, and that the name decides it: the planner
-- ignores a partial index's own statistics, and without these it would
-- take a queue for 0.5% of the table, whatever its size, and may then
-- plan a claim as a sort of all its jobs. On each partition: the planner
-- estimates each partition's scan from that partition's statistics.
CREATE STATISTICS alkstore.jobs_queue_key (dependencies) ON queue, (hashtextextended(queue, 0))
  FROM alkstore.jobs_cold;
CREATE STATISTICS alkstore.jobs_queue_key0 (dependencies) ON queue, (hashtextextended(queue, 0))
  FROM alkstore.jobs_slot0;
CREATE STATISTICS alkstore.jobs_queue_key1 (dependencies) ON queue, (hashtextextended(queue, 0))
  FROM alkstore.jobs_slot1;
-- Deadlines: a running job's claim expiry and a pending (or scheduled)
-- job's expiry, the two times at which a claim or a sweep must act on a job
-- (re-claim or dead-letter it). One index for both: a claim finds either in one probe, and every
-- statement that writes jobs sets up one partial index fewer
-- (docs/benchmarks.md). Queries repeat the key as it is written here, so
-- the planner matches it, and imply the predicate (state = 'running' does):
--   CASE WHEN state = 'running' THEN claim_expires_at ELSE expires_at END
-- (written out rather than as a function: a SQL function's body would be
-- parsed under the search_path of whichever session plans it).
CREATE INDEX jobs_deadline ON alkstore.jobs
  (queue, (CASE WHEN state = 'running' THEN claim_expires_at ELSE expires_at END))
  WHERE state = 'running' OR (state IN ('pending', 'scheduled') AND expires_at IS NOT NULL);
-- Jobs scheduled ahead (ahead.sql), by when they come due: a claim's probe
-- and alk_sweep read the due ones, and nothing else, from the start of
-- each queue's range. (Not in jobs_deadline: there the due ones would lie
-- among the expired claims and expiries, which claims read.)
CREATE INDEX jobs_scheduled_due ON alkstore.jobs (queue, run_at) WHERE state = 'scheduled';
-- And in claim order, as jobs_pending: a claim that found due ones reads
-- each priority's from its own range (alkstore.due_scheduled), never
-- stepping over those still ahead.
CREATE INDEX jobs_scheduled ON alkstore.jobs (hashtextextended(queue, 0), priority DESC, run_at, id)
  INCLUDE (queue) WHERE state = 'scheduled';
-- Finished (dead and completed) jobs, for stats and inspection without
-- reading the rest. One index for both: every statement that writes jobs
-- sets up each partial index's predicate, whatever state it writes.
CREATE INDEX jobs_finished ON alkstore.jobs (queue, state, id)
  WITH (deduplicate_items = off) WHERE state IN ('dead', 'completed');

-- Jobs waiting behind their group's head, next-in-line first, and jobs
-- waiting for their dependencies (deps.sql): what stats count as pending
-- and alk_sweep expires without reading the rest.
CREATE INDEX jobs_waiting ON alkstore.jobs (queue, group_key, id)
  WITH (deduplicate_items = off) WHERE state IN ('waiting', 'blocked');
-- Finished jobs with a retention, in the order alk_prune deletes them.
CREATE INDEX jobs_prune ON alkstore.jobs (prune_at) WHERE prune_at IS NOT NULL;
-- Statements that find jobs by id compare the state with COLLATE "C"
-- (equality is the same under every deterministic collation). The planner
-- then cannot prove a partial index's predicate from that comparison, so
-- they probe the primary key. Without it, plans made while the statistics
-- showed few running jobs read the whole running-jobs index, filtering by
-- id: every ack stepped over the entries of each job claimed since the
-- last VACUUM (docs/benchmarks.md).

-- Ordered groups (contract v1.1 §C2): the number of pending, running and
-- waiting jobs of each group. Its row lock orders enqueues into a group and
-- the hand-over when the head finishes, so a group never has two heads or
-- a waiting job with no head.
CREATE TABLE alkstore.groups (
  queue     text    NOT NULL,
  group_key text    NOT NULL,
  jobs      integer NOT NULL,
  PRIMARY KEY (queue, group_key)
);

-- Job dependencies (contract v1.2 §J, deps.sql): one row per job and a
-- dependency of it not acked yet, found from the dependency when it ends.
CREATE TABLE alkstore.job_deps (
  dep_id bigint NOT NULL,
  job_id bigint NOT NULL,
  PRIMARY KEY (dep_id, job_id)
);
-- Jobs whose rows are gone though they were never acked (cancelled,
-- purged, dead and pruned), kept for dependency_memory_ms(): an id whose
-- row is gone counts as acked unless it is here (deps.sql).
CREATE TABLE alkstore.job_ends (
  id       bigint      PRIMARY KEY,
  ending   text        NOT NULL, -- 'dead' or 'cancelled'
  ended_at timestamptz NOT NULL
);
CREATE INDEX job_ends_age ON alkstore.job_ends (ended_at);

-- Flow control (contract v1.2 §I, limit.sql): the limits of the queues that
-- have any. A queue without limits has no row, and its claims never read
-- more than that. A limited claim updates its queue's row first: the row
-- lock orders the claims of one queue, so each counts what the last one
-- claimed.
CREATE TABLE alkstore.queue_limits (
  queue           text PRIMARY KEY,
  max_running     integer,
  rate_max        integer,
  rate_per_ms     bigint,
  key_max_running integer,
  key_rate_max    integer,
  key_rate_per_ms bigint,
  claimed_at      timestamptz, -- the last limited claim
  -- The queue's claim times in claim_times (limit_key ''): a claim reads
  -- this count, not the rows.
  rate_count      integer NOT NULL DEFAULT 0
);
-- The claims of each rate window: the queue's ('' as limit_key) and each
-- key's. A claim deletes the times that left its window before it counts,
-- so a window holds at most its rate_max rows; alk_prune deletes what idle
-- keys and removed limits left.
CREATE TABLE alkstore.claim_times (
  queue      text        NOT NULL,
  limit_key  text        NOT NULL,
  claimed_at timestamptz NOT NULL
);
CREATE INDEX claim_times_window ON alkstore.claim_times (queue, limit_key, claimed_at);
CREATE INDEX claim_times_age ON alkstore.claim_times (claimed_at);

-- Parked jobs (state 'parked', limit.sql), per key in claim order: what a
-- job of the key leaving 'running' puts back into claim order. A table, not
-- a partial index on jobs: every statement that writes jobs opens and
-- locks each of its indexes and sets up each predicate (about 8,000
-- instructions, 3% of an enqueue), whether or not it parks anything; rows
-- here are written only when jobs are parked and put back. One row per job
-- whose state is 'parked', written and deleted with that state.
CREATE TABLE alkstore.parked (
  id        bigint      PRIMARY KEY,
  queue     text        NOT NULL,
  limit_key text        NOT NULL,
  priority  integer     NOT NULL,
  run_at    timestamptz NOT NULL
);
CREATE INDEX parked_order ON alkstore.parked (queue, limit_key, priority DESC, run_at, id);
-- Keys whose jobs are parked at their rate (limit.sql): when the window
-- frees a slot. A limited claim of the queue asks whether one came due.
CREATE TABLE alkstore.parked_keys (
  queue     text        NOT NULL,
  limit_key text        NOT NULL,
  until     timestamptz NOT NULL,
  PRIMARY KEY (queue, limit_key)
);

-- Idempotency keys (contract v1.1 §C1). Kept apart from the jobs: a key
-- holds for its TTL even after its job was acked and deleted.
CREATE TABLE alkstore.idempotency (
  queue      text        NOT NULL,
  key        text        NOT NULL,
  job_id     bigint      NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (queue, key)
);
CREATE INDEX idempotency_expiry ON alkstore.idempotency (expires_at);

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

-- Streams (contract v1.1 §E): the last offset handed out and the stream's
-- retention. Publishers never touch this row: offsets are given to
-- committed events afterwards by alkstore.sequence (stream.sql), which
-- also keeps here the snapshot of its last assignment (seq_xmax, seq_xip:
-- the events it did not move are those of transactions in progress then
-- or newer) and when the server that took it started (seq_started: a
-- snapshot is used only by that server run, never after a restore
-- elsewhere).
CREATE TABLE alkstore.streams (
  stream        text PRIMARY KEY,
  last_offset   bigint NOT NULL,
  retain_ms     bigint,
  retain_events bigint,
  seq_started   timestamptz,
  seq_xmax      xid8,
  seq_xip       xid8[]
);

-- Events with their offsets, written once by alkstore.sequence. id is last:
-- 0.1.0 had no id column.
CREATE TABLE alkstore.events (
  stream     text        NOT NULL,
  "offset"   bigint      NOT NULL,
  key        text,
  payload    jsonb       NOT NULL,
  created_at timestamptz NOT NULL,
  id         bigint      NOT NULL,
  -- When the sequencer gave it its offset, which made it readable: what
  -- retain_s counts from (NULL: an event from before schema 3, created_at;
  -- 'infinity': sequenced by its own transaction, stamped by a prune).
  readable_at timestamptz,
  PRIMARY KEY (stream, "offset")
);
-- The few events sequenced by their own transaction, for prune to stamp.
CREATE INDEX events_unstamped ON alkstore.events (stream) WHERE readable_at = 'infinity';

-- Published events waiting for their offset: a publisher only inserts
-- here, and alkstore.sequence moves committed ones into events. Small and
-- churning, so autovacuum visits it often (its dead index entries are what
-- the sequencing check walks over).
CREATE TABLE alkstore.published (
  id         bigint      GENERATED ALWAYS AS IDENTITY,
  stream     text        NOT NULL,
  key        text,
  payload    jsonb       NOT NULL,
  created_at timestamptz NOT NULL,
  -- The publishing transaction (top level): the sequencing check finds
  -- new events by it, past the entries of events already moved.
  txid       xid8        NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
  -- Commit order (v1.2 §L): the transaction's first event in the stream
  -- gets a ticket while the transaction commits (alkstore.ticket), and
  -- the sequencer gives transactions their offsets in ticket order.
  tx_first   boolean     NOT NULL DEFAULT false,
  ticket     bigint
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
CREATE INDEX published_stream ON alkstore.published (stream, txid, id);
-- Tickets, drawn in commit order (see alkstore.ticket).
CREATE SEQUENCE alkstore.commit_ticket;

CREATE TABLE alkstore.offsets (
  stream     text        NOT NULL,
  consumer   text        NOT NULL,
  "offset"   bigint      NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (stream, consumer)
);

-- Leases. A row outlives its release so the next token is always larger.
CREATE TABLE alkstore.locks (
  name       text PRIMARY KEY,
  owner      text,
  token      bigint      NOT NULL,
  expires_at timestamptz NOT NULL
);

-- Sessions waiting for work (see wake.sql): enqueue and publish send a
-- wake-up only while someone waits, so NOTIFY's commit-time lock is not
-- taken by every writer.
CREATE TABLE alkstore.waiters (
  kind       "char"      NOT NULL,  -- 'q' queue (outboxes by backing queue), 's' stream
  name       text        NOT NULL,
  pid        integer     NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (kind, name, pid)
);
-- Expired registrations, found without reading the others.
CREATE INDEX waiters_expiry ON alkstore.waiters (expires_at);

-- Queue options (contract §5): as stored and stamped.
CREATE TYPE alkstore.queue_opts AS (
  visibility_timeout_ms bigint,
  max_attempts          integer,
  backoff_base_ms       bigint,
  backoff_max_ms        bigint,
  retain_completed_ms   bigint,
  retain_dead_ms        bigint
);

-- Enqueue options, resolved against the time of enqueue.
CREATE TYPE alkstore.enqueue_opts AS (
  run_at             timestamptz,
  priority           integer,
  max_attempts       integer,     -- NULL: the queue's
  expires_at         timestamptz, -- NULL: never
  idempotency_key    text,
  idempotency_ttl_ms bigint,      -- NULL: the default TTL
  group_key          text,
  limit_key          text,
  depends_on         bigint[]     -- NULL: none
);

REVOKE ALL ON ALL TABLES IN SCHEMA alkstore FROM PUBLIC;
