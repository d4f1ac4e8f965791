-- Stream statements (contract §7).

-- Dense offsets: max + 1 is safe because SQLite has a single writer (the
-- call runs in one write transaction) and (stream, offset) is unique; a
-- rollback takes the row and its offset back.
-- name: next_offset
SELECT coalesce(max("offset"), 0) + 1 FROM alk_events WHERE stream = ?1;

-- name: publish
INSERT INTO alk_events (stream, "offset", key, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5);

-- name: read
SELECT "offset", key, payload, created_at FROM alk_events
WHERE stream = ?1 AND "offset" > ?2
ORDER BY "offset" LIMIT ?3;

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
