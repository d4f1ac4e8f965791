  -- Whether any queue keeps acked jobs is asked once (an uncorrelated
  -- EXISTS runs once per statement, on queues_retaining): when none does,
  -- the delete looks up no job's queue, and the update does not even read
  -- the jobs again (8% of a claim of 32 + ack in instructions). The
  -- follow-ups' arguments come out of the same statement: the grouped
  -- jobs' queues and groups, the queues acked in when any queue has limits
  -- (limit.sql), the jobs that others depend on, the jobs' limit keys.
  WITH d AS (
    DELETE FROM alkstore.jobs j
     WHERE j.id = ANY (job_ids) AND j.state = 'running' COLLATE "C" AND j.claimed_by = w
       AND (NOT EXISTS (SELECT FROM alkstore.queues r WHERE r.retain_completed_ms > 0)
            OR NOT EXISTS (SELECT FROM alkstore.queues c WHERE c.queue = j.queue AND c.retain_completed_ms > 0))
    RETURNING j.queue, j.group_key, CASE WHEN j.dependents THEN j.id END AS dep, j.limit_key
  ), k AS (
    UPDATE alkstore.jobs j
       SET state = 'completed', completed_at = now, claim_expires_at = NULL,
           prune_at = now + c.retain_completed_ms * interval '1 millisecond'
      FROM alkstore.queues c
     WHERE EXISTS (SELECT FROM alkstore.queues r WHERE r.retain_completed_ms > 0)
       AND j.id = ANY (job_ids) AND j.state = 'running' COLLATE "C" AND j.claimed_by = w
       AND c.queue = j.queue AND c.retain_completed_ms > 0
    RETURNING j.queue, j.group_key, CASE WHEN j.dependents THEN j.id END AS dep, j.limit_key
  )
  SELECT count(*)::integer, array_agg(u.queue) FILTER (WHERE u.group_key IS NOT NULL),
         array_agg(u.group_key) FILTER (WHERE u.group_key IS NOT NULL),
         array_agg(DISTINCT u.queue) FILTER (WHERE EXISTS (SELECT FROM alkstore.queue_limits)),
         array_agg(u.dep) FILTER (WHERE u.dep IS NOT NULL),
         array_agg(u.queue) FILTER (WHERE u.limit_key IS NOT NULL),
         array_agg(u.limit_key) FILTER (WHERE u.limit_key IS NOT NULL)
    FROM (SELECT * FROM d UNION ALL SELECT * FROM k) u
