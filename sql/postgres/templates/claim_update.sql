    UPDATE alkstore.jobs j
       SET state = 'running', attempts = j.attempts + 1, claimed_by = w,
           claim_expires_at = now + j.visibility_timeout_ms * interval '1 millisecond',
           -- A claim that expired: its attempt's error (issue 57).
           last_error = CASE WHEN j.state = 'running' COLLATE "C"
                             THEN 'claim expired (worker ' || j.claimed_by || ')' ELSE j.last_error END,
           errors = CASE WHEN j.state = 'running' COLLATE "C"
                         THEN alkstore.push_error(j.errors, j.attempts, 'claim expired (worker ' || j.claimed_by || ')')
                         ELSE j.errors END
     WHERE j.id = ANY (CASE WHEN chosen IS NOT NULL THEN chosen ELSE ARRAY(
             SELECT c.id FROM alkstore.jobs c
              WHERE hashtextextended(c.queue, 0) = hashtextextended(q, 0) AND c.queue = q
                AND c.state = 'pending' AND c.run_at <= now
                AND (c.expires_at IS NULL OR c.expires_at > now)
              ORDER BY c.priority DESC, c.run_at, c.id
              LIMIT n
              FOR UPDATE SKIP LOCKED) END)
