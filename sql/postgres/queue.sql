-- Queues (contract §5). Public functions are SECURITY DEFINER with a pinned
-- search_path: application roles need no rights on the tables, and a
-- hostile search_path cannot redirect anything they reference.

-- Inserts one job stamped with the resolved options (shared by queues and
-- outboxes). PL/pgSQL throughout the hot paths: its statement plans are
-- cached per session, where a SQL-language function is planned per call.
CREATE OR REPLACE FUNCTION alkstore.enqueue(q text, stamped alkstore.queue_opts, opts jsonb, payload jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  now   timestamptz := clock_timestamp();
  o     alkstore.enqueue_opts := alkstore.enqueue_opts(opts, now);
  p     jsonb := alkstore.payload('payload', payload);
  id    bigint;
  state text := CASE WHEN o.run_at > now THEN 'scheduled' ELSE 'pending' END; -- (ahead.sql)
  dwait bigint[]; -- with depends_on: the dependencies not acked yet,
  dfail text;     -- and the error of one that ended without an ack (deps.sql)
BEGIN
  IF o.depends_on IS NOT NULL THEN
    SELECT r.waiting, r.failed INTO dwait, dfail FROM alkstore.deps_resolve(o.depends_on, false) r;
    state := CASE WHEN dfail IS NOT NULL THEN 'dead'
                  WHEN cardinality(dwait) > 0 THEN 'blocked' ELSE state END;
  END IF;
  IF o.idempotency_key IS NOT NULL THEN
    -- Claim the key first, with the id the job will have: whoever holds
    -- the key row decides, and a second enqueue waits for that one's end.
    id := nextval('alkstore.jobs_id_seq');
    INSERT INTO alkstore.idempotency AS k (queue, key, job_id, expires_at)
    VALUES (q, o.idempotency_key, id,
            now + coalesce(o.idempotency_ttl_ms, alkstore.default_idempotency_ttl_ms()) * interval '1 millisecond')
    ON CONFLICT ON CONSTRAINT idempotency_pkey DO UPDATE
      SET job_id = excluded.job_id, expires_at = excluded.expires_at
      WHERE k.expires_at <= now -- a key past its TTL is free again, pruned or not
    RETURNING k.job_id INTO id;
    IF id IS NULL THEN
      RETURN (SELECT k.job_id FROM alkstore.idempotency k WHERE k.queue = q AND k.key = o.idempotency_key);
    END IF;
  END IF;
  -- (A job dead at once, its dependency dead or cancelled, joins no group.)
  IF o.group_key IS NOT NULL AND state <> 'dead' AND NOT alkstore.group_join(q, o.group_key, 1) THEN
    state := 'waiting';
  END IF;
  IF id IS NULL THEN
    INSERT INTO alkstore.jobs AS j (queue, state, payload, priority, attempts, max_attempts,
      visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, expires_at, group_key,
      limit_key, depends_on, deps_left, last_error, prune_at, slot)
    VALUES (q, state, p, o.priority, 0, coalesce(o.max_attempts, stamped.max_attempts),
      stamped.visibility_timeout_ms, stamped.backoff_base_ms, stamped.backoff_max_ms, o.run_at, now,
      o.expires_at, o.group_key, o.limit_key, o.depends_on, nullif(cardinality(dwait), 0),
      dfail, CASE WHEN state = 'dead' THEN alkstore.dead_prune_at(q, now) END,
      CASE WHEN state = 'pending' THEN alkstore.hot_slot(clock_timestamp()) ELSE 2 END)
    RETURNING j.id INTO id;
  ELSE
    INSERT INTO alkstore.jobs AS j (id, queue, state, payload, priority, attempts, max_attempts,
      visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, expires_at, group_key,
      idempotency_key, limit_key, depends_on, deps_left, last_error, prune_at, slot)
    OVERRIDING SYSTEM VALUE
    VALUES (id, q, state, p, o.priority, 0, coalesce(o.max_attempts, stamped.max_attempts),
      stamped.visibility_timeout_ms, stamped.backoff_base_ms, stamped.backoff_max_ms, o.run_at, now,
      o.expires_at, o.group_key, o.idempotency_key, o.limit_key, o.depends_on,
      nullif(cardinality(dwait), 0), dfail,
      CASE WHEN state = 'dead' THEN alkstore.dead_prune_at(q, now) END,
      CASE WHEN state = 'pending' THEN alkstore.hot_slot(clock_timestamp()) ELSE 2 END);
  END IF;
  IF cardinality(dwait) > 0 AND dfail IS NULL THEN
    PERFORM alkstore.deps_link(ARRAY[id], dwait);
  END IF;
  IF state = 'pending' THEN
    PERFORM alkstore.wake('q', q);
  END IF;
  RETURN id;
END $$;

-- The options apply to every payload: no idempotency key (contract v1.1
-- §C1); with a group_key, the jobs join the group in payload order.
CREATE OR REPLACE FUNCTION alkstore.enqueue_batch(q text, stamped alkstore.queue_opts, opts jsonb, payloads jsonb)
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  now  timestamptz := clock_timestamp();
  o    alkstore.enqueue_opts := alkstore.enqueue_opts(opts, now);
  ids  bigint[];
  head boolean := true; -- whether the first job heads its group
  dwait bigint[];        -- with depends_on: the dependencies not acked yet,
  dfail text;            -- and the error of one that ended without an ack (deps.sql)
  hold boolean := false; -- waiting for dependencies
BEGIN
  IF o.idempotency_key IS NOT NULL OR o.idempotency_ttl_ms IS NOT NULL THEN
    PERFORM alkstore.raise('ALK03', 'idempotency_key and idempotency_ttl_s cannot be given to a batch enqueue: '
                                    'its options apply to every payload');
  END IF;
  IF payloads IS NULL OR jsonb_typeof(payloads) <> 'array' THEN
    PERFORM alkstore.raise('ALK04', format('payloads must be a JSON array, got %s', coalesce(alkstore.excerpt(payloads::text), 'NULL')));
  END IF;
  IF o.depends_on IS NOT NULL AND jsonb_array_length(payloads) > 0 THEN
    SELECT r.waiting, r.failed INTO dwait, dfail FROM alkstore.deps_resolve(o.depends_on, false) r;
    hold := cardinality(dwait) > 0;
  END IF;
  IF o.group_key IS NOT NULL AND jsonb_array_length(payloads) > 0 AND dfail IS NULL THEN
    head := alkstore.group_join(q, o.group_key, jsonb_array_length(payloads));
  END IF;
  WITH rows AS (
    INSERT INTO alkstore.jobs (queue, state, payload, priority, attempts, max_attempts,
      visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, expires_at, group_key,
      limit_key, depends_on, deps_left, last_error, prune_at, slot)
    SELECT q, s.state,
      p.value, o.priority, 0, coalesce(o.max_attempts, stamped.max_attempts),
      stamped.visibility_timeout_ms, stamped.backoff_base_ms, stamped.backoff_max_ms, o.run_at, now,
      o.expires_at, o.group_key, o.limit_key, o.depends_on, nullif(cardinality(dwait), 0),
      dfail, CASE WHEN dfail IS NOT NULL THEN alkstore.dead_prune_at(q, now) END,
      CASE WHEN s.state = 'pending' THEN alkstore.hot_slot(clock_timestamp()) ELSE 2 END
    FROM jsonb_array_elements(payloads) WITH ORDINALITY AS p(value, n),
         LATERAL (SELECT CASE WHEN dfail IS NOT NULL THEN 'dead'
                              WHEN o.group_key IS NOT NULL AND NOT (head AND p.n = 1) THEN 'waiting'
                              WHEN hold THEN 'blocked'
                              WHEN o.run_at > now THEN 'scheduled' ELSE 'pending' END AS state) s
    ORDER BY p.n
    RETURNING id
  )
  SELECT coalesce(array_agg(rows.id ORDER BY rows.id), '{}') INTO ids FROM rows;
  IF hold AND dfail IS NULL THEN
    PERFORM alkstore.deps_link(ids, dwait);
  END IF;
  IF cardinality(ids) > 0 AND head AND o.run_at <= now AND NOT hold AND dfail IS NULL THEN
    PERFORM alkstore.wake('q', q);
  END IF;
  RETURN ids;
END $$;

-- The row of a job written due with no options into hot slot s (schema.sql),
-- stamped with the queue's options or the defaults where it has no row
-- (its columns are NOT NULL). A SQL function of one SELECT returning a set:
-- PostgreSQL inlines it into the statement that reads it, under that
-- statement's search_path (alk_enqueue's: every name here is qualified).
-- STABLE though it draws from the sequence: a VOLATILE one is never
-- inlined (EXPLAIN VERBOSE shows the nextval in the INSERT's plan), and
-- inlined, its row is made once per statement, as a VOLATILE one would be.
CREATE OR REPLACE FUNCTION alkstore.due_job(q text, p jsonb, now timestamptz, s smallint)
RETURNS SETOF alkstore.jobs LANGUAGE sql STABLE AS $$
  SELECT nextval('alkstore.jobs_id_seq'), q, 'pending', p, 0, 0,
         coalesce(c.max_attempts, (alkstore.default_queue_opts()).max_attempts),
         coalesce(c.visibility_timeout_ms, (alkstore.default_queue_opts()).visibility_timeout_ms),
         coalesce(c.backoff_base_ms, (alkstore.default_queue_opts()).backoff_base_ms),
         coalesce(c.backoff_max_ms, (alkstore.default_queue_opts()).backoff_max_ms),
         now, now, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text,
         NULL::timestamptz, NULL::jsonb, NULL::timestamptz, NULL::text, NULL::bigint[], NULL::integer,
         NULL::boolean, NULL::jsonb, s
    FROM (SELECT 1) o LEFT JOIN alkstore.queues c ON c.queue = q
$$;

-- The common call -- no options, a valid name and payload -- runs as one
-- statement here: each nested PL/pgSQL call and statement costs CPU that a
-- backend woken from its commit's WAL flush pays at cache-cold speed
-- (docs/benchmarks.md). Anything else, every error included, takes the
-- general path, so both give the same results. The statement names the
-- slot's partition: an INSERT into the partitioned table sets up its
-- routing to a partition anew at every call, a quarter of an enqueue's CPU
-- (docs/benchmarks.md, "The reshape, built").
CREATE OR REPLACE FUNCTION alk_enqueue(queue text, opts jsonb, payload jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q   ALIAS FOR $1;
  p   ALIAS FOR $3;
  id  bigint;
  now timestamptz;
BEGIN
  IF (opts IS NULL OR opts = ANY (ARRAY['null'::jsonb, '{}'::jsonb])) AND p IS NOT NULL
     AND alkstore.name_ok('queue', q) THEN
    now := clock_timestamp();
    IF alkstore.hot_slot(now) = 0 THEN
      INSERT INTO alkstore.jobs_slot0 SELECT * FROM alkstore.due_job(q, p, now, 0::smallint)
      RETURNING alkstore.wake('q', q, jobs_slot0.id) INTO id;
    ELSE
      INSERT INTO alkstore.jobs_slot1 SELECT * FROM alkstore.due_job(q, p, now, 1::smallint)
      RETURNING alkstore.wake('q', q, jobs_slot1.id) INTO id;
    END IF;
    RETURN id;
  END IF;
  q := alkstore.name('queue', q);
  RETURN alkstore.enqueue(q, alkstore.queue_opts(q), opts, p);
END $$;

CREATE OR REPLACE FUNCTION alk_enqueue_batch(queue text, opts jsonb, payloads jsonb) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q text := alkstore.name('queue', queue);
BEGIN
  RETURN alkstore.enqueue_batch(q, alkstore.queue_opts(q), opts, payloads);
END $$;

-- What follows from a batch of acks (alk_ack_batch, templates/ack_batch.sql,
-- and the extension's library, pg_ext/src/ack.rs), with what its
-- statement returned: the grouped jobs' groups go on to their next job,
-- the jobs that depend on acked ones are released, and a finish under a
-- running limit wakes a waiting worker and puts its key's parked jobs back
-- (limit.sql). fq is NULL when no queue has limits.
CREATE OR REPLACE FUNCTION alkstore.batch_acked(qs text[], gs text[], fq text[], dj bigint[], kq text[], kk text[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF gs IS NOT NULL THEN
    PERFORM alkstore.groups_done(qs, gs);
  END IF;
  IF dj IS NOT NULL THEN
    PERFORM alkstore.deps_acked(dj);
  END IF;
  IF fq IS NOT NULL THEN
    PERFORM alkstore.wake('q', x) FROM unnest(fq) x
      WHERE EXISTS (SELECT FROM alkstore.queue_limits l
                     WHERE l.queue = x AND num_nonnulls(l.max_running, l.key_max_running) > 0);
    IF kk IS NOT NULL THEN
      PERFORM alkstore.unpark(x.q, x.k) FROM (SELECT DISTINCT u.q, u.k FROM unnest(kq, kk) u(q, k)) x;
    END IF;
  END IF;
END $$;

CREATE OR REPLACE FUNCTION alk_retry(job_id bigint, worker text, error text, delay_s double precision DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  delay_ms bigint;
  now      timestamptz := clock_timestamp();
  result   text;
  q        text;
  g        text;
  limited  boolean; -- a running limit: a finish wakes a waiting worker (limit.sql)
  k        text;    -- its limit_key: a finish puts the key's parked jobs back (limit.sql)
  deps     boolean; -- jobs depend on it (deps.sql)
BEGIN
  -- Arguments in order, as every function (and SQLite) checks them.
  IF (job_id IS NOT NULL AND alkstore.name_ok('worker', worker)) IS NOT TRUE THEN
    PERFORM alkstore.job_id(job_id), alkstore.name('worker', worker); -- (one expression: alk_claim)
  END IF;
  IF delay_s IS NOT NULL THEN
    delay_ms := alkstore.arg_ms('delay_s', delay_s, false);
  END IF;
  -- A retried head stays its group's head (contract v1.1 §C2).
  UPDATE alkstore.jobs j
     SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead'
                      WHEN coalesce(delay_ms, least(j.backoff_base_ms * power(2::numeric, greatest(j.attempts - 1, 0)),
                                                    j.backoff_max_ms)::bigint) > 0 THEN 'scheduled' -- (ahead.sql)
                      ELSE 'pending' END,
         run_at = CASE WHEN j.attempts >= j.max_attempts THEN j.run_at
                  ELSE now + coalesce(delay_ms,
                         least(j.backoff_base_ms * power(2::numeric, greatest(j.attempts - 1, 0)),
                               j.backoff_max_ms)::bigint) * interval '1 millisecond' END,
         prune_at = CASE WHEN j.attempts >= j.max_attempts THEN alkstore.dead_prune_at(j.queue, now) END,
         last_error = error, errors = alkstore.push_error(j.errors, j.attempts, error),
         claimed_by = NULL, claim_expires_at = NULL
   WHERE j.id = job_id AND j.state = 'running' COLLATE "C" AND j.claimed_by = worker
  RETURNING CASE WHEN j.state = 'dead' THEN 'dead' ELSE 'pending' END, j.queue, j.group_key,
    EXISTS (SELECT FROM alkstore.queue_limits l WHERE l.queue = j.queue AND num_nonnulls(l.max_running, l.key_max_running) > 0),
    j.dependents, j.limit_key
    INTO result, q, g, limited, deps, k;
  IF result = 'dead' AND g IS NOT NULL THEN
    PERFORM alkstore.group_done(q, g, true);
  END IF;
  IF result = 'dead' AND deps THEN
    PERFORM alkstore.deps_failed(ARRAY[job_id], 'dead');
  END IF;
  IF limited THEN
    PERFORM alkstore.limit_freed(q, k);
  END IF;
  RETURN result;
END $$;

CREATE OR REPLACE FUNCTION alk_fail(job_id bigint, worker text, error text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid ALIAS FOR $1;
  w   ALIAS FOR $2;
  q   text;
  g   text;
  limited boolean; -- a running limit: a finish wakes a waiting worker (limit.sql)
  k       text;    -- its limit_key: a finish puts the key's parked jobs back (limit.sql)
  deps    boolean; -- jobs depend on it (deps.sql)
BEGIN
  IF (jid IS NOT NULL AND alkstore.name_ok('worker', w)) IS NOT TRUE THEN
    PERFORM alkstore.job_id(jid), alkstore.name('worker', w); -- (one expression: alk_claim)
  END IF;
  UPDATE alkstore.jobs j
     SET state = 'dead', last_error = error, errors = alkstore.push_error(j.errors, j.attempts, error),
         claimed_by = NULL, claim_expires_at = NULL,
         prune_at = alkstore.dead_prune_at(j.queue, clock_timestamp())
   WHERE j.id = jid AND j.state = 'running' COLLATE "C" AND j.claimed_by = w
  RETURNING j.queue, j.group_key,
    EXISTS (SELECT FROM alkstore.queue_limits l WHERE l.queue = j.queue AND num_nonnulls(l.max_running, l.key_max_running) > 0),
    j.dependents, j.limit_key
    INTO q, g, limited, deps, k;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF g IS NOT NULL THEN
    PERFORM alkstore.group_done(q, g, true);
  END IF;
  IF deps THEN
    PERFORM alkstore.deps_failed(ARRAY[jid], 'dead');
  END IF;
  IF limited THEN
    PERFORM alkstore.limit_freed(q, k);
  END IF;
  RETURN true;
END $$;

CREATE OR REPLACE FUNCTION alk_heartbeat(job_id bigint, worker text, extend_s double precision DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid       ALIAS FOR $1;
  w         ALIAS FOR $2;
  extend_ms bigint;
BEGIN
  IF (jid IS NOT NULL AND alkstore.name_ok('worker', w)) IS NOT TRUE THEN
    PERFORM alkstore.job_id(jid), alkstore.name('worker', w); -- (one expression: alk_claim)
  END IF;
  IF extend_s IS NOT NULL THEN
    extend_ms := alkstore.arg_ms('extend_s', extend_s, true);
  END IF;
  UPDATE alkstore.jobs j
     SET claim_expires_at = clock_timestamp()
           + coalesce(extend_ms, j.visibility_timeout_ms) * interval '1 millisecond'
   WHERE j.id = jid AND j.state = 'running' COLLATE "C" AND j.claimed_by = w;
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_cancel(job_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid bigint := alkstore.job_id(job_id);
  q   text;
  g   text;
  was text;
  limited boolean; -- a running limit: a finish wakes a waiting worker (limit.sql)
  k       text;    -- its limit_key: a finish puts the key's parked jobs back (limit.sql)
  deps    boolean; -- jobs depend on it (deps.sql)
BEGIN
  DELETE FROM alkstore.jobs j WHERE j.id = jid AND j.state IN ('pending', 'running', 'waiting', 'scheduled', 'blocked', 'parked')
  RETURNING j.queue, j.group_key, j.state,
    j.state = 'running' AND EXISTS (SELECT FROM alkstore.queue_limits l WHERE l.queue = j.queue AND num_nonnulls(l.max_running, l.key_max_running) > 0),
    j.dependents, j.limit_key
    INTO q, g, was, limited, deps, k;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF was = 'parked' THEN
    DELETE FROM alkstore.parked p WHERE p.id = jid; -- (limit.sql)
  ELSIF was = 'pending' AND k IS NOT NULL THEN
    -- Its key's jobs parked behind it would wait for a finish that may
    -- never come (limit.sql).
    PERFORM alkstore.unpark(q, k);
  END IF;
  -- Gone without an ack: a later depends_on naming it must not take it
  -- for acked; those waiting for it now go dead (deps.sql).
  PERFORM alkstore.jobs_ended(ARRAY[jid], 'cancelled');
  IF deps THEN
    PERFORM alkstore.deps_failed(ARRAY[jid], 'cancelled');
  END IF;
  IF g IS NOT NULL THEN
    PERFORM alkstore.group_done(q, g, was <> 'waiting');
  END IF;
  IF limited THEN
    PERFORM alkstore.limit_freed(q, k);
  END IF;
  RETURN true;
END $$;

-- A waiting job is pending to everyone outside (it only waits for its group),
-- and so are scheduled, blocked and parked ones.
CREATE OR REPLACE FUNCTION alkstore.job_json(j alkstore.jobs) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'id', j.id, 'queue', j.queue,
    'state', CASE WHEN j.state IN ('waiting', 'scheduled', 'blocked', 'parked') THEN 'pending' ELSE j.state END,
    'payload', j.payload,
    'priority', j.priority, 'attempts', j.attempts, 'max_attempts', j.max_attempts,
    'visibility_timeout_s', alkstore.seconds(j.visibility_timeout_ms),
    'backoff_base_s', alkstore.seconds(j.backoff_base_ms),
    'backoff_max_s', alkstore.seconds(j.backoff_max_ms),
    'run_at', alkstore.ts(j.run_at), 'created_at', alkstore.ts(j.created_at),
    'claimed_by', j.claimed_by, 'claim_expires_at', alkstore.ts(j.claim_expires_at),
    'expires_at', alkstore.ts(j.expires_at), 'last_error', j.last_error,
    'idempotency_key', j.idempotency_key, 'group_key', j.group_key, 'limit_key', j.limit_key,
    'completed_at', alkstore.ts(j.completed_at), 'result', j.result,
    'depends_on', to_jsonb(j.depends_on), 'waiting_for', alkstore.waiting_for(j))
$$;

-- Every error the job met, oldest first (each statement that writes
-- last_error appends to errors: alkstore.push_error in common.sql); [] for a
-- job without any, NULL when there is no such job.
CREATE OR REPLACE FUNCTION alk_job_errors(job_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid bigint := alkstore.job_id(job_id);
BEGIN
  RETURN (SELECT coalesce(j.errors, '[]'::jsonb) FROM alkstore.jobs j WHERE j.id = jid);
END $$;

CREATE OR REPLACE FUNCTION alk_get_job(job_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid bigint := alkstore.job_id(job_id);
BEGIN
  RETURN (SELECT alkstore.job_json(j) FROM alkstore.jobs j WHERE j.id = jid);
END $$;

-- Requeue also clears the expiry: putting a dead job back is an explicit
-- decision to run it. A grouped job rejoins its group: it heads it if the
-- group has no other job, else it waits and runs next (lowest id).
CREATE OR REPLACE FUNCTION alkstore.requeue_dead(jid bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  q    text;
  g    text;
  deps bigint[];
  held text; -- with dependencies: 'blocked', 'dead' or NULL (deps.sql)
BEGIN
  -- Looked for again once when not found: the rotation may have moved the
  -- job between this statement's snapshot and its lock (rotate.sql).
  FOR tries IN 1..2 LOOP
    SELECT j.queue, j.group_key, j.depends_on INTO q, g, deps
      FROM alkstore.jobs j WHERE j.id = jid AND j.state = 'dead' COLLATE "C" FOR UPDATE;
    EXIT WHEN FOUND;
    IF tries = 2 THEN
      RETURN false;
    END IF;
  END LOOP;
  -- A dependent waits again for the dependencies not acked (v1.2 §J).
  IF deps IS NOT NULL THEN
    held := alkstore.deps_requeue(jid, deps);
    IF held = 'dead' THEN
      RETURN true; -- a dependency is gone without an ack: dead again, its error says which
    END IF;
  END IF;
  UPDATE alkstore.jobs j
     SET state = CASE WHEN g IS NOT NULL AND NOT alkstore.group_join(q, g, 1) THEN 'waiting'
                      ELSE coalesce(held, 'pending') END,
         attempts = 0, run_at = clock_timestamp(), expires_at = NULL, prune_at = NULL
   WHERE j.id = jid;
  IF held IS NULL THEN
    PERFORM alkstore.wake('q', q);
  END IF;
  RETURN true;
END $$;

CREATE OR REPLACE FUNCTION alk_requeue_dead(job_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.requeue_dead(alkstore.job_id(job_id));
END $$;

-- Merges the given keys over the queue's options in one statement, so
-- concurrent configures of different keys do not lose each other's keys.
CREATE OR REPLACE FUNCTION alk_queue_configure(queue text, opts jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q      text := alkstore.name('queue', queue);
  merged alkstore.queue_opts;
  limits alkstore.queue_limits;
BEGIN
  -- Check before locking (the rate pairs are checked on the merged limits).
  PERFORM alkstore.merge_queue_opts(alkstore.default_queue_opts(), opts),
          alkstore.merge_limits(alkstore.queue_limits(q), opts, false);
  -- Serialise configures of one queue (the row may not exist yet to lock).
  PERFORM pg_advisory_xact_lock(hashtext('alkstore.queues'), hashtext(q));
  merged := alkstore.merge_queue_opts(alkstore.queue_opts(q), opts);
  limits := alkstore.merge_limits(alkstore.queue_limits(q), opts, true);
  PERFORM alkstore.set_limits(limits);
  INSERT INTO alkstore.queues AS c (queue, visibility_timeout_ms, max_attempts, backoff_base_ms, backoff_max_ms,
                                    retain_completed_ms, retain_dead_ms)
  VALUES (q, merged.visibility_timeout_ms, merged.max_attempts, merged.backoff_base_ms, merged.backoff_max_ms,
          merged.retain_completed_ms, merged.retain_dead_ms)
  ON CONFLICT ON CONSTRAINT queues_pkey DO UPDATE SET
    visibility_timeout_ms = excluded.visibility_timeout_ms, max_attempts = excluded.max_attempts,
    backoff_base_ms = excluded.backoff_base_ms, backoff_max_ms = excluded.backoff_max_ms,
    retain_completed_ms = excluded.retain_completed_ms, retain_dead_ms = excluded.retain_dead_ms;
  RETURN alkstore.queue_opts_json(merged) || alkstore.limits_json(limits);
END $$;

CREATE OR REPLACE FUNCTION alk_queue_opts(queue text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q text := alkstore.name('queue', queue);
BEGIN
  RETURN alkstore.queue_opts_json(alkstore.queue_opts(q)) || alkstore.limits_json(alkstore.queue_limits(q));
END $$;

-- Each count reads one partial index, so stats cost does not grow with
-- the other states' history. Waiting jobs count as pending (or scheduled),
-- and so do jobs of state 'scheduled' that came due (ahead.sql).
CREATE OR REPLACE FUNCTION alkstore.stats(q text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  now    timestamptz := clock_timestamp();
  oldest timestamptz;
  s_due  bigint; -- state 'scheduled', by run_at
  s_next bigint;
BEGIN
  SELECT least(min(j.run_at),
               (SELECT min(e.run_at) FROM alkstore.jobs e
                 WHERE e.queue = q AND e.state = 'scheduled' AND e.run_at <= now))
    INTO oldest FROM alkstore.jobs j
   WHERE hashtextextended(j.queue, 0) = hashtextextended(q, 0) AND j.queue = q
     AND j.state = 'pending' AND j.run_at <= now;
  SELECT count(*) FILTER (WHERE j.run_at <= now), count(*) FILTER (WHERE j.run_at > now) INTO s_due, s_next
    FROM alkstore.jobs j
   WHERE j.queue = q AND j.state = 'scheduled';
  RETURN jsonb_build_object(
    'queue', q,
    'pending', (SELECT count(*) FROM alkstore.jobs j WHERE hashtextextended(j.queue, 0) = hashtextextended(q, 0)
                   AND j.queue = q AND j.state = 'pending' AND j.run_at <= now)
             + (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state IN ('waiting', 'blocked') AND j.run_at <= now)
             + (SELECT count(*) FROM alkstore.parked p WHERE p.queue = q) -- (due: limit.sql)
             + s_due,
    'scheduled', (SELECT count(*) FROM alkstore.jobs j WHERE hashtextextended(j.queue, 0) = hashtextextended(q, 0)
                     AND j.queue = q AND j.state = 'pending' AND j.run_at > now)
               + (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state IN ('waiting', 'blocked') AND j.run_at > now)
               + s_next,
    'running', (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'running'),
    'dead', (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'dead'),
    'completed', (SELECT count(*) FROM alkstore.jobs j WHERE j.queue = q AND j.state = 'completed'),
    'paused', EXISTS (SELECT FROM alkstore.paused p WHERE p.queue = q),
    'running_limit', (SELECT l.max_running FROM alkstore.queue_limits l WHERE l.queue = q),
    'next_slot_at', alkstore.ts(alkstore.next_slot_at(q, now)),
    -- Contract v1.3 §O: whether the maintenance worker serves this
    -- database: its backend is here (pg_ext/src/maintenance.rs names it
    -- so; the functions' owner sees it: the extension's are a
    -- superuser's) and so is the extension (the worker idles in a listed
    -- database without it, a plain install).
    'maintenance_worker', EXISTS (SELECT FROM pg_stat_activity a
                                   WHERE a.backend_type = 'alkstore maintenance'
                                     AND a.datname = current_database())
                          AND EXISTS (SELECT FROM pg_extension x WHERE x.extname = 'alkstore'),
    'oldest_runnable_age_s',
      CASE WHEN oldest IS NULL THEN NULL
           ELSE alkstore.seconds(greatest(floor(extract(epoch FROM now - oldest) * 1000), 0)::bigint) END,
    -- How long ago a sweep last ran in this database (alkstore.swept);
    -- NULL if none has since the install.
    'last_sweep_age_s',
      (SELECT alkstore.seconds(greatest(floor(extract(epoch FROM now) * 1000)::bigint - m.value::bigint, 0))
         FROM alkstore.meta m WHERE m.key = 'last_sweep_at'));
END $$;

CREATE OR REPLACE FUNCTION alk_queue_stats(queue text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.stats(alkstore.name('queue', queue));
END $$;

-- Whether group g of queue q can be handed on now without waiting: its row
-- is locked here (SKIP LOCKED), or it has none. False while another
-- transaction holds it — an enqueue into the group, left open.
CREATE OR REPLACE FUNCTION alkstore.group_lockable(q text, g text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF g IS NULL THEN
    RETURN true;
  END IF;
  PERFORM FROM alkstore.groups c WHERE c.queue = q AND c.group_key = g FOR UPDATE SKIP LOCKED;
  RETURN FOUND OR NOT EXISTS (SELECT FROM alkstore.groups c WHERE c.queue = q AND c.group_key = g);
END $$;

-- Which of the sweep's three kinds a job's end is (sweep_candidates).
CREATE OR REPLACE FUNCTION alkstore.sweep_kind(group_key text, dependents boolean) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN coalesce(dependents, false) THEN 'dependents'
              WHEN group_key IS NOT NULL THEN 'grouped' ELSE 'alone' END
$$;

-- The jobs a sweep ends now: expired pending (waiting, scheduled, parked)
-- jobs and final claims past their deadline, of queue q or of every queue.
-- From indexes (jobs_deadline, jobs_waiting), not a scan of the table, and
-- locked as read: a job another transaction holds (one open for minutes,
-- say) is left to the next sweep rather than stalling this one and the
-- background worker behind it, and so is a job whose group's row another
-- transaction holds. kind: 'alone', the jobs whose end touches no other
-- row; 'grouped', those of a group (its row now locked here) and without
-- dependents; 'dependents', those with dependents to fail — at most lim,
-- none of skip.
CREATE OR REPLACE FUNCTION alkstore.sweep_candidates(q text, now timestamptz, kind text, lim integer,
                                                     skip bigint[] DEFAULT '{}')
RETURNS TABLE (id bigint, state text)
-- PL/pgSQL with generic plans, one statement for a queue and one for all:
-- as a SQL function (one statement, `q IS NULL OR e.queue = q`) it was
-- planned again at every call, 1.4 ms of a sweep's 4 where running it
-- took 0.1 (every worker sweeps every second, the maintenance worker
-- every sweep_interval_ms). Plans kept across calls must not depend on
-- the arguments' values, hence the two statements; and by index
-- (enable_seqscan = off): a plan kept across calls may be made while a
-- slot is empty after its truncation, and kept as it refills (schema.sql,
-- "Statements by a set of ids").
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
  IF q IS NOT NULL THEN
  RETURN QUERY
  WITH d AS (
    SELECT e.id, e.state FROM alkstore.jobs e
     WHERE (e.state = 'running' OR (e.state IN ('pending', 'scheduled') AND e.expires_at IS NOT NULL))
       AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now
       AND (e.state <> 'running' OR e.attempts >= e.max_attempts)
       AND e.queue = q AND alkstore.sweep_kind(e.group_key, e.dependents) = kind AND e.id <> ALL (skip)
       AND (kind = 'alone' OR alkstore.group_lockable(e.queue, e.group_key))
     FOR UPDATE SKIP LOCKED
  ), w AS (
    SELECT e.id, e.state FROM alkstore.jobs e
     WHERE e.state IN ('waiting', 'blocked') AND e.expires_at <= now
       AND e.queue = q AND alkstore.sweep_kind(e.group_key, e.dependents) = kind AND e.id <> ALL (skip)
       AND (kind = 'alone' OR alkstore.group_lockable(e.queue, e.group_key))
     FOR UPDATE SKIP LOCKED
  ), p AS (
    SELECT e.id, e.state FROM alkstore.parked k JOIN alkstore.jobs e ON e.id = k.id -- (limit.sql)
     WHERE e.state = 'parked' AND e.expires_at <= now
       AND k.queue = q AND alkstore.sweep_kind(e.group_key, e.dependents) = kind AND e.id <> ALL (skip)
       AND (kind = 'alone' OR alkstore.group_lockable(e.queue, e.group_key))
     FOR UPDATE OF e SKIP LOCKED
  )
  SELECT * FROM (SELECT * FROM d UNION ALL SELECT * FROM w UNION ALL SELECT * FROM p) x LIMIT lim;
  ELSE
  RETURN QUERY
  WITH d AS (
    SELECT e.id, e.state FROM alkstore.jobs e
     WHERE (e.state = 'running' OR (e.state IN ('pending', 'scheduled') AND e.expires_at IS NOT NULL))
       AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now
       AND (e.state <> 'running' OR e.attempts >= e.max_attempts)
       AND alkstore.sweep_kind(e.group_key, e.dependents) = kind AND e.id <> ALL (skip)
       AND (kind = 'alone' OR alkstore.group_lockable(e.queue, e.group_key))
     FOR UPDATE SKIP LOCKED
  ), w AS (
    SELECT e.id, e.state FROM alkstore.jobs e
     WHERE e.state IN ('waiting', 'blocked') AND e.expires_at <= now
       AND alkstore.sweep_kind(e.group_key, e.dependents) = kind AND e.id <> ALL (skip)
       AND (kind = 'alone' OR alkstore.group_lockable(e.queue, e.group_key))
     FOR UPDATE SKIP LOCKED
  ), p AS (
    SELECT e.id, e.state FROM alkstore.parked k JOIN alkstore.jobs e ON e.id = k.id -- (limit.sql)
     WHERE e.state = 'parked' AND e.expires_at <= now
       AND alkstore.sweep_kind(e.group_key, e.dependents) = kind AND e.id <> ALL (skip)
       AND (kind = 'alone' OR alkstore.group_lockable(e.queue, e.group_key))
     FOR UPDATE OF e SKIP LOCKED
  )
  SELECT * FROM (SELECT * FROM d UNION ALL SELECT * FROM w UNION ALL SELECT * FROM p) x LIMIT lim;
  END IF;
END $$;

-- The end of the candidates (alkstore.sweep_candidates: ids and the states
-- they were read in), each checked again as it is made: dead, with the
-- error that says why. Returns what is left to do for each. By index
-- (enable_seqscan = off): it updates jobs by a set of ids (schema.sql).
CREATE OR REPLACE FUNCTION alkstore.sweep_end(ids bigint[], states text[], now timestamptz)
RETURNS TABLE (id bigint, was text, queue text, group_key text, dependents boolean, limit_key text)
LANGUAGE sql SET enable_seqscan = off AS $$
  UPDATE alkstore.jobs j
     SET state = 'dead', claimed_by = NULL, claim_expires_at = NULL,
         last_error = CASE WHEN x.state = 'running' THEN 'visibility timeout exceeded on final attempt'
                           ELSE 'expired' END,
         errors = alkstore.push_error(j.errors, j.attempts,
                    CASE WHEN x.state = 'running' THEN 'visibility timeout exceeded on final attempt'
                         ELSE 'expired' END),
         prune_at = alkstore.dead_prune_at(j.queue, now)
    FROM unnest(ids, states) AS x(id, state)
   WHERE j.id = x.id AND j.state = x.state
     AND CASE WHEN j.state = 'running' THEN j.claim_expires_at ELSE j.expires_at END <= now
     AND (j.state <> 'running' OR j.attempts >= j.max_attempts)
  RETURNING j.id, x.state, j.queue, j.group_key, coalesce(j.dependents, false), j.limit_key
$$;

-- Expired pending (waiting, scheduled, parked) jobs and final claims past their
-- deadline go dead; a finished head hands its group on, dependents of a
-- dead job go dead. Then scheduled jobs that came due become pending, at
-- most 2,000 a call (ahead.sql): a short transaction (tens of
-- milliseconds), however many came due at once; the next call moves more,
-- and claims take the others meanwhile.
--
-- A sweep (the maintenance worker's, every worker's) never waits for an
-- application's transaction (issue 57): the jobs it ends are chosen with
-- SKIP LOCKED, a job of a group whose row another transaction holds (an
-- enqueue into that group, left open) is left to the next sweep, and the
-- end of a job with dependents — which reaches their rows and their
-- groups' — runs in a block of its own whose lock waits give up after
-- 10 ms (lock_timeout), undone, and is tried again by the next sweep. At
-- most 32 such blocks a call (each is a subtransaction; more than 64 in
-- one transaction slow every session's snapshots).
CREATE OR REPLACE FUNCTION alk_sweep(queue text DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  q      text := CASE WHEN queue IS NULL THEN NULL ELSE alkstore.name('queue', queue) END;
  now    timestamptz := clock_timestamp();
  n      integer := 0;
  c      record;
  r      record;
  lt     text := current_setting('lock_timeout');
  failed bigint[] := '{}';
  -- Whether this transaction wrote nothing before this call: the rotation
  -- runs only then (rotate.sql), as rows it deleted before (an ack, a
  -- cancel, an earlier call's move, in one statement) would make a slot
  -- look empty to it that is not empty to the others until it commits.
  fresh  boolean := pg_current_xact_id_if_assigned() IS NULL;
BEGIN
  -- Alone, then grouped (their group rows locked by sweep_candidates, so
  -- handing a group on waits for nobody), each kind in one statement.
  FOR r IN
    SELECT e.* FROM unnest(ARRAY['alone', 'grouped']) k(kind),
           LATERAL (SELECT array_agg(x.id) AS ids, array_agg(x.state) AS states
                      FROM alkstore.sweep_candidates(q, now, k.kind, NULL) x) found,
           -- Called only with candidates: a SQL function, planned at each call.
           LATERAL (SELECT * FROM alkstore.sweep_end(found.ids, found.states, now)
                     WHERE found.ids IS NOT NULL) e
  LOOP
    n := n + 1;
    IF r.was IN ('running', 'pending') AND r.limit_key IS NOT NULL THEN
      PERFORM alkstore.unpark(r.queue, r.limit_key); -- (limit.sql)
    ELSIF r.was = 'parked' THEN
      DELETE FROM alkstore.parked p WHERE p.id = r.id;
    END IF;
    IF r.group_key IS NOT NULL THEN
      PERFORM alkstore.group_done(r.queue, r.group_key, r.was <> 'waiting');
    END IF;
  END LOOP;
  PERFORM set_config('lock_timeout', '10ms', true);
  FOR i IN 1 .. 32 LOOP
    SELECT x.id, x.state INTO c FROM alkstore.sweep_candidates(q, now, 'dependents', 1, failed) x;
    EXIT WHEN NOT FOUND;
    BEGIN
      SELECT * INTO r FROM alkstore.sweep_end(ARRAY[c.id], ARRAY[c.state], now);
      IF FOUND THEN
        IF r.was IN ('running', 'pending') AND r.limit_key IS NOT NULL THEN
          PERFORM alkstore.unpark(r.queue, r.limit_key);
        ELSIF r.was = 'parked' THEN
          DELETE FROM alkstore.parked p WHERE p.id = r.id;
        END IF;
        IF r.group_key IS NOT NULL THEN
          PERFORM alkstore.group_done(r.queue, r.group_key, r.was <> 'waiting');
        END IF;
        PERFORM alkstore.deps_failed(ARRAY[r.id], 'dead');
        n := n + 1;
      ELSE
        failed := failed || c.id; -- no longer a candidate: not asked again in this call
      END IF;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
      -- An application's open transaction holds a row this end needs: the
      -- next sweep tries again; this one goes on with the others.
      failed := failed || c.id;
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', lt, true);
  PERFORM alkstore.make_due(q, 2000);
  -- Last: its locks are held to the commit (rotate.sql; only when this
  -- call is a transaction of its own, which wrote nothing before it).
  IF fresh THEN
    PERFORM alkstore.rotate();
  END IF;
  PERFORM alkstore.swept(now);
  RETURN n;
END $$;

-- When a sweep last ran in this database, in alkstore.meta (epoch
-- milliseconds), to within 10 s: alk_queue_stats says how long ago
-- (last_sweep_age_s), so an operator sees that nothing sweeps — no
-- maintenance worker, no worker's sweeps, no `alkstore maintain` — before
-- claims slow down under a held horizon (issue 57). Written at most once
-- every 10 s (every worker sweeps every second: one row version a second
-- each would pile up exactly while a held horizon keeps vacuum from them),
-- only at READ COMMITTED (a newer row version than a repeatable-read
-- snapshot's would fail the whole sweep with 40001; such a sweep leaves
-- the record to the next), and never waiting: while another sweep's
-- transaction holds the row (or is writing the first one: the advisory
-- lock, without which this insert would wait on that one's), that sweep's
-- time stands for this one.
CREATE OR REPLACE FUNCTION alkstore.swept(now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  at bigint := floor(extract(epoch FROM now) * 1000)::bigint;
  ms text := at::text;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RETURN;
  END IF;
  UPDATE alkstore.meta m SET value = ms
   WHERE m.key = 'last_sweep_at'
     AND m.key IN (SELECT x.key FROM alkstore.meta x
                    -- The cast only on this key's row: other keys hold
                    -- text ('version'), and a scan's quals may run in
                    -- any order.
                    WHERE x.key = 'last_sweep_at'
                      AND CASE WHEN x.key = 'last_sweep_at' THEN x.value::bigint < at - 10000 END
                   FOR UPDATE SKIP LOCKED);
  IF NOT FOUND AND pg_try_advisory_xact_lock(hashtext('alkstore.swept'), 0)
     AND NOT EXISTS (SELECT FROM alkstore.meta x WHERE x.key = 'last_sweep_at') THEN
    INSERT INTO alkstore.meta (key, value) VALUES ('last_sweep_at', ms) ON CONFLICT DO NOTHING;
  END IF;
END $$;
