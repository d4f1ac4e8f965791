    UPDATE alkstore.jobs j
       SET state = 'running', attempts = j.attempts + 1, claimed_by = w,
           claim_expires_at = now + j.visibility_timeout_ms * interval '1 millisecond'
     WHERE j.id = ANY (CASE WHEN chosen IS NOT NULL THEN chosen ELSE ARRAY(
             SELECT c.id FROM alkstore.jobs c
              WHERE hashtextextended(c.queue, 0) = hashtextextended(q, 0) AND c.queue = q
                AND c.state = 'pending' AND c.run_at <= now
                AND (c.expires_at IS NULL OR c.expires_at > now)
              ORDER BY c.priority DESC, c.run_at, c.id
              LIMIT n
              FOR UPDATE SKIP LOCKED) END)
