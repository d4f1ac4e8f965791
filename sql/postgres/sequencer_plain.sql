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

-- Whether the running statement is a transaction of its own, as far as SQL
-- can tell (the extension asks the server): its transaction began with it,
-- or within 10 ms of it — a statement sent by the extended protocol, as
-- drivers send one with parameters, begins its transaction at Bind and its
-- statement at Execute; the next statement of a BEGIN … COMMIT block most
-- often comes later (one that comes sooner takes the rotation's lock to
-- that block's commit: rotate.sql).
CREATE OR REPLACE FUNCTION alkstore.statement_alone() RETURNS boolean
LANGUAGE sql VOLATILE AS $$
  SELECT pg_catalog.statement_timestamp() - pg_catalog.transaction_timestamp() < interval '10 ms'
$$;
