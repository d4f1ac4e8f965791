-- alk_ack: the ack of one job (manifest.toml: the plain install's and,
-- as alkstore.ack_full, what the extension's library hands the cases its
-- own alk_ack does not cover: pg_ext/src/ack.rs). Its DELETE is
-- templates/ack_delete.sql, which the library sends too, its variables
-- (jid, w) bound to parameters: keep those names, and the order of what it
-- returns.

CREATE OR REPLACE FUNCTION {{function}}(job_id bigint, worker text, result jsonb DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  jid ALIAS FOR $1;
  w   ALIAS FOR $2;
  now timestamptz;
  q   text;
  g   text;
  limited boolean; -- a running limit: a finish wakes a waiting worker (limit.sql)
  k       text;    -- its limit_key: a finish puts the key's parked jobs back (limit.sql)
  deps    boolean; -- jobs depend on it (deps.sql)
BEGIN
  -- Checked here, not inside the statement: a generic plan need not
  -- evaluate a WHERE term once the job is not found. (One expression, the
  -- checks one by one only to say what is wrong: alk_claim.)
  IF (jid IS NOT NULL AND alkstore.name_ok('worker', w)) IS NOT TRUE THEN
    PERFORM alkstore.job_id(jid), alkstore.name('worker', w);
  END IF;
{{include ack_delete.sql}}
    INTO q, g, limited, deps, k;
  IF NOT FOUND THEN
    now := clock_timestamp();
    UPDATE alkstore.jobs j
       SET state = 'completed', completed_at = now, result = {{label}}.result, claim_expires_at = NULL,
           prune_at = now + coalesce((SELECT c.retain_completed_ms FROM alkstore.queues c WHERE c.queue = j.queue), 0)
                            * interval '1 millisecond'
     WHERE j.id = jid AND j.state = 'running' COLLATE "C" AND j.claimed_by = w
    RETURNING j.queue, j.group_key,
    EXISTS (SELECT FROM alkstore.queue_limits l WHERE l.queue = j.queue AND num_nonnulls(l.max_running, l.key_max_running) > 0),
    j.dependents, j.limit_key
    INTO q, g, limited, deps, k;
    IF NOT FOUND THEN
      RETURN false;
    END IF;
  END IF;
  IF g IS NOT NULL THEN
    PERFORM alkstore.group_done(q, g, true);
  END IF;
  IF deps THEN
    PERFORM alkstore.deps_acked(ARRAY[jid]);
  END IF;
  IF limited THEN
    PERFORM alkstore.limit_freed(q, k);
  END IF;
  RETURN true;
END $$;
