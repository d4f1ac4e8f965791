-- alkstore 0.2.0 → 0.3.0: the schema changes of this step only. The
-- functions, the name guard and the grants are then re-created from the
-- current sources (the update script and the plain SQL install append
-- them; see scripts/lib/pg-sources.sh).

-- Schema 3.
UPDATE alkstore.meta SET value = '3' WHERE key = 'schema_version';

-- Stream retention counts from when an event became readable (issue 34):
-- the sequencer stamps it. Events of before keep counting from created_at.
-- No default: adding the column rewrites nothing.
ALTER TABLE alkstore.events ADD COLUMN readable_at timestamptz;
CREATE INDEX events_unstamped ON alkstore.events (stream) WHERE readable_at = 'infinity';
