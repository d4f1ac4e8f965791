-- Notification statements (contract §8).

-- name: notify
INSERT INTO alk_notifications (channel, payload, created_at) VALUES (?1, ?2, ?3)
RETURNING id;

-- Drops notifications older than the cutoff ?1, oldest first.
-- name: notify_prune
DELETE FROM alk_notifications
WHERE id IN (SELECT id FROM alk_notifications WHERE created_at < ?1 ORDER BY id LIMIT 1000);

-- name: notifications_since
SELECT id, payload, created_at FROM alk_notifications
WHERE channel = ?1 AND id > ?2 ORDER BY id LIMIT ?3;
