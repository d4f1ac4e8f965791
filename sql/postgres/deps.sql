-- Job dependencies (contract v1.2 §J). A job enqueued with depends_on
-- waits, as state 'blocked' (pending to every function, outside the claim
-- index), until each job it names has been acked; a grouped one that is
-- not its group's head is 'waiting' as before, and becomes 'blocked'
-- instead of pending when it heads the group with dependencies left.
--
-- alkstore.job_deps holds one row per job and dependency not acked yet;
-- jobs.deps_left counts them, jobs.dependents marks a job some job named,
-- so an ack, a death or a cancel looks for dependents only then (the
-- common ack pays nothing). Naming a job updates its row: that lock orders
-- the enqueue against the job's ack, death or claim (an ack waits for the
-- enqueue to commit and then sees its row in job_deps; an enqueue that
-- waited for an ack finds the job gone), so no dependent waits for a job
-- that already ended.
--
-- A job whose row is gone counts as acked (retention 0 deletes at ack)
-- unless alkstore.job_ends says it ended otherwise: every removal of a job
-- that was not acked (cancel, purge, prune of a dead job) records it there,
-- for dependency_memory_ms(). alk_prune forgets older records and moves
-- meta's 'dependencies_forgotten_through' up to the highest id forgotten:
-- an enqueue naming a gone id at or below it is refused, as nobody can
-- tell any more how that job ended.

-- Locks and marks the jobs in deps (in id order), and sorts them: those
-- not acked yet (waiting, in the order given) and the first one that ended
-- without an ack (failed: the dependency error). An id that names no job
-- is InvalidOptions; on requeue (requeue: true) a dead dependency is
-- waited for (it may be requeued too) and a forgotten one fails.
CREATE OR REPLACE FUNCTION alkstore.deps_resolve(deps bigint[], requeue boolean,
                                                 OUT waiting bigint[], OUT failed text)
LANGUAGE plpgsql AS $$
DECLARE
  ids       bigint[];
  states    text[];
  d         bigint;
  i         integer;
  ended     text;
  last_id   bigint;
  forgotten bigint;
  got       boolean;
BEGIN
  waiting := '{}';
  -- First, before any row is locked (waiting with locks held could
  -- deadlock with the writer): a named job this transaction cannot see,
  -- neither past the ids given nor remembered as ended, may be one another
  -- transaction is still enqueuing. It is waited for, as SQLite's one
  -- writer makes an enqueue wait: rolled back, it names no job; committed,
  -- the loop below finds it (above READ COMMITTED, whose snapshot cannot
  -- see it: a serialization failure).
  FOREACH d IN ARRAY ARRAY(SELECT DISTINCT x FROM unnest(deps) x ORDER BY x) LOOP
    CONTINUE WHEN EXISTS (SELECT FROM alkstore.jobs j WHERE j.id = d)
               OR EXISTS (SELECT FROM alkstore.job_ends e WHERE e.id = d);
    IF last_id IS NULL THEN
      SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO last_id
        FROM alkstore.jobs_id_seq s;
      forgotten := coalesce((SELECT m.value::bigint FROM alkstore.meta m
                              WHERE m.key = 'dependencies_forgotten_through'), 0);
    END IF;
    CONTINUE WHEN d > last_id OR d <= forgotten;
    ended := alkstore.dep_in_flight(d);
    IF ended = 'rolled back' THEN
      PERFORM alkstore.raise('ALK03', format(
        'depends_on names job %s, which does not exist (the transaction that enqueued it rolled back)', d));
    ELSIF ended = 'committed' AND current_setting('transaction_isolation') <> 'read committed' THEN
      RAISE EXCEPTION USING ERRCODE = 'serialization_failure', MESSAGE = format(
        'alkstore: depends_on names job %s, committed after this transaction began: try again', d);
    END IF;
  END LOOP;
  -- Locked and marked one by one in id order, so two enqueues naming the
  -- same jobs take their rows in the same order. (One statement per id:
  -- with "id = ANY (deps)" the generic plan's estimate is ten rows, so
  -- PostgreSQL kept planning the statement anew at every call, which cost
  -- more than the update.) Only a job that has not ended is locked: an
  -- acked one never changes again, and a dead one is read as it is unless
  -- requeuing. The rotation moves finished jobs to the cold slot by a
  -- delete and an insert (rotate.sql): an update that meets the deleted
  -- row finds nothing, where a read sees the job in one slot or the other.
  -- So the update is tried again when the read finds a job it should have
  -- marked (a dead one being requeued, moved under it), for as long as the
  -- read does: a job counted as waited for must carry the mark, or its
  -- end would never release the dependent. (Each new try needs the job to
  -- have changed state again in a committed transaction.)
  FOREACH d IN ARRAY ARRAY(SELECT x FROM unnest(deps) x ORDER BY x) LOOP
    LOOP
      UPDATE alkstore.jobs j SET dependents = true
       WHERE j.id = d AND j.state COLLATE "C" <> 'completed' AND (requeue OR j.state COLLATE "C" <> 'dead')
      RETURNING j.state INTO ended;
      got := FOUND;
      EXIT WHEN got;
      SELECT j.state INTO ended FROM alkstore.jobs j WHERE j.id = d;
      got := FOUND;
      EXIT WHEN NOT got OR ended = 'completed' OR (ended = 'dead' AND NOT requeue);
    END LOOP;
    IF got THEN
      ids := ids || d;
      states := states || ended;
    END IF;
  END LOOP;
  FOREACH d IN ARRAY deps LOOP
    i := array_position(ids, d);
    IF i IS NOT NULL THEN
      IF states[i] = 'completed' THEN
        CONTINUE;
      ELSIF states[i] = 'dead' AND NOT requeue THEN
        failed := coalesce(failed, format('dependency %s dead', d));
      ELSE
        waiting := waiting || d;
      END IF;
      CONTINUE;
    END IF;
    SELECT e.ending INTO ended FROM alkstore.job_ends e WHERE e.id = d;
    IF FOUND THEN
      failed := coalesce(failed, format('dependency %s %s', d, ended));
      CONTINUE;
    END IF;
    IF last_id IS NULL THEN
      SELECT CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END INTO last_id
        FROM alkstore.jobs_id_seq s;
      forgotten := coalesce((SELECT m.value::bigint FROM alkstore.meta m
                              WHERE m.key = 'dependencies_forgotten_through'), 0);
    END IF;
    IF d > last_id THEN
      PERFORM alkstore.raise('ALK03', format('depends_on names job %s, which does not exist', d));
    ELSIF d <= forgotten THEN
      IF requeue THEN
        failed := coalesce(failed, format('dependency %s forgotten', d));
      ELSE
        PERFORM alkstore.raise('ALK03', format(
          'depends_on names job %s, which is gone and may have ended without an ack more than %s days ago: '
          'alkstore no longer remembers how it ended', d, alkstore.dependency_memory_ms() / 86400000));
      END IF;
      CONTINUE;
    END IF;
    -- Otherwise it was acked and deleted — or enqueued by a transaction
    -- that rolled back before this one looked, which leaves the same
    -- trace: none (docs/sql-api.md, "Dependencies and workflows"). One
    -- still being enqueued was waited for above.
  END LOOP;
END $$;

-- How a job this transaction cannot see, at or below the highest id
-- given, came to be unseen: 'committed' or 'rolled back' when another
-- transaction was still enqueuing it (it is waited for), 'none' when none
-- was (acked and deleted, or enqueued by a transaction that rolled back
-- before: the same trace). An enqueue holds its job's key in the
-- partition's primary key until it ends, and an insert of the same key
-- waits for it: so a probe insert into each partition, undone, with a
-- lock_timeout of 1 ms fails at once where a writer holds the key (tried
-- again while it fails in any other wait), and then, waiting,
-- conflicts if it committed or goes through if it rolled
-- back. (The path of an enqueue naming a gone job: up to three undone
-- inserts, one per partition that is not empty. Concurrent probes of one
-- id wait for each other, or one would take the other's probe for a
-- writer. A key whose committed row another transaction is deleting is
-- waited for too: a job that committed, and was acked or cancelled, in the
-- moment between this transaction's look and its probe, or one enqueued
-- and ended in one transaction that leaked its id before committing, is
-- taken for one rolled back.)
CREATE OR REPLACE FUNCTION alkstore.dep_in_flight(d bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  lt      text := current_setting('lock_timeout');
  lt_ms   bigint := (SELECT s.setting::bigint FROM pg_settings s WHERE s.name = 'lock_timeout');
  try_ms  integer;
  started timestamptz;
  k       smallint;
  now     timestamptz := clock_timestamp();
  outcome text;
  context text;
BEGIN
  FOREACH k IN ARRAY ARRAY[0, 1, 2]::smallint[] LOOP
    -- An empty file holds no row, written or being written (and a probe
    -- there would leave a truncated hot slot to truncate again).
    CONTINUE WHEN pg_relation_size(CASE k WHEN 0 THEN 'alkstore.jobs_slot0' WHEN 1 THEN 'alkstore.jobs_slot1'
                                          ELSE 'alkstore.jobs_cold' END::regclass) = 0;
    outcome := 'none';
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtext('alkstore.dep_in_flight'), hashint8(d));
      -- The wait's context is read below: in the server's own words where
      -- the functions' owner may say so (lc_messages is a superuser's
      -- setting; a server that answers in another language otherwise takes
      -- a rolled-back writer for none, as before this probe).
      BEGIN
        PERFORM set_config('lc_messages', 'C', true);
      EXCEPTION WHEN insufficient_privilege THEN
        NULL;
      END;
      -- Tried with a 1 ms lock_timeout until the insert goes through or
      -- times out waiting for the key's writer, in the primary key's
      -- uniqueness check: a timeout in another wait (the file's extension
      -- lock, a table lock queued ahead) says nothing of a writer, and a
      -- longer try would wait for the key with a timer of its own, missing
      -- a writer that rolls back meanwhile. Between tries a pause that
      -- grows to 100 ms; past the caller's own lock_timeout, its error.
      started := clock_timestamp();
      try_ms := 1;
      LOOP
        PERFORM set_config('lock_timeout', '1ms', true);
        BEGIN
          INSERT INTO alkstore.jobs (id, slot, queue, state, payload, priority, attempts, max_attempts,
                                     visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at)
          OVERRIDING SYSTEM VALUE
          VALUES (d, k, '', 'probe', 'null', 0, 0, 0, 0, 0, 0, now, now);
          EXIT;
        EXCEPTION WHEN lock_not_available THEN
          GET STACKED DIAGNOSTICS context = PG_EXCEPTION_CONTEXT;
        END;
        IF context LIKE '%while inserting index tuple%' THEN
          PERFORM set_config('lock_timeout', lt, true);
          INSERT INTO alkstore.jobs (id, slot, queue, state, payload, priority, attempts, max_attempts,
                                     visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at)
          OVERRIDING SYSTEM VALUE
          VALUES (d, k, '', 'probe', 'null', 0, 0, 0, 0, 0, 0, now, now);
          outcome := 'rolled back';
          EXIT;
        END IF;
        IF lt_ms > 0 AND clock_timestamp() - started >= lt_ms * interval '1 millisecond' THEN
          RAISE EXCEPTION USING ERRCODE = 'lock_not_available',
            MESSAGE = 'canceling statement due to lock timeout';
        END IF;
        PERFORM pg_sleep(try_ms / 1000.0);
        try_ms := least(try_ms * 2, 10);
      END LOOP;
      -- Undoes the probe, its lock and the setting.
      RAISE EXCEPTION USING ERRCODE = 'ALKPB';
    EXCEPTION
      WHEN unique_violation THEN
        RETURN 'committed';
      WHEN SQLSTATE 'ALKPB' THEN
        NULL;
    END;
    IF outcome <> 'none' THEN
      RETURN outcome;
    END IF;
  END LOOP;
  RETURN 'none';
END $$;

-- The jobs in jobs wait for the dependencies in waiting. (PL/pgSQL, as
-- every function here: its plans are kept per session, where a SQL
-- function that writes is planned at every call.)
CREATE OR REPLACE FUNCTION alkstore.deps_link(jobs bigint[], waiting bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO alkstore.job_deps (dep_id, job_id)
  SELECT d, j FROM unnest(waiting) d, unnest(jobs) j
  ON CONFLICT DO NOTHING;
END $$;

-- The jobs in ids were acked: their dependents lose one dependency each;
-- a blocked one left with none becomes pending (or scheduled, when its own
-- run_at lies ahead), its run_at no earlier than now; a waiting group
-- member stays waiting for its group.
CREATE OR REPLACE FUNCTION alkstore.deps_acked(ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  now   timestamptz := clock_timestamp();
  acked bigint;
  woken text;
BEGIN
  -- A statement per acked job: with "dep_id = ANY (ids)" the generic
  -- plan's estimates are ten times a single id's, and PostgreSQL planned
  -- the statement anew at every ack.
  FOREACH acked IN ARRAY ids LOOP
    FOR woken IN
      WITH e AS (
        DELETE FROM alkstore.job_deps d WHERE d.dep_id = acked RETURNING d.job_id
      ), u AS (
        UPDATE alkstore.jobs j
           SET deps_left = j.deps_left - 1,
               run_at = CASE WHEN j.deps_left > 1 THEN j.run_at ELSE greatest(j.run_at, now) END,
               state = CASE WHEN j.deps_left > 1 OR j.state = 'waiting' THEN j.state
                            WHEN j.run_at > now THEN 'scheduled' ELSE 'pending' END
          FROM e
         WHERE j.id = e.job_id AND j.state IN ('blocked', 'waiting')
        RETURNING j.queue, j.state
      )
      SELECT DISTINCT u.queue FROM u WHERE u.state = 'pending'
    LOOP
      PERFORM alkstore.wake('q', woken);
    END LOOP;
  END LOOP;
END $$;

-- The jobs in ids went dead or were cancelled (ending): each job waiting
-- for one goes dead at once with the error 'dependency <id> <ending>',
-- naming its direct dependency, and so on down (contract v1.2 §J). Their
-- groups pass on as when any job of theirs dies.
CREATE OR REPLACE FUNCTION alkstore.deps_failed(ids bigint[], ending text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  now  timestamptz := clock_timestamp();
  r    record;
  was  text;
  dead record;
  next bigint[];
BEGIN
  WHILE cardinality(ids) > 0 LOOP
    next := '{}';
    FOR r IN
      WITH e AS (
        DELETE FROM alkstore.job_deps d WHERE d.dep_id = ANY (ids) RETURNING d.dep_id, d.job_id
      )
      SELECT e.job_id, min(e.dep_id) AS dep FROM e GROUP BY e.job_id ORDER BY e.job_id
    LOOP
      SELECT j.state INTO was FROM alkstore.jobs j
       WHERE j.id = r.job_id AND j.state IN ('blocked', 'waiting') FOR UPDATE;
      IF NOT FOUND THEN
        CONTINUE; -- dead already (another of its dependencies), or gone
      END IF;
      UPDATE alkstore.jobs j
         SET state = 'dead', last_error = format('dependency %s %s', r.dep, ending),
             errors = alkstore.push_error(j.errors, j.attempts, format('dependency %s %s', r.dep, ending)),
             prune_at = alkstore.dead_prune_at(j.queue, now)
       WHERE j.id = r.job_id
      RETURNING j.queue, j.group_key, j.dependents INTO dead;
      IF dead.group_key IS NOT NULL THEN
        PERFORM alkstore.group_done(dead.queue, dead.group_key, was <> 'waiting');
      END IF;
      IF dead.dependents THEN
        next := next || r.job_id;
      END IF;
    END LOOP;
    ids := next;
    ending := 'dead';
  END LOOP;
END $$;

-- Jobs removed without an ack (ending 'dead' or 'cancelled'): remembered
-- so that a later depends_on naming one is not taken for acked.
CREATE OR REPLACE FUNCTION alkstore.jobs_ended(ids bigint[], ending text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO alkstore.job_ends (id, ending, ended_at)
  SELECT x, jobs_ended.ending, clock_timestamp() FROM unnest(ids) x
  ON CONFLICT (id) DO UPDATE SET ending = excluded.ending, ended_at = excluded.ended_at;
END $$;

-- alk_prune's part: forgets up to max_rows records older than
-- dependency_memory_ms(); returns how many.
CREATE OR REPLACE FUNCTION alkstore.forget_ends(now timestamptz, max_rows integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  n   integer;
  top bigint;
BEGIN
  WITH f AS (
    DELETE FROM alkstore.job_ends e
     WHERE e.id = ANY (ARRAY(
             SELECT x.id FROM alkstore.job_ends x
              WHERE x.ended_at <= now - alkstore.dependency_memory_ms() * interval '1 millisecond'
              ORDER BY x.ended_at LIMIT max_rows
              FOR UPDATE SKIP LOCKED))
    RETURNING e.id
  )
  SELECT count(*), max(f.id) INTO n, top FROM f;
  IF top IS NOT NULL THEN
    INSERT INTO alkstore.meta AS m (key, value) VALUES ('dependencies_forgotten_through', top::text)
    ON CONFLICT (key) DO UPDATE SET value = greatest(m.value::bigint, excluded.value::bigint)::text;
  END IF;
  RETURN n;
END $$;

-- waiting_for of alk_get_job: the ids in depends_on not acked yet, in the
-- order given, while the job waits for them; else NULL.
CREATE OR REPLACE FUNCTION alkstore.waiting_for(j alkstore.jobs) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN j.deps_left > 0 AND j.state IN ('blocked', 'waiting') THEN
    (SELECT jsonb_agg(u.d ORDER BY u.n) FROM unnest(j.depends_on) WITH ORDINALITY AS u(d, n)
      WHERE EXISTS (SELECT FROM alkstore.job_deps e WHERE e.dep_id = u.d AND e.job_id = j.id)) END
$$;

-- Puts a dead job that has dependencies back: it waits again for those
-- not acked (contract v1.2 §J); returns its state, 'blocked' or 'dead'
-- (a dependency gone without an ack), or NULL when it has none left.
CREATE OR REPLACE FUNCTION alkstore.deps_requeue(jid bigint, deps bigint[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  res record;
BEGIN
  DELETE FROM alkstore.job_deps d WHERE d.dep_id = ANY (deps) AND d.job_id = jid;
  SELECT r.waiting, r.failed INTO res FROM alkstore.deps_resolve(deps, true) r;
  IF res.failed IS NOT NULL THEN
    UPDATE alkstore.jobs j SET last_error = res.failed, errors = alkstore.push_error(j.errors, j.attempts, res.failed),
                               deps_left = NULL WHERE j.id = jid;
    RETURN 'dead';
  END IF;
  UPDATE alkstore.jobs j SET deps_left = nullif(cardinality(res.waiting), 0) WHERE j.id = jid;
  IF cardinality(res.waiting) = 0 THEN
    RETURN NULL;
  END IF;
  PERFORM alkstore.deps_link(ARRAY[jid], res.waiting);
  RETURN 'blocked';
END $$;
