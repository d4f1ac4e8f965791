-- The extension's alk_ack, in its library (pg_ext/src/ack.rs): the common
-- case — valid arguments, a job running under this worker in a queue that
-- keeps no acked jobs — in the DELETE of templates/ack_delete.sql and the
-- same follow-ups as the PL/pgSQL (its group's next job, its dependents,
-- its limit), without a PL/pgSQL call; every other case goes to
-- alkstore.ack_full (the plain install's alk_ack), which also words the
-- errors. SECURITY DEFINER without SET clauses, as alk_claim
-- (claim_library.sql).
CREATE OR REPLACE FUNCTION alk_ack(job_id bigint, worker text, result jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE c SECURITY DEFINER AS 'MODULE_PATHNAME', 'alkstore_ack';

-- The extension's alk_ack_batch, in the same module: valid arguments run
-- templates/ack_batch_delete.sql, the PL/pgSQL's statement, and
-- alkstore.batch_acked when anything follows from it; invalid ones go to
-- alkstore.ack_batch_full, which words the error.
CREATE OR REPLACE FUNCTION alk_ack_batch(job_ids bigint[], worker text)
RETURNS integer
LANGUAGE c SECURITY DEFINER AS 'MODULE_PATHNAME', 'alkstore_ack_batch';
