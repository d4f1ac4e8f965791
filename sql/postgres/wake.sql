-- Wake-ups (contract §10). Workers LISTEN on a channel; writers notify it
-- only while some session is registered as waiting for that queue or
-- stream, because NOTIFY takes a cluster-wide lock at commit that would
-- otherwise serialise every enqueuing transaction.
--
-- Channels:  alkstore_jobs    payload: the queue name (an outbox's is
--                             __alkstore_outbox:{outbox})
--            alkstore_events  payload: the stream name
-- Names of 7900 bytes or more are sent as 'md5:' || md5(name).
-- PostgreSQL delivers one notification per channel and payload per
-- transaction, however many jobs or events it wrote.

CREATE OR REPLACE FUNCTION alkstore.wake_payload(name text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN octet_length(name) < 7900 THEN name ELSE 'md5:' || md5(name) END
$$;

-- The advisory lock that orders an enqueue's check for waiters against a
-- new registration for the same queue or stream (see wake and wait_on).
CREATE OR REPLACE FUNCTION alkstore.wake_key(kind "char", name text) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtextextended('alkstore.wake:' || kind::text || ':' || name, 0) $$;

-- Called by enqueue and publish: notify if anyone waits (contract v1.1
-- §A3: a session registered before this transaction commits is notified).
--  * A snapshot older than the statement (REPEATABLE READ, SERIALIZABLE)
--    cannot see a registration made after it: such a transaction always
--    notifies.
--  * Otherwise the check holds the key's advisory lock in share mode until
--    this transaction ends, never waiting for it: a new registration takes
--    it exclusively, so it completes only after this commit, and its first
--    claim sees this job. If a registration holds it or waits for it now,
--    notify.
--  * A registration counts only while its session is connected to this
--    database: not after the session ended, nor after a restore elsewhere.
CREATE OR REPLACE FUNCTION alkstore.wake(kind "char", name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('transaction_isolation') = 'read committed'
     AND pg_try_advisory_xact_lock_shared(alkstore.wake_key(kind, name)) THEN
    -- Usually nobody waits: a plain probe first (the statement with the
    -- session check costs twice as much to start, even when it finds no row).
    PERFORM 1 FROM alkstore.waiters w
     WHERE w.kind = wake.kind AND w.name = wake.name AND w.expires_at > clock_timestamp()
     LIMIT 1;
    IF NOT FOUND THEN
      RETURN;
    END IF;
    PERFORM 1 FROM alkstore.waiters w
     WHERE w.kind = wake.kind AND w.name = wake.name AND w.expires_at > clock_timestamp()
       AND EXISTS (SELECT FROM pg_stat_get_activity(w.pid) a
                    WHERE a.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()))
     LIMIT 1;
    IF NOT FOUND THEN
      RETURN;
    END IF;
  END IF;
  PERFORM pg_notify(CASE kind WHEN 'q' THEN 'alkstore_jobs' ELSE 'alkstore_events' END,
                    alkstore.wake_payload(name));
END $$;

-- Registers this session as waiting on (kind, name) for ttl and LISTENs on
-- the channel; returns the channel. Register, then claim (or read), then
-- wait: work committed after the registration is announced, work committed
-- before it is found by the claim. A new registration (not a renewal) first
-- waits for the transactions that checked for waiters before it and have
-- not committed yet (see wake): their work is found by that claim.
CREATE OR REPLACE FUNCTION alkstore.wait_on(kind "char", name text, ttl_s double precision) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  ttl_ms  bigint := coalesce(alkstore.arg_ms('ttl_s', ttl_s, true), 60000);
  channel text := CASE kind WHEN 'q' THEN 'alkstore_jobs' ELSE 'alkstore_events' END;
  renewal boolean;
BEGIN
  -- At most max_wait_ttl_s() per call (contract v1.1 §A3): no registration
  -- outlives its session by long, whatever a caller asks.
  IF ttl_s > alkstore.max_wait_ttl_s() THEN
    PERFORM alkstore.raise('ALK05', format('ttl_s must be at most %s seconds, got %s',
      alkstore.max_wait_ttl_s(), ttl_s));
  END IF;
  EXECUTE format('LISTEN %I', channel);
  renewal := EXISTS (SELECT FROM alkstore.waiters w
                      WHERE w.kind = wait_on.kind AND w.name = wait_on.name
                        AND w.pid = pg_backend_pid() AND w.expires_at > clock_timestamp());
  INSERT INTO alkstore.waiters AS w (kind, name, pid, expires_at)
  VALUES (kind, name, pg_backend_pid(), clock_timestamp() + ttl_ms * interval '1 millisecond')
  ON CONFLICT ON CONSTRAINT waiters_pkey DO UPDATE SET expires_at = excluded.expires_at;
  IF NOT renewal THEN
    PERFORM pg_advisory_xact_lock(alkstore.wake_key(kind, name));
  END IF;
  -- Registrations of sessions that stopped renewing them.
  DELETE FROM alkstore.waiters w WHERE w.expires_at < clock_timestamp() - interval '1 minute';
  RETURN channel;
END $$;

-- Ends this session's registration.
CREATE OR REPLACE FUNCTION alkstore.wait_off(kind "char", name text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM alkstore.waiters w WHERE w.kind = wait_off.kind AND w.name = wait_off.name AND w.pid = pg_backend_pid();
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_listen_queue(queue text, ttl_s double precision DEFAULT 60) RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT alkstore.wait_on('q', alkstore.name('queue', queue), ttl_s)
$$;

CREATE OR REPLACE FUNCTION alk_listen_outbox(outbox text, ttl_s double precision DEFAULT 60) RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT alkstore.wait_on('q', alkstore.outbox_prefix() || alkstore.name('outbox', outbox), ttl_s)
$$;

CREATE OR REPLACE FUNCTION alk_listen_stream(stream text, ttl_s double precision DEFAULT 60) RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT alkstore.wait_on('s', alkstore.name('stream', stream), ttl_s)
$$;

CREATE OR REPLACE FUNCTION alk_unlisten_queue(queue text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT alkstore.wait_off('q', alkstore.name('queue', queue))
$$;

CREATE OR REPLACE FUNCTION alk_unlisten_outbox(outbox text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT alkstore.wait_off('q', alkstore.outbox_prefix() || alkstore.name('outbox', outbox))
$$;

CREATE OR REPLACE FUNCTION alk_unlisten_stream(stream text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT alkstore.wait_off('s', alkstore.name('stream', stream))
$$;
