-- Streams (contract §7, v1.1 §E, v1.2 §K). A publisher only inserts its
-- event into alkstore.published, with an id and no offset, so no publisher
-- ever waits for another. A sequencer -- the extension's background worker,
-- or alk_sequence called by the facade, the CLI or the user's scheduler --
-- moves committed events into alkstore.events with their offsets, in short
-- transactions of its own. Readers only read: no reader's transaction, of
-- any isolation level and however long, holds anything another reader, a
-- publisher or a sequencer waits for.

-- Gives the stream's committed published events their offsets and returns
-- how many; the caller commits. One sequencer at a time per stream, under
-- a transaction-scoped advisory lock. Each assignment commits whole and
-- after the one before it, so offsets stay dense (a rolled-back assignment
-- is made again) and a reader never sees a new offset appear behind one it
-- has read. Nothing is assigned where nothing can be written (a read-only
-- transaction, a hot standby).
--
-- What is new since the last assignment: every published event it did not
-- move belongs to a transaction that was in progress (seq_xip) or not yet
-- started (>= seq_xmax) at its snapshot, so the check probes those
-- transactions' index ranges and never walks the entries of events already
-- moved (dead until vacuum).
-- alkstore_user may call it (alk_sequence runs with its caller's rights), so
-- it refuses a transaction block as alk_sequence does: the lock and the
-- stream's row it takes are held until the caller's transaction ends, and a
-- caller that held them open would hold up every other sequencer.
CREATE OR REPLACE FUNCTION alkstore.sequence_stream(s text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  newer   xid8;   -- the last assignment's snapshot: its xmax
  running xid8[]; -- and the transactions it saw in progress
BEGIN
  PERFORM alkstore.name('stream', s);
  PERFORM alkstore.refuse_transaction_block();
  IF current_setting('transaction_read_only') = 'on' THEN
    RETURN 0;
  END IF;
  SELECT t.seq_xmax, t.seq_xip INTO newer, running FROM alkstore.streams t
   -- Kept since this server started: a snapshot lists transaction ids of
   -- one cluster, and one restored from a pg_dump taken elsewhere (or kept
   -- before pg_upgrade) lists another's. After a restart, the first check
   -- probes the whole stream once.
   WHERE t.stream = s AND t.seq_started = pg_catalog.pg_postmaster_start_time();
  IF newer IS NULL THEN
    IF NOT EXISTS (SELECT FROM alkstore.published p WHERE p.stream = s) THEN
      RETURN 0;
    END IF;
  ELSIF NOT EXISTS (SELECT FROM alkstore.published p WHERE p.stream = s AND p.txid >= newer)
        AND NOT EXISTS (SELECT FROM alkstore.published p WHERE p.stream = s AND p.txid = ANY (running)) THEN
    RETURN 0;
  END IF;
  IF current_setting('transaction_isolation') = 'read committed' THEN
    RETURN alkstore.sequence_move(s);
  END IF;
  -- REPEATABLE READ and SERIALIZABLE (a session default): the snapshot is
  -- older than this statement. Every assignment writes the stream's row
  -- first, so if one committed after this snapshot, that write fails with a
  -- serialization failure before anything moves; the block is rolled back,
  -- lock included, and nothing is assigned this time.
  BEGIN
    RETURN alkstore.sequence_move(s);
  EXCEPTION WHEN serialization_failure THEN
    RETURN 0;
  END;
END $$;

-- ALK05 inside a transaction block (as far as this install can tell:
-- alkstore.in_transaction_block), but in one a procedure began after a
-- COMMIT (it began after the CALL statement), where the block is a
-- subtransaction of the procedure's own: alk_maintain's (maintain.sql).
CREATE OR REPLACE FUNCTION alkstore.refuse_transaction_block() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF alkstore.in_transaction_block() AND transaction_timestamp() <= statement_timestamp() THEN
    PERFORM alkstore.raise('ALK05',
      'alk_sequence commits transactions of its own and cannot run inside a transaction block: '
      || 'CALL it on its own (CALL alk_sequence(NULL))');
  END IF;
END $$;

-- The streams alk_sequence(stream) works on: the one named, or every one
-- with events waiting. Refuses a call inside a transaction block: it
-- commits its own transactions.
CREATE OR REPLACE FUNCTION alkstore.sequence_streams(stream text) RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF stream IS NOT NULL THEN
    PERFORM alkstore.name('stream', stream);
  END IF;
  PERFORM alkstore.refuse_transaction_block();
  IF stream IS NOT NULL THEN
    RETURN ARRAY[stream];
  END IF;
  RETURN ARRAY(SELECT DISTINCT p.stream FROM alkstore.published p ORDER BY 1);
END $$;

-- Contract v1.2 §K: gives committed events their offsets, a transaction per
-- stream, and returns how many in sequenced. A procedure, because only a
-- procedure commits; SECURITY INVOKER, because one that is not cannot (the
-- work is done by the SECURITY DEFINER functions it calls between commits).
CREATE OR REPLACE PROCEDURE alk_sequence(stream text, INOUT sequenced bigint DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
  names text[] := alkstore.sequence_streams(stream);
  i     integer;
BEGIN
  sequenced := 0;
  -- Also refuses a transaction block that alkstore.in_transaction_block
  -- could not see (the plain install: one that wrote nothing yet), before
  -- anything is done.
  COMMIT;
  FOR i IN 1 .. coalesce(pg_catalog.array_length(names, 1), 0) LOOP
    sequenced := sequenced + alkstore.sequence_stream(names[i]);
    COMMIT;
  END LOOP;
END $$;

-- The assignment itself, for alkstore.sequence_stream; returns how many
-- events it moved. Offsets follow commit order (v1.2 §L): transactions in
-- the order of their tickets (alkstore.ticket), a transaction's events in
-- the order it published them. One snapshot lists the transactions of a
-- pass, so a transaction that commits during it waits for the next pass:
-- its COMMIT was sent before the moved ones' had returned, and either order
-- keeps the rule. Planned to probe published by the transactions' index
-- ranges (the table's statistics are those of a small table: a bitmap scan
-- or a sequential scan would read every row waiting, and every dead one).
CREATE OR REPLACE FUNCTION alkstore.sequence_move(s text) RETURNS bigint
LANGUAGE plpgsql SET enable_bitmapscan = off SET enable_seqscan = off AS $$
DECLARE
  started timestamptz := pg_catalog.pg_postmaster_start_time();
  last    bigint;
  n       bigint;
  timeout text;
  newer   xid8;        -- the last assignment's snapshot: its xmax
  running xid8[];      -- and the transactions it saw in progress
  snap    pg_snapshot; -- this assignment's snapshot
  txs     xid8[];      -- the committed transactions to move, in commit order
  chunk   xid8[];
  i       integer := 1;
  first   bigint;
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('alkstore.sequence'), hashtext(s)) THEN
    timeout := current_setting('lock_timeout');
    BEGIN
      PERFORM set_config('lock_timeout', alkstore.sequence_wait_ms()::text, true);
      PERFORM pg_advisory_xact_lock(hashtext('alkstore.sequence'), hashtext(s));
      PERFORM set_config('lock_timeout', timeout, true);
    -- Another sequencer is assigning (a short transaction): wait for it a
    -- little, else leave the stream to it.
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
      RETURN 0; -- the setting went back with the failed block
    END;
  END IF;
  -- Read committed: a new statement, so a new snapshot that sees the
  -- previous holder's work (see alkstore.sequence_stream for older
  -- snapshots).
  INSERT INTO alkstore.streams AS t (stream, last_offset) VALUES (s, 0)
  ON CONFLICT ON CONSTRAINT streams_pkey DO UPDATE SET last_offset = t.last_offset
  RETURNING t.last_offset, CASE WHEN t.seq_started = started THEN t.seq_xmax END,
            CASE WHEN t.seq_started = started THEN t.seq_xip END
  INTO last, newer, running;
  newer := coalesce(newer, '0');
  running := coalesce(running, '{}');
  first := last;
  -- The transactions with events waiting that this snapshot sees committed
  -- (their rows and tickets commit together), by ticket (a transaction's
  -- last: see alkstore.ticket). One without any skipped its ticket by
  -- forging the setting alk_publish keeps: it goes last, so it can only
  -- delay its own events.
  SELECT coalesce(array_agg(w.txid ORDER BY w.ticket NULLS LAST, w.txid), '{}'), pg_current_snapshot()
    INTO txs, snap
    FROM (SELECT c.txid, max(c.ticket) AS ticket
            FROM ((SELECT c.txid, c.ticket FROM alkstore.published c
                    WHERE c.stream = s AND c.txid = ANY (running))
                  UNION ALL
                  (SELECT c.txid, c.ticket FROM alkstore.published c
                    WHERE c.stream = s AND c.txid >= newer)) c
           GROUP BY c.txid) w;
  IF pg_catalog.cardinality(txs) = 0 THEN
    RETURN 0;
  END IF;
  -- Recorded for the next pass: everything this snapshot saw is moved
  -- below; what it did not see is of a transaction it saw in progress or
  -- not at all. A snapshot does not list its own transaction, which may
  -- still publish after this: it is recorded as in progress too.
  UPDATE alkstore.streams t
     SET seq_started = started, seq_xmax = pg_snapshot_xmax(snap),
         seq_xip = ARRAY(SELECT pg_snapshot_xip(snap)) || pg_current_xact_id()
   WHERE t.stream = s;
  -- A bounded number of transactions at a time, each row deleted through
  -- its transaction's index range: a committed transaction's rows are all
  -- there already, and only a sequencer deletes them (this one holds the
  -- lock).
  LOOP
    chunk := txs[i : i + 99];
    EXIT WHEN pg_catalog.cardinality(chunk) = 0;
    WITH moved AS (
      DELETE FROM alkstore.published p
       WHERE p.stream = s AND p.txid = ANY (chunk)
      RETURNING p.id, p.txid, p.key, p.payload, p.created_at
    ), added AS (
      INSERT INTO alkstore.events (stream, "offset", key, payload, created_at, id, readable_at)
      SELECT s, last + row_number() OVER (ORDER BY o.n, m.id), m.key, m.payload, m.created_at, m.id,
             -- Readable from now, to others. This transaction's own events
             -- only once it commits: 'infinity' until a prune stamps them.
             CASE WHEN m.txid = pg_current_xact_id_if_assigned() THEN 'infinity' ELSE clock_timestamp() END
        FROM moved m JOIN unnest(chunk) WITH ORDINALITY o (txid, n) ON o.txid = m.txid
      RETURNING 1
    )
    SELECT count(*) INTO n FROM added;
    last := last + n;
    i := i + 100;
  END LOOP;
  UPDATE alkstore.streams t SET last_offset = last WHERE t.stream = s;
  RETURN last - first;
END $$;

-- How long a sequencer waits for another one's assignment to commit.
CREATE OR REPLACE FUNCTION alkstore.sequence_wait_ms() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 500 $$;

CREATE OR REPLACE FUNCTION alk_publish(stream text, payload jsonb, key text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s     ALIAS FOR $1;
  p     ALIAS FOR $2;
  id_   bigint;
  txid_ xid8;
  memo  text;
  first boolean;
BEGIN
  IF (alkstore.name_ok('stream', s) AND p IS NOT NULL) IS NOT TRUE THEN
    PERFORM alkstore.name('stream', s), alkstore.payload('payload', p); -- (one expression: alk_claim)
  END IF;
  -- Only after the arguments passed: bad input changes nothing (no xid
  -- assigned) and gets its code on a standby too.
  txid_ := pg_current_xact_id();
  -- The stream this transaction published to last (see alkstore.ticket).
  memo := txid_::text || ':' || s;
  first := current_setting('alkstore.published_to', true) IS DISTINCT FROM memo;
  IF first THEN
    PERFORM set_config('alkstore.published_to', memo, true);
  END IF;
  INSERT INTO alkstore.published (stream, key, payload, created_at, txid, tx_first)
  VALUES (s, key, p, clock_timestamp(), txid_, first)
  RETURNING alkstore.wake_sequencer(alkstore.wake('s', s, id)) INTO id_;
  RETURN id_;
END $$;

-- Commit order (v1.2 §L): the trigger below draws a publishing
-- transaction's ticket as it commits. Its function, alkstore.ticket, is the
-- library's on the extension (ticket.sql) and PL/pgSQL on the plain install
-- (ticket_plain.sql); both are installed before this file.

-- A constraint trigger cannot be replaced: made once, by whichever install
-- or upgrade runs this first.
DO $alkstore_ticket$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t
                  WHERE t.tgrelid = 'alkstore.published'::regclass AND t.tgname = 'published_ticket') THEN
    CREATE CONSTRAINT TRIGGER published_ticket AFTER INSERT ON alkstore.published
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
      WHEN (NEW.tx_first AND NEW.ticket IS NULL) EXECUTE FUNCTION alkstore.ticket();
  END IF;
END $alkstore_ticket$;

-- A page is read in offset order straight from the primary key, whatever
-- the statistics say: right after a burst they are those of a much smaller
-- stream, and a bitmap scan would read and sort every event after the
-- offset to return the first max_events.
CREATE OR REPLACE FUNCTION alk_read(stream text, after_offset bigint, max_events integer)
RETURNS TABLE ("offset" bigint, key text, payload jsonb, created_at timestamptz, id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
  s ALIAS FOR $1;
  a ALIAS FOR $2;
  n ALIAS FOR $3;
BEGIN
  IF (alkstore.name_ok('stream', s) AND alkstore.batch_ok(n) AND a >= 0) IS NOT TRUE THEN
    PERFORM alkstore.name('stream', s), alkstore.batch('max_events', n), alkstore.offset_arg('after_offset', a);
  END IF;
  RETURN QUERY
  SELECT e."offset", e.key, e.payload, e.created_at, e.id FROM alkstore.events e
   WHERE e.stream = s AND e."offset" > a
   ORDER BY e."offset" LIMIT n;
END $$;

-- A stream's options as alk_stream_configure and alk_stream_info show them.
CREATE OR REPLACE FUNCTION alkstore.stream_opts_json(retain_ms bigint, retain_events bigint) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('retain_s', coalesce(alkstore.seconds(retain_ms), 'null'::jsonb),
                            'retain_events', coalesce(to_jsonb(retain_events), 'null'::jsonb))
$$;

-- Retention (v1.1 §E): retain_s and/or retain_events, merged over the
-- stream's current options; null sets one back to "keep everything".
CREATE OR REPLACE FUNCTION alk_stream_configure(stream text, opts jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s    text := alkstore.name('stream', stream);
  k    text;
  ms   bigint;
  evs  bigint;
  set_ms  boolean := false;
  set_evs boolean := false;
BEGIN
  IF opts IS NOT NULL AND opts <> 'null'::jsonb THEN
    IF jsonb_typeof(opts) <> 'object' THEN
      PERFORM alkstore.raise('ALK03', format('stream options must be a JSON object, got %s', alkstore.excerpt(opts::text)));
    END IF;
    FOR k IN SELECT jsonb_object_keys(opts) LOOP
      CASE k
        WHEN 'retain_s' THEN
          set_ms := true;
          ms := CASE WHEN opts -> k = 'null'::jsonb THEN NULL ELSE alkstore.duration_ms(k, opts -> k, true) END;
        WHEN 'retain_events' THEN
          set_evs := true;
          evs := CASE WHEN opts -> k = 'null'::jsonb THEN NULL
                      ELSE alkstore.whole(k, opts -> k, 1, 9223372036854775807) END;
        ELSE PERFORM alkstore.raise('ALK03', format(
          'unknown stream option %s (expected one of: retain_s, retain_events)', alkstore.quote(k)));
      END CASE;
    END LOOP;
  END IF;
  INSERT INTO alkstore.streams AS t (stream, last_offset, retain_ms, retain_events)
  VALUES (s, 0, ms, evs)
  ON CONFLICT ON CONSTRAINT streams_pkey DO UPDATE SET
    retain_ms = CASE WHEN set_ms THEN excluded.retain_ms ELSE t.retain_ms END,
    retain_events = CASE WHEN set_evs THEN excluded.retain_events ELSE t.retain_events END
  RETURNING t.retain_ms, t.retain_events INTO ms, evs;
  RETURN alkstore.stream_opts_json(ms, evs);
END $$;

-- The stream's kept offsets (0 and 0 with none) and its options.
CREATE OR REPLACE FUNCTION alk_stream_info(stream text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  s text := alkstore.name('stream', stream);
  r record;
BEGIN
  SELECT t.retain_ms, t.retain_events INTO r FROM alkstore.streams t WHERE t.stream = s;
  RETURN jsonb_build_object(
    'stream', s,
    'first_offset', coalesce((SELECT min(e."offset") FROM alkstore.events e WHERE e.stream = s), 0),
    'last_offset', coalesce((SELECT max(e."offset") FROM alkstore.events e WHERE e.stream = s), 0))
    || alkstore.stream_opts_json(r.retain_ms, r.retain_events);
END $$;

-- Deletes, oldest first, at most budget events past their stream's
-- retention; returns how many. retain_s counts from when an event became
-- readable (its offset given), not from its publish: a transaction that
-- publishes and commits later has its events kept the whole time. Only a
-- prefix of each stream goes, so a read after the pruned range starts at
-- the first kept event. Streams
-- another prune is working on are skipped.
CREATE OR REPLACE FUNCTION alkstore.prune_events(budget integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  st   record;
  done integer := 0;
  n    integer;
BEGIN
  FOR st IN SELECT t.stream, t.last_offset,
                   coalesce(clock_timestamp() - t.retain_ms * interval '1 millisecond', '-infinity') AS cut,
                   coalesce(t.last_offset - t.retain_events, 0) AS keep_after
              FROM alkstore.streams t
             WHERE t.retain_ms IS NOT NULL OR t.retain_events IS NOT NULL
             ORDER BY t.stream LOOP
    EXIT WHEN done >= budget;
    CONTINUE WHEN NOT pg_try_advisory_xact_lock(hashtext('alkstore.prune'), hashtext(st.stream));
    -- Events a transaction read back before it committed: readable (to
    -- others) by now, so counted from here.
    UPDATE alkstore.events e SET readable_at = clock_timestamp()
     WHERE e.stream = st.stream AND e.readable_at = 'infinity';
    DELETE FROM alkstore.events d
     WHERE d.stream = st.stream AND d."offset" <= (
       SELECT max(p."offset") FROM (
         SELECT h."offset", bool_and(h.since <= st.cut OR h."offset" <= st.keep_after)
                              OVER (ORDER BY h."offset") AS gone
           FROM (SELECT e."offset", coalesce(e.readable_at, e.created_at) AS since FROM alkstore.events e
                  WHERE e.stream = st.stream
                  ORDER BY e."offset" LIMIT budget - done) h) p
        WHERE p.gone);
    GET DIAGNOSTICS n = ROW_COUNT;
    done := done + n;
  END LOOP;
  RETURN done;
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
