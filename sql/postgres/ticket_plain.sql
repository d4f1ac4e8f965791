-- The plain install's commit-ticket trigger function; the extension's is in
-- its library (ticket.sql, pg_ext/src/ticket.rs), doing the same.
--
-- Commit order (v1.2 §L): a publishing transaction's ticket, drawn while it
-- commits (a deferred trigger runs inside COMMIT, before the commit is
-- recorded) for its first event in each stream. So if one publisher's
-- COMMIT returned before another's was sent, the first has the lower
-- ticket, and the sequencer gives its events the lower offsets. (A
-- prepared transaction draws it at PREPARE TRANSACTION.) A transaction that
-- publishes to streams in turn gets a ticket at each turn, and the highest
-- counts; so does one whose deferred triggers run before COMMIT (SET
-- CONSTRAINTS ALL IMMEDIATE) and publishes again: the next event is a
-- first one again. Restored rows come with their tickets (no event is
-- queued for them). SECURITY DEFINER: it runs as whoever commits.
CREATE OR REPLACE FUNCTION alkstore.ticket() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE alkstore.published p SET ticket = nextval('alkstore.commit_ticket')
   WHERE p.stream = NEW.stream AND p.txid = NEW.txid AND p.id = NEW.id;
  PERFORM set_config('alkstore.published_to', '', true);
  RETURN NULL;
END $$;
