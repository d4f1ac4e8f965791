-- Queues (contract §5). Public functions are SECURITY DEFINER with a pinned
-- search_path: application roles need no rights on the tables, and a
-- hostile search_path cannot redirect anything they reference.

-- Inserts one job stamped with the resolved options (shared by queues and
-- outboxes). PL/pgSQL throughout the hot paths: its statement plans are
-- cached per session, where a SQL-language function is planned per call.
CREATE OR REPLACE FUNCTION alkstore.enqueue(q text, stamped alkstore.queue_opts, opts jsonb, payload jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  now timestamptz := clock_timestamp();
  o   alkstore.enqueue_opts := alkstore.enqueue_opts(opts, now);
  p   jsonb := alkstore.payload('payload', payload);
  id  bigint;
BEGIN
  INSERT INTO alkstore.jobs AS j (queue, state, payload, priority, attempts, max_attempts,
    visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, expires_at)
  VALUES (q, 'pending', p, o.priority, 0, coalesce(o.max_attempts, stamped.max_attempts),
    stamped.visibility_timeout_ms, stamped.backoff_base_ms, stamped.backoff_max_ms, o.run_at, now, o.expires_at)
  RETURNING j.id INTO id;
  PERFORM alkstore.wake('q', q);
  RETURN id;
END $$;

CREATE OR REPLACE FUNCTION alkstore.enqueue_batch(q text, stamped alkstore.queue_opts, opts jsonb, payloads jsonb)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  now timestamptz := clock_timestamp();
  o   alkstore.enqueue_opts := alkstore.enqueue_opts(opts, now);
  ids bigint[];
BEGIN
  IF payloads IS NULL OR jsonb_typeof(payloads) <> 'array' THEN
    PERFORM alkstore.raise('ALK04', format('payloads must be a JSON array, got %s', coalesce(alkstore.excerpt(payloads::text), 'NULL')));
  END IF;
  WITH rows AS (
    INSERT INTO alkstore.jobs (queue, state, payload, priority, attempts, max_attempts,
      visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, expires_at)
    SELECT q, 'pending', p.value, o.priority, 0, coalesce(o.max_attempts, stamped.max_attempts),
      stamped.visibility_timeout_ms, stamped.backoff_base_ms, stamped.backoff_max_ms, o.run_at, now, o.expires_at
    FROM jsonb_array_elements(payloads) WITH ORDINALITY AS p(value, n)
    ORDER BY p.n
    RETURNING id
  )
  SELECT coalesce(array_agg(rows.id ORDER BY rows.id), '{}') INTO ids FROM rows;
  IF cardinality(ids) > 0 THEN
    PERFORM alkstore.wake('q', q);
  END IF;
  RETURN ids;
END $$;

-- Claims up to max_jobs in claim order (priority DESC, run_at, id) among
-- runnable pending jobs and running jobs whose claim expired. FOR UPDATE
-- SKIP LOCKED: concurrent claimers never block on or share a job.
CREATE OR REPLACE FUNCTION alkstore.claim(q text, worker text, max_jobs integer)
RETURNS TABLE (id bigint, queue text, payload jsonb, attempts integer, max_attempts integer,
               claim_expires_at timestamptz)
-- A generic plan: the custom plans PL/pgSQL would otherwise keep choosing
-- for these statements cost more to make than to run.
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  now    timestamptz := clock_timestamp();
  chosen bigint[]; -- when expired claims compete with pending jobs: the ones to take
  any_expired boolean;
BEGIN
  -- Jobs that may not run any more go to the dead-letter state instead.
  -- (id = ANY (ARRAY(…)): a plan that can only probe the primary key.)
  UPDATE alkstore.jobs j SET state = 'dead', last_error = 'expired'
   WHERE j.id = ANY (ARRAY(
           SELECT e.id FROM alkstore.jobs e
            WHERE e.queue = q AND e.state = 'pending' AND e.expires_at <= now
            FOR UPDATE SKIP LOCKED));
  UPDATE alkstore.jobs j SET state = 'dead', last_error = 'visibility timeout exceeded on final attempt',
         claimed_by = NULL, claim_expires_at = NULL
   WHERE j.id = ANY (ARRAY(
           SELECT e.id FROM alkstore.jobs e
            WHERE e.queue = q AND e.state = 'running' AND e.claim_expires_at <= now
              AND e.attempts >= e.max_attempts
            FOR UPDATE SKIP LOCKED));
  -- Expired claims are rare: one index probe says whether there are any.
  -- When there are, both sides are candidates, and locking max_jobs rows on
  -- each would keep other workers off rows this claim does not take until it
  -- ends. So choose first, skipping rows others hold, in a subtransaction
  -- that is then rolled back (releasing its locks); then lock the chosen.
  any_expired := EXISTS (SELECT FROM alkstore.jobs e
                          WHERE e.queue = q AND e.state = 'running' AND e.claim_expires_at <= now);
  IF any_expired THEN
    BEGIN
      WITH p AS (
        SELECT c.id, c.priority, c.run_at FROM alkstore.jobs c
         WHERE c.queue = q AND c.state = 'pending' AND c.run_at <= now
           AND (c.expires_at IS NULL OR c.expires_at > now)
         ORDER BY c.priority DESC, c.run_at, c.id LIMIT max_jobs
         FOR UPDATE SKIP LOCKED
      ), e AS (
        SELECT c.id, c.priority, c.run_at FROM alkstore.jobs c
         WHERE c.queue = q AND c.state = 'running' AND c.claim_expires_at <= now
           AND c.attempts < c.max_attempts
         ORDER BY c.priority DESC, c.run_at, c.id LIMIT max_jobs
         FOR UPDATE SKIP LOCKED
      )
      SELECT coalesce(array_agg(u.id), '{}') INTO chosen FROM (
        SELECT * FROM p UNION ALL SELECT * FROM e
         ORDER BY priority DESC, run_at, id LIMIT max_jobs) u;
      RAISE SQLSTATE 'ALK00'; -- roll the subtransaction back: its locks go
    EXCEPTION WHEN SQLSTATE 'ALK00' THEN
      NULL;
    END;
  END IF;
  RETURN QUERY
  WITH pending AS (
    SELECT c.id, c.priority, c.run_at FROM alkstore.jobs c
     WHERE c.queue = q AND c.state = 'pending' AND c.run_at <= now
       AND (c.expires_at IS NULL OR c.expires_at > now)
       AND (chosen IS NULL OR c.id = ANY (chosen))
     ORDER BY c.priority DESC, c.run_at, c.id
     LIMIT max_jobs
     FOR UPDATE SKIP LOCKED
  ), expired AS (
    SELECT c.id, c.priority, c.run_at FROM alkstore.jobs c
     WHERE c.queue = q AND c.state = 'running' AND c.claim_expires_at <= now
       AND c.attempts < c.max_attempts
       AND (chosen IS NULL OR c.id = ANY (chosen))
     ORDER BY c.priority DESC, c.run_at, c.id
     LIMIT CASE WHEN any_expired THEN max_jobs ELSE 0 END -- 0: not even scanned
     FOR UPDATE SKIP LOCKED
  ), claimed AS (
    UPDATE alkstore.jobs j
       SET state = 'running', attempts = j.attempts + 1, claimed_by = worker,
           claim_expires_at = now + j.visibility_timeout_ms * interval '1 millisecond'
     WHERE j.id = ANY (ARRAY(
             SELECT u.id FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) u
              ORDER BY u.priority DESC, u.run_at, u.id
              LIMIT max_jobs))
    RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.claim_expires_at, j.priority, j.run_at
  )
  SELECT c.id, c.queue, c.payload, c.attempts, c.max_attempts, c.claim_expires_at
    FROM claimed c
   ORDER BY c.priority DESC, c.run_at, c.id;
END $$;

CREATE OR REPLACE FUNCTION alk_enqueue(queue text, opts jsonb, payload jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q text := alkstore.name('queue', queue);
BEGIN
  RETURN alkstore.enqueue(q, alkstore.queue_opts(q), opts, payload);
END $$;

CREATE OR REPLACE FUNCTION alk_enqueue_batch(queue text, opts jsonb, payloads jsonb) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q text := alkstore.name('queue', queue);
BEGIN
  RETURN alkstore.enqueue_batch(q, alkstore.queue_opts(q), opts, payloads);
END $$;

-- The first argument is named queue_name: PostgreSQL does not allow an
-- argument and a result column (queue) of the same name.
CREATE OR REPLACE FUNCTION alk_claim(queue_name text, worker text, max_jobs integer DEFAULT 1)
RETURNS TABLE (id bigint, queue text, payload jsonb, attempts integer, max_attempts integer,
               claim_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY SELECT * FROM alkstore.claim(alkstore.name('queue', $1), alkstore.name('worker', $2),
                                            alkstore.batch('max_jobs', $3));
END $$;

CREATE OR REPLACE FUNCTION alk_ack(job_id bigint, worker text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  -- Checked here, not inside the statement: a generic plan need not
  -- evaluate a WHERE term once the job is not found.
  jid bigint := alkstore.job_id(job_id);
  w   text := alkstore.name('worker', worker);
BEGIN
  DELETE FROM alkstore.jobs j WHERE j.id = jid AND j.state = 'running' AND j.claimed_by = w;
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_ack_batch(job_ids bigint[], worker text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  w text := alkstore.name('worker', worker);
  n integer;
BEGIN
  IF job_ids IS NULL OR array_position(job_ids, NULL) IS NOT NULL THEN
    PERFORM alkstore.raise('ALK05', 'job_ids must be an array of job ids without NULLs');
  END IF;
  DELETE FROM alkstore.jobs j
   WHERE j.id = ANY (job_ids) AND j.state = 'running' AND j.claimed_by = w;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;

CREATE OR REPLACE FUNCTION alk_retry(job_id bigint, worker text, error text, delay_s double precision DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  delay_ms bigint := alkstore.arg_ms('delay_s', delay_s, false);
  now      timestamptz := clock_timestamp();
  result   text;
BEGIN
  PERFORM alkstore.job_id(job_id), alkstore.name('worker', worker);
  UPDATE alkstore.jobs j
     SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'pending' END,
         run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at
                  ELSE now + coalesce(delay_ms,
                         least(j.backoff_base_ms * power(2::numeric, greatest(j.attempts - 1, 0)),
                               j.backoff_max_ms)::bigint) * interval '1 millisecond' END,
         last_error = error, claimed_by = NULL, claim_expires_at = NULL
   WHERE j.id = job_id AND j.state = 'running' AND j.claimed_by = worker
  RETURNING j.state INTO result;
  RETURN result;
END $$;

CREATE OR REPLACE FUNCTION alk_fail(job_id bigint, worker text, error text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid bigint := alkstore.job_id(job_id);
  w   text := alkstore.name('worker', worker);
BEGIN
  UPDATE alkstore.jobs j
     SET state = 'dead', last_error = error, claimed_by = NULL, claim_expires_at = NULL
   WHERE j.id = jid AND j.state = 'running' AND j.claimed_by = w;
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_heartbeat(job_id bigint, worker text, extend_s double precision DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid       bigint := alkstore.job_id(job_id);
  w         text := alkstore.name('worker', worker);
  extend_ms bigint := alkstore.arg_ms('extend_s', extend_s, true);
BEGIN
  UPDATE alkstore.jobs j
     SET claim_expires_at = clock_timestamp()
           + coalesce(extend_ms, j.visibility_timeout_ms) * interval '1 millisecond'
   WHERE j.id = jid AND j.state = 'running' AND j.claimed_by = w;
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_cancel(job_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid bigint := alkstore.job_id(job_id);
BEGIN
  DELETE FROM alkstore.jobs j WHERE j.id = jid AND j.state IN ('pending', 'running');
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_get_job(job_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid bigint := alkstore.job_id(job_id);
BEGIN
  RETURN (SELECT jsonb_build_object(
    'id', j.id, 'queue', j.queue, 'state', j.state, 'payload', j.payload,
    'priority', j.priority, 'attempts', j.attempts, 'max_attempts', j.max_attempts,
    'visibility_timeout_s', alkstore.seconds(j.visibility_timeout_ms),
    'backoff_base_s', alkstore.seconds(j.backoff_base_ms),
    'backoff_max_s', alkstore.seconds(j.backoff_max_ms),
    'run_at', alkstore.ts(j.run_at), 'created_at', alkstore.ts(j.created_at),
    'claimed_by', j.claimed_by, 'claim_expires_at', alkstore.ts(j.claim_expires_at),
    'expires_at', alkstore.ts(j.expires_at), 'last_error', j.last_error)
  FROM alkstore.jobs j WHERE j.id = jid);
END $$;

-- Requeue also clears the expiry: putting a dead job back is an explicit
-- decision to run it.
CREATE OR REPLACE FUNCTION alk_requeue_dead(job_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid bigint := alkstore.job_id(job_id);
BEGIN
  UPDATE alkstore.jobs j
     SET state = 'pending', attempts = 0, run_at = clock_timestamp(), expires_at = NULL
   WHERE j.id = jid AND j.state = 'dead';
  IF FOUND THEN
    PERFORM alkstore.wake('q', (SELECT j.queue FROM alkstore.jobs j WHERE j.id = job_id));
  END IF;
  RETURN FOUND;
END $$;

-- Merges the given keys over the queue's options in one statement, so
-- concurrent configures of different keys do not lose each other's keys.
CREATE OR REPLACE FUNCTION alk_queue_configure(queue text, opts jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q      text := alkstore.name('queue', queue);
  merged alkstore.queue_opts;
BEGIN
  PERFORM alkstore.merge_queue_opts(alkstore.default_queue_opts(), opts); -- check before locking
  -- Serialise configures of one queue (the row may not exist yet to lock).
  PERFORM pg_advisory_xact_lock(hashtext('alkstore.queues'), hashtext(q));
  merged := alkstore.merge_queue_opts(alkstore.queue_opts(q), opts);
  INSERT INTO alkstore.queues AS c (queue, visibility_timeout_ms, max_attempts, backoff_base_ms, backoff_max_ms)
  VALUES (q, merged.visibility_timeout_ms, merged.max_attempts, merged.backoff_base_ms, merged.backoff_max_ms)
  ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE SET
    visibility_timeout_ms = excluded.visibility_timeout_ms, max_attempts = excluded.max_attempts,
    backoff_base_ms = excluded.backoff_base_ms, backoff_max_ms = excluded.backoff_max_ms;
  RETURN alkstore.queue_opts_json(merged);
END $$;

CREATE OR REPLACE FUNCTION alk_queue_opts(queue text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.queue_opts_json(alkstore.queue_opts(alkstore.name('queue', queue)));
END $$;

-- Each count reads one partial index, so stats cost does not grow with
-- the other states' history.
CREATE OR REPLACE FUNCTION alkstore.stats(q text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  now    timestamptz := clock_timestamp();
  oldest timestamptz;
BEGIN
  SELECT min(j.run_at) INTO oldest FROM alkstore.jobs j
   WHERE j.queue = q AND j.state = 'pending' AND j.run_at <= now;
  RETURN jsonb_build_object(
    'queue', q,
    'pending', (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'pending' AND j.run_at <= now),
    'scheduled', (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'pending' AND j.run_at > now),
    'running', (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'running'),
    'dead', (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'dead'),
    'oldest_runnable_age_s',
      CASE WHEN oldest IS NULL THEN NULL
           ELSE alkstore.seconds(greatest(floor(extract(epoch FROM now - oldest) * 1000), 0)::bigint) END);
END $$;

CREATE OR REPLACE FUNCTION alk_queue_stats(queue text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.stats(alkstore.name('queue', queue));
END $$;

CREATE OR REPLACE FUNCTION alk_sweep(queue text DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q   text := CASE WHEN queue IS NULL THEN NULL ELSE alkstore.name('queue', queue) END;
  now timestamptz := clock_timestamp();
  a   integer;
  b   integer;
BEGIN
  UPDATE alkstore.jobs j SET state = 'dead', last_error = 'expired'
   WHERE j.state = 'pending' AND j.expires_at <= now AND (q IS NULL OR j.queue = q);
  GET DIAGNOSTICS a = ROW_COUNT;
  UPDATE alkstore.jobs j SET state = 'dead', last_error = 'visibility timeout exceeded on final attempt',
         claimed_by = NULL, claim_expires_at = NULL
   WHERE j.state = 'running' AND j.claim_expires_at <= now AND j.attempts >= j.max_attempts
     AND (q IS NULL OR j.queue = q);
  GET DIAGNOSTICS b = ROW_COUNT;
  RETURN a + b;
END $$;
