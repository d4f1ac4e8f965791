-- The claim, once for each way of naming its queue (manifest.toml:
-- alk_claim takes a queue's name, alk_outbox_claim an outbox's, whose
-- backing queue it derives). One source rather than one function calling
-- the other: that call and the copy of its rows cost about 32,000
-- instructions, 6% of a claim. `cargo xtask codegen` writes the copies
-- into generated/claim.sql (and generated/claim_full.sql, the extension's
-- alkstore.claim_full). The extension's library (pg_ext/src/claim.rs)
-- sends claim_probe.sql and claim_update.sql itself, their variables (q,
-- w, n, now, chosen) bound to parameters: keep those names.

-- {{function}}: claims up to max_jobs in claim order (priority DESC,
-- run_at, id) among runnable pending jobs and running jobs whose claim
-- expired. FOR UPDATE SKIP LOCKED: concurrent claimers never block on or
-- share a job.
CREATE OR REPLACE FUNCTION {{function}}({{first_arg}} text, worker text, max_jobs integer DEFAULT 1)
RETURNS TABLE (id bigint, queue text, payload jsonb, attempts integer, max_attempts integer,
               claim_expires_at timestamptz)
-- A generic plan: the custom plans PL/pgSQL would otherwise keep choosing
-- for these statements cost more to make than to run. Made by index: a
-- plan is made again whenever a hot slot is truncated, while that slot is
-- empty, and would read the slot whole once it has filled
-- (pg_ext/src/statements.rs says more).
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
  {{queue}}
  w      ALIAS FOR $2;
  n      ALIAS FOR $3;
  now    timestamptz := clock_timestamp();
  chosen bigint[]; -- when expired claims or due scheduled jobs compete with pending jobs: the ones to take
  any_due boolean;     -- a deadline passed: expired claims or pending jobs past their expiry
  any_expired boolean; -- running jobs whose claim expired
  any_sched boolean;   -- scheduled jobs that came due (not made pending yet: alk_sweep does)
  is_paused boolean;
  is_limited boolean;  -- the queue has limits (v1.2 §I): alkstore.claim_limited claims
  qs     text[];   -- queue and group of grouped jobs dead-lettered here
  gs     text[];
  dj     bigint[]; -- jobs dead-lettered here that jobs depend on (deps.sql)
  ks     text[];   -- limit keys of jobs dead-lettered here (limit.sql)
BEGIN
  -- The arguments, checked in one expression: PL/pgSQL sets up each of its
  -- expressions again in every transaction, at about 1,000 instructions a
  -- function in it. The checks one by one say what is wrong.
  IF (alkstore.name_ok('{{name_kind}}', $1) AND alkstore.name_ok('worker', w) AND alkstore.batch_ok(n)) IS NOT TRUE THEN
    PERFORM alkstore.name('{{name_kind}}', $1), alkstore.name('worker', w), alkstore.batch('max_jobs', n);
  END IF;
  {{on_use}}
  -- Paused? Limited? Any deadline passed (an expired claim, or a pending
  -- job past its expires_at)? A scheduled job come due (ahead.sql)? Each is
  -- one index probe, all in one statement (each statement PL/pgSQL runs
  -- costs more to start than these probes).
  -- Passed deadlines are rare; the dead-lettering UPDATEs run only when the
  -- probe finds one: an UPDATE costs tens of microseconds to start (it
  -- opens every index of jobs) even when it changes nothing.
  -- (The earliest passed deadline, in the order of jobs_deadline: a generic
  -- plan for a plain EXISTS chose to scan the table. Bounded by now: the
  -- entries of jobs claimed and acked since the last VACUUM lie beyond it.)
{{include claim_probe.sql}}
    INTO is_paused, is_limited, any_due, any_sched;
  IF is_paused THEN
    RETURN; -- paused (contract v1.1 §C4)
  END IF;
  -- (id = ANY (ARRAY(…)): a plan that can only probe the primary key.
  -- The deadline, written as in jobs_deadline, lets these read that index.)
  -- A job of a group whose row another transaction holds (an enqueue into
  -- that group, left open) is left to a later claim or sweep: handing the
  -- group on would wait for that transaction (issue 57).
  IF any_due THEN
    WITH d AS (
      UPDATE alkstore.jobs j SET state = 'dead', last_error = 'expired',
             errors = alkstore.push_error(j.errors, j.attempts, 'expired'), prune_at = alkstore.dead_prune_at(q, now)
       WHERE j.id = ANY (ARRAY(
               SELECT e.id FROM alkstore.jobs e
                WHERE e.queue = q AND e.state = 'pending' AND e.expires_at IS NOT NULL
                  AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now
                  AND alkstore.group_lockable(q, e.group_key)
                FOR UPDATE SKIP LOCKED))
      RETURNING j.id, j.group_key, j.dependents, j.limit_key
    ), f AS (
      UPDATE alkstore.jobs j SET state = 'dead', last_error = 'visibility timeout exceeded on final attempt',
             errors = alkstore.push_error(j.errors, j.attempts, 'visibility timeout exceeded on final attempt'),
             claimed_by = NULL, claim_expires_at = NULL, prune_at = alkstore.dead_prune_at(q, now)
       WHERE j.id = ANY (ARRAY(
               SELECT e.id FROM alkstore.jobs e
                WHERE e.queue = q AND e.state = 'running'
                  AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now
                  AND e.attempts >= e.max_attempts
                  AND alkstore.group_lockable(q, e.group_key)
                FOR UPDATE SKIP LOCKED))
      RETURNING j.id, j.group_key, j.dependents, j.limit_key
    )
    SELECT array_agg(q) FILTER (WHERE u.group_key IS NOT NULL),
           array_agg(u.group_key) FILTER (WHERE u.group_key IS NOT NULL),
           array_agg(u.id) FILTER (WHERE u.dependents),
           array_agg(DISTINCT u.limit_key) FILTER (WHERE u.limit_key IS NOT NULL)
      INTO qs, gs, dj, ks
      FROM (SELECT * FROM d UNION ALL SELECT * FROM f) u;
    IF gs IS NOT NULL THEN
      PERFORM alkstore.groups_done(qs, gs); -- their groups' next jobs become heads
    END IF;
    IF dj IS NOT NULL THEN
      PERFORM alkstore.deps_failed(dj, 'dead'); -- jobs waiting for them die too (deps.sql)
    END IF;
    IF ks IS NOT NULL THEN
      PERFORM alkstore.unpark(q, k) FROM unnest(ks) k; -- (limit.sql)
    END IF;
    -- Final claims just went dead: any expired claims left to re-claim?
    -- (A count: a generic plan for EXISTS chose to scan the table.)
    SELECT count(*) > 0 INTO any_expired FROM alkstore.jobs e
     WHERE e.queue = q AND e.state = 'running'
       AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now
       AND e.attempts < e.max_attempts;
  END IF;
  -- Claims expired, or scheduled jobs due: they are candidates next to
  -- the pending ones, and locking max_jobs rows on each side would keep
  -- other workers off rows this claim does not take until it ends. So
  -- choose first, skipping rows others hold, in a subtransaction that is
  -- then rolled back (releasing its locks); then lock the chosen that are
  -- still candidates (another claim may have taken one since). Due
  -- scheduled jobs are read each priority from its own range of
  -- jobs_scheduled, never stepping over those still ahead (v1.2 §H).
  -- (A limited queue chooses its own: alkstore.claim_limited.)
  IF (any_expired OR any_sched) AND NOT is_limited THEN
    BEGIN
      WITH p AS (
        SELECT c.id, c.priority, c.run_at FROM alkstore.jobs c
         WHERE hashtextextended(c.queue, 0) = hashtextextended(q, 0) AND c.queue = q
           AND c.state = 'pending' AND c.run_at <= now
           AND (c.expires_at IS NULL OR c.expires_at > now)
         ORDER BY c.priority DESC, c.run_at, c.id LIMIT n
         FOR UPDATE SKIP LOCKED
      ), e AS (
        SELECT c.id, c.priority, c.run_at FROM alkstore.jobs c
         WHERE any_expired AND c.queue = q AND c.state = 'running'
           AND CASE WHEN c.state = 'running' THEN c.claim_expires_at ELSE c.expires_at END <= now
           AND c.attempts < c.max_attempts
         ORDER BY c.priority DESC, c.run_at, c.id LIMIT n
         FOR UPDATE SKIP LOCKED
      ), s AS (
        SELECT d.id, d.priority, d.run_at FROM alkstore.due_scheduled(q, now, n, true) d WHERE any_sched
      )
      SELECT coalesce(array_agg(u.id), '{}') INTO chosen FROM (
        SELECT * FROM p UNION ALL SELECT * FROM e UNION ALL SELECT * FROM s
         ORDER BY priority DESC, run_at, id LIMIT n) u;
      RAISE SQLSTATE 'ALK00'; -- roll the subtransaction back: its locks go
    EXCEPTION WHEN SQLSTATE 'ALK00' THEN
      NULL;
    END;
    -- (By id: COLLATE "C", schema.sql. A scheduled job chosen may have been
    -- made pending by a sweep since: still claimable.)
    WITH p AS (
      SELECT c.id FROM alkstore.jobs c
       WHERE c.id = ANY (chosen) AND c.queue = q AND c.state COLLATE "C" IN ('pending', 'scheduled')
         AND c.run_at <= now AND (c.expires_at IS NULL OR c.expires_at > now)
       FOR UPDATE SKIP LOCKED
    ), e AS (
      SELECT c.id FROM alkstore.jobs c
       WHERE c.id = ANY (chosen) AND c.queue = q AND c.state = 'running' COLLATE "C" AND c.claim_expires_at <= now
         AND c.attempts < c.max_attempts
       FOR UPDATE SKIP LOCKED
    )
    SELECT coalesce(array_agg(u.id), '{}') INTO chosen
      FROM (SELECT * FROM p UNION ALL SELECT * FROM e) u;
  END IF;
  -- Limits: counted and stepped over there (limit.sql), in claim order.
  IF is_limited THEN
    RETURN QUERY SELECT * FROM alkstore.claim_limited(q, w, n, coalesce(any_sched, false));
    RETURN;
  END IF;
  -- The claim. Pending jobs are found by jobs_pending's key, the hash of
  -- the queue's name, and the name rechecked (schema.sql). Without expired
  -- claims (the common case) it reads pending jobs only, in one statement:
  -- each node a statement has costs its start-up even when it reads
  -- nothing, so the expired-claims side is not part of it. (ARRAY(…) runs
  -- only if chosen is NULL.)
  -- One job needs no ordering: the same UPDATE (templates/claim_update.sql),
  -- returned as it is, without the CTE and the sort (6% of a claim + ack).
  IF n = 1 THEN
    RETURN QUERY
{{include claim_update.sql}}
    RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.claim_expires_at;
    RETURN;
  END IF;
  RETURN QUERY
  WITH claimed AS (
{{include claim_update.sql}}
    RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.claim_expires_at, j.priority, j.run_at
  )
  SELECT c.id, c.queue, c.payload, c.attempts, c.max_attempts, c.claim_expires_at
    FROM claimed c
   ORDER BY c.priority DESC, c.run_at, c.id;
END $$;
