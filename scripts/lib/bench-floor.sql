-- The floor of an enqueue under the contract, for scripts/bench-instructions.sh
-- and scripts/bench-postgres.sh (ALK_BENCH_FLOOR=1; docs/benchmarks.md, "The
-- floor an enqueue can reach under the contract"). Made from the installed
-- alkstore, so that it follows it:
--  * floor_jobs: jobs' NOT NULL columns -- what the contract makes a job row
--    record at enqueue (contract v1, "Stamping") -- with the primary key and
--    jobs' claim index, the two indexes a queue that claims in priority
--    order and acks by id needs; none of jobs' indexes for expiry, groups,
--    retention or finished jobs, none of its nullable columns;
--  * floor_enqueue_stamped: alk_enqueue itself, writing into floor_jobs (its
--    common path: name check, the queue's options stamped, wake-up check);
--  * floor_enqueue, floor_enqueue_batch: the bare INSERT in the form contract
--    v1.1 §A1 gives every call, a SECURITY DEFINER PL/pgSQL function.
DO $floor$
DECLARE
  cols text;
  src  text;
BEGIN
  SELECT string_agg(format('%I %s NOT NULL', a.attname, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum)
    INTO STRICT cols
    FROM pg_catalog.pg_attribute a
   WHERE a.attrelid = 'alkstore.jobs'::regclass AND a.attnum > 0 AND NOT a.attisdropped
     AND a.attnotnull AND a.attname <> 'id';
  EXECUTE format('CREATE TABLE public.floor_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, %s)', cols);
  EXECUTE replace(replace(pg_get_indexdef('alkstore.jobs_pending'::regclass),
                          'INDEX jobs_pending ON', 'INDEX floor_pending ON'),
                  'alkstore.jobs ', 'public.floor_jobs ');
  SELECT p.prosrc INTO STRICT src FROM pg_catalog.pg_proc p
   WHERE p.oid = 'alk_enqueue(text, jsonb, jsonb)'::regprocedure;
  IF position('INSERT INTO alkstore.jobs AS j' IN src) = 0 THEN
    RAISE 'bench-floor.sql: alk_enqueue no longer has the INSERT it looks for';
  END IF;
  EXECUTE format('CREATE FUNCTION public.floor_enqueue_stamped(queue text, opts jsonb, payload jsonb) RETURNS bigint
                  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS %L',
                 replace(src, 'INSERT INTO alkstore.jobs AS j', 'INSERT INTO public.floor_jobs AS j'));
END $floor$;

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
