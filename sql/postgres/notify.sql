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

CREATE OR REPLACE FUNCTION alk_notify(channel text, payload jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ch   text := alkstore.name('channel', channel);
  text_ text := alkstore.payload('payload', payload)::text;
BEGIN
  IF octet_length(text_) >= 8000 THEN
    PERFORM alkstore.raise('ALK04', format(
      'notification payload must be shorter than 8000 bytes, got %s', octet_length(text_)));
  END IF;
  PERFORM pg_notify(CASE WHEN octet_length(ch) <= 59 THEN 'alk:' || ch ELSE 'alk#' || md5(ch) END, text_);
END $$;
