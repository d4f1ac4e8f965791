-- alk_ack_batch: the ack of many jobs (manifest.toml: the plain install's
-- and, as alkstore.ack_batch_full, what the extension's library hands the
-- calls its own alk_ack_batch refuses: pg_ext/src/ack.rs). Its statement is
-- templates/ack_batch_delete.sql, which the library sends too, its
-- variables (job_ids, w, now) bound to parameters: keep those names, and
-- the order of what it returns, which alkstore.batch_acked takes.
--
-- Without a retention the jobs are deleted (one statement, as in v1); with
-- one they are kept as 'completed' (contract v1.1 §C3). (COLLATE "C" on
-- the state, here and in every statement by id: the primary key, not a
-- partial index; schema.sql.)
--
-- Planned by index (enable_seqscan = off), as the claim is
-- (templates/claim.sql).
CREATE OR REPLACE FUNCTION {{function}}(job_ids bigint[], worker text) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off AS $$
DECLARE
  w   ALIAS FOR $2;
  now timestamptz := clock_timestamp();
  n   integer;
  qs  text[];
  gs  text[];
  fq  text[];   -- the queues of the acked jobs, when any queue has limits
  kq  text[];   -- the queues and limit keys of the acked jobs that have one
  kk  text[];
  dj  bigint[]; -- the acked jobs that jobs depend on (deps.sql)
BEGIN
  -- Arguments in order, as every function (and SQLite) checks them.
  IF (alkstore.job_ids_ok(job_ids) AND alkstore.name_ok('worker', w)) IS NOT TRUE THEN
    IF NOT alkstore.job_ids_ok(job_ids) THEN
      PERFORM alkstore.raise('ALK05', 'job_ids must be a one-dimensional array of job ids without NULLs');
    END IF;
    PERFORM alkstore.name('worker', w);
  END IF;
{{include ack_batch_delete.sql}}
    INTO n, qs, gs, fq, dj, kq, kk;
  IF gs IS NOT NULL OR fq IS NOT NULL OR dj IS NOT NULL THEN
    PERFORM alkstore.batch_acked(qs, gs, fq, dj, kq, kk);
  END IF;
  RETURN n;
END $$;
