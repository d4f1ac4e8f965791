-- Operating it (contract v1.1 §D): listings and bulk actions for operators,
-- all admin-only (grants.sql, from the catalogue). Job pages are read in
-- id order from an id onwards, from indexes.

-- Every queue with jobs (in any state), options or a pause (outboxes by
-- backing queue), in name order, with its counts as alk_queue_stats
-- reports them (alkstore.stats), in one pass over the jobs grouped by
-- queue. Asking alkstore.stats for each queue took 19.4 s for 100,000
-- queues of a job each (any role that may enqueue can make them), 0.34 s
-- now. JIT is off: compiling the plan cost more than running it (0.38 s of
-- 0.85 s). 'parked' jobs are pending (their alkstore.parked rows are one
-- per job).
CREATE OR REPLACE FUNCTION alk_queues()
RETURNS TABLE (queue text, pending bigint, scheduled bigint, running bigint, dead bigint,
               completed bigint, paused boolean, oldest_runnable_age_s numeric)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off AS $$
DECLARE
  now timestamptz := clock_timestamp();
BEGIN
  RETURN QUERY
  WITH c AS MATERIALIZED (
    SELECT j.queue AS q,
           count(*) FILTER (WHERE j.state IN ('pending', 'waiting', 'blocked', 'scheduled') AND j.run_at <= now
                               OR j.state = 'parked') AS due,
           count(*) FILTER (WHERE j.state IN ('pending', 'waiting', 'blocked', 'scheduled')
                              AND j.run_at > now) AS ahead,
           count(*) FILTER (WHERE j.state = 'running') AS running,
           count(*) FILTER (WHERE j.state = 'dead') AS dead,
           count(*) FILTER (WHERE j.state = 'completed') AS completed,
           min(j.run_at) FILTER (WHERE j.state IN ('pending', 'scheduled') AND j.run_at <= now) AS oldest
      FROM alkstore.jobs j GROUP BY j.queue),
  q AS (SELECT c.q, c.due, c.ahead, c.running, c.dead, c.completed, c.oldest FROM c
        UNION ALL
        SELECT n.q, 0, 0, 0, 0, 0, NULL
          FROM (SELECT o.queue FROM alkstore.queues o UNION SELECT s.queue FROM alkstore.paused s) n(q)
         WHERE NOT EXISTS (SELECT FROM c WHERE c.q = n.q))
  SELECT q.q, q.due, q.ahead, q.running, q.dead, q.completed,
         q.q IN (SELECT p.queue FROM alkstore.paused p),
         CASE WHEN q.oldest IS NULL THEN NULL
              ELSE trim_scale(greatest(floor(extract(epoch FROM now - q.oldest) * 1000), 0) / 1000.0) END
    FROM q ORDER BY q.q;
END $$;

-- Every queue with a limit set (v1.2 §I), in name order, its limits as
-- alk_queue_opts shows them: one query where `alkstore queues` asked
-- alk_queue_opts of each queue (66 s for 20,000 queues; issue 64).
CREATE OR REPLACE FUNCTION alk_queue_limits()
RETURNS TABLE (queue text, max_running integer, rate_max integer, rate_per_s numeric,
               key_max_running integer, key_rate_max integer, key_rate_per_s numeric)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
  SELECT l.queue, l.max_running, l.rate_max, trim_scale(l.rate_per_ms / 1000.0),
         l.key_max_running, l.key_rate_max, trim_scale(l.key_rate_per_ms / 1000.0)
    FROM alkstore.queue_limits l
   WHERE coalesce(l.max_running, l.rate_max, l.key_max_running, l.key_rate_max) IS NOT NULL
   ORDER BY l.queue;
END $$;

-- A state argument of the listing and bulk functions (contract v1.1 §G).
CREATE OR REPLACE FUNCTION alkstore.state_arg(st text, allowed text[], null_ok boolean) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF (st IS NULL AND NOT null_ok) OR (st IS NOT NULL AND NOT st = ANY (allowed)) THEN
    PERFORM alkstore.raise('ALK05', format('state must be one of %s%s, got %s',
      array_to_string(allowed, ', '), CASE WHEN null_ok THEN ' or NULL' ELSE '' END,
      coalesce(alkstore.quote(st), 'NULL')));
  END IF;
  RETURN st;
END $$;

-- Job documents (as alk_get_job) of one queue in ascending id after
-- after_id. One statement per state, each with its literal state, so the
-- planner can read the state's partial index.
CREATE OR REPLACE FUNCTION alk_list_jobs(queue text, state text DEFAULT NULL, after_id bigint DEFAULT 0,
                                         max_jobs integer DEFAULT 100)
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q  text := alkstore.listed_queue(queue);
  st text := alkstore.state_arg(state, ARRAY['pending', 'running', 'dead', 'completed'], true);
  a  bigint := CASE WHEN after_id IS NULL THEN 0 ELSE alkstore.offset_arg('after_id', after_id) END;
  m  integer := alkstore.batch('max_jobs', max_jobs);
BEGIN
  IF st = 'dead' THEN
    RETURN QUERY SELECT alkstore.job_json(j) FROM alkstore.jobs j
                  WHERE j.queue = q AND j.state = 'dead' AND j.id > a ORDER BY j.id LIMIT m;
  ELSIF st = 'completed' THEN
    RETURN QUERY SELECT alkstore.job_json(j) FROM alkstore.jobs j
                  WHERE j.queue = q AND j.state = 'completed' AND j.id > a ORDER BY j.id LIMIT m;
  ELSIF st = 'running' THEN
    RETURN QUERY SELECT alkstore.job_json(j) FROM alkstore.jobs j
                  WHERE j.queue = q AND j.state = 'running' AND j.id > a ORDER BY j.id LIMIT m;
  ELSIF st = 'pending' THEN -- waiting group members, scheduled, blocked and parked jobs are pending too
    RETURN QUERY SELECT alkstore.job_json(j) FROM alkstore.jobs j
                  WHERE j.queue = q AND j.state IN ('pending', 'waiting', 'scheduled', 'blocked', 'parked') AND j.id > a
                  ORDER BY j.id LIMIT m;
  ELSE
    RETURN QUERY SELECT alkstore.job_json(j) FROM alkstore.jobs j
                  WHERE j.queue = q AND j.id > a ORDER BY j.id LIMIT m;
  END IF;
END $$;

-- Every dead job of the queue back to pending, as alk_requeue_dead does
-- each: plain ones in one statement, grouped ones and ones with
-- dependencies one by one in id order (each rejoins its group, or waits
-- again for its dependencies not acked).
CREATE OR REPLACE FUNCTION alk_requeue_dead_all(queue text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q   text := alkstore.listed_queue(queue);
  n     integer;
  moved integer;
  jid   bigint;
BEGIN
  -- Twice: the jobs the rotation moved while the first pass ran were
  -- deleted under it, and the second finds them in the cold slot
  -- (rotate.sql). alkstore.requeue_dead looks twice for the same reason.
  n := 0;
  FOR tries IN 1..2 LOOP
    UPDATE alkstore.jobs j
       SET state = 'pending', attempts = 0, run_at = clock_timestamp(), expires_at = NULL, prune_at = NULL
     WHERE j.queue = q AND j.state = 'dead' AND j.group_key IS NULL AND j.depends_on IS NULL;
    GET DIAGNOSTICS moved = ROW_COUNT;
    n := n + moved;
  END LOOP;
  FOR jid IN SELECT j.id FROM alkstore.jobs j
              WHERE j.queue = q AND j.state = 'dead' AND (j.group_key IS NOT NULL OR j.depends_on IS NOT NULL)
              ORDER BY j.id LOOP
    IF alkstore.requeue_dead(jid) THEN
      n := n + 1;
    END IF;
  END LOOP;
  IF n > 0 THEN
    PERFORM alkstore.wake('q', q);
  END IF;
  RETURN n;
END $$;

-- Deletes every job of the queue in one state. Purging pending jobs takes
-- their groups' counts down with them.
CREATE OR REPLACE FUNCTION alk_purge(queue text, state text) RETURNS integer
-- By index (schema.sql, "Statements by a set of ids").
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off AS $$
DECLARE
  q    text := alkstore.listed_queue(queue);
  st   text := alkstore.state_arg(state, ARRAY['pending', 'dead', 'completed'], false);
  n    integer;
  moved integer;
  gs   text[];
  held text[]; -- the queue's groups whose rows this purge holds
  ids  bigint[]; -- the jobs purged, which were not acked (deps.sql)
  dj   bigint[]; -- those that jobs depend on
  cascade bigint[]; -- the jobs that die with them (deps_failed)
  stage text;       -- what was being locked without waiting
  retries integer := 0;
BEGIN
  IF st IN ('dead', 'completed') THEN
    -- Twice, as alk_requeue_dead_all: the second pass deletes what the
    -- rotation moved to the cold slot under the first (rotate.sql). A
    -- dead job is remembered as ended without an ack (deps.sql).
    n := 0;
    FOR tries IN 1..2 LOOP
      IF st = 'dead' THEN
        WITH d AS (DELETE FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'dead' RETURNING j.id)
        SELECT count(*), array_agg(d.id) INTO moved, ids FROM d;
        PERFORM alkstore.jobs_ended(ids, 'dead');
      ELSE
        DELETE FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'completed';
        GET DIAGNOSTICS moved = ROW_COUNT;
      END IF;
      n := n + moved;
    END LOOP;
  ELSE
    LOOP
      BEGIN
        stage := NULL;
        -- The queue's group rows first, in key order. An enqueue into a group
        -- and a head finishing take their group's row before they touch the
        -- group's other jobs: taking the rows in the same order leaves no
        -- deadlock with them (with the rows taken after the jobs, a purge and
        -- an ack deadlocked), and waiting here for an open enqueue means the
        -- DELETE below, a statement of its own, sees that enqueue's job too (a
        -- job it missed would be left waiting behind a head purged away).
        SELECT array_agg(l.group_key) INTO held
          FROM (SELECT c.group_key FROM alkstore.groups c WHERE c.queue = q
                 ORDER BY c.group_key FOR UPDATE) l;
        -- The cascade next: every job that dies with what this purge ends
        -- (deps_failed), and its group's row, locked without waiting. Waiting
        -- for one while holding the group rows deadlocked with a transaction
        -- that held it (an enqueue naming it in depends_on) and then enqueued
        -- into one of these groups (issue 57). One another transaction holds:
        -- let go of everything, wait for it holding nothing, start again.
        WITH RECURSIVE c(id) AS (
          SELECT d.job_id FROM alkstore.job_deps d
           WHERE d.dep_id = ANY (ARRAY(
                   SELECT x.id FROM alkstore.jobs x
                    WHERE x.queue = q AND x.dependents
                      AND x.state IN ('pending', 'waiting', 'scheduled', 'blocked', 'parked')
                      AND (x.group_key IS NULL OR x.group_key = ANY (held))))
          UNION
          SELECT d.job_id FROM alkstore.job_deps d JOIN c ON d.dep_id = c.id
        )
        SELECT array_agg(c.id ORDER BY c.id) INTO cascade FROM c;
        IF cascade IS NOT NULL THEN
          stage := 'jobs';
          PERFORM FROM alkstore.jobs j WHERE j.id = ANY (cascade) ORDER BY j.id FOR UPDATE NOWAIT;
          stage := 'groups';
          PERFORM FROM (SELECT FROM alkstore.groups c
                         WHERE (c.queue, c.group_key) IN (SELECT j.queue, j.group_key FROM alkstore.jobs j
                                                           WHERE j.id = ANY (cascade) AND j.group_key IS NOT NULL)
                         ORDER BY c.queue, c.group_key FOR UPDATE NOWAIT) g;
          stage := NULL;
        END IF;
        -- Only jobs of groups whose rows it holds: a group that came to be
        -- after that (its row made by a later enqueue) is that enqueue's, and
        -- touching it would take its row after jobs, the order that deadlocks.
        -- A job another transaction holds is being claimed or cancelled: that
        -- transaction decides it (waiting for it could deadlock a claim that
        -- dead-letters a grouped job and wants its group's row).
        WITH d AS (
          DELETE FROM alkstore.jobs j
           WHERE j.id IN (SELECT x.id FROM alkstore.jobs x
                           WHERE x.queue = q AND x.state IN ('pending', 'waiting', 'scheduled', 'blocked', 'parked')
                             AND (x.group_key IS NULL OR x.group_key = ANY (held))
                             FOR UPDATE SKIP LOCKED)
          RETURNING j.id, j.group_key, j.dependents
        )
        SELECT count(*), array_agg(d.group_key) FILTER (WHERE d.group_key IS NOT NULL), array_agg(d.id),
               array_agg(d.id) FILTER (WHERE d.dependents)
          INTO n, gs, ids, dj FROM d;
        DELETE FROM alkstore.parked p WHERE p.queue = q AND p.id = ANY (ids); -- (limit.sql)
        -- Purged pending jobs count as cancelled for their dependents, now and
        -- for a later depends_on (deps.sql).
        PERFORM alkstore.jobs_ended(ids, 'cancelled');
        IF dj IS NOT NULL THEN
          PERFORM alkstore.deps_failed(dj, 'cancelled');
        END IF;
        IF gs IS NOT NULL THEN
          UPDATE alkstore.groups c SET jobs = c.jobs - x.n
            FROM (SELECT u.g, count(*)::integer AS n FROM unnest(gs) AS u(g) GROUP BY u.g) x
           WHERE c.queue = q AND c.group_key = x.g;
          DELETE FROM alkstore.groups c WHERE c.queue = q AND c.jobs <= 0;
          -- A group that still has jobs but lost its head gets the next one.
          UPDATE alkstore.jobs j SET state = CASE WHEN j.deps_left > 0 THEN 'blocked' -- (deps.sql)
                                    WHEN j.run_at > clock_timestamp() THEN 'scheduled' ELSE 'pending' END
           WHERE j.id = ANY (ARRAY(
                   SELECT (SELECT min(w.id) FROM alkstore.jobs w
                            WHERE w.queue = q AND w.group_key = c.group_key AND w.state = 'waiting')
                     FROM alkstore.groups c
                    WHERE c.queue = q AND c.group_key = ANY (gs)
                      AND NOT EXISTS (SELECT FROM alkstore.jobs h
                                       WHERE h.queue = q AND h.group_key = c.group_key
                                         AND h.state IN ('pending', 'running', 'scheduled', 'blocked', 'parked'))));
          IF FOUND THEN
            PERFORM alkstore.wake('q', q);
          END IF;
        END IF;
        EXIT;
      EXCEPTION WHEN lock_not_available THEN
        IF stage IS NULL THEN
          RAISE; -- not the cascade's (the caller's lock_timeout, say)
        END IF;
        BEGIN -- wait for the holder, then let go again
          IF stage = 'jobs' THEN
            PERFORM FROM alkstore.jobs j WHERE j.id = ANY (cascade) ORDER BY j.id FOR UPDATE;
          ELSE
            PERFORM FROM (SELECT FROM alkstore.groups c
                           WHERE (c.queue, c.group_key) IN (SELECT j.queue, j.group_key FROM alkstore.jobs j
                                                             WHERE j.id = ANY (cascade) AND j.group_key IS NOT NULL)
                           ORDER BY c.queue, c.group_key FOR UPDATE) g;
          END IF;
          RAISE SQLSTATE 'ALK00';
        EXCEPTION WHEN SQLSTATE 'ALK00' THEN
          NULL;
        END;
      WHEN deadlock_detected THEN
        -- Chosen to break a cycle this ordering did not foresee (a job
        -- that came to depend on one purged after the cascade was read; a
        -- cancel of the waiting job a handover promotes, which may lose
        -- instead): everything let go, start again, a few times.
        retries := retries + 1;
        IF retries > 3 THEN
          RAISE;
        END IF;
      END;
    END LOOP;
  END IF;
  RETURN n;
END $$;

-- Every stream (published to, or with a saved offset): its first and last
-- kept offsets (0 and 0 with none) and its consumers with their lag.
-- Events waiting for a sequencer (alk_sequence) are not counted yet.
CREATE OR REPLACE FUNCTION alk_streams()
RETURNS TABLE (stream text, first_offset bigint, last_offset bigint, consumers jsonb)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
  WITH names AS (
    SELECT s.stream AS n FROM alkstore.streams s UNION SELECT o.stream FROM alkstore.offsets o
    UNION SELECT p.stream FROM alkstore.published p
  ), spans AS (
    SELECT names.n,
           coalesce((SELECT min(e."offset") FROM alkstore.events e WHERE e.stream = names.n), 0) AS first,
           coalesce((SELECT max(e."offset") FROM alkstore.events e WHERE e.stream = names.n), 0) AS last
      FROM names
  )
  SELECT spans.n, spans.first, spans.last,
         coalesce((SELECT jsonb_agg(jsonb_build_object('consumer', o.consumer, 'offset', o."offset",
                                                       'lag', greatest(spans.last - o."offset", 0))
                                    ORDER BY o.consumer)
                     FROM alkstore.offsets o WHERE o.stream = spans.n), '[]'::jsonb)
    FROM spans ORDER BY spans.n;
END $$;

-- Every lease row; a released one has no owner and no expiry.
CREATE OR REPLACE FUNCTION alk_locks()
RETURNS TABLE (name text, owner text, token bigint, expires_at text, held boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY
  SELECT l.name, l.owner, l.token,
         CASE WHEN l.owner IS NULL THEN NULL ELSE alkstore.ts(l.expires_at) END,
         l.owner IS NOT NULL AND l.expires_at > clock_timestamp()
    FROM alkstore.locks l ORDER BY l.name;
END $$;

-- Deletes one dead or completed job (what alk_purge does to a whole
-- state, for one id: the dashboard's "purge what the filter matches").
-- A pending or running job is not deleted: alk_cancel is for those. A dead
-- one is remembered as ended without an ack (deps.sql), as a purge does.
-- A concurrent requeue or prune holds the row: the DELETE waits for it and
-- then finds the job in its new state (or gone), and returns false.
CREATE OR REPLACE FUNCTION alk_delete_job(job_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid bigint := alkstore.job_id(job_id);
  was text;
BEGIN
  -- Looked for again once when not found: the rotation may have moved the
  -- job under the first statement (rotate.sql).
  FOR tries IN 1..2 LOOP
    DELETE FROM alkstore.jobs j WHERE j.id = jid AND j.state IN ('dead', 'completed')
    RETURNING j.state INTO was;
    EXIT WHEN FOUND;
  END LOOP;
  IF was = 'dead' THEN
    PERFORM alkstore.jobs_ended(ARRAY[jid], 'dead');
  END IF;
  RETURN was IS NOT NULL;
END $$;
