-- Leases with fencing tokens (contract §9). One upsert per call: the row
-- lock serialises racing owners, and the row outlives its release, so every
-- new acquisition gets a larger token than any before for that name.

CREATE OR REPLACE FUNCTION alk_lock_acquire(name text, owner text, ttl_s double precision) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n     text := alkstore.name('lock', name);
  o     text := alkstore.name('owner', owner);
  ttl   bigint := alkstore.arg_ms('ttl_s', ttl_s, true);
  now   timestamptz := clock_timestamp();
  token bigint;
BEGIN
  IF ttl IS NULL THEN
    PERFORM alkstore.raise('ALK05', 'ttl_s must not be NULL');
  END IF;
  INSERT INTO alkstore.locks AS l (name, owner, token, expires_at)
  VALUES (n, o, 1, now + ttl * interval '1 millisecond')
  ON CONFLICT ON CONSTRAINT locks_pkey DO UPDATE
    SET token = CASE WHEN l.owner = excluded.owner AND l.expires_at > now THEN l.token ELSE l.token + 1 END,
        owner = excluded.owner, expires_at = excluded.expires_at
    WHERE l.owner IS NULL OR l.expires_at <= now OR l.owner = excluded.owner
  RETURNING l.token INTO token;
  RETURN token; -- NULL: another owner holds an unexpired lease
END $$;

CREATE OR REPLACE FUNCTION alk_lock_renew(name text, owner text, ttl_s double precision) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n   text := alkstore.name('lock', name);
  o   text := alkstore.name('owner', owner);
  ttl bigint := alkstore.arg_ms('ttl_s', ttl_s, true);
  now timestamptz := clock_timestamp();
BEGIN
  IF ttl IS NULL THEN
    PERFORM alkstore.raise('ALK05', 'ttl_s must not be NULL');
  END IF;
  UPDATE alkstore.locks l SET expires_at = now + ttl * interval '1 millisecond'
   WHERE l.name = n AND l.owner = o AND l.expires_at > now;
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_lock_release(name text, owner text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n text := alkstore.name('lock', name);
  o text := alkstore.name('owner', owner);
BEGIN
  UPDATE alkstore.locks l SET owner = NULL, expires_at = '-infinity'
   WHERE l.name = n AND l.owner = o AND l.expires_at > clock_timestamp();
  RETURN FOUND;
END $$;
