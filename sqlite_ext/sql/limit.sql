-- Flow control (contract v1.2 §I): statements of limit.rs. Times are epoch
-- milliseconds; '' as limit_key is the queue-wide rate window.

-- name: limits_get
SELECT max_running, rate_max, rate_per_ms, key_max_running, key_rate_max, key_rate_per_ms
FROM alk_queue_limits WHERE queue = ?1;

-- name: limits_put
INSERT INTO alk_queue_limits (queue, max_running, rate_max, rate_per_ms, key_max_running,
                              key_rate_max, key_rate_per_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (queue) DO UPDATE SET
  max_running = excluded.max_running, rate_max = excluded.rate_max, rate_per_ms = excluded.rate_per_ms,
  key_max_running = excluded.key_max_running, key_rate_max = excluded.key_rate_max,
  key_rate_per_ms = excluded.key_rate_per_ms;

-- name: limits_delete
DELETE FROM alk_queue_limits WHERE queue = ?1;

-- name: claim_times_delete
DELETE FROM alk_claim_times WHERE queue = ?1;

-- Running (claimed, claim not expired: an expired claim frees its slot)
-- jobs of the queue (?3 NULL) or of one key, and the first claim expiry.
-- name: limit_running
SELECT count(*), min(claim_expires_at) FROM alk_jobs
WHERE queue = ?1 AND state = 'running' AND claim_expires_at > ?2 AND (?3 IS NULL OR limit_key = ?3);

-- Claims in the window (?3: its start, exclusive), and the ?4-th latest.
-- name: limit_window
SELECT count(*),
       (SELECT claimed_at FROM alk_claim_times
         WHERE queue = ?1 AND limit_key = ?2 AND claimed_at > ?3
         ORDER BY claimed_at DESC LIMIT 1 OFFSET ?4 - 1)
FROM alk_claim_times WHERE queue = ?1 AND limit_key = ?2 AND claimed_at > ?3;

-- name: limit_forget
DELETE FROM alk_claim_times WHERE queue = ?1 AND limit_key = ?2 AND claimed_at <= ?3;

-- name: limit_count
INSERT INTO alk_claim_times (queue, limit_key, claimed_at) VALUES (?1, ?2, ?3);

-- The keys of the first 1,000 jobs a claim could take now (next_slot_at).
-- name: limit_due_keys
SELECT DISTINCT limit_key FROM (
  SELECT limit_key FROM alk_jobs
  WHERE queue = ?1 AND state = 'pending' AND run_at <= ?2 AND (expires_at IS NULL OR expires_at > ?2)
  ORDER BY priority DESC, run_at, id LIMIT 1000);

-- Claim times that left their window, which claims of idle keys and
-- removed limits do not delete (alk_prune; not counted).
-- name: limit_prune
DELETE FROM alk_claim_times WHERE rowid IN (
  SELECT t.rowid FROM alk_claim_times t LEFT JOIN alk_queue_limits l ON l.queue = t.queue
  WHERE t.claimed_at <= ?1 - coalesce(CASE WHEN t.limit_key = '' THEN l.rate_per_ms ELSE l.key_rate_per_ms END, 0)
  ORDER BY t.claimed_at LIMIT ?2);
