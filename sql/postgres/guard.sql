-- Names alk_* belong to alkstore (contract v1.1 §A1). The alk_* functions
-- are called unqualified, so an overload that another role defines — say
-- alk_ack(integer, text) in public, a closer match for alk_ack(1, 'w') than
-- ours — would run that role's code with the rights of whoever calls it,
-- a superuser included. This event trigger refuses such routines: only the
-- owner of schema alkstore (or a superuser) may make a routine named alk_*
-- or one in schema alkstore.
--
-- It fires after every DDL command, not a list of tags: a routine can come
-- to have such a name in more ways than CREATE FUNCTION (CREATE AGGREGATE,
-- ALTER ROUTINE / AGGREGATE ... RENAME TO or SET SCHEMA, an extension's
-- script), and any command that leaves one behind reports it here.

CREATE OR REPLACE FUNCTION alkstore.guard_names() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure
      FROM pg_event_trigger_ddl_commands() c JOIN pg_proc p ON p.oid = c.objid
     WHERE c.classid = 'pg_proc'::regclass
       AND (p.proname LIKE 'alk\_%' OR p.pronamespace = 'alkstore'::regnamespace)
  LOOP
    IF NOT EXISTS (SELECT FROM pg_namespace n
                    WHERE n.nspname = 'alkstore' AND pg_has_role(current_user, n.nspowner, 'MEMBER')) THEN
      RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
        MESSAGE = format('alkstore: routines named alk_* are alkstore''s: %s may not define %s', current_user, f),
        HINT = 'Only the owner of schema alkstore defines them; name your routine otherwise.';
    END IF;
  END LOOP;
END $$;

-- Creating an event trigger takes a superuser. A plain install by another
-- role gets a warning instead: then keep untrusted roles from creating
-- objects in the schemas of the search_path. An install or upgrade also
-- refuses to go on while a routine named alk_* that another role made
-- exists (one made before the guard, or before it covered every command):
-- callers could be running it instead of alkstore's.
DO $alkstore_guard$
DECLARE
  planted text;
BEGIN
  SELECT string_agg(format('%s (owner %s)', p.oid::regprocedure, p.proowner::regrole), ', ' ORDER BY p.oid)
    INTO planted
    FROM pg_proc p, pg_namespace n
   WHERE n.nspname = 'alkstore'
     AND (p.proname LIKE 'alk\_%' OR p.pronamespace = n.oid)
     AND NOT pg_has_role(p.proowner, n.nspowner, 'MEMBER');
  IF planted IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
      MESSAGE = format('alkstore: routines named alk_* that alkstore''s owner did not make exist: %s', planted),
      HINT = 'Callers of alk_* could be running them. Drop them (after finding out who made them), then install again.';
  END IF;
  IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
    -- Up to 0.2.0 the trigger fired on four tags only: made again without any.
    IF EXISTS (SELECT FROM pg_event_trigger WHERE evtname = 'alkstore_guard_names' AND evttags IS NOT NULL) THEN
      DROP EVENT TRIGGER alkstore_guard_names;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_event_trigger WHERE evtname = 'alkstore_guard_names') THEN
      CREATE EVENT TRIGGER alkstore_guard_names ON ddl_command_end
        EXECUTE FUNCTION alkstore.guard_names();
    END IF;
  ELSIF NOT EXISTS (SELECT FROM pg_event_trigger WHERE evtname = 'alkstore_guard_names') THEN
    RAISE WARNING USING
      MESSAGE = 'alkstore: not a superuser, so no event trigger stops other roles from defining alk_* routines',
      HINT = 'Make sure no untrusted role may CREATE in the schemas of the search_path (REVOKE CREATE ON SCHEMA public FROM PUBLIC), or have a superuser run the install.';
  END IF;
END $alkstore_guard$;
