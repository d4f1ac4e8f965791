-- The floor of an enqueue under the contract, for scripts/bench-instructions.sh
-- (ALK_BENCH_FLOOR=1; docs/benchmarks.md, "The floor an enqueue can reach").
-- floor_jobs holds what the contract makes a job row record at enqueue
-- (contract v1 "Stamping") and the two indexes any queue that claims in
-- priority order and acks by id needs; none of jobs' indexes for expiry,
-- groups, retention or finished jobs.
CREATE TABLE floor_jobs (
  id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue                 text        NOT NULL,
  state                 text        NOT NULL,
  payload               jsonb       NOT NULL,
  priority              integer     NOT NULL,
  attempts              integer     NOT NULL,
  max_attempts          integer     NOT NULL,
  visibility_timeout_ms bigint      NOT NULL,
  backoff_base_ms       bigint      NOT NULL,
  backoff_max_ms        bigint      NOT NULL,
  run_at                timestamptz NOT NULL,
  created_at            timestamptz NOT NULL
);
CREATE INDEX floor_pending ON floor_jobs (hashtextextended(queue, 0), priority DESC, run_at, id)
  WHERE state = 'pending';

-- The INSERT alone, in the form contract v1.1 §A1 gives every call.
CREATE FUNCTION public.floor_enqueue(q text, p jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  id bigint;
BEGIN
  INSERT INTO public.floor_jobs (queue, state, payload, priority, attempts, max_attempts,
    visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at)
  VALUES (q, 'pending', p, 0, 0, 5, 60000, 5000, 3600000, clock_timestamp(), clock_timestamp())
  RETURNING floor_jobs.id INTO id;
  RETURN id;
END $$;

-- And what every enqueue must also do: check the name, stamp the queue's
-- options (or the defaults), wake a registered worker (contract v1.1 §A3).
-- alk_enqueue's statement for the common call (sql/postgres/queue.sql),
-- into floor_jobs.
CREATE FUNCTION public.floor_enqueue_stamped(q text, p jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  id bigint;
BEGIN
  IF p IS NOT NULL AND alkstore.name_ok('queue', q) THEN
    INSERT INTO public.floor_jobs AS j (queue, state, payload, priority, attempts, max_attempts,
      visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at)
    SELECT q, 'pending', p, 0, 0,
           coalesce(c.max_attempts, (alkstore.default_queue_opts()).max_attempts),
           coalesce(c.visibility_timeout_ms, (alkstore.default_queue_opts()).visibility_timeout_ms),
           coalesce(c.backoff_base_ms, (alkstore.default_queue_opts()).backoff_base_ms),
           coalesce(c.backoff_max_ms, (alkstore.default_queue_opts()).backoff_max_ms),
           t.now, t.now
      FROM (SELECT clock_timestamp() AS now) t
      LEFT JOIN alkstore.queues c ON c.queue = q
    RETURNING alkstore.wake('q', q, j.id) INTO id;
    RETURN id;
  END IF;
  RAISE 'floor_enqueue_stamped takes valid arguments only';
END $$;

-- A batch, the INSERT alone in that form.
CREATE FUNCTION public.floor_enqueue_batch(q text, b jsonb) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ids bigint[];
BEGIN
  WITH rows AS (
    INSERT INTO public.floor_jobs (queue, state, payload, priority, attempts, max_attempts,
      visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at)
    SELECT q, 'pending', e, 0, 0, 5, 60000, 5000, 3600000, clock_timestamp(), clock_timestamp()
      FROM jsonb_array_elements(b) e
    RETURNING floor_jobs.id
  )
  SELECT array_agg(rows.id) INTO ids FROM rows;
  RETURN ids;
END $$;
