-- Giving a claim back without spending an attempt (contract v1.3 §Q).

-- ?1 job, ?2 worker, ?3 now, ?4 run_at, ?5 'pending', or 'scheduled' when
-- ?4 lies ahead (schema.sql). Only an unexpired claim of this worker; the
-- claim that took it no longer counts, and last_error stays: a release is
-- no error. A group head stays its group's head (nothing hands it over).
-- name: release_claim
UPDATE alk_jobs
SET state = ?5, run_at = ?4, attempts = max(attempts - 1, 0), claimed_by = NULL, claim_expires_at = NULL
WHERE id = ?1 AND state = 'running' AND claimed_by = ?2 AND claim_expires_at > ?3
RETURNING queue, limit_key;
