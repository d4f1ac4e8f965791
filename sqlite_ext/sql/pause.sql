-- Pause (contract v1.1 §C4).

-- name: pause
INSERT INTO alk_paused (queue, paused_at) VALUES (?1, ?2) ON CONFLICT (queue) DO NOTHING;

-- name: resume
DELETE FROM alk_paused WHERE queue = ?1;
