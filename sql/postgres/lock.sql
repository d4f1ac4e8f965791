-- Leases with fencing tokens (contract §9). The row outlives its release,
-- so every new acquisition gets a larger token than any before for that name.

-- Acquiring never waits and never leaves a lock behind when it fails
-- (contract v1.1 §A5): a per-name advisory lock admits one acquirer at a
-- time — the others get NULL at once — and a failed attempt reads the row
-- without locking it, so the holder's renew and release are never delayed.
-- A successful acquisition keeps the advisory lock until its transaction
-- ends: the lease is usable once that commits.
CREATE OR REPLACE FUNCTION alk_lock_acquire(name text, owner text, ttl_s double precision) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n     text := alkstore.name('lock', name);
  o     text := alkstore.name('owner', owner);
  ttl   bigint := alkstore.arg_ms('ttl_s', ttl_s, true);
  key   bigint := hashtextextended('alkstore.lock:' || n, 0);
  cur   record;
  now   timestamptz;
  tok   bigint;
BEGIN
  IF ttl IS NULL THEN
    PERFORM alkstore.raise('ALK05', 'ttl_s must not be NULL');
  END IF;
  -- Session level for now, so that a failed attempt can let go of it. A
  -- session lock outlives a rollback: on any error it is let go of below.
  IF NOT pg_try_advisory_lock(key) THEN
    RETURN NULL; -- another transaction is acquiring this name
  END IF;
  BEGIN
    SELECT l.owner, l.token, l.expires_at INTO cur FROM alkstore.locks l WHERE l.name = n;
    IF FOUND THEN
      IF cur.owner IS NOT NULL AND cur.owner <> o AND cur.expires_at > clock_timestamp() THEN
        PERFORM pg_advisory_unlock(key);
        RETURN NULL; -- held by another owner: no row lock taken
      END IF;
      -- Free, expired or ours: lock the row, unless the holder is renewing or
      -- releasing it right now (then it is alive: do not wait for it).
      SELECT l.owner, l.token, l.expires_at INTO cur FROM alkstore.locks l WHERE l.name = n
         FOR UPDATE SKIP LOCKED;
      now := clock_timestamp(); -- read after every lock is held
      IF NOT FOUND OR (cur.owner IS NOT NULL AND cur.owner <> o AND cur.expires_at > now) THEN
        PERFORM pg_advisory_unlock(key);
        RETURN NULL;
      END IF;
      tok := CASE WHEN cur.owner = o AND cur.expires_at > now THEN cur.token ELSE cur.token + 1 END;
      UPDATE alkstore.locks l SET owner = o, token = tok,
             expires_at = now + ttl * interval '1 millisecond'
       WHERE l.name = n;
    ELSE
      now := clock_timestamp();
      INSERT INTO alkstore.locks AS l (name, owner, token, expires_at)
      VALUES (n, o, 1, now + ttl * interval '1 millisecond')
      ON CONFLICT ON CONSTRAINT locks_pkey DO NOTHING
      RETURNING l.token INTO tok;
      IF tok IS NULL THEN
        PERFORM pg_advisory_unlock(key);
        RETURN NULL; -- created meanwhile by a transaction this snapshot does not see
      END IF;
    END IF;
    -- Keep the name until this transaction ends: transaction level from here.
    PERFORM pg_advisory_xact_lock(key);
    PERFORM pg_advisory_unlock(key);
  EXCEPTION WHEN OTHERS OR query_canceled THEN
    PERFORM pg_advisory_unlock(key);
    RAISE;
  END;
  RETURN tok;
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
