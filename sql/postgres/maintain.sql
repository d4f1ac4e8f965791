-- alk_maintain: the maintenance worker's chores, for a database no worker
-- serves, run by a scheduler that can only start one command at a time —
-- pg_cron every minute (docs/operating.md, "Without a maintenance worker").
-- For run_for_s seconds it does, about every second and each in a
-- transaction of its own: sequence every stream with events waiting, sweep
-- (with the rotation of the job table's hot slots, rotate.sql), tick the
-- schedules; and it prunes at its start and every 10 s. A chore that
-- fails is logged as a WARNING and the others go on (the next round tries
-- it again). Returns in rounds how many rounds it ran.
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
      || 'CALL it on its own (CALL alk_maintain(55))');
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
BEGIN
  PERFORM alkstore.maintain_start(run_for_s);
  COMMIT;
  rounds := 0;
  until := clock_timestamp() + run_for_s * interval '1 second';
  LOOP
    -- alkstore.maintain_commits, to this transaction's COMMIT, tells the
    -- chores it runs that the COMMIT follows them: the rotation (rotate.sql)
    -- takes a slot lock held to the commit and runs only in a transaction of
    -- its own, which it tells by its start (a procedure's later transactions
    -- begin after its CALL statement); the sequencer refuses a transaction
    -- block, and takes a block's subtransaction for one.
    PERFORM pg_catalog.set_config('alkstore.maintain_commits', 'on', true);
    BEGIN
      names := alkstore.sequence_streams(NULL);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'alk_maintain: listing the streams to sequence failed: %', SQLERRM;
      names := '{}';
    END;
    COMMIT;
    FOR i IN 1 .. coalesce(array_length(names, 1), 0) LOOP
      PERFORM pg_catalog.set_config('alkstore.maintain_commits', 'on', true);
      BEGIN
        PERFORM alkstore.sequence_stream(names[i]);
      EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'alk_maintain: sequencing stream % failed: %', names[i], SQLERRM;
      END;
      COMMIT;
    END LOOP;
    PERFORM pg_catalog.set_config('alkstore.maintain_commits', 'on', true);
    BEGIN
      PERFORM alk_sweep(NULL);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'alk_maintain: alk_sweep failed: %', SQLERRM;
    END;
    COMMIT;
    BEGIN
      PERFORM alk_schedule_tick();
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'alk_maintain: alk_schedule_tick failed: %', SQLERRM;
    END;
    COMMIT;
    IF pruned_at IS NULL OR clock_timestamp() >= pruned_at + interval '10 seconds' THEN
      pruned_at := clock_timestamp();
      -- As `alkstore maintain`: again while a call fills its batch, ten at most.
      calls := 0;
      LOOP
        BEGIN
          n := alk_prune(1000);
        EXCEPTION WHEN OTHERS THEN
          RAISE WARNING 'alk_maintain: alk_prune failed: %', SQLERRM;
          n := 0;
        END;
        COMMIT;
        calls := calls + 1;
        EXIT WHEN n < 1000 OR calls >= 10;
      END LOOP;
    END IF;
    rounds := rounds + 1;
    EXIT WHEN clock_timestamp() >= until;
    -- A second, or what is left of run_for_s, in a transaction that has
    -- written nothing.
    PERFORM pg_catalog.pg_sleep(least(1, extract(epoch FROM until - clock_timestamp())));
    COMMIT;
  END LOOP;
END $$;
