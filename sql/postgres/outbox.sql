-- Outboxes (contract §6, ADR-014): the outbox name derives its backing
-- queue __alkstore_outbox:{name} here, with fixed options; the reserved
-- prefix keeps that queue out of reach of the queue functions.

CREATE OR REPLACE FUNCTION alkstore.outbox_queue(outbox text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT alkstore.outbox_prefix() || alkstore.name('outbox', outbox) $$;

CREATE OR REPLACE FUNCTION alk_outbox_enqueue(outbox text, opts jsonb, payload jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.enqueue(alkstore.outbox_queue(outbox), alkstore.default_queue_opts(), opts, payload);
END $$;

-- alk_outbox_claim is alk_claim (queue.sql) on the outbox's backing queue:
-- made here from alk_claim's source with what names the queue replaced --
-- the queue is the outbox's backing queue, and the name checked is an
-- outbox's -- rather than both calling one claim function: that call and
-- the copy of its rows cost about 32,000 instructions, 6% of a claim.
DO $make$
DECLARE
  src   text;
  -- In alk_claim, each exactly as often as said; here, what replaces it.
  parts constant text[] := ARRAY[$q$q      ALIAS FOR $1;$q$, $q$'queue', $1$q$];
  times constant integer[] := ARRAY[1, 2];
  subst constant text[] := ARRAY[$q$q      text := alkstore.outbox_prefix() || $1;$q$, $q$'outbox', $1$q$];
BEGIN
  SELECT p.prosrc INTO STRICT src FROM pg_catalog.pg_proc p
   WHERE p.oid = format('%I.alk_claim(text, text, integer)', current_schema())::regprocedure;
  FOR i IN 1 .. cardinality(parts) LOOP
    IF array_length(string_to_array(src, parts[i]), 1) - 1 IS DISTINCT FROM times[i] THEN
      RAISE 'alk_claim must name its queue with % exactly % times', parts[i], times[i];
    END IF;
    src := replace(src, parts[i], subst[i]);
  END LOOP;
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION alk_outbox_claim(outbox text, worker text, max_jobs integer DEFAULT 1)
    RETURNS TABLE (id bigint, queue text, payload jsonb, attempts integer, max_attempts integer,
                   claim_expires_at timestamptz)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    SET plan_cache_mode = force_generic_plan AS %L$f$,
    src);
END $make$;

CREATE OR REPLACE FUNCTION alk_outbox_stats(outbox text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.stats(alkstore.outbox_queue(outbox));
END $$;
