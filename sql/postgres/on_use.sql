-- The extension's check for a maintenance worker on use, in its library
-- (pg_ext/src/maintenance.rs, start_on_use): a database no worker serves
-- gets one as a dynamic background worker, at most one check a minute per
-- session. alk_claim runs it in the library; alk_outbox_claim calls this,
-- so that a database used only through outboxes (the relay) gets one too.
CREATE OR REPLACE FUNCTION alkstore.maintenance_on_use() RETURNS void
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'alkstore_maintenance_on_use_wrapper';
