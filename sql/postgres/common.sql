-- Shared helpers: errors, names, payloads, options and JSON formatting.
-- Internal (schema alkstore, not usable by application roles); the public
-- alk_* functions call them with search_path pinned, so every reference is
-- schema-qualified.

-- Milliseconds as JSON seconds: 60 (whole) or 0.25 (fraction), as on SQLite.
CREATE OR REPLACE FUNCTION alkstore.seconds(ms bigint) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN ms % 1000 = 0 THEN to_jsonb(ms / 1000) ELSE to_jsonb(trim_scale(ms / 1000.0)) END
$$;

-- A time as an RFC 3339 UTC string with milliseconds.
CREATE OR REPLACE FUNCTION alkstore.ts(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- A job's errors with one more, {attempt, error, at}, the last 100 kept
-- (alk_job_errors): every statement that writes last_error writes this
-- too. Not a trigger: a row trigger on jobs would fetch the old row again
-- for every claim and ack, which never name last_error.
CREATE OR REPLACE FUNCTION alkstore.push_error(errors jsonb, attempt integer, error text) RETURNS jsonb
LANGUAGE sql VOLATILE AS $$
  SELECT CASE WHEN jsonb_array_length(e) > 100 THEN e - 0 ELSE e END
    FROM (SELECT coalesce(errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                   'attempt', attempt, 'error', error, 'at', alkstore.ts(clock_timestamp())))) x(e)
$$;

-- Raises a contract error: SQLSTATE = code, message "alkstore: Variant: detail".
CREATE OR REPLACE FUNCTION alkstore.raise(code text, detail text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING
    ERRCODE = code,
    -- Never over 1000 characters, whatever the input (contract v1.1 §G).
    MESSAGE = 'alkstore: ' || coalesce(alkstore.variant(code), 'InvalidArgument') || ': '
              || CASE WHEN char_length(detail) <= alkstore.max_detail_chars() THEN detail
                      ELSE left(detail, alkstore.max_detail_chars()) || '…' END;
END $$;

-- A value as error messages quote it: JSON-quoted, cut to its first
-- alkstore.quote_chars() characters, then "…" (contract v1.1 §G).
CREATE OR REPLACE FUNCTION alkstore.quote(v text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN char_length(v) <= alkstore.quote_chars() THEN to_json(v)::text
              ELSE to_json(left(v, alkstore.quote_chars()))::text || '…' END
$$;

-- A JSON value as error messages show it: its first quote_chars()
-- characters, then "…".
CREATE OR REPLACE FUNCTION alkstore.excerpt(v text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN char_length(v) <= alkstore.quote_chars() THEN v
              ELSE left(v, alkstore.quote_chars()) || '…' END
$$;

-- Whether a name of the given kind is valid (contract §2, v1.1 §G): the
-- one statement of the rules. A SQL expression, so callers' plans inline it
-- (alk_enqueue's common path checks a name without a function call).
CREATE OR REPLACE FUNCTION alkstore.name_ok(kind text, name text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(name <> '' AND octet_length(name) <= alkstore.max_name_bytes()
                  AND NOT (alkstore.namespaced(kind) AND starts_with(name, alkstore.reserved_prefix())), false)
$$;

-- Says which rule of name_ok a name breaks (name calls it only then).
CREATE OR REPLACE FUNCTION alkstore.name_error(kind text, name text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF name IS NULL THEN
    PERFORM alkstore.raise('ALK01', kind || ' name must not be NULL');
  ELSIF name = '' THEN
    PERFORM alkstore.raise('ALK01', kind || ' name must not be empty');
  ELSIF octet_length(name) > alkstore.max_name_bytes() THEN
    PERFORM alkstore.raise('ALK01', format('%s name must be at most %s bytes, got %s bytes starting %s',
      kind, alkstore.max_name_bytes(), octet_length(name), alkstore.quote(name)));
  ELSIF alkstore.namespaced(kind) AND starts_with(name, alkstore.reserved_prefix()) THEN
    PERFORM alkstore.raise('ALK02', format('%s name %s starts with the reserved prefix %s',
      kind, alkstore.quote(name), to_json(alkstore.reserved_prefix())));
  END IF;
  -- A rule of name_ok not listed above still refuses the name.
  PERFORM alkstore.raise('ALK01', format('%s name %s is not valid', kind, alkstore.quote(name)));
  RETURN name;
END $$;

-- Checks a name of the given kind and returns it. The checks of
-- arguments (name, batch, job_id, payload) are SQL expressions that
-- callers' plans inline: a valid argument costs no function call (a
-- PL/pgSQL call costs about 7,000 instructions), an invalid one calls the
-- function that says what is wrong.
CREATE OR REPLACE FUNCTION alkstore.name(kind text, name text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN alkstore.name_ok(kind, name) THEN name ELSE alkstore.name_error(kind, name) END
$$;

-- A queue name as the admin functions take it (alk_list_jobs,
-- alk_requeue_dead_all, alk_purge): a queue's, or exactly an outbox's
-- backing queue as alk_queues lists it (the prefix, then a valid outbox
-- name), so that an operator can list, requeue and purge an outbox's
-- messages; every other function keeps refusing the prefix. Returns it.
CREATE OR REPLACE FUNCTION alkstore.listed_queue(name text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN starts_with(name, alkstore.outbox_prefix())
              THEN alkstore.outbox_prefix()
                   || alkstore.name('outbox', substr(name, length(alkstore.outbox_prefix()) + 1))
              ELSE alkstore.name('queue', name) END
$$;

-- A payload must be a JSON value; SQL NULL is not one.
-- (Each *_error function takes the checked value too: with only constant
-- arguments the planner would call it while planning, error and all.)
CREATE OR REPLACE FUNCTION alkstore.payload_error(what text, payload jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM alkstore.raise('ALK04', what || ' must not be NULL (the JSON text ''null'' is a valid payload)');
  RETURN payload;
END $$;

CREATE OR REPLACE FUNCTION alkstore.payload(what text, payload jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN payload IS NOT NULL THEN payload ELSE alkstore.payload_error(what, payload) END
$$;

-- Seconds (a JSON number, fractions kept to the millisecond) as milliseconds.
CREATE OR REPLACE FUNCTION alkstore.duration_ms(key text, v jsonb, positive boolean) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  s  numeric;
  ms bigint;
BEGIN
  IF jsonb_typeof(v) IS DISTINCT FROM 'number' THEN
    PERFORM alkstore.raise('ALK03', format('%s must be a number, got %s', key, alkstore.excerpt(v::text)));
  END IF;
  s := (v #>> '{}')::numeric;
  IF s < 0 OR s > alkstore.max_duration_s() THEN
    ms := -1;
  ELSE
    ms := round(s * 1000);
  END IF;
  IF ms < 0 OR (positive AND ms < 1) THEN
    PERFORM alkstore.raise('ALK03', format('%s must be %s and at most %s seconds, got %s',
      key, CASE WHEN positive THEN 'at least 0.001' ELSE 'at least 0' END, alkstore.max_duration_s(), alkstore.excerpt(v::text)));
  END IF;
  RETURN ms;
END $$;

-- A whole JSON number in [lo, hi].
CREATE OR REPLACE FUNCTION alkstore.whole(key text, v jsonb, lo bigint, hi bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  n numeric;
BEGIN
  IF jsonb_typeof(v) IS DISTINCT FROM 'number' THEN
    PERFORM alkstore.raise('ALK03', format('%s must be a number, got %s', key, alkstore.excerpt(v::text)));
  END IF;
  n := (v #>> '{}')::numeric;
  IF n <> trunc(n) OR n < lo OR n > hi THEN
    PERFORM alkstore.raise('ALK03', format('%s must be a whole number from %s to %s, got %s', key, lo, hi, alkstore.excerpt(v::text)));
  END IF;
  RETURN n;
END $$;

-- Seconds for the argument positions that take them (delay_s, extend_s, ttl_s).
CREATE OR REPLACE FUNCTION alkstore.arg_ms(what text, s double precision, positive boolean) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  ms bigint;
BEGIN
  IF s IS NULL THEN
    RETURN NULL;
  END IF;
  IF s < 0 OR s > alkstore.max_duration_s() OR s = 'NaN'::float8 THEN
    ms := -1;
  ELSE
    ms := round(s::numeric * 1000);
  END IF;
  IF ms < 0 OR (positive AND ms < 1) THEN
    PERFORM alkstore.raise('ALK05', format('%s must be %s and at most %s seconds, got %s',
      what, CASE WHEN positive THEN 'greater than 0' ELSE 'at least 0' END, alkstore.max_duration_s(), s));
  END IF;
  RETURN ms;
END $$;

-- A batch size (max_jobs, max_events) from 1 to alkstore.max_batch().
CREATE OR REPLACE FUNCTION alkstore.batch_error(what text, n integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF n IS NULL THEN
    PERFORM alkstore.raise('ALK05', what || ' must not be NULL');
  END IF;
  PERFORM alkstore.raise('ALK05', format('%s must be between 1 and %s, got %s', what, alkstore.max_batch(), n));
  RETURN n;
END $$;

CREATE OR REPLACE FUNCTION alkstore.batch_ok(n integer) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(n BETWEEN 1 AND alkstore.max_batch(), false)
$$;

CREATE OR REPLACE FUNCTION alkstore.batch(what text, n integer) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN alkstore.batch_ok(n) THEN n ELSE alkstore.batch_error(what, n) END
$$;

-- A stream offset argument: at least 0.
CREATE OR REPLACE FUNCTION alkstore.offset_arg(what text, o bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF o IS NULL OR o < 0 THEN
    PERFORM alkstore.raise('ALK05', format('%s must be at least 0, got %s', what, coalesce(o::text, 'NULL')));
  END IF;
  RETURN o;
END $$;

CREATE OR REPLACE FUNCTION alkstore.job_id_error(id bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM alkstore.raise('ALK05', 'job_id must not be NULL');
  RETURN id;
END $$;

CREATE OR REPLACE FUNCTION alkstore.job_id(id bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN id IS NOT NULL THEN id ELSE alkstore.job_id_error(id) END
$$;

-- A list of job ids (alk_ack_batch): one dimension, no NULLs. (AND stops
-- at the first false: array_position refuses arrays of arrays.)
CREATE OR REPLACE FUNCTION alkstore.job_ids_ok(ids bigint[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(ids IS NOT NULL AND coalesce(array_ndims(ids), 1) = 1 AND array_position(ids, NULL) IS NULL, false)
$$;

-- Queue options (contract §5): the stored row, or the defaults.

CREATE OR REPLACE FUNCTION alkstore.queue_opts(q text) RETURNS alkstore.queue_opts
LANGUAGE plpgsql STABLE AS $$
DECLARE
  r alkstore.queue_opts;
BEGIN
  SELECT c.visibility_timeout_ms, c.max_attempts, c.backoff_base_ms, c.backoff_max_ms,
         c.retain_completed_ms, c.retain_dead_ms INTO r
    FROM alkstore.queues c WHERE c.queue = q;
  IF NOT FOUND THEN
    r := alkstore.default_queue_opts();
  END IF;
  RETURN r;
END $$;

-- Merges the keys of `opts` over `base`; rejects anything else.
CREATE OR REPLACE FUNCTION alkstore.merge_queue_opts(base alkstore.queue_opts, opts jsonb) RETURNS alkstore.queue_opts
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  k text;
  r alkstore.queue_opts := base;
BEGIN
  IF opts IS NULL OR opts = 'null'::jsonb THEN
    RETURN r;
  END IF;
  IF jsonb_typeof(opts) <> 'object' THEN
    PERFORM alkstore.raise('ALK03', format('queue options must be a JSON object, got %s', alkstore.excerpt(opts::text)));
  END IF;
  FOR k IN SELECT jsonb_object_keys(opts) LOOP
    CASE k
      WHEN 'visibility_timeout_s' THEN r.visibility_timeout_ms := alkstore.duration_ms(k, opts -> k, true);
      WHEN 'max_attempts' THEN r.max_attempts := alkstore.whole(k, opts -> k, 1, 2147483647);
      WHEN 'backoff_base_s' THEN r.backoff_base_ms := alkstore.duration_ms(k, opts -> k, false);
      WHEN 'backoff_max_s' THEN r.backoff_max_ms := alkstore.duration_ms(k, opts -> k, false);
      WHEN 'retain_completed_s' THEN r.retain_completed_ms := alkstore.duration_ms(k, opts -> k, false);
      -- null: keep dead jobs until requeued or purged (the default).
      WHEN 'retain_dead_s' THEN r.retain_dead_ms :=
        CASE WHEN opts -> k = 'null'::jsonb THEN NULL ELSE alkstore.duration_ms(k, opts -> k, false) END;
      -- The limits: alkstore.merge_limits (limit.sql).
      WHEN 'max_running', 'rate_max', 'rate_per_s', 'key_max_running', 'key_rate_max', 'key_rate_per_s' THEN NULL;
      ELSE PERFORM alkstore.raise('ALK03', format(
        'unknown queue option %s (expected one of: visibility_timeout_s, max_attempts, backoff_base_s, backoff_max_s, retain_completed_s, retain_dead_s, max_running, rate_max, rate_per_s, key_max_running, key_rate_max, key_rate_per_s)',
        alkstore.quote(k)));
    END CASE;
  END LOOP;
  RETURN r;
END $$;

CREATE OR REPLACE FUNCTION alkstore.queue_opts_json(o alkstore.queue_opts) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'visibility_timeout_s', alkstore.seconds(o.visibility_timeout_ms),
    'max_attempts', o.max_attempts,
    'backoff_base_s', alkstore.seconds(o.backoff_base_ms),
    'backoff_max_s', alkstore.seconds(o.backoff_max_ms),
    'retain_completed_s', alkstore.seconds(o.retain_completed_ms),
    'retain_dead_s', coalesce(alkstore.seconds(o.retain_dead_ms), 'null'::jsonb))
$$;

-- A key option (idempotency_key, group_key, limit_key): a non-empty string of at most
-- max_name_bytes() bytes.
CREATE OR REPLACE FUNCTION alkstore.key_opt(key text, v jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  s text;
BEGIN
  IF jsonb_typeof(v) IS DISTINCT FROM 'string' OR v = '""'::jsonb THEN
    PERFORM alkstore.raise('ALK03', format('%s must be a non-empty string, got %s', key, alkstore.excerpt(v::text)));
  END IF;
  s := v #>> '{}';
  IF octet_length(s) > alkstore.max_name_bytes() THEN
    PERFORM alkstore.raise('ALK03', format('%s must be at most %s bytes, got %s bytes starting %s',
      key, alkstore.max_name_bytes(), octet_length(s), alkstore.quote(s)));
  END IF;
  RETURN s;
END $$;

-- depends_on (contract v1.2 §J): a JSON array of 1 to max_dependencies()
-- job ids, each a whole number >= 1 however written (7, 7.0, 7e0, as
-- alkstore.whole reads every whole-number option); duplicates dropped,
-- first kept.
CREATE OR REPLACE FUNCTION alkstore.depends_on_opt(v jsonb) RETURNS bigint[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  ids bigint[];
  ok  boolean;
BEGIN
  IF jsonb_typeof(v) = 'array' AND jsonb_array_length(v) BETWEEN 1 AND alkstore.max_dependencies() THEN
    -- One statement (each costs more to start than the checks in it).
    SELECT bool_and(x.id IS NOT NULL), array_agg(x.id) INTO ok, ids
      FROM (SELECT CASE WHEN m.n BETWEEN 1 AND 9223372036854775807 AND m.n = trunc(m.n)
                        THEN m.n::bigint END AS id
              FROM jsonb_array_elements(v) e,
                   LATERAL (SELECT CASE WHEN jsonb_typeof(e) = 'number' THEN (e #>> '{}')::numeric END AS n) m) x;
  END IF;
  IF ok IS NOT TRUE THEN
    PERFORM alkstore.raise('ALK03', format('depends_on must be a JSON array of 1 to %s job ids, got %s',
      alkstore.max_dependencies(), alkstore.excerpt(v::text)));
  END IF;
  IF cardinality(ids) > 1 THEN -- duplicates dropped, the first of each kept
    ids := ARRAY(SELECT u.id FROM unnest(ids) WITH ORDINALITY AS u(id, n) GROUP BY u.id ORDER BY min(u.n));
  END IF;
  RETURN ids;
END $$;

-- Enqueue options, resolved against the time of enqueue.

CREATE OR REPLACE FUNCTION alkstore.enqueue_opts(opts jsonb, now timestamptz) RETURNS alkstore.enqueue_opts
LANGUAGE plpgsql STABLE AS $$
DECLARE
  k        text;
  v        jsonb;
  delay_ms bigint;
  at       timestamptz;
  secs     numeric;
  r        alkstore.enqueue_opts := ROW(now, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
BEGIN
  IF opts IS NULL OR opts = 'null'::jsonb OR opts = '{}'::jsonb THEN
    RETURN r;
  END IF;
  IF jsonb_typeof(opts) <> 'object' THEN
    PERFORM alkstore.raise('ALK03', format('enqueue options must be a JSON object, got %s', alkstore.excerpt(opts::text)));
  END IF;
  FOR k, v IN SELECT * FROM jsonb_each(opts) LOOP
    CASE k
      WHEN 'delay_s' THEN delay_ms := alkstore.duration_ms(k, v, false);
      WHEN 'priority' THEN r.priority := alkstore.whole(k, v, -2147483648, 2147483647);
      WHEN 'max_attempts' THEN r.max_attempts := alkstore.whole(k, v, 1, 2147483647);
      WHEN 'expires_in_s' THEN r.expires_at := now + alkstore.duration_ms(k, v, true) * interval '1 millisecond';
      WHEN 'run_at' THEN
        at := NULL;
        IF jsonb_typeof(v) = 'string'
           AND (v #>> '{}') ~ '^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$' THEN
          BEGIN
            at := (v #>> '{}')::timestamptz;
          EXCEPTION WHEN others THEN
            at := NULL;
          END;
        ELSIF jsonb_typeof(v) = 'number' THEN
          secs := (v #>> '{}')::numeric;
          IF secs >= 0 AND secs <= 253402300799 THEN
            at := to_timestamp(0) + round(secs * 1000) * interval '1 millisecond';
          END IF;
        END IF;
        IF at IS NULL OR at < to_timestamp(0) OR at >= '10000-01-01T00:00:00Z'::timestamptz THEN
          PERFORM alkstore.raise('ALK03', format(
            'run_at must be an RFC 3339 timestamp or unix seconds between 1970 and 9999, got %s',
            alkstore.excerpt(v::text)));
        END IF;
        r.run_at := at;
      WHEN 'idempotency_key' THEN r.idempotency_key := alkstore.key_opt(k, v);
      WHEN 'idempotency_ttl_s' THEN r.idempotency_ttl_ms := alkstore.duration_ms(k, v, true);
      WHEN 'group_key' THEN r.group_key := alkstore.key_opt(k, v);
      WHEN 'limit_key' THEN r.limit_key := alkstore.key_opt(k, v);
      WHEN 'depends_on' THEN r.depends_on := alkstore.depends_on_opt(v);
      ELSE PERFORM alkstore.raise('ALK03', format(
        'unknown enqueue option %s (expected one of: delay_s, run_at, priority, max_attempts, expires_in_s, idempotency_key, idempotency_ttl_s, group_key, limit_key, depends_on)',
        alkstore.quote(k)));
    END CASE;
  END LOOP;
  IF delay_ms IS NOT NULL THEN
    IF opts ? 'run_at' THEN
      PERFORM alkstore.raise('ALK03', 'delay_s and run_at cannot be given together');
    END IF;
    r.run_at := now + delay_ms * interval '1 millisecond';
  END IF;
  RETURN r;
END $$;
