-- Outboxes (contract §6, ADR-014): the outbox name derives its backing
-- queue __alkstore_outbox:{name} here, with fixed options; the reserved
-- prefix keeps that queue out of reach of the queue functions.

CREATE OR REPLACE FUNCTION alkstore.outbox_queue(outbox text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT alkstore.outbox_prefix() || alkstore.name('outbox', outbox) $$;

CREATE OR REPLACE FUNCTION alk_outbox_enqueue(outbox text, opts jsonb, payload jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.enqueue(alkstore.outbox_queue(outbox), alkstore.default_queue_opts(), opts, payload);
END $$;

-- alk_outbox_claim: generated/claim.sql (templates/claim.sql).

CREATE OR REPLACE FUNCTION alk_outbox_stats(outbox text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RETURN alkstore.stats(alkstore.outbox_queue(outbox));
END $$;
