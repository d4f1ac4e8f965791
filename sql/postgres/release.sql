-- Giving a claim back without spending an attempt (contract v1.3 §Q): a
-- worker that stops with prefetched jobs, a relay whose sink is down, a
-- handler that snoozes.
--
-- Only the holder's unexpired claim ends; the job is pending again at now
-- + delay_s ('scheduled' while that lies ahead, ahead.sql) and the claim
-- that took it no longer counts. Nothing else moves: no error is recorded
-- (a release is none), a group head stays its group's head, dependents
-- keep waiting, expires_at stands. A running limit's slot is free at once
-- (limit_freed, as a finish frees it), and a job claimable at once wakes a
-- waiting worker.

CREATE OR REPLACE FUNCTION alkstore.release(ids bigint[], w text, delay_ms bigint) RETURNS integer
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  now timestamptz := clock_timestamp();
  n   integer;
  qs  text[];
  ks  text[];
BEGIN
  WITH u AS (
    UPDATE alkstore.jobs j
       SET state = CASE WHEN delay_ms > 0 THEN 'scheduled' ELSE 'pending' END,
           run_at = now + coalesce(delay_ms, 0) * interval '1 millisecond',
           attempts = greatest(j.attempts - 1, 0),
           claimed_by = NULL, claim_expires_at = NULL
     WHERE j.id = ANY (ids) AND j.state = 'running' COLLATE "C" AND j.claimed_by = w
       AND j.claim_expires_at > now
    RETURNING j.queue, j.limit_key
  )
  SELECT count(*), array_agg(u.queue), array_agg(u.limit_key) INTO n, qs, ks FROM u;
  IF n > 0 THEN
    PERFORM CASE WHEN coalesce(delay_ms, 0) = 0 THEN alkstore.wake('q', x.q) END,
            CASE WHEN EXISTS (SELECT FROM alkstore.queue_limits l
                               WHERE l.queue = x.q AND num_nonnulls(l.max_running, l.key_max_running) > 0)
                 THEN alkstore.limit_freed(x.q, x.k) END
       FROM (SELECT DISTINCT a.q, a.k FROM unnest(qs, ks) a(q, k)) x;
  END IF;
  RETURN n;
END $$;

CREATE OR REPLACE FUNCTION alk_release(job_id bigint, worker text, delay_s double precision DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid ALIAS FOR $1;
  w   ALIAS FOR $2;
BEGIN
  -- Arguments in order, as every function (and SQLite) checks them.
  IF (jid IS NOT NULL AND alkstore.name_ok('worker', w)) IS NOT TRUE THEN
    PERFORM alkstore.job_id(jid), alkstore.name('worker', w); -- (one expression: alk_claim)
  END IF;
  RETURN alkstore.release(ARRAY[jid], w, alkstore.arg_ms('delay_s', delay_s, false)) > 0;
END $$;

CREATE OR REPLACE FUNCTION alk_release_batch(job_ids bigint[], worker text, delay_s double precision DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  w ALIAS FOR $2;
BEGIN
  IF (alkstore.job_ids_ok(job_ids) AND alkstore.name_ok('worker', w)) IS NOT TRUE THEN
    IF NOT alkstore.job_ids_ok(job_ids) THEN
      PERFORM alkstore.raise('ALK05', 'job_ids must be a one-dimensional array of job ids without NULLs');
    END IF;
    PERFORM alkstore.name('worker', w);
  END IF;
  RETURN alkstore.release(job_ids, w, alkstore.arg_ms('delay_s', delay_s, false));
END $$;
