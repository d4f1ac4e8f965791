-- Job dependencies (contract v1.2 §J), see sqlite_ext/src/deps.rs.

-- A named job's state; marks it as having dependents.
-- name: deps_state
SELECT state FROM alk_jobs WHERE id = ?1;

-- name: deps_mark
UPDATE alk_jobs SET dependents = 1 WHERE id = ?1 AND dependents IS NULL;

-- How a job whose row is gone ended, if not by an ack.
-- name: deps_ending
SELECT ending FROM alk_job_ends WHERE id = ?1;

-- The highest job id ever given (AUTOINCREMENT: a rolled-back insert
-- gives its id back) and the highest id forgotten (deps.rs).
-- name: deps_bounds
SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'alk_jobs'), 0),
       coalesce((SELECT CAST(value AS INTEGER) FROM alk_meta WHERE key = 'dependencies_forgotten_through'), 0);

-- name: deps_link
INSERT INTO alk_job_deps (dep_id, job_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING;

-- A job that waited for an acked job (deps.rs) has one dependency fewer;
-- blocked with none left, it becomes pending (scheduled while its own
-- run_at lies ahead of ?2), its run_at no earlier than ?2. By id, one job a
-- statement: an "id IN (SELECT …)" costs a temporary table per call.
-- name: deps_release
UPDATE alk_jobs
SET deps_left = deps_left - 1,
    run_at = CASE WHEN deps_left > 1 THEN run_at ELSE max(run_at, ?2) END,
    state = CASE WHEN deps_left > 1 OR state = 'waiting' THEN state
                 WHEN run_at > ?2 THEN 'scheduled' ELSE 'pending' END
WHERE id = ?1 AND (state = 'blocked' OR state = 'waiting');

-- name: deps_drop
DELETE FROM alk_job_deps WHERE dep_id = ?1;

-- The jobs waiting for job ?1, in id order.
-- name: deps_dependents
SELECT job_id FROM alk_job_deps WHERE dep_id = ?1 ORDER BY job_id;

-- A job waiting for dependencies: its state (for its group's hand-over).
-- name: deps_waiting_state
SELECT state FROM alk_jobs WHERE id = ?1 AND (state = 'blocked' OR state = 'waiting');

-- name: deps_kill
UPDATE alk_jobs
SET state = 'dead', last_error = ?2,
    prune_at = ?3 + (SELECT retain_dead_ms FROM alk_queues c WHERE c.queue = alk_jobs.queue)
WHERE id = ?1
RETURNING queue, group_key, dependents;

-- A job gone without an ack (?2: 'dead' or 'cancelled').
-- name: deps_ended
INSERT INTO alk_job_ends (id, ending, ended_at) VALUES (?1, ?2, ?3)
ON CONFLICT (id) DO UPDATE SET ending = excluded.ending, ended_at = excluded.ended_at;

-- Forgets at most ?2 records older than ?1; returns their ids.
-- name: deps_forget
DELETE FROM alk_job_ends WHERE id IN (
  SELECT id FROM alk_job_ends WHERE ended_at <= ?1 ORDER BY ended_at LIMIT ?2)
RETURNING id;

-- name: deps_forgotten_through
INSERT INTO alk_meta (key, value) VALUES ('dependencies_forgotten_through', ?1)
ON CONFLICT (key) DO UPDATE SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER));

-- Whether job ?2 still waits for job ?1.
-- name: deps_waits_for
SELECT 1 FROM alk_job_deps WHERE dep_id = ?1 AND job_id = ?2;

-- Before a requeue: job ?1's rows for the dependencies in ?2 (a JSON array).
-- name: deps_unlink
DELETE FROM alk_job_deps WHERE job_id = ?1 AND dep_id IN (SELECT value FROM json_each(?2));

-- name: deps_set_left
UPDATE alk_jobs SET deps_left = ?2 WHERE id = ?1;

-- name: deps_requeue_failed
UPDATE alk_jobs SET last_error = ?2, deps_left = NULL WHERE id = ?1;
