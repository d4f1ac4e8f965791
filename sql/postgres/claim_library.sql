-- The extension's alk_claim, in its library (pg_ext/src/claim.rs): the
-- common case — valid arguments, a queue neither paused nor limited, no
-- deadline passed and no scheduled job come due — in the statements of
-- templates/claim_probe.sql and templates/claim_update.sql, without a
-- PL/pgSQL call; every other case goes to alkstore.claim_full (the same
-- PL/pgSQL as the plain install's alk_claim), which also words the errors.
--
-- SECURITY DEFINER, without SET clauses: the library runs its statements
-- under a search path of pg_catalog alone (pushed around them, not a
-- setting, so a caller's search_path cannot redirect a name and costs no
-- setting changed per call), and plans them generic itself.
CREATE OR REPLACE FUNCTION alk_claim(queue_name text, worker text, max_jobs integer DEFAULT 1)
RETURNS TABLE (id bigint, queue text, payload jsonb, attempts integer, max_attempts integer,
               claim_expires_at timestamptz)
LANGUAGE c SECURITY DEFINER AS 'MODULE_PATHNAME', 'alkstore_claim';
