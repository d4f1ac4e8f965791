-- Pruning (contract v1.1 §C5): each statement deletes at most ?2 rows,
-- oldest first, whose retention ended before ?1.

-- Dead jobs past their retention, across queues (alk_jobs_prune).
-- name: prune_dead
DELETE FROM alk_jobs WHERE id IN (
  SELECT id FROM alk_jobs WHERE state = 'dead' AND prune_at IS NOT NULL AND prune_at <= ?1
  ORDER BY prune_at LIMIT ?2)
RETURNING id;

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

-- Streams with a retention (v1.1 §E), after ?1 ('' for the first).
-- name: prune_next_stream
SELECT stream, last_offset, retain_ms, retain_events, stamped_offset FROM alk_streams
WHERE stream > ?1 AND (retain_ms IS NOT NULL OR retain_events IS NOT NULL)
ORDER BY stream LIMIT 1;

-- Events of stream ?2 from after offset ?3 up to ?4, seen by this prune for
-- the first time: readable by now (?1). Offsets are dense, so this is at
-- most ?4 - ?3 rows, through the (stream, offset) index.
-- name: prune_stamp_events
UPDATE alk_events SET readable_at = ?1 WHERE stream = ?2 AND "offset" > ?3 AND "offset" <= ?4;

-- name: prune_stamped
UPDATE alk_streams SET stamped_offset = ?2 WHERE stream = ?1;

-- The oldest events of stream ?3 (at most ?2) that are past its retention:
-- readable at or before ?1 (unstamped ones are not, unless they are from
-- before schema 3: at or below ?5, counted from created_at) or at an offset
-- at or below ?4. Only a prefix goes, so a read after the pruned range
-- starts at the first kept event.
-- name: prune_events
DELETE FROM alk_events WHERE stream = ?3 AND "offset" <= (
  SELECT max("offset") FROM (
    SELECT "offset", min(since <= ?1 OR "offset" <= ?4) OVER (ORDER BY "offset") AS gone
    FROM (SELECT "offset",
                 coalesce(readable_at, CASE WHEN "offset" <= ?5 THEN created_at END, 9223372036854775807) AS since
            FROM alk_events WHERE stream = ?3 ORDER BY "offset" LIMIT ?2))
  WHERE gone);
