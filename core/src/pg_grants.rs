//! Who may call what on PostgreSQL (contract v1.1 §A1), generated from the
//! function catalogue: `sql/postgres/generated/grants.sql` is [`sql`]'s
//! output (`cargo xtask codegen` writes it, `verify` checks it). Every install
//! and upgrade runs it last, so a function added later is granted to the
//! role the catalogue names, and nothing else is granted to anyone.

use crate::catalogue::{Role, FUNCTIONS};
use std::fmt::Write;

/// Roles that could call the alk_* functions before an upgrade that
/// restricted them to alkstore_user (0.1.0 let PUBLIC call them all): the
/// upgrade step recorded them in alkstore.meta; they are granted
/// alkstore_user here, with a warning, so that the upgrade keeps working what
/// worked. A role that may not grant says which statement an administrator
/// runs, and changes nothing.
const CALLERS_BEFORE: &str = r#"
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
"#;

/// The text of `sql/postgres/generated/grants.sql`.
pub fn sql() -> String {
    let (user, admin) = (Role::User.name(), Role::Admin.name());
    let mut out = format!(
        r#"-- GENERATED from core/src/pg_grants.rs and the function catalogue: do not edit.
-- Who may call what (contract v1.1 §A1). Run last by every install and upgrade.

-- The two roles, created when missing and this role may create roles.
DO $alkstore_roles$
DECLARE
  may boolean := (SELECT r.rolsuper OR r.rolcreaterole FROM pg_catalog.pg_roles r
                   WHERE r.rolname = current_user);
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '{user}')
     OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '{admin}') THEN
    IF NOT may THEN
      RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
        MESSAGE = 'alkstore: the roles {user} and {admin} are missing, and this role may not create them; nothing was changed',
        HINT = 'An administrator runs: CREATE ROLE {user} NOLOGIN; CREATE ROLE {admin} NOLOGIN IN ROLE {user}; then run the install again.';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '{user}') THEN
      CREATE ROLE {user} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '{admin}') THEN
      CREATE ROLE {admin} NOLOGIN;
    END IF;
  END IF;
  IF NOT pg_catalog.pg_has_role('{admin}', '{user}', 'MEMBER') THEN
    GRANT {user} TO {admin};
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

-- Each function to the role the catalogue names ({admin} is a member of {user}).
DO $alkstore_grants$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT * FROM (VALUES
"#
    );
    let rows: Vec<String> = FUNCTIONS
        .iter()
        .filter(|f| f.on_postgres())
        .map(|f| format!("    ('{}', '{}')", f.pg_signature(), f.role.name()))
        .collect();
    let _ = write!(
        out,
        "{}\n  ) AS g(signature, role) LOOP\n    \
         EXECUTE format('GRANT EXECUTE ON ROUTINE %I.%s TO %I', current_schema(), r.signature, r.role);\n  \
         END LOOP;\nEND $alkstore_grants$;\n",
        rows.join(",\n")
    );
    out.push_str(INVOKER_HELPERS);
    out.push_str(CALLERS_BEFORE);
    out
}

/// `alk_sequence` and `alk_maintain` are procedures that commit, so they
/// run with their caller's rights (PostgreSQL lets no SECURITY DEFINER
/// routine commit): their caller may look up the schema `alkstore` and run
/// the SECURITY DEFINER functions they call between commits — nothing else
/// in that schema.
const INVOKER_HELPERS: &str = r#"
-- What alk_sequence and alk_maintain (procedures with their caller's rights) call.
GRANT USAGE ON SCHEMA alkstore TO alkstore_user;
GRANT EXECUTE ON FUNCTION alkstore.sequence_streams(text), alkstore.sequence_stream(text) TO alkstore_user;
GRANT EXECUTE ON FUNCTION alkstore.maintain_start(double precision) TO alkstore_user;
"#;
