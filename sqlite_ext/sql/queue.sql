-- Queue statements (contract §5). ?-parameters are bound by position by
-- sqlite_ext/src/queue/; each block is one prepared, cached statement.

-- A writing function called outside any transaction runs in its own, so
-- that its statements are one atomic unit (see conn.rs).
-- name: begin_immediate
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: savepoint
SAVEPOINT alkstore_call;

-- name: release
RELEASE alkstore_call;

-- name: rollback_to
ROLLBACK TO alkstore_call;

-- Takes the write lock (and waits for it) without writing anything: a
-- deadline is computed from the clock only once the lock is held.
-- name: take_write_lock
UPDATE alk_meta SET value = value WHERE 0;

-- name: schema_version
SELECT value FROM alk_meta WHERE key = 'schema_version';

-- name: schema_objects
SELECT type, name FROM sqlite_master
WHERE name LIKE 'alk\_%' ESCAPE '\' AND type IN ('table', 'index', 'view', 'trigger') ORDER BY name;

-- The library version that created or last migrated the schema.
-- name: record_version
INSERT INTO alk_meta (key, value) VALUES ('version', ?1)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- name: queue_opts
SELECT visibility_timeout_ms, max_attempts, backoff_base_ms, backoff_max_ms,
       retain_completed_ms, retain_dead_ms
FROM alk_queues WHERE queue = ?1;

-- name: queue_configure
INSERT INTO alk_queues (queue, visibility_timeout_ms, max_attempts, backoff_base_ms, backoff_max_ms,
                        retain_completed_ms, retain_dead_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (queue) DO UPDATE SET
  visibility_timeout_ms = excluded.visibility_timeout_ms,
  max_attempts = excluded.max_attempts,
  backoff_base_ms = excluded.backoff_base_ms,
  backoff_max_ms = excluded.backoff_max_ms,
  retain_completed_ms = excluded.retain_completed_ms,
  retain_dead_ms = excluded.retain_dead_ms;

-- The new id is read with sqlite3_last_insert_rowid (cheaper than RETURNING).
-- name: enqueue
INSERT INTO alk_jobs (queue, state, payload, priority, attempts, max_attempts,
  visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, expires_at)
VALUES (?1, 'pending', ?2, ?3, 0, ?4, ?5, ?6, ?7, ?8, ?9, ?10);

-- An enqueue with a group, an idempotency key, a limit key, a run_at
-- ahead or dependencies (?11 state: 'pending' for a group's head, else
-- 'waiting'; 'scheduled' for a job due later; 'blocked' or 'dead' for one
-- with dependencies, deps.rs: ?15 depends_on, ?16 deps_left, ?17 its
-- error and ?18 now when dead).
-- name: enqueue_keyed
INSERT INTO alk_jobs (queue, state, payload, priority, attempts, max_attempts,
  visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, expires_at,
  group_key, idempotency_key, limit_key, depends_on, deps_left, last_error, prune_at)
VALUES (?1, ?11, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?12, ?13, ?14, ?15, ?16, ?17,
        ?18 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = ?1));

-- name: idempotency_get
SELECT job_id FROM alk_idempotency WHERE queue = ?1 AND key = ?2 AND expires_at > ?3;

-- name: idempotency_put
INSERT INTO alk_idempotency (queue, key, job_id, expires_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (queue, key) DO UPDATE SET job_id = excluded.job_id, expires_at = excluded.expires_at;

-- name: paused
SELECT 1 FROM alk_paused WHERE queue = ?1;

-- Claim candidates, each side read in claim order straight from its partial
-- index (no sort, no temporary table: those cost more than the claim).
-- queue/claim.rs merges the two sides.
-- name: claim_pending
SELECT id, priority, run_at, expires_at, attempts, max_attempts, visibility_timeout_ms, payload, limit_key
FROM alk_jobs
WHERE queue = ?1 AND state = 'pending' AND run_at <= ?2
ORDER BY priority DESC, run_at, id LIMIT ?3;

-- Scheduled jobs that came due but are not pending yet (alk_sweep makes
-- them so): one index seek. Usually none, and then the claim reads no
-- scheduled jobs.
-- name: any_scheduled_due
SELECT 1 FROM alk_jobs WHERE queue = ?1 AND state = 'scheduled' AND run_at <= ?2 LIMIT 1;

-- The queue's next lower priority (below ?2) that has scheduled jobs: one
-- seek. queue/claim.rs reads the due ones of each in turn, never stepping over
-- the jobs of a priority that are still ahead.
-- name: scheduled_priority
SELECT max(priority) FROM alk_jobs WHERE queue = ?1 AND state = 'scheduled' AND priority < ?2;

-- The due scheduled jobs of one priority (?4), in claim order; expired
-- ones are left to alk_sweep (as on PostgreSQL, where the claim reads
-- only unexpired ones and so locks nothing else).
-- name: claim_scheduled
SELECT id, priority, run_at, expires_at, attempts, max_attempts, visibility_timeout_ms, payload, limit_key
FROM alk_jobs
WHERE queue = ?1 AND state = 'scheduled' AND priority = ?4 AND run_at <= ?2
  AND (expires_at IS NULL OR expires_at > ?2)
ORDER BY run_at, id LIMIT ?3;

-- Whether any claim in the queue has expired: one index seek. Usually not,
-- and then claim_expired (which sorts) is not run.
-- name: any_expired
SELECT 1 FROM alk_jobs WHERE queue = ?1 AND state = 'running' AND claim_expires_at <= ?2 LIMIT 1;

-- Running jobs whose claim expired, in claim order.
-- name: claim_expired
SELECT id, priority, run_at, expires_at, attempts, max_attempts, visibility_timeout_ms, payload, limit_key
FROM alk_jobs
WHERE queue = ?1 AND state = 'running' AND claim_expires_at <= ?2
ORDER BY priority DESC, run_at, id LIMIT ?3;

-- An expired claim about to be claimed again: the attempt's error, under
-- the worker that held it (alk_jobs_errors appends it to errors).
-- name: note_expired_claim
UPDATE alk_jobs SET last_error = 'claim expired (worker ' || claimed_by || ')'
WHERE id = ?1 AND state = 'running' AND claim_expires_at <= ?2 AND attempts < max_attempts;

-- Claims one candidate, re-checking that it is still claimable. No
-- RETURNING (it costs a temporary table per call): the caller knows the
-- values from the candidate row and checks sqlite3_changes.
-- name: claim_one
UPDATE alk_jobs
SET state = 'running', attempts = attempts + 1, claimed_by = ?2,
    claim_expires_at = ?3 + visibility_timeout_ms
WHERE id = ?1 AND (
  ((state = 'pending' OR state = 'scheduled') AND run_at <= ?3 AND (expires_at IS NULL OR expires_at > ?3))
  OR (state = 'running' AND claim_expires_at <= ?3 AND attempts < max_attempts));

-- The same for many candidates in one statement (?1: JSON array of ids):
-- one statement instead of one per job is most of a batch claim's cost.
-- No RETURNING (a temporary table per call): the candidates were read in
-- this same write transaction, so every one is claimed; the caller checks
-- the count and finds the claimed ones with claimed_many if it differs.
-- name: claim_many
UPDATE alk_jobs
SET state = 'running', attempts = attempts + 1, claimed_by = ?2,
    claim_expires_at = ?3 + visibility_timeout_ms
WHERE id IN (SELECT value FROM json_each(?1)) AND (
  ((state = 'pending' OR state = 'scheduled') AND run_at <= ?3 AND (expires_at IS NULL OR expires_at > ?3))
  OR (state = 'running' AND claim_expires_at <= ?3 AND attempts < max_attempts));

-- name: claimed_many
SELECT id FROM alk_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'running' AND claimed_by = ?2
  AND claim_expires_at = ?3 + visibility_timeout_ms;

-- Dead-lettering statements keep a dead job until now + the queue's
-- retain_dead_ms as it is now (NULL: kept), and return its queue, group
-- and whether jobs depend on it (deps.rs).
-- name: expire_one
UPDATE alk_jobs SET state = 'dead', last_error = 'expired',
  prune_at = ?2 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE id = ?1 AND (state = 'pending' OR state = 'scheduled') AND expires_at <= ?2
RETURNING queue, group_key, dependents, limit_key;

-- name: final_claim_one
UPDATE alk_jobs
SET state = 'dead', last_error = 'visibility timeout exceeded on final attempt',
    claimed_by = NULL, claim_expires_at = NULL,
    prune_at = ?2 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE id = ?1 AND state = 'running' AND claim_expires_at <= ?2 AND attempts >= max_attempts
RETURNING queue, group_key, dependents, limit_key;

-- name: dead_letter
UPDATE alk_jobs
SET state = 'dead', last_error = ?2, claimed_by = NULL, claim_expires_at = NULL,
    prune_at = ?3 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE id = ?1
RETURNING queue, group_key, dependents, limit_key;

-- The held job an ack finishes: its queue, group, the queue's
-- retain_completed_ms now (0: delete it), whether jobs depend on it and its
-- limit_key.
-- name: ack_probe
SELECT queue, group_key,
       coalesce((SELECT retain_completed_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue), 0),
       dependents, limit_key
FROM alk_jobs WHERE id = ?1 AND state = 'running' AND claimed_by = ?2;

-- name: ack_delete
DELETE FROM alk_jobs WHERE id = ?1;

-- The held jobs among ?1 (a JSON array of ids), as ack_probe for each.
-- name: ack_batch_probe
SELECT id, queue, group_key,
       coalesce((SELECT retain_completed_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue), 0),
       dependents, limit_key
FROM alk_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'running' AND claimed_by = ?2;

-- name: ack_batch_delete
DELETE FROM alk_jobs WHERE id IN (SELECT value FROM json_each(?1));

-- The common case in one pass: held jobs of no group, no dependents and no
-- limit_key, in queues that keep no completed jobs, are deleted; the rest
-- (if any) go through the probe.
-- name: ack_batch_plain
DELETE FROM alk_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'running' AND claimed_by = ?2
  AND group_key IS NULL AND dependents IS NULL AND limit_key IS NULL
  AND NOT EXISTS (SELECT 1 FROM alk_queues c WHERE c.queue = alk_jobs.queue AND c.retain_completed_ms > 0);

-- Kept as completed, with its result, until ?3 (completed_at) + ?5.
-- name: ack_keep
UPDATE alk_jobs
SET state = 'completed', completed_at = ?3, result = ?4, claim_expires_at = NULL, prune_at = ?3 + ?5
WHERE id = ?1;

-- name: held_job
SELECT attempts, max_attempts, backoff_base_ms, backoff_max_ms, visibility_timeout_ms, queue, group_key,
       limit_key
FROM alk_jobs WHERE id = ?1 AND state = 'running' AND claimed_by = ?2;

-- ?4: 'pending', or 'scheduled' when ?2 lies ahead (schema.sql).
-- name: retry_pending
UPDATE alk_jobs
SET state = ?4, run_at = ?2, last_error = ?3, claimed_by = NULL, claim_expires_at = NULL
WHERE id = ?1 AND state = 'running';

-- name: fail
UPDATE alk_jobs
SET state = 'dead', last_error = ?3, claimed_by = NULL, claim_expires_at = NULL,
    prune_at = ?4 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE id = ?1 AND state = 'running' AND claimed_by = ?2
RETURNING queue, group_key, dependents, limit_key;

-- name: heartbeat
UPDATE alk_jobs
SET claim_expires_at = ?3 + coalesce(?4, visibility_timeout_ms)
WHERE id = ?1 AND state = 'running' AND claimed_by = ?2
RETURNING id;

-- name: cancel
DELETE FROM alk_jobs WHERE id = ?1
  AND (state = 'pending' OR state = 'running' OR state = 'waiting' OR state = 'scheduled'
       OR state = 'blocked' OR state = 'parked')
RETURNING queue, group_key, state, dependents, limit_key;

-- A waiting job is pending to everyone outside (it only waits for its
-- group), and so are a scheduled one (it only waits for its run_at) and a
-- blocked one (it waits for its dependencies), and a parked one (it waits
-- for its limit_key's room: limit.rs).
-- Every error the job met (alk_job_errors).
-- name: job_errors
SELECT coalesce(errors, '[]') FROM alk_jobs WHERE id = ?1;

-- name: get_job
SELECT id, queue,
       CASE state WHEN 'waiting' THEN 'pending' WHEN 'scheduled' THEN 'pending' WHEN 'blocked' THEN 'pending'
                  WHEN 'parked' THEN 'pending' ELSE state END,
       payload, priority,
       attempts, max_attempts, visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at,
       created_at, claimed_by, claim_expires_at, expires_at, last_error, idempotency_key,
       group_key, completed_at, result, limit_key, depends_on,
       deps_left > 0 AND (state = 'blocked' OR state = 'waiting')
FROM alk_jobs WHERE id = ?1;

-- name: dead_job
SELECT queue, group_key, depends_on FROM alk_jobs WHERE id = ?1 AND state = 'dead';

-- Requeue also clears the expiry: putting a dead job back is an explicit
-- decision to run it. ?3: 'pending', 'waiting' behind its group's head, or
-- 'blocked' waiting for its dependencies.
-- name: requeue_dead
UPDATE alk_jobs
SET state = ?3, attempts = 0, run_at = ?2, expires_at = NULL, prune_at = NULL
WHERE id = ?1 AND state = 'dead';

-- Waiting, scheduled and blocked jobs count as pending (or scheduled), by
-- run_at; parked ones (limit.rs) are due.
-- name: queue_stats
SELECT
  (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'pending' AND run_at <= ?2)
  + (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'waiting' AND run_at <= ?2)
  + (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'blocked' AND run_at <= ?2)
  + (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'scheduled' AND run_at <= ?2)
  + (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'parked'),
  (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'pending' AND run_at > ?2)
  + (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'waiting' AND run_at > ?2)
  + (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'blocked' AND run_at > ?2)
  + (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'scheduled' AND run_at > ?2),
  (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'running'),
  (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'dead'),
  (SELECT min(coalesce(p, s), coalesce(s, p)) FROM (
     SELECT (SELECT min(run_at) FROM alk_jobs WHERE queue = ?1 AND state = 'pending' AND run_at <= ?2) AS p,
            (SELECT min(run_at) FROM alk_jobs WHERE queue = ?1 AND state = 'scheduled' AND run_at <= ?2) AS s)),
  (SELECT count(*) FROM alk_jobs WHERE queue = ?1 AND state = 'completed'),
  EXISTS (SELECT 1 FROM alk_paused WHERE queue = ?1);

-- Sweep: ?1 is a queue or NULL for every queue. Each returns the queue,
-- group and former state of what it dead-lettered, its id and whether jobs
-- depend on it.
-- name: sweep_expired
UPDATE alk_jobs
SET state = 'dead', last_error = 'expired',
    prune_at = ?2 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE state = 'pending' AND expires_at IS NOT NULL AND expires_at <= ?2
  AND (?1 IS NULL OR queue = ?1)
RETURNING queue, group_key, 'pending', id, dependents, limit_key;

-- name: sweep_expired_waiting
UPDATE alk_jobs
SET state = 'dead', last_error = 'expired',
    prune_at = ?2 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE state = 'waiting' AND expires_at IS NOT NULL AND expires_at <= ?2
  AND (?1 IS NULL OR queue = ?1)
RETURNING queue, group_key, 'waiting', id, dependents, limit_key;

-- name: sweep_expired_blocked
UPDATE alk_jobs
SET state = 'dead', last_error = 'expired',
    prune_at = ?2 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE state = 'blocked' AND expires_at IS NOT NULL AND expires_at <= ?2
  AND (?1 IS NULL OR queue = ?1)
RETURNING queue, group_key, 'blocked', id, dependents, limit_key;

-- name: sweep_expired_parked
UPDATE alk_jobs
SET state = 'dead', last_error = 'expired',
    prune_at = ?2 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE state = 'parked' AND expires_at IS NOT NULL AND expires_at <= ?2
  AND (?1 IS NULL OR queue = ?1)
RETURNING queue, group_key, 'parked', id, dependents, limit_key;

-- name: sweep_expired_scheduled
UPDATE alk_jobs
SET state = 'dead', last_error = 'expired',
    prune_at = ?2 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE state = 'scheduled' AND expires_at IS NOT NULL AND expires_at <= ?2
  AND (?1 IS NULL OR queue = ?1)
RETURNING queue, group_key, 'scheduled', id, dependents, limit_key;

-- name: sweep_final_claims
UPDATE alk_jobs
SET state = 'dead', last_error = 'visibility timeout exceeded on final attempt',
    claimed_by = NULL, claim_expires_at = NULL,
    prune_at = ?2 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE state = 'running' AND claim_expires_at <= ?2 AND attempts >= max_attempts
  AND (?1 IS NULL OR queue = ?1)
RETURNING queue, group_key, 'running', id, dependents, limit_key;

-- When a sweep last ran (?1: now, epoch ms), for alk_queue_stats's
-- last_sweep_age_s (issue 57): to within 10 s, as on PostgreSQL.
-- name: swept
INSERT INTO alk_meta (key, value) VALUES ('last_sweep_at', ?1)
ON CONFLICT (key) DO UPDATE SET value = excluded.value
WHERE CAST(alk_meta.value AS INTEGER) < CAST(excluded.value AS INTEGER) - 10000;

-- name: last_sweep_at
SELECT CAST(value AS INTEGER) FROM alk_meta WHERE key = 'last_sweep_at';

-- Scheduled jobs that came due become pending (contract v1.2 §H), at most
-- ?3 of them, earliest first: alk_sweep's bounded batch.
-- name: make_due
UPDATE alk_jobs SET state = 'pending'
WHERE id IN (SELECT id FROM alk_jobs
             WHERE state = 'scheduled' AND run_at <= ?2 AND (?1 IS NULL OR queue = ?1)
               AND (expires_at IS NULL OR expires_at > ?2)
             ORDER BY run_at LIMIT ?3);
