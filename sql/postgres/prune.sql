-- Pruning (contract v1.1 §C5): deletes what outlived its retention, at
-- most max_rows rows per call, oldest first. Rows another session holds are
-- skipped, never waited for; callers loop until it returns 0.

CREATE OR REPLACE FUNCTION alk_prune(max_rows integer) RETURNS integer
-- By index (schema.sql, "Statements by a set of ids").
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off AS $$
DECLARE
  now  timestamptz := clock_timestamp();
  done integer := 0;
  n    integer;
  dead bigint[];
BEGIN
  IF max_rows IS NULL OR max_rows < 1 OR max_rows > alkstore.max_prune_rows() THEN
    PERFORM alkstore.raise('ALK05', format('max_rows must be between 1 and %s, got %s',
      alkstore.max_prune_rows(), coalesce(max_rows::text, 'NULL')));
  END IF;
  -- Completed and dead jobs past their retention.
  -- A dead one is remembered as ended without an ack (deps.sql).
  WITH d AS (
    DELETE FROM alkstore.jobs j
     WHERE j.id = ANY (ARRAY(
             SELECT e.id FROM alkstore.jobs e
              WHERE e.prune_at <= now AND e.state IN ('completed', 'dead')
              ORDER BY e.prune_at LIMIT max_rows
              FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.state
  )
  SELECT count(*), array_agg(d.id) FILTER (WHERE d.state = 'dead') INTO n, dead FROM d;
  IF dead IS NOT NULL THEN
    PERFORM alkstore.jobs_ended(dead, 'dead');
  END IF;
  done := done + n;
  -- Idempotency keys past their TTL.
  IF done < max_rows THEN
    DELETE FROM alkstore.idempotency k
     WHERE k.ctid = ANY (ARRAY(
             SELECT e.ctid FROM alkstore.idempotency e
              WHERE e.expires_at <= now
              ORDER BY e.expires_at LIMIT max_rows - done
              FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS n = ROW_COUNT;
    done := done + n;
  END IF;
  -- Stream events past their stream's retention (v1.1 §E).
  IF done < max_rows THEN
    done := done + alkstore.prune_events(max_rows - done);
  END IF;
  -- Claim times of keys that left their rate window (limit.sql), which
  -- claims do not delete once a key goes idle. Not counted: they are not
  -- data a caller kept. (A queue's own window, limit_key '', is counted in
  -- queue_limits.rate_count: only its claims forget those.)
  DELETE FROM alkstore.claim_times t
   WHERE t.ctid = ANY (ARRAY(
           SELECT e.ctid FROM alkstore.claim_times e
             LEFT JOIN alkstore.queue_limits l ON l.queue = e.queue
            WHERE e.limit_key <> ''
              AND e.claimed_at <= now - coalesce(l.key_rate_per_ms, 0) * interval '1 millisecond'
            ORDER BY e.claimed_at LIMIT max_rows
            FOR UPDATE OF e SKIP LOCKED));
  -- Records of jobs gone without an ack, past dependency_memory_ms()
  -- (deps.sql). Not counted either.
  PERFORM alkstore.forget_ends(now, max_rows);
  RETURN done;
END $$;
