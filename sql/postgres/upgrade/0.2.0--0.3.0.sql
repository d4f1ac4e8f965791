-- alkstore 0.2.0 → 0.3.0: the schema changes of this step only (none so
-- far: 0.3.0 keeps schema 2). The functions, the name guard and the grants
-- are then re-created from the current sources (the update script and the
-- plain SQL install append them; see scripts/lib/pg-sources.sh).
SELECT 1;
