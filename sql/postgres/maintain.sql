-- alk_maintain: the maintenance worker's chores, for a database no worker
-- serves, run by a scheduler that can only start one command at a time —
-- pg_cron every minute (docs/operating.md, "Without a maintenance worker").
-- For run_for_s seconds it does, about every second and each in a
-- transaction of its own: sequence every stream with events waiting, sweep
-- (with the rotation of the job table's hot slots, rotate.sql), tick the
-- schedules; and it prunes at its start and every 10 s. A chore that
-- fails is logged as a WARNING and the others go on (the next round tries
-- it again); a chore that failed in every round it ran fails the call at
-- its end, once the others' work is committed, so that a scheduler shows
-- it (pg_cron's job_run_details). Returns in rounds how many rounds it ran.
--
-- A procedure, because only a procedure commits; SECURITY INVOKER, because
-- one that is not cannot (the chores are the SECURITY DEFINER functions it
-- calls between commits, which a role granted alkstore_user may call, and
-- alkstore.maintain_start, granted to it for this).
-- Each chore runs in a block of its own (a subtransaction, so a failure
-- undoes only it), and the COMMIT after it outside the block, where
-- PostgreSQL allows one.

-- Checks alk_maintain's argument, and refuses a transaction block before
-- anything is done, as alk_sequence does (the extension sees one; the
-- plain install's first COMMIT refuses one that wrote nothing yet).
CREATE OR REPLACE FUNCTION alkstore.maintain_start(run_for_s double precision) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF run_for_s IS NULL OR run_for_s = 'NaN' OR run_for_s < 0 OR run_for_s > 3600 THEN
    PERFORM alkstore.raise('ALK05', format('run_for_s must be between 0 and 3600 seconds, got %s',
                                           coalesce(run_for_s::text, 'NULL')));
  END IF;
  IF alkstore.in_transaction_block() THEN
    PERFORM alkstore.raise('ALK05',
      'alk_maintain commits transactions of its own and cannot run inside a transaction block: '
      || 'CALL it on its own (CALL alk_maintain(50))');
  END IF;
END $$;

CREATE OR REPLACE PROCEDURE alk_maintain(run_for_s double precision, INOUT rounds bigint DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
  until      timestamptz;
  pruned_at  timestamptz;
  names      text[];
  i          integer;
  n          integer;
  calls      integer;
  chore      text;
  stream     text;
  -- Per chore: the rounds it worked, the rounds it failed, its last error.
  worked     jsonb := '{}';
  failed     jsonb := '{}';
  errors     jsonb := '{}';
BEGIN
  PERFORM alkstore.maintain_start(run_for_s);
  COMMIT;
  rounds := 0;
  until := pg_catalog.clock_timestamp() + run_for_s * interval '1 second';
  LOOP
    -- Each chore in a block (a subtransaction) of a transaction this
    -- procedure began after a COMMIT: the sequencer, which refuses a
    -- transaction block, and the rotation (rotate.sql), which runs only in
    -- a transaction of its own, tell such a transaction by its start, later
    -- than the CALL statement's.
    -- The streams with events waiting, then each in a transaction of its
    -- own, as alk_sequence does.
    names := NULL;
    FOR chore IN SELECT unnest(ARRAY['sequence', 'sweep', 'tick', 'prune']) LOOP
      CONTINUE WHEN chore = 'prune' AND pruned_at IS NOT NULL
                    AND pg_catalog.clock_timestamp() < pruned_at + interval '10 seconds';
      BEGIN
        IF chore = 'sequence' THEN
          names := alkstore.sequence_streams(NULL);
        ELSIF chore = 'sweep' THEN
          PERFORM alk_sweep(NULL);
        ELSIF chore = 'tick' THEN
          PERFORM alk_schedule_tick();
        ELSE
          pruned_at := pg_catalog.clock_timestamp();
          -- As `alkstore maintain`: again while a call fills its batch,
          -- ten at most.
          calls := 0;
          LOOP
            n := alk_prune(1000);
            calls := calls + 1;
            EXIT WHEN n < 1000 OR calls >= 10;
          END LOOP;
        END IF;
        worked := worked || jsonb_build_object(chore, coalesce((worked->>chore)::integer, 0) + 1);
      EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'alk_maintain: %: %', chore, SQLERRM;
        failed := failed || jsonb_build_object(chore, coalesce((failed->>chore)::integer, 0) + 1);
        errors := errors || jsonb_build_object(chore, SQLSTATE || ' ' || SQLERRM);
      END;
      COMMIT;
      FOR i IN 1 .. CASE WHEN chore = 'sequence' THEN coalesce(pg_catalog.array_length(names, 1), 0) ELSE 0 END LOOP
        -- Kept per stream: one stream failing in every round fails the call.
        stream := 'sequence of stream ' || names[i];
        BEGIN
          PERFORM alkstore.sequence_stream(names[i]);
          worked := worked || jsonb_build_object(stream, 1);
        EXCEPTION WHEN OTHERS THEN
          RAISE WARNING 'alk_maintain: %: %', stream, SQLERRM;
          failed := failed || jsonb_build_object(stream, coalesce((failed->>stream)::integer, 0) + 1);
          errors := errors || jsonb_build_object(stream, SQLSTATE || ' ' || SQLERRM);
        END;
        COMMIT;
      END LOOP;
    END LOOP;
    rounds := rounds + 1;
    EXIT WHEN pg_catalog.clock_timestamp() >= until;
    -- A second, or what is left of run_for_s, in a transaction that has
    -- written nothing (its snapshot, held while it sleeps, holds back no
    -- slot for long: 1 s of a slot's 6 s).
    PERFORM pg_catalog.pg_sleep(LEAST(1, extract(epoch FROM until - pg_catalog.clock_timestamp())));
    COMMIT;
  END LOOP;
  -- A chore that never worked: the call fails (what the others did is
  -- committed), with its last error.
  FOR chore IN SELECT k FROM jsonb_object_keys(failed) k ORDER BY k LOOP
    IF worked->>chore IS NULL THEN
      RAISE EXCEPTION USING ERRCODE = pg_catalog.left(errors->>chore, 5), MESSAGE = pg_catalog.format(
        'alkstore: alk_maintain: the %s failed in every round (%s times): %s',
        chore, failed->>chore, errors->>chore);
    END IF;
  END LOOP;
END $$;
