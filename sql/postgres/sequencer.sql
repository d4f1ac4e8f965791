-- The extension's sequencer functions, in its library
-- (pg_ext/src/sequencer.rs). The plain install has SQL stand-ins
-- (sequencer_plain.sql).

-- Returns id; at this transaction's commit, wakes the background worker
-- that sequences this database's streams (when one runs), so a committed
-- event gets its offset within milliseconds, with no polling.
CREATE OR REPLACE FUNCTION alkstore.wake_sequencer(id bigint) RETURNS bigint
LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'alkstore_wake_sequencer_wrapper';

-- Whether this call runs inside a transaction block (BEGIN … COMMIT), where
-- alk_sequence, which commits its own transactions, cannot run.
CREATE OR REPLACE FUNCTION alkstore.in_transaction_block() RETURNS boolean
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'alkstore_in_transaction_block_wrapper';

-- Whether the running statement is a transaction of its own (no BEGIN …
-- COMMIT around it, sent by either protocol): where the job table's
-- rotation may take its lock (rotate.sql).
CREATE OR REPLACE FUNCTION alkstore.statement_alone() RETURNS boolean
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'alkstore_statement_alone_wrapper';
