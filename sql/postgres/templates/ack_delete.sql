  DELETE FROM alkstore.jobs j
   WHERE j.id = jid AND j.state = 'running' COLLATE "C" AND j.claimed_by = w
     AND NOT EXISTS (SELECT FROM alkstore.queues c WHERE c.queue = j.queue AND c.retain_completed_ms > 0)
  RETURNING j.queue, j.group_key,
    EXISTS (SELECT FROM alkstore.queue_limits l WHERE l.queue = j.queue AND num_nonnulls(l.max_running, l.key_max_running) > 0),
    j.dependents, j.limit_key
