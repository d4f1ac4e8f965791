-- Data of every kind, written through the 0.1.0 functions. The same SQL runs
-- on SQLite and PostgreSQL; ids are literal because every install it runs on
-- is fresh (job ids 1, 2, … in enqueue order).
--
-- The upgrade tests (tests/tests/upgrade.rs) run it on the frozen 0.1.0
-- PostgreSQL installs; sqlite-0.1.0.db is this script run once by the 0.1.0
-- SQLite library (see README.md beside it).

-- A configured queue. Its claims last 100 years, so the claim taken below is
-- still live whenever the upgrade test runs.
SELECT alk_queue_configure('up-q', '{"visibility_timeout_s": 3153600000, "max_attempts": 7, "backoff_base_s": 0.25, "backoff_max_s": 90}');

SELECT alk_enqueue('up-q', '{"priority": 5}', '{"kind": "live claim"}');                     -- 1: running
SELECT alk_enqueue('up-q', '{"priority": 4}', '{"kind": "dead"}');                           -- 2: dead
SELECT alk_enqueue('up-q', '{"priority": 3, "max_attempts": 2}', '{"kind": "retried"}');     -- 3: pending, attempts 1
SELECT alk_enqueue('up-q', '{"priority": 1, "expires_in_s": 3000000000}', '{"kind": "pending", "n": [1, 2.5, null, "x"]}'); -- 4
SELECT alk_enqueue('up-q', '{"delay_s": 3000000000}', '"scheduled"');                       -- 5: scheduled
SELECT alk_enqueue('up-q', '{"run_at": "2030-01-02T03:04:05.678Z", "priority": -2}', 'null'); -- 6: scheduled

SELECT count(*) FROM (SELECT alk_claim('up-q', 'w-live', 1)) c;    -- job 1
SELECT count(*) FROM (SELECT alk_claim('up-q', 'w-dead', 1)) c;    -- job 2
SELECT alk_fail(2, 'w-dead', 'boom: it broke');
SELECT count(*) FROM (SELECT alk_claim('up-q', 'w-retry', 1)) c;   -- job 3
SELECT alk_retry(3, 'w-retry', 'try later', 0);

-- A queue with default options.
SELECT alk_enqueue_batch('up-plain', NULL, '[{"a": 1}, {"a": 2}]');                         -- 7, 8

-- An outbox message.
SELECT alk_outbox_enqueue('up-o', NULL, '{"mail": "ada@example.com"}');                      -- 9

-- A stream with keys, and consumer offsets.
SELECT alk_publish('up-s', '{"e": 1}', 'k1');
SELECT alk_publish('up-s', '{"e": 2}', NULL);
SELECT alk_publish('up-s', '[3]', 'k3');
SELECT alk_save_offset('up-s', 'c-two', 2);
SELECT alk_save_offset('up-s', 'c-one', 1);

-- Leases: up-l changed hands (token 2, held for 100 years); up-free was released.
SELECT alk_lock_acquire('up-l', 'host-a', 60);
SELECT alk_lock_release('up-l', 'host-a');
SELECT alk_lock_acquire('up-l', 'host-b', 3153600000);
SELECT alk_lock_acquire('up-free', 'host-a', 60);
SELECT alk_lock_release('up-free', 'host-a');

-- A notification (SQLite keeps it as a row; PostgreSQL sends it to nobody).
SELECT alk_notify('up-n', '{"hello": 1}');
