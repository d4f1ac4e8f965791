-- Pruning (contract v1.1 §C5): each statement deletes at most ?2 rows,
-- oldest first, whose retention ended before ?1.

-- name: prune_jobs
DELETE FROM alk_jobs WHERE id IN (
  SELECT id FROM alk_jobs WHERE prune_at <= ?1 AND (state = 'completed' OR state = 'dead')
  ORDER BY prune_at LIMIT ?2);

-- name: prune_idempotency
DELETE FROM alk_idempotency WHERE (queue, key) IN (
  SELECT queue, key FROM alk_idempotency WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2);

-- name: prune_notifications
DELETE FROM alk_notifications WHERE id IN (
  SELECT id FROM alk_notifications WHERE created_at < ?1 ORDER BY id LIMIT ?2);
