-- Pause (contract v1.1 §C4): while a queue (an outbox: its backing queue)
-- is paused its claims return nothing; everything else keeps working.

CREATE OR REPLACE FUNCTION alkstore.pause(q text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO alkstore.paused (queue, paused_at) VALUES (q, clock_timestamp())
  ON CONFLICT ON CONSTRAINT paused_pkey DO NOTHING;
  RETURN FOUND;
END $$;

-- Resuming wakes the queue's waiting workers: jobs may have piled up.
CREATE OR REPLACE FUNCTION alkstore.resume(q text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM alkstore.paused p WHERE p.queue = q;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM alkstore.wake('q', q);
  RETURN true;
END $$;

CREATE OR REPLACE FUNCTION alk_queue_pause(queue text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.pause(alkstore.name('queue', queue));
END $$;

CREATE OR REPLACE FUNCTION alk_queue_resume(queue text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.resume(alkstore.name('queue', queue));
END $$;

CREATE OR REPLACE FUNCTION alk_outbox_pause(outbox text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.pause(alkstore.outbox_queue(outbox));
END $$;

CREATE OR REPLACE FUNCTION alk_outbox_resume(outbox text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.resume(alkstore.outbox_queue(outbox));
END $$;
