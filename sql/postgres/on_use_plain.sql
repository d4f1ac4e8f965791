-- The plain install's stand-in for the extension's check for a
-- maintenance worker on use (on_use.sql): no library, so no worker to
-- start (docs/operating.md: alkstore maintain, or alk_maintain from pg_cron).
CREATE OR REPLACE FUNCTION alkstore.maintenance_on_use() RETURNS void
LANGUAGE sql IMMUTABLE AS $$ SELECT $$;
