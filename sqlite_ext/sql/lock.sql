-- Lease statements (contract §9). Rows are never deleted, so tokens only grow.

-- name: lock_get
SELECT owner, token, expires_at FROM alk_locks WHERE name = ?1;

-- name: lock_put
INSERT INTO alk_locks (name, owner, token, expires_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (name) DO UPDATE
  SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at;

-- name: lock_renew
UPDATE alk_locks SET expires_at = ?4
WHERE name = ?1 AND owner = ?2 AND expires_at > ?3
RETURNING token;

-- name: lock_release
UPDATE alk_locks SET owner = NULL, expires_at = 0
WHERE name = ?1 AND owner = ?2 AND expires_at > ?3
RETURNING token;
