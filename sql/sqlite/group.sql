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

-- The next waiting job (lowest id) becomes the group's head.
-- name: group_promote
UPDATE alk_jobs SET state = 'pending'
WHERE id = (SELECT min(id) FROM alk_jobs WHERE queue = ?1 AND group_key = ?2 AND state = 'waiting');
