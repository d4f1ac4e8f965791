  SELECT EXISTS (SELECT FROM alkstore.paused p WHERE p.queue = q),
         EXISTS (SELECT FROM alkstore.queue_limits l WHERE l.queue = q),
         (SELECT CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END
            FROM alkstore.jobs e
           WHERE e.queue = q AND (e.state = 'running' OR (e.state = 'pending' AND e.expires_at IS NOT NULL))
             AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now
           ORDER BY 1 LIMIT 1) IS NOT NULL,
         (SELECT e.run_at FROM alkstore.jobs e
           WHERE e.queue = q AND e.state = 'scheduled' AND e.run_at <= now
           ORDER BY e.run_at LIMIT 1) IS NOT NULL
