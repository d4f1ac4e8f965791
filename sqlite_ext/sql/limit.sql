-- Flow control (contract v1.2 §I): statements of limit.rs. Times are epoch
-- milliseconds; '' as limit_key is the queue-wide rate window.

-- name: limits_get
SELECT max_running, rate_max, rate_per_ms, key_max_running, key_rate_max, key_rate_per_ms, rate_count
FROM alk_queue_limits WHERE queue = ?1;

-- name: limits_rate_count
UPDATE alk_queue_limits SET rate_count = ?2 WHERE queue = ?1;

-- name: limits_put
INSERT INTO alk_queue_limits (queue, max_running, rate_max, rate_per_ms, key_max_running,
                              key_rate_max, key_rate_per_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (queue) DO UPDATE SET
  max_running = excluded.max_running, rate_max = excluded.rate_max, rate_per_ms = excluded.rate_per_ms,
  key_max_running = excluded.key_max_running, key_rate_max = excluded.key_rate_max,
  key_rate_per_ms = excluded.key_rate_per_ms,
  rate_count = CASE WHEN excluded.rate_max IS NULL THEN 0 ELSE rate_count END;

-- name: limits_delete
DELETE FROM alk_queue_limits WHERE queue = ?1;

-- A rate removed takes its window's claim times along (?2: the queue's
-- rate removed, ?3: the keys').
-- name: claim_times_delete
DELETE FROM alk_claim_times
WHERE queue = ?1 AND ((limit_key = '' AND ?2) OR (limit_key <> '' AND ?3));

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
  SELECT * FROM (
    SELECT limit_key FROM alk_jobs
    WHERE queue = ?1 AND state = 'pending' AND run_at <= ?2 AND (expires_at IS NULL OR expires_at > ?2)
    ORDER BY priority DESC, run_at, id LIMIT 1000)
  UNION ALL -- and the keys of parked jobs (their keys were full: limit.rs)
  SELECT * FROM (SELECT limit_key FROM alk_jobs WHERE queue = ?1 AND state = 'parked' LIMIT 1000));

-- Parks one pending job stepped over because its key is at its running
-- limit (limit.rs).
-- name: limit_park
UPDATE alk_jobs SET state = 'parked' WHERE id = ?1 AND state = 'pending';

-- A job of key ?2 left 'running' at ?3: as many of the key's parked jobs as
-- it has room for now go back into claim order.
-- name: limit_unpark
UPDATE alk_jobs SET state = 'pending'
WHERE id IN (SELECT p.id FROM alk_jobs p
             WHERE p.queue = ?1 AND p.limit_key = ?2 AND p.state = 'parked'
             ORDER BY p.priority DESC, p.run_at, p.id
             LIMIT coalesce((SELECT max(0, l.key_max_running
                                           - (SELECT count(*) FROM alk_jobs r
                                               WHERE r.queue = ?1 AND r.state = 'running'
                                                 AND r.claim_expires_at > ?3 AND r.limit_key = ?2))
                               FROM alk_queue_limits l WHERE l.queue = ?1 AND l.key_max_running IS NOT NULL), 0));

-- The first ?3 parked jobs of key ?2 back into claim order (its rate
-- window frees a slot).
-- name: limit_unpark_first
UPDATE alk_jobs SET state = 'pending'
WHERE id IN (SELECT p.id FROM alk_jobs p
             WHERE p.queue = ?1 AND p.limit_key = ?2 AND p.state = 'parked'
             ORDER BY p.priority DESC, p.run_at, p.id LIMIT ?3);

-- A key's jobs parked at its rate, until ?3.
-- name: limit_park_key
INSERT INTO alk_parked_keys (queue, limit_key, until) VALUES (?1, ?2, ?3)
ON CONFLICT (queue, limit_key) DO UPDATE SET until = excluded.until;

-- Keys of running jobs whose claim expired by ?2.
-- name: limit_expired_keys
SELECT DISTINCT limit_key FROM alk_jobs
WHERE queue = ?1 AND state = 'running' AND claim_expires_at <= ?2 AND limit_key IS NOT NULL;

-- Keys parked at their rate whose time came.
-- name: limit_parked_keys_due
SELECT limit_key FROM alk_parked_keys WHERE queue = ?1 AND until <= ?2 ORDER BY limit_key;

-- Whether key ?2 still has parked jobs.
-- name: limit_parked_any
SELECT 1 FROM alk_jobs WHERE queue = ?1 AND limit_key = ?2 AND state = 'parked' LIMIT 1;

-- name: limit_park_key_until
UPDATE alk_parked_keys SET until = ?3 WHERE queue = ?1 AND limit_key = ?2;

-- name: limit_park_key_forget
DELETE FROM alk_parked_keys WHERE queue = ?1 AND limit_key = ?2;

-- name: limit_park_keys_forget_all
DELETE FROM alk_parked_keys WHERE queue = ?1;

-- Every parked job of the queue back into claim order (its key's running
-- limit changed).
-- name: limit_unpark_all
UPDATE alk_jobs SET state = 'pending' WHERE queue = ?1 AND state = 'parked';

-- Claim times of keys that left their window, which claims do not delete
-- once a key goes idle (alk_prune; not counted). A queue's own window
-- (limit_key '') is counted in rate_count: only its claims forget those.
-- name: limit_prune
DELETE FROM alk_claim_times WHERE rowid IN (
  SELECT t.rowid FROM alk_claim_times t LEFT JOIN alk_queue_limits l ON l.queue = t.queue
  WHERE t.limit_key <> '' AND t.claimed_at <= ?1 - coalesce(l.key_rate_per_ms, 0)
  ORDER BY t.claimed_at LIMIT ?2);
