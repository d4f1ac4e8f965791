-- A job's round trip in the sqlite3 shell, as the README shows it.
-- Run from the directory holding the library:  sqlite3 app.db < roundtrip.sql
.load ./libalkstore_sqlite
.mode list
.bail off
PRAGMA journal_mode = WAL;
SELECT alk_init();

-- A business row and a job in one transaction…
CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL);
BEGIN IMMEDIATE;
INSERT INTO orders (item) VALUES ('book');
SELECT alk_enqueue('emails', '{"priority": 1}', json_object('order', last_insert_rowid()));
COMMIT;

-- …and one rolled back: neither the row nor the job survives.
BEGIN IMMEDIATE;
INSERT INTO orders (item) VALUES ('ghost');
SELECT alk_enqueue('emails', NULL, '{"order": 2}');
ROLLBACK;
SELECT count(*) AS orders FROM orders;

-- A worker claims, reads the payload and acks.
SELECT j.value ->> 'id', j.value ->> 'attempts', j.value -> 'payload'
FROM json_each(alk_claim('emails', 'worker-1', 10)) AS j;
SELECT alk_ack(1, 'worker-1');
SELECT alk_get_job(1) IS NULL AS acked;
SELECT alk_queue_stats('emails');

-- Retry, dead letter and requeue (id 2 again: a rolled-back id may be reused).
SELECT alk_enqueue('emails', '{"max_attempts": 1}', '"flaky"');
SELECT json_array_length(alk_claim('emails', 'worker-1'));
SELECT alk_retry(2, 'worker-1', 'smtp down', 0);
SELECT alk_get_job(2) ->> 'state', alk_get_job(2) ->> 'last_error';
SELECT alk_requeue_dead(2);

-- Outbox, stream, lock.
SELECT alk_outbox_enqueue('webhooks', NULL, '{"event": "paid"}');
SELECT j.value ->> 'queue' FROM json_each(alk_outbox_claim('webhooks', 'deliverer')) AS j;
SELECT alk_publish('orders', '{"n": 1}', 'k1'), alk_publish('orders', '{"n": 2}');
SELECT e.value ->> 'offset', e.value ->> 'key' FROM json_each(alk_read('orders', 0, 100)) AS e;
SELECT alk_save_offset('orders', 'billing', 2), alk_get_offset('orders', 'billing');
SELECT alk_lock_acquire('nightly', 'host-a', 30), alk_lock_acquire('nightly', 'host-b', 30) IS NULL;

-- Errors carry the contract's codes.
SELECT alk_enqueue('__alkstore_outbox:webhooks', NULL, '1');
SELECT alk_enqueue('', NULL, '1');
SELECT alk_enqueue('emails', '{"delay_s": 1, "run_at": 0}', '1');
SELECT alk_enqueue('emails', NULL, 'not json');
SELECT alk_claim('emails', 'worker-1', 0);
