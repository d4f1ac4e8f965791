-- Backups (contract v1.1 §A2). pg_dump leaves out the rows of an
-- extension's tables unless the extension registers them: every table whose
-- rows are state is registered, the job and event id sequences and the commit tickets, so a restore brings
-- back every job, option, limit, rate window, parked job, pause, group, idempotency key, schedule,
-- dependency, record of a job ended without an ack,
-- event, offset and lease, and ids continue above the old ones. Not the
-- waiters: registrations of sessions that are gone.
-- Not meta's version rows, which the restoring CREATE EXTENSION writes.
-- The plain SQL install needs nothing: pg_dump dumps its tables as any.
DO $alkstore_backup$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'alkstore') THEN
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.meta',
      $$WHERE key NOT IN ('schema_version', 'version')$$);
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.queues', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.queue_limits', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.claim_times', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.parked', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.parked_keys', '');
    -- The job table's partitions, which hold its rows (schema.sql).
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.jobs_slot0', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.jobs_slot1', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.jobs_cold', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.jobs_id_seq', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.streams', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.events', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.published', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.published_id_seq', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.commit_ticket', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.offsets', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.locks', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.paused', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.groups', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.idempotency', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.schedules', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.job_deps', '');
    PERFORM pg_catalog.pg_extension_config_dump('alkstore.job_ends', '');
  END IF;
END $alkstore_backup$;
