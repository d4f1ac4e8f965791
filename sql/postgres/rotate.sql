-- The rotation of the job table's hot slots (schema.sql; docs/decisions.md,
-- "The reshape, built"). A job written due goes to the hot slot of the 3 s
-- period it is written in (alkstore.hot_slot: periods since the epoch,
-- modulo 2). Once a slot's period has passed, its jobs are claimed and
-- acked within moments; the rotation then moves the finished ones (dead,
-- completed) to the cold slot and truncates the slot when no job is left
-- in it. A truncated slot's index entries are gone at once, where a deleted
-- job's would stay while any transaction holds back vacuum (a transaction
-- open for minutes, an idle one holding an XID): claims walk those entries
-- on every call.
--
-- TRUNCATE is not MVCC-safe: a snapshot taken before it sees the slot
-- empty afterwards, including the jobs deleted since the snapshot. So a
-- slot is truncated only when no snapshot can still see a row of it. It
-- is first seen empty while no transaction that began before the slot's
-- period ended holds a snapshot or a writer's lock on it (every row of the
-- slot was written in that period); it is truncated at a later call before
-- its next period, under its exclusive lock, if it is still empty and no
-- transaction holding a snapshot began before that first look. A pg_dump
-- (one snapshot from its start), a REPEATABLE READ transaction or an open
-- cursor older than that holds the slot back until it ends; a session idle
-- in its transaction for over 10 s does not (alkstore.snapshots_since).

-- The hot slot of a job written due at t: its 3 s period since the epoch,
-- modulo 2. (Inlined where it is called, under the caller's search_path.)
CREATE OR REPLACE FUNCTION alkstore.hot_slot(t timestamptz) RETURNS smallint
LANGUAGE sql STABLE AS $$
  SELECT (pg_catalog.floor(pg_catalog.date_part('epoch', t) / 3)::bigint % 2)::smallint
$$;

-- Called by alk_sweep (the maintenance worker's sweep and the facade's
-- workers call it every second: a slot's period leaves three calls, one
-- to see it empty and one to truncate it). Returns the slots it truncated:
-- at most one a call, whose exclusive lock it then holds to its commit.
-- The setting alkstore.rotation = off (for a session, a role or the
-- database: ALTER DATABASE ... SET) turns it off; it takes what a boolean
-- setting takes (off, false, no, 0, …), and any other value is an error
-- (ALK05) that rolls back the sweep calling it.
CREATE OR REPLACE FUNCTION alkstore.rotate() RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  e       bigint := floor(date_part('epoch', clock_timestamp()) / 3)::bigint; -- the period now
  k       integer := (e + 1) % 2; -- the slot not written to now
  part    text := format('alkstore.jobs_slot%s', k);
  mark    alkstore.rotation;
  ended   timestamptz := to_timestamp(e * 3); -- the end of its period
  got     boolean;
  timeout text := current_setting('lock_timeout');
  setting text := current_setting('alkstore.rotation', true);
  moved   bigint;
BEGIN
  IF coalesce(btrim(setting), '') <> '' THEN
    BEGIN
      got := setting::boolean;
    EXCEPTION WHEN invalid_text_representation THEN
      PERFORM alkstore.raise('ALK05', format('alkstore.rotation must be on or off, got %s',
                                             alkstore.quote(setting)));
    END;
    IF NOT got THEN
      RETURN 0;
    END IF;
  END IF;
  -- Only in a transaction of its own, at READ COMMITTED: the lock it takes
  -- is held to its commit (claims wait behind it), and its checks must
  -- read what is committed now. A transaction of its own is a lone
  -- statement's (alkstore.statement_alone: sequencer.sql, and its plain
  -- stand-in), or one a procedure began after a COMMIT, as alk_maintain's
  -- (maintain.sql: it began after its CALL statement did); not that of a
  -- BEGIN … COMMIT block.
  IF NOT (transaction_timestamp() > statement_timestamp() OR alkstore.statement_alone())
     OR current_setting('transaction_isolation') <> 'read committed'
     OR NOT pg_try_advisory_xact_lock(hashtext('alkstore.rotate'), 1) THEN
    RETURN 0;
  END IF;
  -- A delete and an insert, not an UPDATE of slot: a statement that meets
  -- the old row then finds it deleted, never "moved to another partition"
  -- (40001). The calls that write finished jobs by id or by state look
  -- again when they find nothing (alk_requeue_dead, alk_delete_job) or
  -- make a second pass (alk_purge, alk_requeue_dead_all): by then the move
  -- has committed, and the job is in the cold slot. Rows another
  -- transaction holds wait for a later call.
  EXECUTE format($m$
    WITH m AS (
      DELETE FROM %1$s j
       WHERE j.id IN (SELECT f.id FROM %1$s f WHERE f.state IN ('dead', 'completed')
                       LIMIT 1000 FOR UPDATE SKIP LOCKED)
      RETURNING j.*)
    INSERT INTO alkstore.jobs OVERRIDING SYSTEM VALUE
    SELECT (jsonb_populate_record(NULL::alkstore.jobs, to_jsonb(m) || '{"slot": 2}')).* FROM m$m$, part);
  -- Moved some: the slot looks emptier to this transaction than it is to
  -- the others until this one commits, so it is neither marked empty nor
  -- truncated now (a later call, in a later transaction, looks again; and
  -- alk_sweep calls this only in a transaction that wrote nothing before).
  GET DIAGNOSTICS moved = ROW_COUNT;
  IF moved > 0 THEN
    RETURN 0;
  END IF;
  -- An empty file: nothing written since it was last truncated (each
  -- TRUNCATE makes every session plan its job statements again).
  IF pg_relation_size(part::regclass) = 0 THEN
    RETURN 0;
  END IF;
  EXECUTE format('SELECT EXISTS (SELECT FROM %s)', part) INTO got;
  SELECT * INTO mark FROM alkstore.rotation r WHERE r.slot = k;
  IF got THEN
    DELETE FROM alkstore.rotation r WHERE r.slot = k; -- a job is left: look again later
  ELSIF mark.round IS DISTINCT FROM e THEN
    -- First seen empty since its period. Every row written to it came from
    -- a statement of that period: none is still open holding a snapshot or
    -- a lock on it (an insert it may yet commit).
    IF NOT alkstore.snapshots_since(ended) AND NOT alkstore.locked_since(part, ended) THEN
      INSERT INTO alkstore.rotation AS r (slot, round, empty_at) VALUES (k, e, clock_timestamp())
      ON CONFLICT (slot) DO UPDATE SET round = excluded.round, empty_at = excluded.empty_at;
    END IF;
  ELSIF NOT alkstore.snapshots_since(mark.empty_at) THEN
    -- Seen empty before, and every snapshot open now was taken since: none
    -- sees a row of it. Its exclusive lock, waited for 10 ms at a time: a
    -- request waiting longer would stall the claims queued behind it.
    got := false;
    FOR i IN 1..10 LOOP
      BEGIN
        PERFORM set_config('lock_timeout', '10ms', true);
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', part);
        got := true;
        EXIT;
      EXCEPTION WHEN lock_not_available THEN
        NULL;
      END;
    END LOOP;
    PERFORM set_config('lock_timeout', timeout, true);
    IF got THEN
      EXECUTE format('SELECT EXISTS (SELECT FROM %s)', part) INTO got;
      IF NOT got THEN
        EXECUTE format('TRUNCATE %s', part);
      END IF;
      DELETE FROM alkstore.rotation r WHERE r.slot = k;
      RETURN CASE WHEN got THEN 0 ELSE 1 END;
    END IF;
  END IF;
  RETURN 0;
END $$;

-- Whether a transaction that began before t (or a prepared one) holds a
-- lock on the relation under which it may write rows into it (not a
-- reader's, not vacuum's).
CREATE OR REPLACE FUNCTION alkstore.locked_since(rel text, t timestamptz) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (SELECT FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
                  WHERE l.locktype = 'relation' AND l.relation = rel::regclass
                    AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                    AND l.mode IN ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock',
                                   'AccessExclusiveLock')
                    AND l.pid IS DISTINCT FROM pg_backend_pid() AND l.granted
                    AND (a.pid IS NULL OR a.xact_start < t OR a.xact_start IS NULL))
$$;

-- Whether a transaction of this database that began before t still holds a
-- snapshot (other than this one and autovacuum's, which reads no job), and
-- has run a statement in the last 10 s. A session idle in its transaction
-- for longer does not count: most such sessions hold a snapshot only in the
-- finished portal of their last statement (every driver that speaks the
-- extended protocol leaves one), which nothing reads again — the idle
-- application transaction this rotation is for. (The risk taken: a
-- REPEATABLE READ transaction idle for over 10 s that then reads the job
-- table for the first time misses the jobs acked since its snapshot in a
-- slot truncated meanwhile; docs/operating.md.) A role without
-- pg_read_all_stats sees no other role's xact_start or state: each such
-- transaction holding a snapshot counts.
CREATE OR REPLACE FUNCTION alkstore.snapshots_since(t timestamptz) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (SELECT FROM pg_stat_activity a
                  WHERE a.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                    AND a.pid <> pg_backend_pid() AND a.backend_xmin IS NOT NULL
                    AND (a.xact_start < t OR a.xact_start IS NULL)
                    AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
                    AND NOT (a.state IS NOT DISTINCT FROM 'idle in transaction'
                             AND a.state_change < clock_timestamp() - interval '10 s'))
$$;
