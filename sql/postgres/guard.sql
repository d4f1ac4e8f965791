-- Names alk_* belong to alkstore (contract v1.1 §A1). The alk_* functions
-- are called unqualified, so an overload that another role defines — say
-- alk_ack(integer, text) in public, a closer match for alk_ack(1, 'w') than
-- ours — would run that role's code with the rights of whoever calls it,
-- a superuser included. This event trigger refuses such functions: only the
-- owner of schema alkstore (or a superuser) may define functions named
-- alk_* or in schema alkstore.

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
        MESSAGE = format('alkstore: functions named alk_* are alkstore''s: %s may not define %s', current_user, f),
        HINT = 'Only the owner of schema alkstore defines them; name your function otherwise.';
    END IF;
  END LOOP;
END $$;

-- Creating an event trigger takes a superuser. A plain install by another
-- role gets a warning instead: then keep untrusted roles from creating
-- objects in the schemas of the search_path.
DO $alkstore_guard$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_event_trigger WHERE evtname = 'alkstore_guard_names') THEN
    IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
      CREATE EVENT TRIGGER alkstore_guard_names ON ddl_command_end
        WHEN TAG IN ('CREATE FUNCTION', 'ALTER FUNCTION', 'CREATE PROCEDURE', 'ALTER PROCEDURE')
        EXECUTE FUNCTION alkstore.guard_names();
    ELSE
      RAISE WARNING USING
        MESSAGE = 'alkstore: not a superuser, so no event trigger stops other roles from defining alk_* overloads',
        HINT = 'Make sure no untrusted role may CREATE in the schemas of the search_path (REVOKE CREATE ON SCHEMA public FROM PUBLIC), or have a superuser run the install.';
    END IF;
  END IF;
END $alkstore_guard$;
