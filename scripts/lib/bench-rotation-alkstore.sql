-- For scripts/bench-rotation.sh's pressure run (ALK_ROTATION_PRESSURE=1):
-- in a throwaway database with the extension, alkstore.jobs swapped for the
-- rotating layout of bench-rotation.sql (`rot`: four partitions by a slot
-- that rotate(`alkstore`) advances, each with the table's eight indexes),
-- so that alkstore's own functions — unchanged — run on it. A bench
-- device, not an install: the new table is not the extension's, and the
-- slot of a new job comes from a default that reads alkstore.current.
BEGIN;
ALTER TABLE alkstore.jobs RENAME TO jobs_single;
CREATE TABLE alkstore.current (slot smallint NOT NULL);
INSERT INTO alkstore.current VALUES (0);
CREATE FUNCTION alkstore.current_slot() RETURNS smallint
  LANGUAGE sql STABLE AS 'SELECT slot FROM alkstore.current';
CREATE TABLE alkstore.jobs (LIKE alkstore.jobs_single INCLUDING IDENTITY,
  slot smallint NOT NULL DEFAULT alkstore.current_slot()) PARTITION BY LIST (slot);
ALTER TABLE alkstore.jobs ADD PRIMARY KEY (id, slot);
CREATE TABLE alkstore.jobs_0 PARTITION OF alkstore.jobs FOR VALUES IN (0);
CREATE TABLE alkstore.jobs_1 PARTITION OF alkstore.jobs FOR VALUES IN (1);
CREATE TABLE alkstore.jobs_2 PARTITION OF alkstore.jobs FOR VALUES IN (2);
CREATE TABLE alkstore.jobs_3 PARTITION OF alkstore.jobs FOR VALUES IN (3);
DO $$
DECLARE d text;
BEGIN
  FOR d IN SELECT indexdef FROM pg_indexes
            WHERE schemaname = 'alkstore' AND tablename = 'jobs_single' AND indexname <> 'jobs_single_pkey'
              AND indexname <> 'jobs_pkey' LOOP
    EXECUTE replace(regexp_replace(d, 'INDEX \S+ ON', 'INDEX ON'), 'alkstore.jobs_single', 'alkstore.jobs');
  END LOOP;
END $$;
-- (jobs_single stays, empty: the extension's functions name its row type.)
COMMIT;
