-- alkstore 0.3.0 → 0.4.0: the schema changes of this step only (none so
-- far: 0.4.0 keeps schema 3). The functions, the name guard and the grants
-- are then re-created from the current sources (the update script and the
-- plain SQL install append them; see manifest.toml).
-- alk_queues counts in one pass over the jobs now (admin.sql): the
-- function that listed the names for it one by one is gone.
DROP FUNCTION IF EXISTS alkstore.queue_names();
