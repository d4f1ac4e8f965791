-- The extension's commit-ticket trigger function, in its library
-- (pg_ext/src/ticket.rs): what ticket_plain.sql does in PL/pgSQL, without
-- a PL/pgSQL call or a search_path set per call. See ticket_plain.sql for
-- when it runs and why.
--
-- SECURITY DEFINER: it runs as whoever commits. No SET search_path: its
-- statement names every object with its schema.
CREATE OR REPLACE FUNCTION alkstore.ticket() RETURNS trigger
LANGUAGE c SECURITY DEFINER AS 'MODULE_PATHNAME', 'alkstore_ticket_wrapper';
