-- Schema 1 (alkstore 0.1.0) → 2 (0.2.0). Runs inside the transaction of the
-- first call that finds schema 1; the library records its version after it.
--
-- No table changes: schema 2 is where alk_version() reports the schema
-- and alk_meta records the library version that last migrated it.
UPDATE alk_meta SET value = '2' WHERE key = 'schema_version';
