-- Data of every kind, written through the 0.3.0 functions. The same SQL runs
-- on SQLite and PostgreSQL; ids are literal because every install it runs on
-- is fresh (job ids 1, 2, … in enqueue order).
--
-- Everything up to job 16 is exactly what 0.2.0's fixture writes
-- (sql/frozen/0.2.0/fixture.sql), so the upgrade tests check every release
-- with the same readings; what 0.3.0 added (contract v1.2) follows, from
-- job 17 on, in queues of its own, and 0.2.0's last line closes it.
--
-- The upgrade tests (tests/tests/upgrade.rs) run it on the frozen 0.3.0
-- PostgreSQL installs; sqlite-0.3.0.db is this script run once by the 0.3.0
-- SQLite library (see README.md beside it).

-- ---- as in 0.1.0 and 0.2.0 ----
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

SELECT alk_enqueue_batch('up-plain', NULL, '[{"a": 1}, {"a": 2}]');                         -- 7, 8
SELECT alk_outbox_enqueue('up-o', NULL, '{"mail": "ada@example.com"}');                      -- 9

SELECT alk_publish('up-s', '{"e": 1}', 'k1');
SELECT alk_publish('up-s', '{"e": 2}', NULL);
SELECT alk_publish('up-s', '[3]', 'k3');
SELECT alk_save_offset('up-s', 'c-two', 2);
SELECT alk_save_offset('up-s', 'c-one', 1);

SELECT alk_lock_acquire('up-l', 'host-a', 60);
SELECT alk_lock_release('up-l', 'host-a');
SELECT alk_lock_acquire('up-l', 'host-b', 3153600000);
SELECT alk_lock_acquire('up-free', 'host-a', 60);
SELECT alk_lock_release('up-free', 'host-a');

SELECT alk_notify('up-n', '{"hello": 1}');

-- ---- what 0.2.0 added (contract v1.1) ----
-- Retention: acked jobs kept with their result for 100 years, dead ones for a day.
SELECT alk_queue_configure('up2-keep', '{"retain_completed_s": 3153600000, "retain_dead_s": 86400, "visibility_timeout_s": 3153600000}');
SELECT alk_enqueue('up2-keep', '{"idempotency_key": "order-1"}', '{"order": 1}');           -- 10: completed, result
SELECT count(*) FROM (SELECT alk_claim('up2-keep', 'w-keep', 1)) c;                          -- job 10
SELECT alk_ack(10, 'w-keep', '{"charged": 1200}');

-- An ordered group: the head is running, the next two wait behind it.
SELECT alk_queue_configure('up2-g', '{"visibility_timeout_s": 3153600000}');
SELECT alk_enqueue('up2-g', '{"group_key": "cust-7"}', '{"step": 1}');                       -- 11: running head
SELECT alk_enqueue('up2-g', '{"group_key": "cust-7"}', '{"step": 2}');                       -- 12: waits
SELECT alk_enqueue_batch('up2-g', '{"group_key": "cust-8"}', '[{"step": 1}, {"step": 2}]'); -- 13, 14
SELECT count(*) FROM (SELECT alk_claim('up2-g', 'w-group', 1)) c;                            -- job 11

-- A paused queue and a paused outbox, each with a job.
SELECT alk_enqueue('up2-paused', '{"idempotency_key": "p-1", "idempotency_ttl_s": 3153600000}', '{"held": true}'); -- 15
SELECT alk_queue_pause('up2-paused');
SELECT alk_outbox_enqueue('up2-po', NULL, '{"held": "outbox"}');                             -- 16
SELECT alk_outbox_pause('up2-po');

-- Schedules: one on cron, one every hour with enqueue options.
SELECT alk_schedule('up2-nightly', 'up2-reports', '{"cron": "0 3 * * *"}', '{"report": "sales"}', NULL);
SELECT alk_schedule('up2-hourly', 'up2-pings', '{"every_s": 3600}', '{}', '{"priority": 5}');

-- A stream with retention settings.
SELECT alk_stream_configure('up2-s', '{"retain_events": 100}');
SELECT alk_publish('up2-s', '{"e": "kept"}', 'k');

-- ---- what 0.3.0 added (contract v1.2) ----
-- Dependencies (§J): 17 pending, 18 waits for it.
SELECT alk_enqueue('up3-deps', NULL, '{"step": "first"}');                                 -- 17: pending
SELECT alk_enqueue('up3-deps', '{"depends_on": [17]}', '{"step": "second"}');              -- 18: waits for 17

-- Flow control (§I): one running at a time, one per key; 19 runs, 20 is held.
SELECT alk_queue_configure('up3-limited', '{"max_running": 1, "key_max_running": 1, "visibility_timeout_s": 3153600000}');
SELECT alk_enqueue('up3-limited', '{"limit_key": "tenant-1"}', '{"n": 1}');               -- 19: running
SELECT alk_enqueue('up3-limited', '{"limit_key": "tenant-1"}', '{"n": 2}');               -- 20: pending, held
SELECT count(*) FROM (SELECT alk_claim('up3-limited', 'w-limit', 10)) c;                  -- job 19 only

-- A dead job deleted (alk_delete_job): its id is never used again.
SELECT alk_enqueue('up3-gone', '{"max_attempts": 1}', '{"gone": true}');                  -- 21: deleted
SELECT count(*) FROM (SELECT alk_claim('up3-gone', 'w-gone', 1)) c;
SELECT alk_fail(21, 'w-gone', 'bad input');
SELECT alk_delete_job(21);

-- Last: PostgreSQL's sequence spends an id on an enqueue that its
-- idempotency key answers with the earlier job; SQLite's does not.
SELECT alk_enqueue('up2-keep', '{"idempotency_key": "order-1"}', '{"order": "again"}');     -- 10 again
