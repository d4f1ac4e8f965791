-- Versions (contract v1.1 §B). The installed code's version comes from
-- constants.sql; the schema's from alkstore.meta, which install scripts and
-- upgrade steps keep current.

CREATE OR REPLACE FUNCTION alk_version() RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object('version', alkstore.version(), 'schema', m.value::integer)
    FROM alkstore.meta m WHERE m.key = 'schema_version'
$$;

-- The schema is created by CREATE EXTENSION (or the plain SQL install);
-- alk_init() exists on both engines and returns the schema version.
CREATE OR REPLACE FUNCTION alk_init() RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT m.value::integer FROM alkstore.meta m WHERE m.key = 'schema_version'
$$;

-- Every install and upgrade ends here: record the version (the plain SQL
-- script reads it to know what it upgrades), and refuse a schema that the
-- upgrade steps did not bring to the version this code needs.
INSERT INTO alkstore.meta AS m (key, value) VALUES ('version', alkstore.version())
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

DO $alkstore_check$
BEGIN
  IF (SELECT m.value::integer FROM alkstore.meta m WHERE m.key = 'schema_version')
     IS DISTINCT FROM alkstore.schema_version() THEN
    RAISE EXCEPTION 'alkstore: the schema is not at version % after the install; an upgrade step is missing',
      alkstore.schema_version();
  END IF;
END $alkstore_check$;
