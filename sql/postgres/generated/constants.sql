-- GENERATED from core/src/pg_constants.rs: do not edit. The contract's constants,
-- spelled once in Rust (core/) and here for PL/pgSQL. `cargo xtask verify`
-- fails when this file is stale; `cargo xtask codegen` rewrites it.

-- The installed code's version (alk_version).
CREATE OR REPLACE FUNCTION alkstore.version() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '0.4.0'::text $$;

-- The schema version this code works on.
CREATE OR REPLACE FUNCTION alkstore.schema_version() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 3::integer $$;

-- Queue, outbox, stream, channel and lock names must not start with it.
CREATE OR REPLACE FUNCTION alkstore.reserved_prefix() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '__alkstore_'::text $$;

-- The backing queue of outbox x is this prefix followed by x.
CREATE OR REPLACE FUNCTION alkstore.outbox_prefix() RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT '__alkstore_outbox:'::text $$;

-- A notification payload's compact JSON must be shorter than this many bytes.
CREATE OR REPLACE FUNCTION alkstore.max_notify_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 8000::integer $$;

-- The longest a wake-up registration lasts per call, in seconds.
CREATE OR REPLACE FUNCTION alkstore.max_wait_ttl_s() RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 300::double precision $$;

-- Buckets of names a waiting session's advisory locks are taken per (a power of two).
CREATE OR REPLACE FUNCTION alkstore.wait_buckets() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 64::integer $$;

-- The longest name of any kind, in bytes.
CREATE OR REPLACE FUNCTION alkstore.max_name_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 1024::integer $$;

-- The longest sentence of an error message, in characters.
CREATE OR REPLACE FUNCTION alkstore.max_detail_chars() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 950::integer $$;

-- How many characters of an offending value an error message quotes.
CREATE OR REPLACE FUNCTION alkstore.quote_chars() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 64::integer $$;

-- The longest duration any option or argument takes, in seconds.
CREATE OR REPLACE FUNCTION alkstore.max_duration_s() RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 3153600000::numeric $$;

-- The longest cron text of a schedule spec, in bytes.
CREATE OR REPLACE FUNCTION alkstore.max_cron_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 1024::integer $$;

-- The largest max_jobs / max_events.
CREATE OR REPLACE FUNCTION alkstore.max_batch() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 1000::integer $$;

-- The largest max_rows of alk_prune.
CREATE OR REPLACE FUNCTION alkstore.max_prune_rows() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 100000::integer $$;

-- How long an idempotency key holds when no idempotency_ttl_s is given, in milliseconds.
CREATE OR REPLACE FUNCTION alkstore.default_idempotency_ttl_ms() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 86400000::bigint $$;

-- The most jobs one depends_on may name (contract v1.2 §J).
CREATE OR REPLACE FUNCTION alkstore.max_dependencies() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 100::integer $$;

-- How long an id that ended without an ack is remembered once its row is gone, in milliseconds.
CREATE OR REPLACE FUNCTION alkstore.dependency_memory_ms() RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 604800000::bigint $$;

-- Options of a queue never configured (contract §5).
CREATE OR REPLACE FUNCTION alkstore.default_queue_opts() RETURNS alkstore.queue_opts
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT ROW(60000, 5, 5000, 3600000, 0, NULL)::alkstore.queue_opts $$;

-- Whether names of this kind share the reserved namespace.
CREATE OR REPLACE FUNCTION alkstore.namespaced(kind text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT kind IN ('queue', 'outbox', 'stream', 'channel', 'lock') $$;

-- The facade variant of each error code (contract §3).
CREATE OR REPLACE FUNCTION alkstore.variant(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT CASE code WHEN 'ALK01' THEN 'InvalidName' WHEN 'ALK02' THEN 'ReservedName' WHEN 'ALK03' THEN 'InvalidOptions' WHEN 'ALK04' THEN 'InvalidPayload' WHEN 'ALK05' THEN 'InvalidArgument' END $$;
