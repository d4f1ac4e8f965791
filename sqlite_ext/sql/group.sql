-- Ordered groups (contract v1.1 §C2), see sqlite_ext/src/group.rs.

-- Adds ?3 jobs to a group; returns its count of live jobs after.
-- name: group_join
INSERT INTO alk_groups (queue, group_key, jobs) VALUES (?1, ?2, ?3)
ON CONFLICT (queue, group_key) DO UPDATE SET jobs = jobs + excluded.jobs
RETURNING jobs;

-- name: group_leave
UPDATE alk_groups SET jobs = jobs - 1 WHERE queue = ?1 AND group_key = ?2
RETURNING jobs;

-- name: group_drop
DELETE FROM alk_groups WHERE queue = ?1 AND group_key = ?2;

-- The next waiting job (lowest id) becomes the group's head: pending,
-- scheduled if its run_at lies ahead of ?3 (now), or blocked while it
-- waits for dependencies (deps.rs).
-- name: group_promote
UPDATE alk_jobs SET state = CASE WHEN deps_left > 0 THEN 'blocked' WHEN run_at > ?3 THEN 'scheduled' ELSE 'pending' END
WHERE id = (SELECT min(id) FROM alk_jobs WHERE queue = ?1 AND group_key = ?2 AND state = 'waiting');

-- The same for many finished heads at once: ?1 is a JSON array of
-- [queue, group_key, n] (n: how many of the group's jobs finished), three
-- statements per batch instead of two per job.
-- name: groups_leave
UPDATE alk_groups SET jobs = jobs - f.n
FROM (SELECT value ->> 0 AS q, value ->> 1 AS g, value ->> 2 AS n FROM json_each(?1)) AS f
WHERE alk_groups.queue = f.q AND alk_groups.group_key = f.g;

-- name: groups_drop
DELETE FROM alk_groups
WHERE jobs <= 0 AND (queue, group_key) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?1));

-- name: groups_promote
UPDATE alk_jobs SET state = CASE WHEN deps_left > 0 THEN 'blocked' WHEN run_at > ?2 THEN 'scheduled' ELSE 'pending' END
WHERE id IN (SELECT (SELECT min(w.id) FROM alk_jobs w
                     WHERE w.queue = f.value ->> 0 AND w.group_key = f.value ->> 1 AND w.state = 'waiting')
             FROM json_each(?1) f);
