-- Ordered groups (contract v1.1 §C2). Jobs of one (queue, group_key) run
-- one at a time in id order. Only the group's head is 'pending' (or
-- 'running', or 'scheduled' while its run_at lies ahead: ahead.sql); the
-- others are 'waiting', outside the claim index, so a claim
-- reads heads only however long the groups' backlogs are. alkstore.groups
-- counts each group's live jobs; updating its row orders a group's enqueues
-- against the hand-over when its head finishes (the row lock is held to
-- commit, and under REPEATABLE READ a concurrent change is a serialization
-- failure rather than a stale read), so a group never has two heads and
-- never waiting jobs without one.

-- Adds n jobs to group g of queue q; true if the group had none (then the
-- first of them is its head).
CREATE OR REPLACE FUNCTION alkstore.group_join(q text, g text, n integer) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  total integer;
BEGIN
  INSERT INTO alkstore.groups AS c (queue, group_key, jobs) VALUES (q, g, n)
  ON CONFLICT ON CONSTRAINT groups_pkey DO UPDATE SET jobs = c.jobs + excluded.jobs
  RETURNING c.jobs INTO total;
  RETURN total = n;
END $$;

-- One job of the group finished (acked, cancelled, dead-lettered). When it
-- was the head, the next waiting job (lowest id) becomes the head.
CREATE OR REPLACE FUNCTION alkstore.group_done(q text, g text, head boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  remaining integer;
BEGIN
  UPDATE alkstore.groups c SET jobs = c.jobs - 1
   WHERE c.queue = q AND c.group_key = g
  RETURNING c.jobs INTO remaining;
  IF remaining IS NULL THEN
    RETURN;
  ELSIF remaining <= 0 THEN
    DELETE FROM alkstore.groups c WHERE c.queue = q AND c.group_key = g;
  ELSIF head THEN
    UPDATE alkstore.jobs j SET state = CASE WHEN j.deps_left > 0 THEN 'blocked' -- (deps.sql)
                                WHEN j.run_at > clock_timestamp() THEN 'scheduled' ELSE 'pending' END
     WHERE j.id = (SELECT min(w.id) FROM alkstore.jobs w
                    WHERE w.queue = q AND w.group_key = g AND w.state = 'waiting');
    IF FOUND THEN
      PERFORM alkstore.wake('q', q);
    END IF;
  END IF;
END $$;

-- group_done for many finished heads (an ack_batch, a claim's dead-letters)
-- in three statements whatever their number. The promotion is a statement
-- of its own: it must see the waiting jobs of enqueues that committed while
-- the first one waited for their group rows (READ COMMITTED takes a new
-- snapshot per statement).
CREATE OR REPLACE FUNCTION alkstore.groups_done(qs text[], gs text[]) RETURNS void
-- By index (enable_seqscan = off): it updates jobs by a set of ids
-- (schema.sql, "Statements by a set of ids").
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  lq text[];    -- the groups that still have jobs, and their queues
  lg text[];
  woken text;
BEGIN
  WITH finished AS (
    SELECT u.q, u.g, count(*)::integer AS n FROM unnest(qs, gs) AS u(q, g)
     WHERE u.g IS NOT NULL GROUP BY u.q, u.g
  ), counted AS (
    UPDATE alkstore.groups c SET jobs = c.jobs - f.n FROM finished f
     WHERE c.queue = f.q AND c.group_key = f.g
    RETURNING c.queue, c.group_key, c.jobs
  )
  SELECT array_agg(c.queue) FILTER (WHERE c.jobs > 0), array_agg(c.group_key) FILTER (WHERE c.jobs > 0)
    INTO lq, lg FROM counted c;
  DELETE FROM alkstore.groups c
   USING unnest(qs, gs) AS u(q, g)
   WHERE c.queue = u.q AND c.group_key = u.g AND c.jobs <= 0;
  IF lg IS NULL THEN
    RETURN;
  END IF;
  FOR woken IN
    WITH heads AS (
      UPDATE alkstore.jobs j SET state = CASE WHEN j.deps_left > 0 THEN 'blocked' -- (deps.sql)
                                WHEN j.run_at > clock_timestamp() THEN 'scheduled' ELSE 'pending' END
       WHERE j.id = ANY (ARRAY(
               SELECT (SELECT min(w.id) FROM alkstore.jobs w
                        WHERE w.queue = u.q AND w.group_key = u.g AND w.state = 'waiting')
                 FROM unnest(lq, lg) AS u(q, g)))
      RETURNING j.queue
    )
    SELECT DISTINCT h.queue FROM heads h
  LOOP
    PERFORM alkstore.wake('q', woken);
  END LOOP;
END $$;

-- When a job dead-lettered now in queue q may be pruned (contract v1.1 §C3:
-- the queue's retain_dead_s as it is now; NULL: kept).
CREATE OR REPLACE FUNCTION alkstore.dead_prune_at(q text, now timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
  SELECT now + c.retain_dead_ms * interval '1 millisecond' FROM alkstore.queues c WHERE c.queue = q
$$;
