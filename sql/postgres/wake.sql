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

-- The advisory locks of a queue or stream are (class, key): the name's
-- hashtext for the ordering lock, its bucket (wait_key) for the waiting
-- lock. Callers pass kind as a constant, so the class is folded when the
-- statement is planned and each lock costs one hash at run time.
-- The ordering lock: orders an enqueue's check for waiters against a new
-- registration for the same queue or stream (see wake and wait_on).
CREATE OR REPLACE FUNCTION alkstore.wake_class(kind "char") RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext('alkstore.wake:' || kind::text) $$;

-- The waiting lock: a registered session holds it in share mode, at session
-- level, from before its registration commits until the session ends (or a
-- later registration finds it unneeded), so an enqueuer that can take it
-- exclusively knows that no other session of this database is registered,
-- without reading alkstore.waiters. It is per bucket of names, not per
-- name (wait_key): a session holds at most wait_buckets() of them per kind
-- however many names it waits on (one session listening on 20,000 names
-- filled the cluster's lock table). A bucket held for another name only
-- sends an enqueuer to read the table (wake_check).
CREATE OR REPLACE FUNCTION alkstore.wait_class(kind "char") RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext('alkstore.wait:' || kind::text) $$;

CREATE OR REPLACE FUNCTION alkstore.wait_key(name text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext(name) & (alkstore.wait_buckets() - 1) $$;

-- wake when a session may be registered (or another enqueuer is trying
-- the waiting lock this instant, or this session has not yet looked for
-- registrations from before the upgrade): read the registrations.
--  * A snapshot older than the statement (REPEATABLE READ, SERIALIZABLE)
--    cannot see a registration made after it: such a transaction always
--    notifies.
--  * Otherwise the check holds the ordering lock in share mode until this
--    transaction ends, never waiting for it: a new registration takes it
--    exclusively, so it completes only after this commit, and its first
--    claim sees this job. If a registration holds it or waits for it now,
--    notify.
--  * A registration counts only while its session is connected to this
--    database: not after the session ended, nor after a restore elsewhere.
CREATE OR REPLACE FUNCTION alkstore.wake_check(kind "char", name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(current_setting('alkstore.wake3', true), '') = ''
     AND NOT EXISTS (SELECT FROM alkstore.meta m WHERE m.key = 'waiters_before_upgrade_until'
                                                  AND to_timestamp(m.value::float8) > clock_timestamp()) THEN
    PERFORM set_config('alkstore.wake3', 'fast', false); -- see wake
  END IF;
  IF current_setting('transaction_isolation') = 'read committed'
     AND pg_try_advisory_xact_lock_shared(alkstore.wake_class(kind), hashtext(name)) THEN
    -- A plain probe first (the statement with the session check costs
    -- twice as much to start, even when it finds no row).
    PERFORM 1 FROM alkstore.waiters w
     WHERE w.kind = wake_check.kind AND w.name = wake_check.name AND w.expires_at > clock_timestamp()
     LIMIT 1;
    IF NOT FOUND THEN
      RETURN;
    END IF;
    PERFORM 1 FROM alkstore.waiters w
     WHERE w.kind = wake_check.kind AND w.name = wake_check.name AND w.expires_at > clock_timestamp()
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

-- Called by enqueue and publish: notify if anyone waits (contract v1.1
-- §A3: a session registered before this transaction commits is notified).
-- The common case -- nobody waits -- is one inlined expression, no
-- statement. Once wake_check has found that no registration from before
-- the upgrade to 0.2.0 is left, and unless this session is itself
-- registered (its own locks never conflict with it), the session's
-- alkstore.wake setting is 'fast'. Then: take the ordering lock (wake_class)
-- in share mode until this transaction ends, never waiting for it, and try
-- the waiting lock (wait_class) exclusively, letting go of it at once. Got
-- both: a registration that committed before now holds the waiting lock,
-- and one made after it waits for this commit (wait_on), so its first
-- claim sees this job. Anything else is decided by wake_check. The nested
-- CASE fixes the order: the waiting lock is tried with the ordering lock held.
CREATE OR REPLACE FUNCTION alkstore.wake(kind "char", name text) RETURNS void
LANGUAGE sql AS $$
  SELECT CASE WHEN CASE WHEN current_setting('alkstore.wake3', true) = 'fast'
                             AND pg_try_advisory_xact_lock_shared(alkstore.wake_class(kind), hashtext(name))
                        THEN pg_try_advisory_lock(alkstore.wait_class(kind), alkstore.wait_key(name)) END
              THEN CASE WHEN pg_advisory_unlock(alkstore.wait_class(kind), alkstore.wait_key(name)) THEN NULL::void END
              ELSE alkstore.wake_check(kind, name) END
$$;

-- wake, then id: for an INSERT's RETURNING clause, where the check costs no
-- statement of its own (a PERFORM costs an enqueue 2%). Both branches give
-- id; the CASE only orders the wake-up before it.
CREATE OR REPLACE FUNCTION alkstore.wake(kind "char", name text, id bigint) RETURNS bigint
LANGUAGE sql AS $$
  SELECT CASE WHEN alkstore.wake(kind, name) IS NULL THEN id ELSE id END
$$;

-- Whether this session holds the waiting lock of (kind, name)'s bucket.
CREATE OR REPLACE FUNCTION alkstore.holds_wait_lock(kind "char", name text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (
    SELECT FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.mode = 'ShareLock' AND l.granted
       AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND l.classid = (alkstore.wait_class(kind)::bigint & 4294967295)::oid
       AND l.objid = alkstore.wait_key(name)::oid
       AND l.objsubid = 2) -- the two-key form
$$;

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
  -- A renewal: a live registration whose waiting lock this session holds.
  renewal := alkstore.holds_wait_lock(kind, name)
             AND EXISTS (SELECT FROM alkstore.waiters w
                          WHERE w.kind = wait_on.kind AND w.name = wait_on.name
                            AND w.pid = pg_backend_pid() AND w.expires_at > clock_timestamp());
  IF NOT renewal THEN
    -- Waiting locks no live registration needs any more (unlistened,
    -- expired, rolled back) go now (but see wait_off).
    PERFORM alkstore.wait_locks_release();
  END IF;
  -- The waiting lock (see wake), taken before the registration commits and
  -- kept, once, until the session ends or a later registration finds it
  -- ended (wait_locks_release). A lock held for a registration that
  -- ended only makes enqueuers read the table.
  IF NOT alkstore.holds_wait_lock(kind, name) THEN
    PERFORM pg_advisory_lock_shared(alkstore.wait_class(kind), alkstore.wait_key(name));
  END IF;
  -- This session's own enqueues must read the table (see wake). (After a
  -- RESET ALL they skip it: only its own enqueues no longer wake it.)
  PERFORM set_config('alkstore.wake3', 'registered', false);
  INSERT INTO alkstore.waiters AS w (kind, name, pid, expires_at)
  VALUES (kind, name, pg_backend_pid(), clock_timestamp() + ttl_ms * interval '1 millisecond')
  ON CONFLICT ON CONSTRAINT waiters_pkey DO UPDATE SET expires_at = excluded.expires_at;
  IF NOT renewal THEN
    PERFORM pg_advisory_xact_lock(alkstore.wake_class(kind), hashtext(name));
  END IF;
  -- Registrations of sessions that stopped renewing them.
  DELETE FROM alkstore.waiters w WHERE w.expires_at < clock_timestamp() - interval '1 minute';
  RETURN channel;
END $$;

-- Lets go of this session's waiting locks that no live registration of it
-- needs: ended by wait_off in an earlier transaction, expired, or made in a
-- transaction that rolled back. Not in a transaction that ran wait_off: a
-- rollback would bring back the registration its lock was let go for, and
-- enqueuers would skip it (it goes at the next registration instead).
CREATE OR REPLACE FUNCTION alkstore.wait_locks_release() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  l record;
BEGIN
  IF current_setting('alkstore.wait_off', true) = 'on' THEN
    RETURN;
  END IF;
  FOR l IN
    SELECT k.classid, k.objid FROM pg_locks k
     WHERE k.locktype = 'advisory' AND k.pid = pg_backend_pid() AND k.mode = 'ShareLock' AND k.granted
       AND k.objsubid = 2
       AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
       AND k.classid IN ((alkstore.wait_class('q')::bigint & 4294967295)::oid,
                         (alkstore.wait_class('s')::bigint & 4294967295)::oid)
    EXCEPT
    SELECT (alkstore.wait_class(w.kind)::bigint & 4294967295)::oid, alkstore.wait_key(w.name)::oid
      FROM alkstore.waiters w
     WHERE w.pid = pg_backend_pid() AND w.expires_at > clock_timestamp()
  LOOP
    -- Back from the lock table's unsigned class to the signed key (the
    -- bucket is small and positive).
    PERFORM pg_advisory_unlock_shared((l.classid::bigint - CASE WHEN l.classid::bigint >= 2147483648 THEN 4294967296 ELSE 0 END)::integer,
                                      l.objid::bigint::integer);
  END LOOP;
END $$;

-- Ends this session's registration. The waiting lock stays until a later
-- registration in another transaction (see wait_locks_release): let go
-- before this transaction commits, it would let enqueuers skip a
-- registration that a rollback keeps.
CREATE OR REPLACE FUNCTION alkstore.wait_off(kind "char", name text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('alkstore.wait_off', 'on', true);
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
