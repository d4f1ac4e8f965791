-- Operating it (contract v1.1 §D), see sqlite_ext/src/admin.rs.

-- Every queue with options, jobs or a pause, in name order: a skip scan of
-- each state's partial index (one seek per queue).
-- name: queue_names
WITH RECURSIVE
p(q) AS (SELECT (SELECT queue FROM alk_jobs WHERE state = 'pending' ORDER BY queue LIMIT 1)
         UNION ALL
         SELECT (SELECT queue FROM alk_jobs WHERE state = 'pending' AND queue > p.q ORDER BY queue LIMIT 1)
           FROM p WHERE p.q IS NOT NULL),
r(q) AS (SELECT (SELECT queue FROM alk_jobs WHERE state = 'running' ORDER BY queue LIMIT 1)
         UNION ALL
         SELECT (SELECT queue FROM alk_jobs WHERE state = 'running' AND queue > r.q ORDER BY queue LIMIT 1)
           FROM r WHERE r.q IS NOT NULL),
d(q) AS (SELECT (SELECT queue FROM alk_jobs WHERE state = 'dead' ORDER BY queue LIMIT 1)
         UNION ALL
         SELECT (SELECT queue FROM alk_jobs WHERE state = 'dead' AND queue > d.q ORDER BY queue LIMIT 1)
           FROM d WHERE d.q IS NOT NULL),
c(q) AS (SELECT (SELECT queue FROM alk_jobs WHERE state = 'completed' ORDER BY queue LIMIT 1)
         UNION ALL
         SELECT (SELECT queue FROM alk_jobs WHERE state = 'completed' AND queue > c.q ORDER BY queue LIMIT 1)
           FROM c WHERE c.q IS NOT NULL),
w(q) AS (SELECT (SELECT queue FROM alk_jobs WHERE state = 'waiting' ORDER BY queue LIMIT 1)
         UNION ALL
         SELECT (SELECT queue FROM alk_jobs WHERE state = 'waiting' AND queue > w.q ORDER BY queue LIMIT 1)
           FROM w WHERE w.q IS NOT NULL),
b(q) AS (SELECT (SELECT queue FROM alk_jobs WHERE state = 'blocked' ORDER BY queue LIMIT 1)
         UNION ALL
         SELECT (SELECT queue FROM alk_jobs WHERE state = 'blocked' AND queue > b.q ORDER BY queue LIMIT 1)
           FROM b WHERE b.q IS NOT NULL),
s(q) AS (SELECT (SELECT queue FROM alk_jobs WHERE state = 'scheduled' ORDER BY queue LIMIT 1)
         UNION ALL
         SELECT (SELECT queue FROM alk_jobs WHERE state = 'scheduled' AND queue > s.q ORDER BY queue LIMIT 1)
           FROM s WHERE s.q IS NOT NULL)
SELECT q FROM (
  SELECT q FROM p UNION SELECT q FROM r UNION SELECT q FROM d UNION SELECT q FROM c UNION SELECT q FROM w
  UNION SELECT q FROM s UNION SELECT q FROM b
  UNION SELECT queue FROM alk_queues UNION SELECT queue FROM alk_paused
) WHERE q IS NOT NULL ORDER BY q;

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
