-- Flow control (contract v1.2 §I): concurrency and sliding-window rate
-- limits per queue and per limit_key, kept in alkstore.queue_limits and
-- alkstore.claim_times (schema.sql). Claims of a queue without limits never
-- come here: the claim (templates/claim.sql) asks whether the queue has a
-- row, in the statement it asks whether the queue is paused.

-- Merges the limit keys of `opts` over `base` (the other keys are
-- merge_queue_opts' business). With `pairs`, the result must have both or
-- neither of each rate pair (contract: one without the other is
-- InvalidOptions); the check of the arguments alone, before anything is
-- read, merges over no limits without it.
CREATE OR REPLACE FUNCTION alkstore.merge_limits(base alkstore.queue_limits, opts jsonb, pairs boolean)
RETURNS alkstore.queue_limits
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  r alkstore.queue_limits := base;
  k text;
  v jsonb;
BEGIN
  IF jsonb_typeof(opts) IS DISTINCT FROM 'object' THEN
    RETURN r; -- NULL or 'null' (no change); anything else merge_queue_opts refused
  END IF;
  FOR k, v IN SELECT * FROM jsonb_each(opts) LOOP
    CASE k -- (null removes the limit)
      WHEN 'max_running' THEN r.max_running := alkstore.limit_count(k, v);
      WHEN 'rate_max' THEN r.rate_max := alkstore.limit_count(k, v);
      WHEN 'rate_per_s' THEN
        r.rate_per_ms := CASE WHEN v <> 'null'::jsonb THEN alkstore.duration_ms(k, v, true) END;
      WHEN 'key_max_running' THEN r.key_max_running := alkstore.limit_count(k, v);
      WHEN 'key_rate_max' THEN r.key_rate_max := alkstore.limit_count(k, v);
      WHEN 'key_rate_per_s' THEN
        r.key_rate_per_ms := CASE WHEN v <> 'null'::jsonb THEN alkstore.duration_ms(k, v, true) END;
      ELSE NULL;
    END CASE;
  END LOOP;
  IF pairs AND (r.rate_max IS NULL) <> (r.rate_per_ms IS NULL) THEN
    PERFORM alkstore.raise('ALK03', 'rate_max and rate_per_s go together: give both, or set both to null');
  END IF;
  IF pairs AND (r.key_rate_max IS NULL) <> (r.key_rate_per_ms IS NULL) THEN
    PERFORM alkstore.raise('ALK03', 'key_rate_max and key_rate_per_s go together: give both, or set both to null');
  END IF;
  RETURN r;
END $$;

-- A count limit: a whole number from 1, or null (no limit).
CREATE OR REPLACE FUNCTION alkstore.limit_count(key text, v jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN v <> 'null'::jsonb THEN alkstore.whole(key, v, 1, 2147483647) END
$$;

-- The queue's limits: its row, or none set.
CREATE OR REPLACE FUNCTION alkstore.queue_limits(q text) RETURNS alkstore.queue_limits
LANGUAGE sql STABLE AS $$
  SELECT coalesce((SELECT l FROM alkstore.queue_limits l WHERE l.queue = q),
                  ROW(q, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0)::alkstore.queue_limits)
$$;

CREATE OR REPLACE FUNCTION alkstore.limits_json(l alkstore.queue_limits) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'max_running', l.max_running, 'rate_max', l.rate_max,
    'rate_per_s', coalesce(alkstore.seconds(l.rate_per_ms), 'null'::jsonb),
    'key_max_running', l.key_max_running, 'key_rate_max', l.key_rate_max,
    'key_rate_per_s', coalesce(alkstore.seconds(l.key_rate_per_ms), 'null'::jsonb))
$$;

-- Stores the queue's limits (alk_queue_configure, which serialises
-- configures of one queue); a queue left without any has no row. A rate
-- removed takes its window's claim times along (and the count of the
-- queue's): a rate set again starts from an empty window. (The row lock
-- the upsert takes orders this with the queue's claims.)
CREATE OR REPLACE FUNCTION alkstore.set_limits(l alkstore.queue_limits) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  -- A key's limit changed: every parked job of the queue goes back into
  -- claim order, and claims park again what is still over the limits.
  -- (After the row lock: a claim parking now has committed.)
  IF (SELECT (t.key_max_running, t.key_rate_max, t.key_rate_per_ms) FROM alkstore.queue_limits t WHERE t.queue = l.queue)
     IS DISTINCT FROM (l.key_max_running, l.key_rate_max, l.key_rate_per_ms) THEN
    PERFORM FROM alkstore.queue_limits t WHERE t.queue = l.queue FOR UPDATE;
    DELETE FROM alkstore.parked_keys t WHERE t.queue = l.queue;
    -- (Job rows locked before their parked rows: see unpark_first.)
    WITH pick AS (
      SELECT j.id FROM alkstore.parked p JOIN alkstore.jobs j ON j.id = p.id
       WHERE p.queue = l.queue AND j.state = 'parked' COLLATE "C"
         FOR UPDATE OF j
    ), back AS (
      DELETE FROM alkstore.parked p WHERE p.id IN (SELECT pick.id FROM pick) RETURNING p.id
    )
    UPDATE alkstore.jobs j SET state = 'pending' FROM back b WHERE j.id = b.id;
  END IF;
  IF num_nonnulls(l.max_running, l.rate_max, l.key_max_running, l.key_rate_max) = 0 THEN
    DELETE FROM alkstore.queue_limits t WHERE t.queue = l.queue;
  ELSE
    INSERT INTO alkstore.queue_limits AS t (queue, max_running, rate_max, rate_per_ms, key_max_running,
                                            key_rate_max, key_rate_per_ms)
    VALUES (l.queue, l.max_running, l.rate_max, l.rate_per_ms, l.key_max_running, l.key_rate_max, l.key_rate_per_ms)
    ON CONFLICT ON CONSTRAINT queue_limits_pkey DO UPDATE SET
      max_running = excluded.max_running, rate_max = excluded.rate_max, rate_per_ms = excluded.rate_per_ms,
      key_max_running = excluded.key_max_running, key_rate_max = excluded.key_rate_max,
      key_rate_per_ms = excluded.key_rate_per_ms,
      rate_count = CASE WHEN excluded.rate_max IS NULL THEN 0 ELSE t.rate_count END;
  END IF;
  DELETE FROM alkstore.claim_times t
   WHERE t.queue = l.queue
     AND ((t.limit_key = '' AND l.rate_max IS NULL) OR (t.limit_key <> '' AND l.key_rate_max IS NULL));
END $$;

-- Room under one pair of limits at `now`: the queue's (key NULL) or one
-- key's. room: how many more claims they allow now (may be 0 or less);
-- free_at, when room is 0 or less: the earliest time it can be more — a
-- rate window frees a slot when the rate_max-th latest claim leaves it; a
-- running slot at the latest when the first of the running claims expires
-- (sooner if a job finishes, which wakes waiting workers).
CREATE OR REPLACE FUNCTION alkstore.limit_room(q text, key text, max_running integer, rate_max integer,
                                               rate_per_ms bigint, now timestamptz,
                                               OUT room integer, OUT free_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  n     bigint;
  first timestamptz;
BEGIN
  room := 2147483647;
  IF max_running IS NOT NULL THEN
    -- Running: claimed, claim not expired (an expired claim frees its slot).
    SELECT count(*), min(e.claim_expires_at) INTO n, first FROM alkstore.jobs e
     WHERE e.queue = q AND e.state = 'running'
       AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END > now
       AND (key IS NULL OR e.limit_key = key);
    room := max_running - n;
    IF room <= 0 THEN
      free_at := first;
    END IF;
  END IF;
  IF rate_max IS NOT NULL THEN
    SELECT count(*), (array_agg(t.claimed_at ORDER BY t.claimed_at DESC))[rate_max] INTO n, first
      FROM alkstore.claim_times t
     WHERE t.queue = q AND t.limit_key = coalesce(key, '')
       AND t.claimed_at > now - rate_per_ms * interval '1 millisecond';
    IF rate_max - n <= 0 THEN
      free_at := greatest(free_at, first + rate_per_ms * interval '1 millisecond');
    END IF;
    room := least(room, rate_max - n);
  END IF;
END $$;

-- Forgets the claim times that left a window: a window holds at most its
-- rate_max rows.
-- Returns how many it deleted.
CREATE OR REPLACE FUNCTION alkstore.limit_forget(q text, key text, rate_per_ms bigint, now timestamptz) RETURNS integer
LANGUAGE sql AS $$
  WITH gone AS (
    DELETE FROM alkstore.claim_times t
     WHERE t.queue = q AND t.limit_key = key AND t.claimed_at <= now - rate_per_ms * interval '1 millisecond'
    RETURNING 1)
  SELECT count(*)::integer FROM gone
$$;

-- A claim of a queue with limits: up to n jobs in claim order among the
-- claimable ones (pending and due, running with an expired claim, and with
-- sched, scheduled and due: ahead.sql),
-- stepping over those whose key is at its limit, and no more than the
-- queue's limits allow. Never waits for a slot: fewer jobs, or none.
-- (The candidates are read in pages from the start of the claim order,
-- each page four times the last: a query with a LIMIT is planned to read
-- the claim index in order, only as far as the limit. A query without one
-- is planned for all its rows — a sort of every pending job of the queue.)
CREATE OR REPLACE FUNCTION alkstore.claim_limited(q text, w text, n integer, sched boolean)
RETURNS TABLE (id bigint, queue text, payload jsonb, attempts integer, max_attempts integer,
               claim_expires_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  l      alkstore.queue_limits;
  now    timestamptz;
  room   integer;
  r      record;
  c      record;
  keys   jsonb := '{}'; -- room left per key met so far
  k_room integer;
  chosen bigint[] := '{}';
  fulls  text[] := '{}';   -- keys met at their running limit
  park   bigint[] := '{}'; -- their pending jobs stepped over
  rated  text[] := '{}';   -- keys met at their rate limit (not their running limit)
  rated_at timestamptz[] := '{}'; -- when each one's window frees a slot
  park_rated bigint[] := '{}';    -- their pending jobs stepped over
  page   integer := n + 16; -- candidates read, from the start of the claim order
  seen   integer := 0;      -- of those, the ones looked at by earlier pages
  i      integer;
BEGIN
  -- The order of the queue's claims: an UPDATE rather than FOR UPDATE, so
  -- that a claim in a REPEATABLE READ transaction whose snapshot is older
  -- than the last claim fails (40001) instead of counting from that
  -- snapshot. Read committed: each statement below sees the last claim.
  UPDATE alkstore.queue_limits t SET claimed_at = clock_timestamp() WHERE t.queue = q RETURNING t.* INTO l;
  IF NOT FOUND THEN
    l := alkstore.queue_limits(q); -- removed since the claim looked: none
  END IF;
  now := clock_timestamp(); -- after the wait for the last claim
  -- Keys parked at their rate whose window frees a slot now.
  IF l.key_rate_max IS NOT NULL
     AND EXISTS (SELECT FROM alkstore.parked_keys k WHERE k.queue = q AND k.until <= now) THEN
    PERFORM alkstore.unpark_due(q, l.key_rate_max, l.key_rate_per_ms, now);
  END IF;
  -- Claims that expired free their keys' slots with no statement to see it:
  -- the keys' parked jobs come back now, so that the claim order decides
  -- between them and the expired job's re-claim (jobs_deadline: none
  -- expired, one probe).
  IF l.key_max_running IS NOT NULL THEN
    PERFORM alkstore.unpark(q, x.limit_key)
       FROM (SELECT DISTINCT e.limit_key FROM alkstore.jobs e
              WHERE e.queue = q AND e.state = 'running'
                AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now
                AND e.limit_key IS NOT NULL) x;
  END IF;
  -- The queue's rate from its count of the window's claims (the times
  -- that left the window forgotten first), not from the rows.
  IF l.rate_max IS NOT NULL THEN
    l.rate_count := l.rate_count - alkstore.limit_forget(q, '', l.rate_per_ms, now);
  END IF;
  r := alkstore.limit_room(q, NULL, l.max_running, NULL, NULL, now);
  room := least(n, r.room, l.rate_max - l.rate_count);
  IF room <= 0 THEN
    IF l.rate_max IS NOT NULL THEN
      UPDATE alkstore.queue_limits t SET rate_count = l.rate_count WHERE t.queue = q; -- what was forgotten
    END IF;
    RETURN;
  END IF;
  LOOP
    i := 0;
    FOR c IN
      (SELECT e.id, e.limit_key, e.priority, e.run_at, true AS pending FROM alkstore.jobs e
        WHERE hashtextextended(e.queue, 0) = hashtextextended(q, 0) AND e.queue = q
          AND e.state = 'pending' AND e.run_at <= now AND (e.expires_at IS NULL OR e.expires_at > now)
        ORDER BY e.priority DESC, e.run_at, e.id LIMIT page)
      UNION ALL
      (SELECT e.id, e.limit_key, e.priority, e.run_at, false FROM alkstore.jobs e
        WHERE e.queue = q AND e.state = 'running'
          AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now
          AND e.attempts < e.max_attempts
        ORDER BY e.priority DESC, e.run_at, e.id LIMIT page)
      UNION ALL
      (SELECT d.id, d.limit_key, d.priority, d.run_at, false FROM alkstore.due_scheduled(q, now, page, false) d
        WHERE sched)
      ORDER BY 3 DESC, 4, 1 LIMIT page
    LOOP
      i := i + 1;
      CONTINUE WHEN i <= seen; -- looked at by an earlier page
      IF c.limit_key IS NOT NULL AND num_nonnulls(l.key_max_running, l.key_rate_max) > 0 THEN
        IF NOT keys ? c.limit_key THEN
          IF l.key_rate_max IS NOT NULL THEN
            PERFORM alkstore.limit_forget(q, c.limit_key, l.key_rate_per_ms, now); -- (keys count their rows)
          END IF;
          r := alkstore.limit_room(q, c.limit_key, l.key_max_running, l.key_rate_max, l.key_rate_per_ms, now);
          keys := keys || jsonb_build_object(c.limit_key, r.room);
          IF r.room <= 0 AND l.key_max_running IS NOT NULL
             AND (alkstore.limit_room(q, c.limit_key, l.key_max_running, NULL, NULL, now)).room <= 0 THEN
            fulls := fulls || c.limit_key; -- at its running limit: its pending jobs are parked
          ELSIF r.room <= 0 AND r.free_at IS NOT NULL THEN
            rated := rated || c.limit_key; -- at its rate: parked until its window frees a slot
            rated_at := rated_at || r.free_at;
          END IF;
        END IF;
        k_room := (keys ->> c.limit_key)::integer;
        IF k_room <= 0 AND c.pending THEN
          IF c.limit_key = ANY (fulls) THEN
            park := park || c.id;
          ELSIF c.limit_key = ANY (rated) THEN
            park_rated := park_rated || c.id;
          END IF;
        END IF;
        CONTINUE WHEN k_room <= 0; -- stepped over: the next job's key may have room
        keys := keys || jsonb_build_object(c.limit_key, k_room - 1);
      END IF;
      chosen := chosen || c.id;
      room := room - 1;
      EXIT WHEN room = 0;
    END LOOP;
    EXIT WHEN room = 0 OR i < page; -- enough, or no candidate left
    seen := i;
    page := page * 4;
  END LOOP;
  IF cardinality(park) > 0 THEN
    PERFORM alkstore.park(q, park, fulls, l.key_max_running, now);
  END IF;
  IF cardinality(park_rated) > 0 THEN
    PERFORM alkstore.park_rated(q, park_rated, rated, rated_at);
  END IF;
  -- Locked and claimed only now, the chosen that are still claimable
  -- (nothing stepped over is locked; one another transaction holds is
  -- left: fewer jobs). Each claim counts toward the rates at its time.
  RETURN QUERY
  WITH claimed AS (
    UPDATE alkstore.jobs j
       SET state = 'running', attempts = j.attempts + 1, claimed_by = w,
           claim_expires_at = now + j.visibility_timeout_ms * interval '1 millisecond',
           -- A claim that expired: its attempt's error (issue 57).
           last_error = CASE WHEN j.state = 'running' COLLATE "C"
                             THEN 'claim expired (worker ' || j.claimed_by || ')' ELSE j.last_error END,
           errors = CASE WHEN j.state = 'running' COLLATE "C"
                         THEN alkstore.push_error(j.errors, j.attempts, 'claim expired (worker ' || j.claimed_by || ')')
                         ELSE j.errors END
     WHERE j.id = ANY (ARRAY(
             SELECT e.id FROM alkstore.jobs e
              WHERE e.id = ANY (chosen) AND e.queue = q
                AND ((e.state COLLATE "C" IN ('pending', 'scheduled') AND e.run_at <= now
                      AND (e.expires_at IS NULL OR e.expires_at > now))
                     OR (e.state = 'running' COLLATE "C" AND e.claim_expires_at <= now
                         AND e.attempts < e.max_attempts))
              FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.claim_expires_at, j.priority, j.run_at,
              j.limit_key
  ), counted AS (
    INSERT INTO alkstore.claim_times (queue, limit_key, claimed_at)
    SELECT q, '', now FROM claimed WHERE l.rate_max IS NOT NULL
    UNION ALL
    SELECT q, k.limit_key, now FROM claimed k WHERE l.key_rate_max IS NOT NULL AND k.limit_key IS NOT NULL
  ), recount AS (
    UPDATE alkstore.queue_limits t SET rate_count = l.rate_count + (SELECT count(*) FROM claimed)
     WHERE t.queue = q AND l.rate_max IS NOT NULL
  )
  SELECT k.id, k.queue, k.payload, k.attempts, k.max_attempts, k.claim_expires_at
    FROM claimed k
   ORDER BY k.priority DESC, k.run_at, k.id;
END $$;

-- Parking (issue 37): a claim that steps over pending jobs whose key is at
-- its running limit (key_max_running) parks them — state 'parked', out of
-- jobs_pending, and a row in alkstore.parked — so that the next claims do
-- not read past them again: a full key's backlog costs one claim, not
-- every claim. A job of the key
-- leaving 'running' (ack, retry, fail, cancel, dead-lettered) puts back
-- as many of the key's parked jobs, in claim order, as the key has room
-- for (alkstore.unpark). Jobs stepped over because their key is at its
-- rate (key_rate_max) are parked too, until the key's window frees a slot:
-- the queue's next claim after that puts back as many as a window allows
-- (alkstore.unpark_due, alkstore.parked_keys). Changing a key's limits puts
-- back all of the queue's (set_limits).
--
-- The race that could strand parked jobs (a claim decides a key is full,
-- its last running job finishes and finds nothing parked, then the claim
-- parks) cannot happen: the claim share-locks the key's running jobs and
-- parks only keys whose running jobs it holds, so a finish of one waits for
-- the claim's commit and then sees what it parked; a running job being
-- finished at that moment is skipped, and its key not parked.
-- (tests/isolation/specs/limit_park.spec)
CREATE OR REPLACE FUNCTION alkstore.park(q text, ids bigint[], keys text[], max integer, now timestamptz)
RETURNS void
LANGUAGE sql AS $$
  WITH held AS (
    SELECT e.limit_key FROM alkstore.jobs e
     WHERE e.queue = q AND e.state = 'running' AND e.limit_key = ANY (keys)
       AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END > now
     ORDER BY e.id
       FOR SHARE SKIP LOCKED
  ), still AS (
    SELECT h.limit_key FROM held h GROUP BY h.limit_key HAVING count(*) >= max
  )
  , moved AS (
    UPDATE alkstore.jobs j SET state = 'parked'
     WHERE j.id = ANY (ARRAY(
             SELECT e.id FROM alkstore.jobs e
              WHERE e.id = ANY (ids) AND e.state = 'pending' COLLATE "C"
                AND e.limit_key IN (SELECT s.limit_key FROM still s)
                FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.queue, j.limit_key, j.priority, j.run_at
  )
  INSERT INTO alkstore.parked (id, queue, limit_key, priority, run_at)
  SELECT m.id, m.queue, m.limit_key, m.priority, m.run_at FROM moved m
$$;

-- Parks the pending jobs `ids` of keys at their rate limit, each key until
-- its window frees a slot (`untils`, in the order of `keys`): no finish
-- frees such a slot, the clock does, and the queue's next claim after that
-- time puts the key's jobs back (unpark_due).
CREATE OR REPLACE FUNCTION alkstore.park_rated(q text, ids bigint[], keys text[], untils timestamptz[])
RETURNS void
LANGUAGE sql AS $$
  WITH moved AS (
    UPDATE alkstore.jobs j SET state = 'parked'
     WHERE j.id = ANY (ARRAY(
             SELECT e.id FROM alkstore.jobs e
              WHERE e.id = ANY (ids) AND e.state = 'pending' COLLATE "C"
                FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.queue, j.limit_key, j.priority, j.run_at
  ), rows AS (
    INSERT INTO alkstore.parked (id, queue, limit_key, priority, run_at)
    SELECT m.id, m.queue, m.limit_key, m.priority, m.run_at FROM moved m
  )
  INSERT INTO alkstore.parked_keys AS t (queue, limit_key, until)
  SELECT q, u.k, u.at FROM unnest(keys, untils) u(k, at)
   WHERE u.k IN (SELECT m.limit_key FROM moved m)
  ON CONFLICT ON CONSTRAINT parked_keys_pkey DO UPDATE SET until = excluded.until
$$;

-- The keys parked at their rate whose time came: each puts back as many
-- parked jobs, in claim order, as its rate allows in a window; the rest
-- wait a window more (the jobs put back, once claimed, fill the window
-- until then at the earliest). A key with no parked job left is forgotten.
CREATE OR REPLACE FUNCTION alkstore.unpark_due(q text, per_window integer, per_ms bigint, now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  k text;
BEGIN
  FOR k IN SELECT t.limit_key FROM alkstore.parked_keys t WHERE t.queue = q AND t.until <= now
             ORDER BY t.limit_key FOR UPDATE LOOP
    PERFORM alkstore.unpark_first(q, k, per_window);
    IF (SELECT x.id FROM alkstore.parked x WHERE x.queue = q AND x.limit_key = k
         ORDER BY x.priority DESC, x.run_at, x.id LIMIT 1) IS NOT NULL THEN -- (as in unpark)
      UPDATE alkstore.parked_keys t SET until = now + per_ms * interval '1 millisecond'
       WHERE t.queue = q AND t.limit_key = k;
    ELSE
      DELETE FROM alkstore.parked_keys t WHERE t.queue = q AND t.limit_key = k;
    END IF;
  END LOOP;
END $$;

-- Puts back into claim order the first n parked jobs of key k of queue q
-- that no other transaction holds; returns how many. The job rows are
-- locked before their parked rows, the order of every path that ends a
-- parked job (cancel, purge, sweep), so that none of them deadlocks with
-- this; candidates are read a little past n, so that a concurrent put-back
-- holding the first ones does not leave this one with none.
CREATE OR REPLACE FUNCTION alkstore.unpark_first(q text, k text, n bigint) RETURNS integer
-- By index (enable_seqscan = off): it updates jobs by a set of ids
-- (schema.sql, "Statements by a set of ids").
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  done integer;
BEGIN
  IF n <= 0 THEN
    RETURN 0;
  END IF;
  WITH pick AS (
    SELECT j.id FROM alkstore.jobs j
     WHERE j.id = ANY (ARRAY(
             SELECT x.id FROM alkstore.parked x
              WHERE x.queue = q AND x.limit_key = k
              ORDER BY x.priority DESC, x.run_at, x.id LIMIT n + 16))
       AND j.state = 'parked' COLLATE "C"
     ORDER BY j.priority DESC, j.run_at, j.id LIMIT n
       FOR UPDATE SKIP LOCKED
  ), back AS (
    DELETE FROM alkstore.parked p WHERE p.id IN (SELECT pick.id FROM pick) RETURNING p.id
  )
  UPDATE alkstore.jobs j SET state = 'pending' FROM back b WHERE j.id = b.id;
  GET DIAGNOSTICS done = ROW_COUNT;
  RETURN done;
END $$;

-- A job of key k of queue q left 'running': the key's parked jobs that now
-- fit go back into claim order (see park). Called by every path that takes
-- a job out of 'running' — ack, ack batch, retry, fail, cancel (through
-- limit_freed), a claim's or a sweep's dead-lettering of a final claim —
-- and by those that end a pending job of the key without running it
-- (cancel, expiry: it may be one put back here, whose finish the parked
-- ones were waiting for) —
-- rather than by a trigger on jobs: a row trigger, even one whose WHEN
-- nothing passes, cost every claim + ack 13% more instructions
-- (docs/benchmarks.md).
CREATE OR REPLACE FUNCTION alkstore.unpark(q text, k text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  max integer;
BEGIN
  -- Most finishes find none parked: one probe. (A claim parking the key's
  -- jobs holds this finish's job until it commits: see park.) In the
  -- index's order: as EXISTS, planned from statistics in which one busy key
  -- holds every parked job, it was a scan of the table at every finish.
  IF k IS NULL OR (SELECT p.id FROM alkstore.parked p WHERE p.queue = q AND p.limit_key = k
                    ORDER BY p.priority DESC, p.run_at, p.id LIMIT 1) IS NULL THEN
    RETURN;
  END IF;
  SELECT l.key_max_running INTO max FROM alkstore.queue_limits l WHERE l.queue = q;
  IF max IS NULL THEN
    RETURN; -- parked at a rate: unpark_due puts them back
  END IF;
  IF alkstore.unpark_first(q, k, greatest(max - (
       SELECT count(*) FROM alkstore.jobs e
        WHERE e.queue = q AND e.state = 'running' AND e.limit_key = k
          AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END > clock_timestamp()), 0)) > 0 THEN
    PERFORM alkstore.wake('q', q);
  END IF;
END $$;

-- A job of key k (or none) finished in queue q, which has a running limit:
-- the slot it frees is work a waiting worker could claim now.
CREATE OR REPLACE FUNCTION alkstore.limit_freed(q text, k text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM alkstore.wake('q', q);
  IF k IS NOT NULL THEN
    PERFORM alkstore.unpark(q, k);
  END IF;
END $$;

-- When a claim of the queue can take a job next: NULL when its limits
-- leave room now (or it has none), else the earliest time a slot frees
-- (limit_room). Per-key limits count when every job a claim could take now
-- (the first 1,000 in claim order, and the keys of parked jobs) is of a
-- key at its limit.
CREATE OR REPLACE FUNCTION alkstore.next_slot_at(q text, now timestamptz) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
  l     alkstore.queue_limits;
  r     record;
  k     text;
  first timestamptz;
BEGIN
  SELECT t.* INTO l FROM alkstore.queue_limits t WHERE t.queue = q;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  r := alkstore.limit_room(q, NULL, l.max_running, l.rate_max, l.rate_per_ms, now);
  IF r.room <= 0 THEN
    RETURN r.free_at;
  END IF;
  IF num_nonnulls(l.key_max_running, l.key_rate_max) = 0 THEN
    RETURN NULL;
  END IF;
  FOR k IN
    SELECT DISTINCT e.limit_key FROM (
      (SELECT e.limit_key FROM alkstore.jobs e
        WHERE hashtextextended(e.queue, 0) = hashtextextended(q, 0) AND e.queue = q
          AND e.state = 'pending' AND e.run_at <= now AND (e.expires_at IS NULL OR e.expires_at > now)
        ORDER BY e.priority DESC, e.run_at, e.id LIMIT 1000)
      UNION ALL -- and keys whose jobs are parked (their keys were full)
      (SELECT p.limit_key FROM alkstore.parked p WHERE p.queue = q LIMIT 1000)) e
  LOOP
    IF k IS NULL THEN
      RETURN NULL; -- a job without a key: only the queue's limits count
    END IF;
    r := alkstore.limit_room(q, k, l.key_max_running, l.key_rate_max, l.key_rate_per_ms, now);
    IF r.room > 0 THEN
      RETURN NULL;
    END IF;
    first := least(first, r.free_at);
  END LOOP;
  RETURN first;
END $$;

-- (A job finishing in a queue with a running limit — ack, ack batch, retry,
-- fail, cancel — wakes a waiting worker, as an enqueue does: queue.sql asks
-- in the statement that finishes it, in its RETURNING list.)
