-- Operating it (contract v1.1 §D), see sqlite_ext/src/admin.rs.

-- Every queue with jobs (in any state), options or a pause, in name order,
-- with its counts as queue_stats reads them (?1: now), in one pass over the
-- jobs grouped by queue: queue_stats for each queue took 5.1 s for 100,000
-- queues, which any writer can make. 'parked' jobs are pending.
-- name: queues
WITH c AS (
  SELECT queue,
         sum(state IN ('pending', 'waiting', 'blocked', 'scheduled') AND run_at <= ?1 OR state = 'parked') AS due,
         sum(state IN ('pending', 'waiting', 'blocked', 'scheduled') AND run_at > ?1) AS ahead,
         sum(state = 'running') AS running,
         sum(state = 'dead') AS dead,
         min(CASE WHEN state IN ('pending', 'scheduled') AND run_at <= ?1 THEN run_at END) AS oldest,
         sum(state = 'completed') AS completed
    FROM alk_jobs GROUP BY queue)
SELECT n.queue, coalesce(c.due, 0), coalesce(c.ahead, 0), coalesce(c.running, 0), coalesce(c.dead, 0),
       c.oldest, coalesce(c.completed, 0), EXISTS (SELECT 1 FROM alk_paused p WHERE p.queue = n.queue)
  FROM (SELECT queue FROM c UNION SELECT queue FROM alk_queues UNION SELECT queue FROM alk_paused) n
  LEFT JOIN c ON c.queue = n.queue
 ORDER BY n.queue;

-- Every queue with a limit set, in name order (alk_queue_limits).
-- name: queue_limits_all
SELECT queue, max_running, rate_max, rate_per_ms, key_max_running, key_rate_max, key_rate_per_ms
  FROM alk_queue_limits
 WHERE coalesce(max_running, rate_max, key_max_running, key_rate_max) IS NOT NULL
 ORDER BY queue;

-- Job pages in id order after ?2, at most ?3: one statement per state, so
-- that each reads its state's index.
-- name: list_jobs_any
SELECT id FROM alk_jobs WHERE queue = ?1 AND id > ?2 ORDER BY id LIMIT ?3;

-- name: list_jobs_pending
SELECT id FROM alk_jobs
WHERE queue = ?1 AND (state = 'pending' OR state = 'waiting' OR state = 'scheduled' OR state = 'blocked'
                      OR state = 'parked')
  AND id > ?2
ORDER BY id LIMIT ?3;

-- name: list_jobs_running
SELECT id FROM alk_jobs WHERE queue = ?1 AND state = 'running' AND id > ?2 ORDER BY id LIMIT ?3;

-- The dead jobs' index is in (queue, id) order: named, so that a planner
-- with statistics never prefers reading them all and sorting (it did, for
-- the first page of a queue of 1,000,000 jobs).
-- name: list_jobs_dead
SELECT id FROM alk_jobs INDEXED BY alk_jobs_dead
WHERE queue = ?1 AND state = 'dead' AND id > ?2 ORDER BY id LIMIT ?3;

-- name: list_jobs_completed
SELECT id FROM alk_jobs WHERE queue = ?1 AND state = 'completed' AND id > ?2 ORDER BY id LIMIT ?3;

-- name: requeue_dead_ungrouped
UPDATE alk_jobs SET state = 'pending', attempts = 0, run_at = ?2, expires_at = NULL, prune_at = NULL
WHERE queue = ?1 AND state = 'dead' AND group_key IS NULL AND depends_on IS NULL;

-- Dead jobs requeued one by one: grouped ones and ones with dependencies.
-- name: dead_grouped
SELECT id FROM alk_jobs WHERE queue = ?1 AND state = 'dead' AND (group_key IS NOT NULL OR depends_on IS NOT NULL)
ORDER BY id;

-- name: purge_dead
DELETE FROM alk_jobs WHERE queue = ?1 AND state = 'dead'
RETURNING id;

-- One dead or completed job (alk_delete_job).
-- name: delete_job
DELETE FROM alk_jobs WHERE id = ?1 AND (state = 'dead' OR state = 'completed')
RETURNING state;

-- name: purge_completed
DELETE FROM alk_jobs WHERE queue = ?1 AND state = 'completed';

-- name: purge_pending
DELETE FROM alk_jobs WHERE queue = ?1 AND (state = 'pending' OR state = 'waiting' OR state = 'scheduled'
                                           OR state = 'blocked' OR state = 'parked')
RETURNING group_key, id, dependents;

-- Every stream (published to, configured, or with a saved offset): its
-- first and last kept offsets (0 with none).
-- name: streams
WITH names(s) AS (SELECT stream FROM alk_streams UNION SELECT stream FROM alk_offsets)
SELECT s,
       coalesce((SELECT min("offset") FROM alk_events WHERE stream = names.s), 0),
       coalesce((SELECT max("offset") FROM alk_events WHERE stream = names.s), 0)
FROM names ORDER BY s;

-- name: stream_consumers
SELECT consumer, "offset" FROM alk_offsets WHERE stream = ?1 ORDER BY consumer;

-- name: locks
SELECT name, owner, token, expires_at FROM alk_locks ORDER BY name;
