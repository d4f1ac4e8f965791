-- Pruning (contract v1.1 §C5): each statement deletes at most ?2 rows,
-- oldest first, whose retention ended before ?1.

-- Dead jobs past their retention, across queues (alk_jobs_prune).
-- name: prune_dead
DELETE FROM alk_jobs WHERE id IN (
  SELECT id FROM alk_jobs WHERE state = 'dead' AND prune_at IS NOT NULL AND prune_at <= ?1
  ORDER BY prune_at LIMIT ?2);

-- The next queue after ?1 ('' for the first: names are never empty) that
-- has completed jobs: a skip through alk_jobs_completed, one seek per
-- queue. (No "?1 IS NULL OR": it would turn the seek into a scan.)
-- name: prune_next_queue
SELECT queue FROM alk_jobs
WHERE state = 'completed' AND queue > ?1
ORDER BY queue LIMIT 1;

-- Completed jobs of queue ?3 past their retention.
-- name: prune_completed
DELETE FROM alk_jobs WHERE id IN (
  SELECT id FROM alk_jobs WHERE queue = ?3 AND state = 'completed' AND prune_at <= ?1
  ORDER BY prune_at LIMIT ?2);

-- name: prune_idempotency
DELETE FROM alk_idempotency WHERE (queue, key) IN (
  SELECT queue, key FROM alk_idempotency WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2);

-- name: prune_notifications
DELETE FROM alk_notifications WHERE id IN (
  SELECT id FROM alk_notifications WHERE created_at < ?1 ORDER BY id LIMIT ?2);
