-- GENERATED from core/src/pg_grants.rs and the function catalogue: do not edit.
-- Who may call what (contract v1.1 §A1). Run last by every install and upgrade.

-- The two roles, created when missing and this role may create roles.
DO $alkstore_roles$
DECLARE
  may boolean := (SELECT r.rolsuper OR r.rolcreaterole FROM pg_catalog.pg_roles r
                   WHERE r.rolname = current_user);
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'alkstore_user')
     OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'alkstore_admin') THEN
    IF NOT may THEN
      RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
        MESSAGE = 'alkstore: the roles alkstore_user and alkstore_admin are missing, and this role may not create them; nothing was changed',
        HINT = 'An administrator runs: CREATE ROLE alkstore_user NOLOGIN; CREATE ROLE alkstore_admin NOLOGIN IN ROLE alkstore_user; then run the install again.';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'alkstore_user') THEN
      CREATE ROLE alkstore_user NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'alkstore_admin') THEN
      CREATE ROLE alkstore_admin NOLOGIN;
    END IF;
  END IF;
  IF NOT pg_catalog.pg_has_role('alkstore_admin', 'alkstore_user', 'MEMBER') THEN
    GRANT alkstore_user TO alkstore_admin;
  END IF;
END $alkstore_roles$;

-- Nothing for anyone but the owner: whatever earlier versions, PUBLIC's
-- defaults or ALTER DEFAULT PRIVILEGES granted on the schema, its tables,
-- sequences and functions, and on the alk_* functions.
DO $alkstore_acl$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT format('%s %s', CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass) AS obj,
           a.grantee
      FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
     WHERE c.relnamespace = 'alkstore'::regnamespace AND c.relkind IN ('r', 'S', 'v', 'm', 'p')
       AND a.grantee <> c.relowner
    UNION
    SELECT format('ROUTINE %s', p.oid::regprocedure), a.grantee
      FROM pg_catalog.pg_proc p,
           pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) a
     WHERE (p.pronamespace = 'alkstore'::regnamespace
            OR (p.proname LIKE 'alk\_%' AND p.pronamespace = current_schema()::regnamespace))
       AND a.grantee <> p.proowner
    UNION
    SELECT 'SCHEMA alkstore', a.grantee
      FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
     WHERE n.nspname = 'alkstore' AND a.grantee <> n.nspowner
  LOOP
    EXECUTE format('REVOKE ALL ON %s FROM %s', r.obj,
                   CASE r.grantee WHEN 0 THEN 'PUBLIC' ELSE r.grantee::regrole::text END);
  END LOOP;
END $alkstore_acl$;

-- Each function to the role the catalogue names (alkstore_admin is a member of alkstore_user).
DO $alkstore_grants$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT * FROM (VALUES
    ('alk_version()', 'alkstore_user'),
    ('alk_init()', 'alkstore_user'),
    ('alk_enqueue(text, jsonb, jsonb)', 'alkstore_user'),
    ('alk_enqueue_batch(text, jsonb, jsonb)', 'alkstore_user'),
    ('alk_claim(text, text, integer)', 'alkstore_user'),
    ('alk_ack(bigint, text, jsonb)', 'alkstore_user'),
    ('alk_ack_batch(bigint[], text)', 'alkstore_user'),
    ('alk_retry(bigint, text, text, double precision)', 'alkstore_user'),
    ('alk_fail(bigint, text, text)', 'alkstore_user'),
    ('alk_heartbeat(bigint, text, double precision)', 'alkstore_user'),
    ('alk_release(bigint, text, double precision)', 'alkstore_user'),
    ('alk_release_batch(bigint[], text, double precision)', 'alkstore_user'),
    ('alk_cancel(bigint)', 'alkstore_user'),
    ('alk_get_job(bigint)', 'alkstore_user'),
    ('alk_job_errors(bigint)', 'alkstore_user'),
    ('alk_requeue_dead(bigint)', 'alkstore_admin'),
    ('alk_delete_job(bigint)', 'alkstore_admin'),
    ('alk_queue_configure(text, jsonb)', 'alkstore_admin'),
    ('alk_queue_opts(text)', 'alkstore_user'),
    ('alk_queue_stats(text)', 'alkstore_user'),
    ('alk_sweep(text)', 'alkstore_user'),
    ('alk_queue_pause(text)', 'alkstore_admin'),
    ('alk_queue_resume(text)', 'alkstore_admin'),
    ('alk_outbox_pause(text)', 'alkstore_admin'),
    ('alk_outbox_resume(text)', 'alkstore_admin'),
    ('alk_prune(integer)', 'alkstore_user'),
    ('alk_queues()', 'alkstore_admin'),
    ('alk_queue_limits()', 'alkstore_admin'),
    ('alk_list_jobs(text, text, bigint, integer)', 'alkstore_admin'),
    ('alk_requeue_dead_all(text)', 'alkstore_admin'),
    ('alk_purge(text, text)', 'alkstore_admin'),
    ('alk_outbox_enqueue(text, jsonb, jsonb)', 'alkstore_user'),
    ('alk_outbox_claim(text, text, integer)', 'alkstore_user'),
    ('alk_outbox_stats(text)', 'alkstore_user'),
    ('alk_publish(text, jsonb, text)', 'alkstore_user'),
    ('alk_read(text, bigint, integer)', 'alkstore_user'),
    ('alk_save_offset(text, text, bigint)', 'alkstore_user'),
    ('alk_get_offset(text, text)', 'alkstore_user'),
    ('alk_reset_offset(text, text, bigint)', 'alkstore_admin'),
    ('alk_streams()', 'alkstore_admin'),
    ('alk_stream_configure(text, jsonb)', 'alkstore_admin'),
    ('alk_stream_info(text)', 'alkstore_user'),
    ('alk_sequence(text, bigint)', 'alkstore_user'),
    ('alk_schedule(text, text, jsonb, jsonb, jsonb)', 'alkstore_admin'),
    ('alk_unschedule(text)', 'alkstore_admin'),
    ('alk_schedules()', 'alkstore_user'),
    ('alk_schedule_tick()', 'alkstore_user'),
    ('alk_maintain(double precision, bigint)', 'alkstore_user'),
    ('alk_notify(text, jsonb)', 'alkstore_user'),
    ('alk_channel(text)', 'alkstore_user'),
    ('alk_listen_queue(text, double precision)', 'alkstore_user'),
    ('alk_listen_outbox(text, double precision)', 'alkstore_user'),
    ('alk_listen_stream(text, double precision)', 'alkstore_user'),
    ('alk_unlisten_queue(text)', 'alkstore_user'),
    ('alk_unlisten_outbox(text)', 'alkstore_user'),
    ('alk_unlisten_stream(text)', 'alkstore_user'),
    ('alk_lock_acquire(text, text, double precision)', 'alkstore_user'),
    ('alk_lock_renew(text, text, double precision)', 'alkstore_user'),
    ('alk_lock_release(text, text)', 'alkstore_user'),
    ('alk_locks()', 'alkstore_admin')
  ) AS g(signature, role) LOOP
    EXECUTE format('GRANT EXECUTE ON ROUTINE %I.%s TO %I', current_schema(), r.signature, r.role);
  END LOOP;
END $alkstore_grants$;

-- What alk_sequence and alk_maintain (procedures with their caller's rights) call.
GRANT USAGE ON SCHEMA alkstore TO alkstore_user;
GRANT EXECUTE ON FUNCTION alkstore.sequence_streams(text), alkstore.sequence_stream(text) TO alkstore_user;
GRANT EXECUTE ON FUNCTION alkstore.maintain_start(double precision) TO alkstore_user;

-- Roles that could call alk_* before an upgrade restricted them (recorded by
-- the upgrade step in alkstore.meta) keep calling them: granted alkstore_user.
DO $alkstore_callers$
DECLARE
  names text;
BEGIN
  SELECT pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ', ' ORDER BY r.rolname) INTO names
    FROM alkstore.meta m, pg_catalog.jsonb_array_elements_text(m.value::jsonb) c(name), pg_catalog.pg_roles r
   WHERE m.key = 'callers_before_upgrade' AND r.rolname = c.name
     AND NOT pg_catalog.pg_has_role(r.oid, 'alkstore_user', 'MEMBER');
  DELETE FROM alkstore.meta WHERE key = 'callers_before_upgrade';
  IF names IS NOT NULL THEN
    BEGIN
      EXECUTE pg_catalog.format('GRANT alkstore_user TO %s', names);
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
        MESSAGE = pg_catalog.format('alkstore: these roles could call the alk_* functions before this upgrade and would lose them, and this role may not grant them alkstore_user: %s; nothing was changed', names),
        HINT = pg_catalog.format('An administrator runs: GRANT alkstore_user TO %s; then run the upgrade again.', names);
    END;
    RAISE WARNING USING
      MESSAGE = pg_catalog.format('alkstore: only members of alkstore_user may call the alk_* functions now; granted alkstore_user to %s, who could call them before', names),
      HINT = 'Revoke it (REVOKE alkstore_user FROM <role>) from any of them that should not; grant alkstore_admin to those that configure queues.';
  END IF;
END $alkstore_callers$;
