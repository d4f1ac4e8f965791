-- Jobs scheduled ahead (contract v1.2 §H). A job written with a run_at
-- ahead (a delay, a run_at, a retry's backoff, a group's next head) is
-- 'scheduled': reported as pending, but kept out of jobs_pending, so a
-- claim never steps over jobs that are not due, whatever their priority.
-- When one comes due, alk_sweep makes it pending, a bounded batch per call
-- in a short transaction of its own (the background worker calls it every
-- second). Until then a claim takes it directly: the claim's probe finds
-- it (jobs_scheduled_due), and due_scheduled reads the due ones in claim
-- order (jobs_scheduled).

-- The priorities of queue q's scheduled jobs, highest first: one probe of
-- jobs_scheduled each, read only as far as the caller reads. (Names whose
-- hashes collide share the key: a priority may have no job of q.)
CREATE OR REPLACE FUNCTION alkstore.scheduled_priorities(q text) RETURNS SETOF integer
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE lv(p) AS (
    SELECT max(s.priority) FROM alkstore.jobs s
     WHERE hashtextextended(s.queue, 0) = hashtextextended(q, 0) AND s.state = 'scheduled'
    UNION ALL
    SELECT (SELECT max(s.priority) FROM alkstore.jobs s
             WHERE hashtextextended(s.queue, 0) = hashtextextended(q, 0) AND s.state = 'scheduled'
               AND s.priority < lv.p)
      FROM lv WHERE lv.p IS NOT NULL
  )
  SELECT lv.p FROM lv WHERE lv.p IS NOT NULL
$$;

-- Up to n due scheduled jobs of queue q, in claim order: at each priority
-- from the highest down, only the due ones (the start of that priority's
-- run_at range), so it reads as many priorities as it takes to find n,
-- whatever number of jobs lies ahead at each. With lock, each row it
-- returns is locked, and rows another transaction holds are stepped over
-- (the claim chooses with it in a subtransaction it rolls back); without,
-- nothing is locked.
CREATE OR REPLACE FUNCTION alkstore.due_scheduled(q text, now timestamptz, n integer, lock boolean)
RETURNS TABLE (id bigint, priority integer, run_at timestamptz, limit_key text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  IF lock THEN
    RETURN QUERY
    SELECT d.* FROM alkstore.scheduled_priorities(q) lv(p), LATERAL (
      SELECT s.id, s.priority, s.run_at, s.limit_key FROM alkstore.jobs s
       WHERE hashtextextended(s.queue, 0) = hashtextextended(q, 0) AND s.queue = q AND s.state = 'scheduled'
         AND s.priority = lv.p AND s.run_at <= now AND (s.expires_at IS NULL OR s.expires_at > now)
       ORDER BY s.run_at, s.id LIMIT n FOR UPDATE SKIP LOCKED) d
    LIMIT n;
  ELSE
    RETURN QUERY
    SELECT d.* FROM alkstore.scheduled_priorities(q) lv(p), LATERAL (
      SELECT s.id, s.priority, s.run_at, s.limit_key FROM alkstore.jobs s
       WHERE hashtextextended(s.queue, 0) = hashtextextended(q, 0) AND s.queue = q AND s.state = 'scheduled'
         AND s.priority = lv.p AND s.run_at <= now AND (s.expires_at IS NULL OR s.expires_at > now)
       ORDER BY s.run_at, s.id LIMIT n) d
    LIMIT n;
  END IF;
END $$;

-- Makes up to max_jobs due scheduled jobs pending (of queue q, or of every
-- queue if NULL), earliest first, and wakes their queues' workers. Jobs
-- another transaction holds (a claim taking them) are left. Returns how
-- many it moved. The queues come from a skip scan of jobs_scheduled_due
-- (one probe per queue with scheduled jobs), the jobs from the start of
-- each queue's range.
CREATE OR REPLACE FUNCTION alkstore.make_due(q text, max_jobs integer) RETURNS integer
-- By index (enable_seqscan = off): it updates jobs by a set of ids
-- (schema.sql, "Statements by a set of ids"). Generic plans, kept across
-- calls: planned at each call (custom plans) it took 1.3 ms of every
-- sweep, with nothing to do.
LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  now   timestamptz := clock_timestamp();
  left_ integer := max_jobs;
  moved integer;
  qq    text;
BEGIN
  FOR qq IN
    WITH RECURSIVE r(name) AS (
      SELECT min(j.queue) FROM alkstore.jobs j WHERE j.state = 'scheduled'
      UNION ALL
      SELECT (SELECT min(j.queue) FROM alkstore.jobs j WHERE j.state = 'scheduled' AND j.queue > r.name)
        FROM r WHERE r.name IS NOT NULL
    )
    SELECT r.name FROM r WHERE r.name IS NOT NULL AND make_due.q IS NULL
    UNION ALL
    SELECT make_due.q WHERE make_due.q IS NOT NULL
  LOOP
    WITH m AS (
      UPDATE alkstore.jobs j SET state = 'pending'
       WHERE j.id = ANY (ARRAY(
               SELECT e.id FROM alkstore.jobs e
                WHERE e.queue = qq AND e.state = 'scheduled' AND e.run_at <= now
                  AND (e.expires_at IS NULL OR e.expires_at > now)
                ORDER BY e.run_at LIMIT left_
                FOR UPDATE SKIP LOCKED))
      RETURNING 1
    )
    SELECT count(*) INTO moved FROM m;
    IF moved > 0 THEN
      PERFORM alkstore.wake('q', qq);
      left_ := left_ - moved;
      EXIT WHEN left_ <= 0;
    END IF;
  END LOOP;
  RETURN max_jobs - left_;
END $$;
