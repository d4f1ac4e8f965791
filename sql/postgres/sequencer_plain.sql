-- The plain install's stand-ins for the extension's sequencer functions
-- (sequencer.sql, backed by pg_ext/src/sequencer.rs): no library, so no
-- background worker to wake, and no view of the transaction block.

-- Returns id. No worker to wake: a sequencer is whoever calls
-- alk_sequence (the facade's readers, the CLI, the user's scheduler).
CREATE OR REPLACE FUNCTION alkstore.wake_sequencer(id bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT id $$;

-- Whether this call runs inside a transaction block, as far as SQL can
-- tell: a transaction that has written. One that has not is refused by
-- alk_sequence's first COMMIT (PostgreSQL's 2D000), before anything is done.
CREATE OR REPLACE FUNCTION alkstore.in_transaction_block() RETURNS boolean
LANGUAGE sql VOLATILE AS $$ SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL $$;
