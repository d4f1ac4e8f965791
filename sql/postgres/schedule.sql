-- Schedules (contract v1.1 §F): a row per schedule; alk_schedule_tick
-- enqueues each due occurrence at most once per (schedule, fire time),
-- however many sessions tick. The fire times are core/src/schedule.rs's,
-- rule for rule (the cross-engine suite compares them); times are computed
-- in epoch milliseconds, in UTC whatever the session's TimeZone.

CREATE OR REPLACE FUNCTION alkstore.ms(t timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT floor(extract(epoch FROM t) * 1000)::bigint $$;

CREATE OR REPLACE FUNCTION alkstore.at_ms(ms bigint) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$ SELECT timestamptz 'epoch' + ms * interval '1 millisecond' $$;

-- One cron field: the values it allows, ascending.
CREATE OR REPLACE FUNCTION alkstore.cron_field(f text, what text, lo integer, hi integer) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  item text;
  m    text[];
  a    numeric;
  b    numeric;
  s    numeric := 1;
  -- One flag per value, set in place: linear in the field's length (a list
  -- grown by concatenation copied itself once per item).
  flags boolean[] := array_fill(false, ARRAY[hi - lo + 1], ARRAY[lo]);
  v    integer;
  why  text;
BEGIN
  FOREACH item IN ARRAY string_to_array(f, ',') LOOP
    -- (range)(/step): range is *, a, or a-b
    m := regexp_match(item, '^(\*|([0-9]+)(-([0-9]+))?)(/([0-9]+))?$');
    IF m IS NULL THEN
      why := CASE WHEN item ~ '/' AND item !~ '/[0-9]+$' THEN 'a step must be a whole number of at least 1'
                  WHEN item ~ '^[0-9]*-' OR item ~ '-[0-9]*$' THEN 'a range is two numbers, a-b (no names)'
                  ELSE 'expected *, a number, a range a-b or a step */s (no names, no L, W or #)' END;
    ELSE
      IF m[6] IS NOT NULL THEN
        s := m[6]::numeric;
      END IF;
      IF m[1] = '*' THEN
        a := lo; b := hi;
      ELSIF m[4] IS NOT NULL THEN
        a := m[2]::numeric; b := m[4]::numeric;
      ELSE
        a := m[2]::numeric; b := a;
      END IF;
      IF s < 1 THEN
        why := 'a step must be a whole number of at least 1';
      ELSIF m[1] <> '*' AND m[4] IS NULL AND m[6] IS NOT NULL THEN
        why := 'a step needs * or a range before it (*/s, a-b/s)';
      ELSIF a < lo OR b > hi OR a > b THEN
        why := format('values must be from %s to %s, low to high', lo, hi);
      END IF;
    END IF;
    IF why IS NOT NULL THEN
      PERFORM alkstore.raise('ALK03', format('cron %s field %s: %s', what, alkstore.quote(f), why));
    END IF;
    v := a::integer;
    WHILE v <= b LOOP
      flags[v] := true;
      v := v + least(s, 1000)::integer;
    END LOOP;
  END LOOP;
  RETURN ARRAY(SELECT i FROM generate_series(lo, hi) i WHERE flags[i]);
END $$;

-- A spec parsed: {"every_ms": n} or the cron fields' values.
CREATE OR REPLACE FUNCTION alkstore.schedule_parse(spec jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  f   text[];
  p   jsonb;
  n   numeric;
BEGIN
  IF jsonb_typeof(spec) IS DISTINCT FROM 'object' THEN
    PERFORM alkstore.raise('ALK03', format(
      'a schedule spec must be a JSON object, {"cron": "…"} or {"every_s": n}, got %s',
      coalesce(alkstore.excerpt(spec::text), 'NULL')));
  END IF;
  IF (SELECT count(*) FROM jsonb_object_keys(spec)) <> 1 OR NOT (spec ? 'cron' OR spec ? 'every_s') THEN
    PERFORM alkstore.raise('ALK03', format(
      'a schedule spec has exactly one key, cron or every_s, got %s', alkstore.excerpt(spec::text)));
  END IF;
  IF spec ? 'every_s' THEN
    IF jsonb_typeof(spec -> 'every_s') = 'number' THEN
      n := (spec ->> 'every_s')::numeric;
    END IF;
    -- Seconds to the millisecond, rounded as every duration is (§G).
    IF n IS NULL OR n < 0 OR n > alkstore.max_duration_s() OR round(n * 1000) < 1 THEN
      PERFORM alkstore.raise('ALK03', format('every_s must be a number of seconds from 0.001 to %s, got %s',
        alkstore.max_duration_s(), alkstore.excerpt((spec -> 'every_s')::text)));
    END IF;
    RETURN jsonb_build_object('every_ms', round(n * 1000)::bigint);
  END IF;
  IF jsonb_typeof(spec -> 'cron') IS DISTINCT FROM 'string' THEN
    PERFORM alkstore.raise('ALK03', format('cron must be a string of 5 fields, got %s',
      alkstore.excerpt((spec -> 'cron')::text)));
  END IF;
  IF octet_length(spec ->> 'cron') > alkstore.max_cron_bytes() THEN
    PERFORM alkstore.raise('ALK03', format('cron must be at most %s bytes, got %s',
      alkstore.max_cron_bytes(), octet_length(spec ->> 'cron')));
  END IF;
  f := regexp_split_to_array(btrim(spec ->> 'cron', E' \t\n\r'), E'[ \t\n\r]+');
  IF btrim(spec ->> 'cron', E' \t\n\r') = '' OR cardinality(f) <> 5 THEN
    PERFORM alkstore.raise('ALK03', format(
      'cron must have 5 fields (minute hour day-of-month month day-of-week), got %s in %s',
      CASE WHEN btrim(spec ->> 'cron', E' \t\n\r') = '' THEN 0 ELSE cardinality(f) END,
      alkstore.quote(spec ->> 'cron')));
  END IF;
  p := jsonb_build_object(
    'minutes', to_jsonb(alkstore.cron_field(f[1], 'minute', 0, 59)),
    'hours', to_jsonb(alkstore.cron_field(f[2], 'hour', 0, 23)),
    'doms', to_jsonb(alkstore.cron_field(f[3], 'day-of-month', 1, 31)),
    'months', to_jsonb(alkstore.cron_field(f[4], 'month', 1, 12)),
    -- 7 is Sunday too
    'dows', to_jsonb(ARRAY(SELECT DISTINCT v % 7 FROM unnest(alkstore.cron_field(f[5], 'day-of-week', 0, 7)) v
                           ORDER BY 1)),
    'dom_restricted', NOT starts_with(f[3], '*'),
    'dow_restricted', NOT starts_with(f[5], '*'));
  IF alkstore.schedule_next(p, timestamptz 'epoch') IS NULL THEN
    PERFORM alkstore.raise('ALK03', format('cron %s never fires (no such day)', alkstore.quote(spec ->> 'cron')));
  END IF;
  RETURN p;
END $$;

-- Whether a day (days since 1970-01-01) is one a parsed cron fires on.
CREATE OR REPLACE FUNCTION alkstore.cron_day(p jsonb, day bigint) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  d   date := date '1970-01-01' + day::integer;
  dom boolean := p -> 'doms' @> to_jsonb(extract(day FROM d)::integer);
  dow boolean := p -> 'dows' @> to_jsonb(extract(dow FROM d)::integer);
BEGIN
  IF NOT p -> 'months' @> to_jsonb(extract(month FROM d)::integer) THEN
    RETURN false;
  END IF;
  -- Vixie cron: a field starting with * only makes the two combine with
  -- AND; its own values still count (*/10 is days 1, 11, 21 and 31).
  RETURN CASE WHEN (p ->> 'dom_restricted')::boolean AND (p ->> 'dow_restricted')::boolean THEN dom OR dow
              ELSE dom AND dow END;
END $$;

-- The first fire time strictly after t (NULL: none within 28 years).
CREATE OR REPLACE FUNCTION alkstore.schedule_next(p jsonb, t timestamptz) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  ms    bigint := alkstore.ms(t);
  n     bigint := (p ->> 'every_ms')::bigint;
  start bigint;
  day   integer; -- (a FOR loop variable is an integer anyway)
  h     integer;
  m     integer;
  at    bigint;
BEGIN
  IF n IS NOT NULL THEN
    RETURN alkstore.at_ms((floor(ms::numeric / n)::bigint + 1) * n);
  END IF;
  start := (floor(ms::numeric / 60000)::bigint + 1) * 60000;
  FOR day IN floor(start::numeric / 86400000)::bigint .. floor(start::numeric / 86400000)::bigint + 366 * 28 LOOP
    CONTINUE WHEN NOT alkstore.cron_day(p, day);
    FOR h IN SELECT jsonb_array_elements_text(p -> 'hours')::integer LOOP
      FOR m IN SELECT jsonb_array_elements_text(p -> 'minutes')::integer LOOP
        at := day::bigint * 86400000 + (h * 60 + m) * 60000::bigint;
        IF at >= start THEN
          RETURN alkstore.at_ms(at);
        END IF;
      END LOOP;
    END LOOP;
  END LOOP;
  RETURN NULL;
END $$;

-- The last fire time at or before t (NULL: none within 28 years).
CREATE OR REPLACE FUNCTION alkstore.schedule_last(p jsonb, t timestamptz) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  ms  bigint := alkstore.ms(t);
  n   bigint := (p ->> 'every_ms')::bigint;
  day integer; -- (a FOR loop variable is an integer anyway)
  h   integer;
  m   integer;
  at  bigint;
BEGIN
  IF n IS NOT NULL THEN
    RETURN alkstore.at_ms(floor(ms::numeric / n)::bigint * n);
  END IF;
  FOR day IN REVERSE floor(ms::numeric / 86400000)::bigint .. floor(ms::numeric / 86400000)::bigint - 366 * 28 LOOP
    CONTINUE WHEN NOT alkstore.cron_day(p, day);
    FOR h IN SELECT v::integer FROM jsonb_array_elements_text(p -> 'hours') v ORDER BY 1 DESC LOOP
      FOR m IN SELECT v::integer FROM jsonb_array_elements_text(p -> 'minutes') v ORDER BY 1 DESC LOOP
        at := day::bigint * 86400000 + (h * 60 + m) * 60000::bigint;
        IF at <= ms THEN
          RETURN alkstore.at_ms(at);
        END IF;
      END LOOP;
    END LOOP;
  END LOOP;
  RETURN NULL;
END $$;

-- Creates or replaces a schedule; returns its next fire time. Replacing
-- keeps the record of the occurrence last enqueued, so none fires twice, and
-- an unchanged spec keeps its next fire time, so none is skipped.
CREATE OR REPLACE FUNCTION alk_schedule(name text, queue text, spec jsonb, payload jsonb, opts jsonb DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n    text := alkstore.name('schedule', name);
  q    text := alkstore.name('queue', queue);
  p    jsonb := alkstore.schedule_parse(spec);
  body jsonb := alkstore.payload('payload', payload);
  o    alkstore.enqueue_opts := alkstore.enqueue_opts(opts, clock_timestamp());
  next timestamptz := alkstore.schedule_next(p, clock_timestamp());
BEGIN
  IF o.idempotency_key IS NOT NULL OR o.idempotency_ttl_ms IS NOT NULL THEN
    PERFORM alkstore.raise('ALK03', 'idempotency_key and idempotency_ttl_s cannot be given to a schedule: '
                                    'each occurrence is a job of its own');
  END IF;
  IF o.depends_on IS NOT NULL THEN
    PERFORM alkstore.raise('ALK03', 'depends_on cannot be given to a schedule: its jobs are enqueued '
                                    'at their times, after any job it could name ended');
  END IF;
  INSERT INTO alkstore.schedules AS s (name, queue, spec, payload, opts, next_run_at)
  VALUES (n, q, spec, body, CASE WHEN opts = 'null'::jsonb THEN NULL ELSE opts END, next)
  ON CONFLICT ON CONSTRAINT schedules_pkey DO UPDATE
    SET queue = excluded.queue, spec = excluded.spec, payload = excluded.payload, opts = excluded.opts,
        -- An unchanged spec keeps its due time: re-applying a schedule at
        -- start-up must not skip the occurrence that is due.
        next_run_at = CASE WHEN s.spec = excluded.spec THEN s.next_run_at ELSE excluded.next_run_at END
  RETURNING s.next_run_at INTO next;
  RETURN alkstore.ts(next);
END $$;

CREATE OR REPLACE FUNCTION alk_unschedule(name text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n text := alkstore.name('schedule', name);
BEGIN
  DELETE FROM alkstore.schedules s WHERE s.name = n;
  RETURN FOUND;
END $$;

CREATE OR REPLACE FUNCTION alk_schedules()
RETURNS TABLE (name text, queue text, spec jsonb, payload jsonb, opts jsonb, next_run_at text, last_run_at text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN QUERY SELECT s.name, s.queue, s.spec, s.payload, s.opts, alkstore.ts(s.next_run_at), alkstore.ts(s.last_run_at)
                 FROM alkstore.schedules s ORDER BY s.name;
END $$;

-- Enqueues the latest due occurrence of every due schedule, once: the due
-- rows are locked (others' skipped: a concurrent tick handles them), and a
-- row's last_run_at says which occurrence was enqueued already.
-- A tick never waits for an application's transaction (issue 57): a
-- schedule whose enqueue needs a row such a transaction holds (its group's,
-- an idempotency key being written) gives up within 10 ms (lock_timeout),
-- undone, and fires at the next tick; the other schedules fire now. At
-- most 50 schedules a call, the longest due first (each is a block, so a
-- subtransaction: more than 64 in one transaction slow every session's
-- snapshots); the next tick fires the rest.
CREATE OR REPLACE FUNCTION alk_schedule_tick() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  now timestamptz := clock_timestamp();
  r   record;
  p   jsonb;
  due timestamptz;
  n   integer := 0;
  lt  text := current_setting('lock_timeout');
BEGIN
  PERFORM set_config('lock_timeout', '10ms', true);
  FOR r IN SELECT s.name, s.queue, s.spec, s.payload, s.opts, s.last_run_at FROM alkstore.schedules s
            WHERE s.next_run_at <= now ORDER BY s.next_run_at, s.name LIMIT 50 FOR UPDATE SKIP LOCKED LOOP
    BEGIN
      p := alkstore.schedule_parse(r.spec);
      due := alkstore.schedule_last(p, now);
      IF due IS NOT NULL AND (r.last_run_at IS NULL OR due > r.last_run_at) THEN
        PERFORM alkstore.enqueue(r.queue, alkstore.queue_opts(r.queue), r.opts, r.payload);
        n := n + 1;
      ELSE
        due := r.last_run_at;
      END IF;
      UPDATE alkstore.schedules s SET last_run_at = due, next_run_at = alkstore.schedule_next(p, now)
       WHERE s.name = r.name;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
      NULL; -- left due: the next tick fires it
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', lt, true);
  RETURN n;
END $$;
