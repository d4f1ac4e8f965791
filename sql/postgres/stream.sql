-- Streams (contract §7). The stream's row in alkstore.streams is the
-- per-stream publish lock: a publisher holds it until commit, so offsets
-- are dense (a rollback gives its offset back) and commit in offset order
-- (a reader that has read up to N never later sees a new event <= N).

CREATE OR REPLACE FUNCTION alk_publish(stream text, payload jsonb, key text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s      text := alkstore.name('stream', stream);
  p      jsonb := alkstore.payload('payload', payload);
  offset_ bigint;
BEGIN
  INSERT INTO alkstore.streams AS t (stream, last_offset) VALUES (s, 1)
  ON CONFLICT ON CONSTRAINT streams_pkey DO UPDATE SET last_offset = t.last_offset + 1
  RETURNING t.last_offset INTO offset_;
  INSERT INTO alkstore.events (stream, "offset", key, payload, created_at)
  VALUES (s, offset_, key, p, clock_timestamp());
  PERFORM alkstore.wake('s', s);
  RETURN offset_;
END $$;

CREATE OR REPLACE FUNCTION alk_read(stream text, after_offset bigint, max_events integer)
RETURNS TABLE ("offset" bigint, key text, payload jsonb, created_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
  s text := alkstore.name('stream', stream);
  n integer := alkstore.batch('max_events', max_events);
  a bigint := alkstore.offset_arg('after_offset', after_offset);
BEGIN
  RETURN QUERY
  SELECT e."offset", e.key, e.payload, e.created_at FROM alkstore.events e
   WHERE e.stream = s AND e."offset" > a
   ORDER BY e."offset" LIMIT n;
END $$;

CREATE OR REPLACE FUNCTION alk_save_offset(stream text, consumer text, "offset" bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s text := alkstore.name('stream', stream);
  c text := alkstore.name('consumer', consumer);
  o bigint := alkstore.offset_arg('offset', $3);
BEGIN
  IF o = 0 THEN
    RETURN false; -- every consumer starts at 0: nothing to advance
  END IF;
  INSERT INTO alkstore.offsets AS t (stream, consumer, "offset", updated_at)
  VALUES (s, c, o, clock_timestamp())
  ON CONFLICT ON CONSTRAINT offsets_pkey DO UPDATE
    SET "offset" = excluded."offset", updated_at = excluded.updated_at
    WHERE excluded."offset" > t."offset";
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_get_offset(stream text, consumer text) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s text := alkstore.name('stream', stream);
  c text := alkstore.name('consumer', consumer);
BEGIN
  RETURN coalesce((SELECT t."offset" FROM alkstore.offsets t WHERE t.stream = s AND t.consumer = c), 0);
END $$;

-- The one way to move an offset backwards, or past an event that cannot be
-- processed (contract v1.1 §D); admin only.
CREATE OR REPLACE FUNCTION alk_reset_offset(stream text, consumer text, "offset" bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s text := alkstore.name('stream', stream);
  c text := alkstore.name('consumer', consumer);
  o bigint := alkstore.offset_arg('offset', $3);
BEGIN
  INSERT INTO alkstore.offsets AS t (stream, consumer, "offset", updated_at)
  VALUES (s, c, o, clock_timestamp())
  ON CONFLICT ON CONSTRAINT offsets_pkey DO UPDATE
    SET "offset" = excluded."offset", updated_at = excluded.updated_at;
  RETURN true;
END $$;
