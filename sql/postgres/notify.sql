-- Notifications (contract §8), built on pg_notify so that any PostgreSQL
-- client receives them with plain LISTEN, after commit, in commit order.
--
-- Channel mapping: alkstore channel C is the PostgreSQL channel 'alk:' || C,
-- or 'alk#' || md5(C) when that would exceed PostgreSQL's 63-byte channel
-- names. alk_channel(C) returns it; LISTEN quotes it as an identifier:
--   SELECT format('LISTEN %I', alk_channel('orders'));  -- LISTEN "alk:orders"

CREATE OR REPLACE FUNCTION alk_channel(channel text) RETURNS text
LANGUAGE sql IMMUTABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN octet_length(c.n) <= 59 THEN 'alk:' || c.n ELSE 'alk#' || md5(c.n) END
    FROM (SELECT alkstore.name('channel', channel) AS n) c
$$;

-- A payload's compact JSON text (no whitespace outside strings): what the
-- notification limit is measured on, on both engines (contract v1.1 §G),
-- and what is sent when jsonb's own text (a space after every ':' and ',')
-- would be over the limit. Only used for payloads near the limit.
CREATE OR REPLACE FUNCTION alkstore.compact(p jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN CASE jsonb_typeof(p)
    WHEN 'object' THEN '{' || coalesce((
      SELECT string_agg(to_json(e.key)::text || ':' || alkstore.compact(e.value), ',' ORDER BY e.n)
        FROM jsonb_each(p) WITH ORDINALITY AS e(key, value, n)), '') || '}'
    WHEN 'array' THEN '[' || coalesce((
      SELECT string_agg(alkstore.compact(a.value), ',' ORDER BY a.n)
        FROM jsonb_array_elements(p) WITH ORDINALITY AS a(value, n)), '') || ']'
    ELSE p::text END;
END $$;

CREATE OR REPLACE FUNCTION alk_notify(channel text, payload jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ch   text := alkstore.name('channel', channel);
  text_ text := alkstore.payload('payload', payload)::text;
BEGIN
  IF octet_length(text_) >= alkstore.max_notify_bytes() THEN
    text_ := alkstore.compact(payload);
    IF octet_length(text_) >= alkstore.max_notify_bytes() THEN
      PERFORM alkstore.raise('ALK04', format(
        'notification payload must be shorter than %s bytes of compact JSON, got %s',
        alkstore.max_notify_bytes(), octet_length(text_)));
    END IF;
  END IF;
  PERFORM pg_notify(CASE WHEN octet_length(ch) <= 59 THEN 'alk:' || ch ELSE 'alk#' || md5(ch) END, text_);
END $$;
