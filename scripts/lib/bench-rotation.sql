-- Three layouts of alkstore's job table for scripts/bench-rotation.sh
-- (issue 35 item 1, the reshape):
--   one  the table as it is: its columns and its eight indexes (schema.sql);
--   rot  the same table LIST-partitioned by a slot that rotates, 4
--        partitions, each with all eight indexes, drained ones truncated;
--   hot  as rot, but the 4 rotating partitions carry only what a claim, an
--        ack and a sweep of expired claims read (the key, the claim order,
--        the deadlines), and a fifth, cold partition (slot 4) holds what
--        waits long (scheduled ahead, waiting, finished) with the others.
-- Plain statements on each, the same on each: what the layout costs and
-- saves, apart from the functions around it.

CREATE SCHEMA one;
CREATE SCHEMA rot;
CREATE SCHEMA hot;

-- The columns of alkstore.jobs; rot's and hot's carry the slot of the
-- partition their row is in.
CREATE TABLE one.jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue text NOT NULL, state text NOT NULL, payload jsonb NOT NULL,
  priority integer NOT NULL, attempts integer NOT NULL, max_attempts integer NOT NULL,
  visibility_timeout_ms bigint NOT NULL, backoff_base_ms bigint NOT NULL,
  backoff_max_ms bigint NOT NULL, run_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL, claimed_by text, claim_expires_at timestamptz,
  expires_at timestamptz, last_error text, idempotency_key text, group_key text,
  completed_at timestamptz, result jsonb, prune_at timestamptz, limit_key text,
  depends_on bigint[], deps_left integer, dependents boolean, errors jsonb
);
DO $$
DECLARE l text;
BEGIN
  FOREACH l IN ARRAY ARRAY['rot', 'hot'] LOOP
    EXECUTE format($t$
      CREATE SEQUENCE %1$s.ids;
      CREATE TABLE %1$s.jobs (LIKE one.jobs, slot smallint NOT NULL) PARTITION BY LIST (slot);
      ALTER TABLE %1$s.jobs ALTER id SET DEFAULT nextval('%1$s.ids'), ADD PRIMARY KEY (id, slot);
      CREATE TABLE %1$s.jobs_0 PARTITION OF %1$s.jobs FOR VALUES IN (0);
      CREATE TABLE %1$s.jobs_1 PARTITION OF %1$s.jobs FOR VALUES IN (1);
      CREATE TABLE %1$s.jobs_2 PARTITION OF %1$s.jobs FOR VALUES IN (2);
      CREATE TABLE %1$s.jobs_3 PARTITION OF %1$s.jobs FOR VALUES IN (3);
      -- The slot enqueues write into.
      CREATE TABLE %1$s.current (slot smallint NOT NULL);
      INSERT INTO %1$s.current VALUES (0);
    $t$, l);
  END LOOP;
END $$;
CREATE TABLE hot.jobs_cold PARTITION OF hot.jobs FOR VALUES IN (4);

-- schema.sql's indexes: on every partition of one and rot, only the
-- claim's on hot's rotating ones, all on its cold one.
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['one.jobs', 'rot.jobs', 'hot.jobs_0', 'hot.jobs_1', 'hot.jobs_2',
                           'hot.jobs_3', 'hot.jobs_cold'] LOOP
    EXECUTE format($i$
      CREATE INDEX ON %1$s (hashtextextended(queue, 0), priority DESC, run_at, id)
        INCLUDE (queue) WHERE state = 'pending';
      CREATE INDEX ON %1$s
        (queue, (CASE WHEN state = 'running' THEN claim_expires_at ELSE expires_at END))
        WHERE state = 'running' OR (state IN ('pending', 'scheduled') AND expires_at IS NOT NULL);
    $i$, t);
    CONTINUE WHEN t LIKE 'hot.jobs\__';
    EXECUTE format($i$
      CREATE INDEX ON %1$s (queue, run_at) WHERE state = 'scheduled';
      CREATE INDEX ON %1$s (hashtextextended(queue, 0), priority DESC, run_at, id)
        INCLUDE (queue) WHERE state = 'scheduled';
      CREATE INDEX ON %1$s (queue, state, id) WHERE state IN ('dead', 'completed');
      CREATE INDEX ON %1$s (queue, group_key, id) WHERE state IN ('waiting', 'blocked');
      CREATE INDEX ON %1$s (prune_at) WHERE prune_at IS NOT NULL;
    $i$, t);
  END LOOP;
END $$;

-- Rotation: make the next slot current, then truncate every other slot
-- that was written since and holds no row any more. In transactions of
-- their own (a procedure). The lock waits at most 10 ms (then tries again,
-- up to 20 times): claims queue behind a waiting ACCESS EXCLUSIVE request,
-- and without waiting it never comes (each claim holds every partition
-- till its commit). TRUNCATE does not wait for the xmin horizon: that is
-- the point. An empty partition is left alone: each TRUNCATE invalidates
-- every backend's plans on the table. So is one that a transaction open
-- for over a second holds a lock on (a long reader): its lock would not
-- be granted, and each try would stall the claims queued behind it.
CREATE PROCEDURE rotate(layout text) LANGUAGE plpgsql AS $$
DECLARE l text := layout; cur smallint; s smallint; tries int; busy boolean;
BEGIN
  EXECUTE format('UPDATE %s.current SET slot = (slot + 1) %% 4 RETURNING slot', l) INTO cur;
  COMMIT;
  FOR s IN 0..3 LOOP
    CONTINUE WHEN s = cur OR pg_relation_size(format('%s.jobs_%s', l, s)) = 0
      OR EXISTS (SELECT FROM pg_locks k JOIN pg_stat_activity a USING (pid)
                  WHERE k.relation = format('%s.jobs_%s', l, s)::regclass
                    AND a.xact_start < clock_timestamp() - interval '1 second');
    FOR tries IN 1..20 LOOP
      BEGIN
        SET LOCAL lock_timeout = '10ms';
        EXECUTE format('LOCK TABLE %s.jobs_%s IN ACCESS EXCLUSIVE MODE', l, s);
        EXECUTE format('SELECT EXISTS (SELECT FROM %s.jobs_%s)', l, s) INTO busy;
        IF NOT busy THEN
          EXECUTE format('TRUNCATE %s.jobs_%s', l, s);
        END IF;
        EXIT;
      EXCEPTION WHEN lock_not_available THEN NULL;
      END;
    END LOOP;
    COMMIT;
  END LOOP;
END $$;
