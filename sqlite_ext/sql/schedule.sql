-- Schedules (contract v1.1 §F), see sqlite_ext/src/schedule.rs.

-- Replacing keeps last_run_at: the occurrence last enqueued never fires again.
-- An unchanged spec keeps next_run_at too: re-applying a schedule at start-up
-- must not skip the occurrence that is due. Returns the next fire time kept.
-- name: schedule_put
INSERT INTO alk_schedules (name, queue, spec, payload, opts, next_run_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (name) DO UPDATE SET
  queue = excluded.queue, spec = excluded.spec, payload = excluded.payload, opts = excluded.opts,
  next_run_at = CASE WHEN spec = excluded.spec THEN next_run_at ELSE excluded.next_run_at END
RETURNING next_run_at;

-- name: schedule_delete
DELETE FROM alk_schedules WHERE name = ?1;

-- name: schedules_all
SELECT name, queue, spec, payload, opts, next_run_at, last_run_at FROM alk_schedules ORDER BY name;

-- name: schedules_due
SELECT name, queue, spec, payload, opts, last_run_at FROM alk_schedules WHERE next_run_at <= ?1 ORDER BY name;

-- name: schedule_ran
UPDATE alk_schedules SET last_run_at = ?2, next_run_at = ?3 WHERE name = ?1;
