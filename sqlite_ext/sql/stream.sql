-- Stream statements (contract §7, v1.1 §E).

-- The next offset: SQLite has one writer (the call runs in one write
-- transaction), so offsets are dense and commit in order; a rollback takes
-- the offset back with the event. No RETURNING (a temporary table per
-- call): bump the counter, create it at 1 if the stream is new, then insert
-- the event at the counter's value; its id is the new rowid.
-- name: bump_offset
UPDATE alk_streams SET last_offset = last_offset + 1 WHERE stream = ?1;

-- name: first_offset
INSERT INTO alk_streams (stream, last_offset) VALUES (?1, 1);

-- name: publish
INSERT INTO alk_events (stream, "offset", key, payload, created_at)
VALUES (?1, (SELECT last_offset FROM alk_streams WHERE stream = ?1), ?2, ?3, ?4);

-- name: read
SELECT "offset", key, payload, created_at, id FROM alk_events
WHERE stream = ?1 AND "offset" > ?2
ORDER BY "offset" LIMIT ?3;

-- name: stream_opts
SELECT retain_ms, retain_events FROM alk_streams WHERE stream = ?1;

-- name: stream_configure
INSERT INTO alk_streams (stream, last_offset, retain_ms, retain_events) VALUES (?1, 0, ?2, ?3)
ON CONFLICT (stream) DO UPDATE SET retain_ms = excluded.retain_ms, retain_events = excluded.retain_events;

-- The kept offsets (0 and 0 with none).
-- name: stream_span
SELECT coalesce(min("offset"), 0), coalesce(max("offset"), 0) FROM alk_events WHERE stream = ?1;

-- name: save_offset
INSERT INTO alk_offsets (stream, consumer, "offset", updated_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (stream, consumer) DO UPDATE
  SET "offset" = excluded."offset", updated_at = excluded.updated_at
  WHERE excluded."offset" > alk_offsets."offset"
RETURNING "offset";

-- name: get_offset
SELECT "offset" FROM alk_offsets WHERE stream = ?1 AND consumer = ?2;

-- The one way to move an offset backwards (alk_reset_offset).
-- name: reset_offset
INSERT INTO alk_offsets (stream, consumer, "offset", updated_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (stream, consumer) DO UPDATE
  SET "offset" = excluded."offset", updated_at = excluded.updated_at;
