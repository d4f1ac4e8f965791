//! The extension's maintenance worker (pg_ext/src/maintenance.rs), on the
//! test cluster as `scripts/postgres.sh install` sets it up: the library
//! preloaded, one worker for `alkstore_test_worker`
//! (`ALKSTORE_PG_WORKER_URL`), its chores every 100 ms and streams when a
//! commit wakes it, no worker for the
//! other test databases.

use alkstore_tests::*;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Held by every test here: one of them drops the extension and restarts
/// the server under the others.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The worker's database, or `None` when PostgreSQL is not configured (a
/// failure when the test command requires it).
fn worker_db() -> Option<postgres::Client> {
    let Ok(url) = std::env::var("ALKSTORE_PG_WORKER_URL") else {
        assert!(
            !alkstore_testkit::pg_required(),
            "ALKSTORE_PG_WORKER_URL is not set but ALKSTORE_REQUIRE_PG=1"
        );
        return None;
    };
    Some(
        postgres::Client::connect(&url, postgres::NoTls).expect("connect to the worker's database"),
    )
}

/// Polls `check` until it holds, for at most `within`; false if it never did.
fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn workers_on(c: &mut postgres::Client, db: &str) -> i64 {
    c.query_one(
        "SELECT count(*) FROM pg_stat_activity \
          WHERE backend_type = 'alkstore maintenance' AND datname = $1",
        &[&db],
    )
    .unwrap()
    .get(0)
}

#[test]
fn one_worker_serves_each_configured_database_and_no_other() {
    let _serial = serial();
    let Some(mut c) = worker_db() else { return };
    // The database was just made again (scripts/postgres.sh testdbs): the
    // postmaster restarts its worker within 5 s.
    assert!(
        worker_back(&mut c),
        "no maintenance worker in alkstore_test_worker"
    );
    assert_eq!(workers_on(&mut c, "alkstore_test_ext"), 0);
    let preload: String = c
        .query_one("SHOW shared_preload_libraries", &[])
        .unwrap()
        .get(0);
    assert!(preload.contains("alkstore"), "{preload}");
}

/// Contract v1.3 §O: `alk_queue_stats` says whether maintenance is done
/// by the worker: true in the database it serves, false in one it does
/// not serve, on the plain install and on SQLite.
#[test]
fn queue_stats_say_whether_the_maintenance_worker_serves_the_database() {
    let _serial = serial();
    let Some(mut c) = worker_db() else { return };
    assert!(
        worker_back(&mut c),
        "no maintenance worker in alkstore_test_worker"
    );
    let served = |c: &mut postgres::Client| -> serde_json::Value {
        let stats: String = c
            .query_one("SELECT alk_queue_stats('maint-stats')::text", &[])
            .unwrap()
            .get(0);
        serde_json::from_str::<serde_json::Value>(&stats).unwrap()["maintenance_worker"].clone()
    };
    assert_eq!(served(&mut c), true);
    for var in ["ALKSTORE_PG_URL", "ALKSTORE_PG_PLAIN_URL"] {
        let url = std::env::var(var).unwrap_or_else(|_| panic!("{var} beside the worker's"));
        let mut other = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        assert_eq!(served(&mut other), false, "{var}");
    }
    let dir = tempfile::tempdir().unwrap();
    let lite = alkstore::SqliteStore::open(dir.path().join("maint.db")).unwrap();
    let stats = lite.queue("maint-stats").unwrap().stats().unwrap();
    assert_eq!(stats["maintenance_worker"], false, "{stats}");
}

#[test]
fn expired_claims_and_due_schedules_are_handled_with_no_caller() {
    let _serial = serial();
    let Some(mut c) = worker_db() else { return };
    let q = fresh("maint");
    let job_state = |c: &mut postgres::Client, db_id: i64| -> String {
        c.query_one("SELECT alk_get_job($1) ->> 'state'", &[&db_id])
            .unwrap()
            .get(0)
    };
    // A claim on its last attempt that outlives its visibility timeout goes
    // dead; nobody here calls alk_sweep.
    c.execute(
        "SELECT alk_queue_configure($1, '{\"visibility_timeout_s\": 0.2, \"max_attempts\": 1}')",
        &[&q],
    )
    .unwrap();
    let id: i64 = c
        .query_one("SELECT alk_enqueue($1, NULL, '{}')", &[&q])
        .unwrap()
        .get(0);
    let claimed: i64 = c
        .query_one("SELECT count(*) FROM alk_claim($1, 'w', 1)", &[&q])
        .unwrap()
        .get(0);
    assert_eq!(claimed, 1);
    assert!(
        eventually(Duration::from_secs(10), || job_state(&mut c, id) == "dead"),
        "the expired claim is still {}",
        job_state(&mut c, id)
    );
    // A schedule due every second enqueues; nobody calls alk_schedule_tick.
    let s = fresh("maint-sched");
    c.execute(
        "SELECT alk_schedule($1, $2, '{\"every_s\": 1}', '{\"from\": \"schedule\"}')",
        &[&s, &q],
    )
    .unwrap();
    let pending = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT (alk_queue_stats($1) ->> 'pending')::bigint", &[&q])
            .unwrap()
            .get(0)
    };
    assert!(
        eventually(Duration::from_secs(10), || pending(&mut c) >= 1),
        "the schedule never fired"
    );
    c.execute("SELECT alk_unschedule($1)", &[&s]).unwrap();
    // 4,500 jobs scheduled ahead come due: the worker makes them pending
    // (out of 'scheduled', contract v1.2 §H), 2,000 a transaction, all in
    // one round; nobody calls alk_sweep.
    let ahead = fresh("maint-ahead");
    c.execute(
        "SELECT alk_enqueue_batch($1, '{\"delay_s\": 0.3}', (SELECT jsonb_agg(i) FROM generate_series(1, 4500) i))",
        &[&ahead],
    )
    .unwrap();
    let scheduled = |c: &mut postgres::Client| -> i64 {
        c.query_one(
            "SELECT count(*) FROM alkstore.jobs WHERE queue = $1 AND state = 'scheduled'",
            &[&ahead],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(scheduled(&mut c), 4500);
    assert!(
        eventually(Duration::from_secs(10), || scheduled(&mut c) == 0),
        "{} jobs still scheduled",
        scheduled(&mut c)
    );
    c.execute("SELECT alk_purge($1, 'pending')", &[&ahead])
        .unwrap();
}

#[test]
fn databases_without_a_worker_see_no_chore_they_did_not_call() {
    let _serial = serial();
    let Some(_) = worker_db() else { return };
    let url = std::env::var("ALKSTORE_PG_URL").expect("ALKSTORE_PG_URL beside the worker's");
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let q = fresh("no-maint");
    c.execute(
        "SELECT alk_queue_configure($1, '{\"visibility_timeout_s\": 0.1, \"max_attempts\": 1}')",
        &[&q],
    )
    .unwrap();
    let id: i64 = c
        .query_one("SELECT alk_enqueue($1, NULL, '{}')", &[&q])
        .unwrap()
        .get(0);
    c.execute("SELECT * FROM alk_claim($1, 'w', 1)", &[&q])
        .unwrap();
    // Ten of the worker's rounds later, the expired claim is still running:
    // only a sweep (or a claim on its queue) here would end it.
    std::thread::sleep(Duration::from_millis(1000));
    let state: String = c
        .query_one("SELECT alk_get_job($1) ->> 'state'", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(state, "running");
    let swept: i32 = c.query_one("SELECT alk_sweep($1)", &[&q]).unwrap().get(0);
    assert_eq!(swept, 1);
}

/// Contract v1.2 §K: with the worker, a committed event is readable at once
/// by a reader that cannot give offsets (a READ ONLY transaction, as on a
/// hot standby), with nobody calling `alk_sequence`. Also after the worker
/// was terminated and came back. (The publisher's commit wakes the worker;
/// on the test cluster the other chores, due every 100 ms, wake it too, and
/// it sequences on every pass: this shows the worker sequences, not that
/// the publisher's wake-up reached it.)
#[test]
fn the_worker_sequences_a_committed_event_within_seconds() {
    let _serial = serial();
    let Some(mut c) = worker_db() else { return };
    let mut reader = worker_db().unwrap();
    assert!(worker_back(&mut c), "no maintenance worker");
    let stream = format!("worker-seq-{}", std::process::id());
    for round in 0..2 {
        assert!(
            sequenced_by_the_worker(&mut c, &mut reader, &stream),
            "round {round}: the event was not readable within 10 s"
        );
        if round == 0 {
            // Terminated: the postmaster starts it again within 5 s.
            c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                  WHERE backend_type = 'alkstore maintenance' AND datname = current_database()",
                &[],
            )
            .unwrap();
            std::thread::sleep(Duration::from_millis(200));
            assert!(worker_back(&mut c), "the worker did not come back");
            // Announced itself before its first round: give it that round.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// Whether the worker's database has its one worker within 30 s.
fn worker_back(c: &mut postgres::Client) -> bool {
    eventually(Duration::from_secs(30), || {
        workers_on(c, "alkstore_test_worker") == 1
    })
}

/// Publishes an event on `c` and waits at most 10 s for `reader` to read
/// it in a READ ONLY transaction (which gives no offsets), with nobody
/// calling alk_sequence. (1 s was missed on a loaded machine.)
fn sequenced_by_the_worker(
    c: &mut postgres::Client,
    reader: &mut postgres::Client,
    stream: &str,
) -> bool {
    let id: i64 = c
        .query_one("SELECT alk_publish($1, '{}')", &[&stream])
        .unwrap()
        .get(0);
    eventually(Duration::from_secs(10), || {
        let mut tx = reader.build_transaction().read_only(true).start().unwrap();
        let n: i64 = tx
            .query_one(
                "SELECT count(*) FROM alk_read($1, 0, 1000) WHERE id = $2",
                &[&stream, &id],
            )
            .unwrap()
            .get(0);
        tx.commit().unwrap();
        n == 1
    })
}

/// The worker outlives its extension being dropped and created again (it
/// idles meanwhile, and says so once in the log) and the server's restart
/// (the postmaster starts it again); each time, a committed event is
/// readable within seconds afterwards.
#[test]
fn the_worker_comes_back_after_drop_create_extension_and_a_restart() {
    let _serial = serial();
    let Some(mut c) = worker_db() else { return };
    let mut reader = worker_db().unwrap();
    assert!(worker_back(&mut c), "no maintenance worker");
    let stream = format!("worker-back-{}", std::process::id());
    // The drop takes its objects' locks in its own order while a chore may
    // hold some of them: PostgreSQL may end one of the two as deadlocked
    // (40P01), and an operator runs the drop again.
    let dropped = (0..5).any(
        |_| match c.batch_execute("DROP EXTENSION alkstore CASCADE") {
            Ok(()) => true,
            Err(e) if e.code() == Some(&postgres::error::SqlState::T_R_DEADLOCK_DETECTED) => false,
            Err(e) => panic!("DROP EXTENSION: {e}"),
        },
    );
    assert!(dropped, "DROP EXTENSION deadlocked five times");
    std::thread::sleep(Duration::from_millis(300));
    // (A chore that was calling a function as it went ends the worker
    // with an error; the postmaster starts it again 5 s later.)
    assert!(worker_back(&mut c), "no worker without the extension");
    c.batch_execute("CREATE EXTENSION alkstore").unwrap();
    assert!(
        (0..20)
            .any(|_| worker_back(&mut c) && sequenced_by_the_worker(&mut c, &mut reader, &stream)),
        "not sequenced after CREATE EXTENSION"
    );
    let Ok(restart) = std::env::var("ALKSTORE_PG_RESTART") else {
        assert!(
            !alkstore_testkit::pg_required(),
            "ALKSTORE_PG_RESTART is not set but ALKSTORE_REQUIRE_PG=1"
        );
        return;
    };
    let status = std::process::Command::new("sh")
        .args(["-c", &restart])
        .status()
        .unwrap();
    assert!(status.success(), "{restart}");
    let mut c = None;
    assert!(
        eventually(Duration::from_secs(30), || {
            c = std::env::var("ALKSTORE_PG_WORKER_URL")
                .ok()
                .and_then(|url| postgres::Client::connect(&url, postgres::NoTls).ok());
            c.is_some()
        }),
        "the server did not come back"
    );
    let mut c = c.unwrap();
    let mut reader = worker_db().unwrap();
    assert!(
        worker_back(&mut c),
        "the worker did not come back after the restart"
    );
    assert!(
        (0..20)
            .any(|_| worker_back(&mut c) && sequenced_by_the_worker(&mut c, &mut reader, &stream)),
        "not sequenced after the restart"
    );
}

/// Issue 57: an application's transaction, left open after it enqueued into
/// the group whose head's final claim expired, holds that group's row. No
/// chore waits for it: `alk_sweep(NULL)` returns at once, and the worker
/// sweeps every other queue, ticks schedules and prunes meanwhile; once the
/// transaction commits, the head is swept too.
#[test]
fn a_transaction_held_open_stalls_no_chore() {
    let _serial = serial();
    let Some(mut c) = worker_db() else { return };
    let mut app = worker_db().unwrap();
    let one = |c: &mut postgres::Client, sql: &str, q: &str| -> i64 {
        c.query_one(sql, &[&q]).unwrap().get(0)
    };
    let state = |c: &mut postgres::Client, id: i64| -> String {
        c.query_one(
            "SELECT coalesce(alk_get_job($1) ->> 'state', 'gone')",
            &[&id],
        )
        .unwrap()
        .get(0)
    };
    let (gq, oq, kq) = (fresh("stall-g"), fresh("stall-o"), fresh("stall-k"));
    for q in [&gq, &oq] {
        c.execute(
            "SELECT alk_queue_configure($1, '{\"visibility_timeout_s\": 0.3, \"max_attempts\": 1}')",
            &[q],
        )
        .unwrap();
    }
    c.execute(
        "SELECT alk_queue_configure($1, '{\"retain_completed_s\": 0.3}')",
        &[&kq],
    )
    .unwrap();
    let head = one(
        &mut c,
        "SELECT alk_enqueue($1, '{\"group_key\": \"g\"}', '{}')",
        &gq,
    );
    assert_eq!(
        one(&mut c, "SELECT count(*) FROM alk_claim($1, 'w', 1)", &gq),
        1
    );
    // The application's transaction: an enqueue into group g, left open.
    let mut tx = app.transaction().unwrap();
    tx.query_one(
        "SELECT alk_enqueue($1, '{\"group_key\": \"g\"}', '{}')",
        &[&gq],
    )
    .unwrap();
    // Work of other queues for the chores: a claim that expires, a job kept
    // completed for 0.3 s, a schedule due every second.
    let other = one(&mut c, "SELECT alk_enqueue($1, NULL, '{}')", &oq);
    assert_eq!(
        one(&mut c, "SELECT count(*) FROM alk_claim($1, 'w', 1)", &oq),
        1
    );
    let kept = one(&mut c, "SELECT alk_enqueue($1, NULL, '{}')", &kq);
    assert_eq!(
        one(&mut c, "SELECT count(*) FROM alk_claim($1, 'w', 1)", &kq),
        1
    );
    c.execute("SELECT alk_ack($1, 'w')", &[&kept]).unwrap();
    let s = fresh("stall-s");
    c.execute(
        "SELECT alk_schedule($1, $2, '{\"every_s\": 1}', '{}')",
        &[&s, &kq],
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(400)); // both claims expired

    // A sweep of every queue returns at once rather than waiting for the
    // open transaction (it waited for it to end before).
    c.batch_execute("SET statement_timeout = '5s'").unwrap();
    let started = Instant::now();
    let swept = c.query_one("SELECT alk_sweep(NULL)", &[]);
    assert!(swept.is_ok(), "alk_sweep(NULL): {swept:?}");
    // Below the statement_timeout, which a sweep that waited would reach.
    assert!(
        started.elapsed() < Duration::from_millis(4500),
        "alk_sweep(NULL) took {:?}",
        started.elapsed()
    );
    // The direct sweep ends it, or the maintenance worker's own sweep
    // does: when that one holds the job's row at this moment, the direct
    // sweep skips it (SKIP LOCKED) and the worker commits it a moment later
    // (CI once read "running" right after the direct sweep).
    assert!(
        eventually(Duration::from_secs(5), || state(&mut c, other) == "dead"),
        "the expired claim was not swept: {}",
        state(&mut c, other)
    );
    // The worker's chores go on meanwhile: a claim that expires now is
    // dead-lettered by the worker alone.
    let later = one(&mut c, "SELECT alk_enqueue($1, NULL, '{}')", &oq);
    assert_eq!(
        one(&mut c, "SELECT count(*) FROM alk_claim($1, 'w', 1)", &oq),
        1
    );
    assert!(
        eventually(Duration::from_secs(15), || state(&mut c, later) == "dead"),
        "the other queue's expired claim is still {}",
        state(&mut c, later)
    );
    assert!(
        eventually(Duration::from_secs(15), || state(&mut c, kept) == "gone"),
        "the completed job was not pruned: {}",
        state(&mut c, kept)
    );
    let ticked = || -> bool {
        let mut c = worker_db().unwrap();
        let last: Option<String> = c
            .query_one(
                "SELECT last_run_at FROM alk_schedules() WHERE name = $1",
                &[&s],
            )
            .unwrap()
            .get(0);
        last.is_some()
    };
    assert!(
        eventually(Duration::from_secs(15), ticked),
        "the schedule never ticked"
    );
    assert_eq!(
        state(&mut c, head),
        "running",
        "the head waits for the open transaction"
    );
    tx.commit().unwrap();
    assert!(
        eventually(Duration::from_secs(15), || state(&mut c, head) == "dead"),
        "the head was not swept after the commit: {}",
        state(&mut c, head)
    );
    c.execute("SELECT alk_unschedule($1)", &[&s]).unwrap();
}

/// Issue 57: a chore that fails every time (here the sweep, refused by a
/// bad `alkstore.rotation` set for the worker's database) is logged and
/// retried when next due; the worker goes on with the other chores (a
/// schedule ticks) instead of ending and, restarted, failing at the same
/// chore first again.
#[test]
fn a_failing_chore_does_not_stop_the_others() {
    let _serial = serial();
    let Some(mut c) = worker_db() else { return };
    assert!(worker_back(&mut c), "no maintenance worker");
    let pid = |c: &mut postgres::Client| -> Option<i32> {
        c.query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'alkstore maintenance' \
              AND datname = current_database()",
            &[],
        )
        .unwrap()
        .map(|r| r.get(0))
    };
    let set = |c: &mut postgres::Client, value: Option<&str>| {
        let sql = match value {
            Some(v) => format!(
                "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET alkstore.rotation = %L', \
                 current_database(), '{v}'); END $$"
            ),
            None => "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET alkstore.rotation', \
                     current_database()); END $$"
                .to_string(),
        };
        c.batch_execute(&sql).unwrap();
        // The worker reads database settings when it connects: end it, and
        // the postmaster starts it again within 5 s.
        c.batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
              WHERE backend_type = 'alkstore maintenance' AND datname = current_database()",
        )
        .unwrap();
    };
    /// Puts the setting back however the test ends.
    struct Reset<F: FnMut()>(F);
    impl<F: FnMut()> Drop for Reset<F> {
        fn drop(&mut self) {
            (self.0)()
        }
    }
    set(&mut c, Some("bogus"));
    let _reset = Reset(|| set(&mut worker_db().unwrap(), None));
    let mut probe = worker_db().unwrap();
    assert!(
        probe.query_one("SELECT alk_sweep(NULL)", &[]).is_err(),
        "the sweep still works with alkstore.rotation = bogus"
    );
    assert!(
        eventually(Duration::from_secs(15), || pid(&mut c).is_some()),
        "the worker did not start again"
    );
    let worker = pid(&mut c);
    let q = fresh("failing-chore");
    let s = fresh("failing-chore-s");
    c.execute(
        "SELECT alk_schedule($1, $2, '{\"every_s\": 1}', '{}')",
        &[&s, &q],
    )
    .unwrap();
    let ticked = |c: &mut postgres::Client| -> bool {
        c.query_one(
            "SELECT last_run_at FROM alk_schedules() WHERE name = $1",
            &[&s],
        )
        .unwrap()
        .get::<_, Option<String>>(0)
        .is_some()
    };
    assert!(
        eventually(Duration::from_secs(15), || ticked(&mut c)),
        "the schedule never ticked while the sweep failed"
    );
    std::thread::sleep(Duration::from_secs(2)); // more failed sweeps
    assert_eq!(
        pid(&mut c),
        worker,
        "the worker ended (the postmaster started another)"
    );
    c.execute("SELECT alk_unschedule($1)", &[&s]).unwrap();
}

/// Issue 57: `alk_queue_stats` and `alk_outbox_stats` say how long ago a
/// sweep last ran in the database — null before any, small after one, an
/// hour for a sweep an hour ago — on every engine, in databases of their
/// own (no other test's sweep comes between); and on PostgreSQL recording
/// it never waits for another transaction holding the record.
#[test]
fn queue_stats_say_how_long_ago_a_sweep_ran() {
    let _serial = serial();
    for target in isolated_targets("sweep_age") {
        let mut db = target.connect();
        let e = db.engine();
        let age = |db: &mut dyn Db, f: &str, name: &str| {
            let stats = db.ok(f, &[t(name)]);
            match stats.get("last_sweep_age_s") {
                Some(a) => a.clone(),
                None => panic!("[{e}] no last_sweep_age_s in {stats}"),
            }
        };
        assert_eq!(
            age(&mut *db, "alk_queue_stats", "q"),
            serde_json::Value::Null,
            "[{e}] before any sweep"
        );
        db.int("alk_sweep", &[t("q")]);
        let after = age(&mut *db, "alk_queue_stats", "other").as_f64();
        assert!(after.is_some_and(|a| a < 60.0), "[{e}] {after:?}");
        let meta = if target.is_postgres() {
            "alkstore.meta"
        } else {
            "alk_meta"
        };
        let hour_ago = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - 3_600_000;
        db.exec(&format!(
            "UPDATE {meta} SET value = '{hour_ago}' WHERE key = 'last_sweep_at'"
        ));
        for f in ["alk_queue_stats", "alk_outbox_stats"] {
            let a = age(&mut *db, f, "q").as_f64();
            assert!(
                a.is_some_and(|a| (3599.0..3700.0).contains(&a)),
                "[{e}] {f}: {a:?}"
            );
        }
        if target.is_postgres() {
            let connect = || postgres::Client::connect(target.pg_url(), postgres::NoTls).unwrap();
            let mut holder = connect();
            holder
                .batch_execute(
                    "BEGIN; UPDATE alkstore.meta SET value = value WHERE key = 'last_sweep_at'",
                )
                .unwrap();
            let mut sweeper = connect();
            sweeper
                .batch_execute("SET statement_timeout = '5s'")
                .unwrap();
            let started = Instant::now();
            sweeper.query_one("SELECT alk_sweep(NULL)", &[]).unwrap();
            assert!(
                started.elapsed() < Duration::from_millis(4500),
                "[{e}] the sweep waited for the record's holder"
            );
            holder.batch_execute("ROLLBACK").unwrap();
        }
    }
}

/// Issue 57: a database with the extension that no worker is configured
/// for gets one on first use — the first claim (of a queue or an outbox) starts it, a second
/// session's claim starts no other, and it sweeps (`last_sweep_age_s`
/// comes with no caller sweeping) — and it ends with its database. The test
/// cluster turns `alkstore.maintenance_on_use` off (scripts/postgres.sh);
/// this database turns it on. With it off here, no worker starts.
#[test]
fn a_database_no_worker_serves_gets_one_on_first_use() {
    let _serial = serial();
    let Some(mut admin) = worker_db() else { return };
    assert!(
        worker_back(&mut admin),
        "no maintenance worker in alkstore_test_worker"
    );
    let before = all_workers(&mut admin);
    let db = "alkstore_on_use";
    let url = pg_database(db).expect("PostgreSQL is configured");
    Install::Extension.install(&url);
    let connect = || postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let claim = |c: &mut postgres::Client| {
        c.query("SELECT * FROM alk_claim('on-use', 'w', 1)", &[])
            .unwrap();
    };
    // Off (the cluster's setting): a claim starts nothing.
    claim(&mut connect());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        workers_on(&mut admin, db),
        0,
        "started with the setting off"
    );

    admin
        .batch_execute(&format!(
            "ALTER DATABASE {db} SET alkstore.maintenance_on_use = on"
        ))
        .unwrap();
    let mut c = connect();
    // Queued before the worker, so that only its sweep can record one.
    let stats = |c: &mut postgres::Client| -> serde_json::Value {
        let s: String = c
            .query_one("SELECT alk_queue_stats('on-use')::text", &[])
            .unwrap()
            .get(0);
        serde_json::from_str(&s).unwrap()
    };
    assert_eq!(stats(&mut c)["last_sweep_age_s"], serde_json::Value::Null);
    // Four sessions' first claims at once: one worker, not none, not four.
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            let mut session = connect();
            let start = &start;
            scope.spawn(move || {
                start.wait();
                claim(&mut session);
            });
        }
    });
    assert!(
        eventually(Duration::from_secs(30), || workers_on(&mut admin, db) == 1),
        "no worker started on use"
    );
    // Another session's first claim starts none (or one that steps aside).
    claim(&mut c);
    claim(&mut connect());
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(workers_on(&mut admin, db), 1, "not one worker on use");
    let s = stats(&mut c);
    assert_eq!(s["maintenance_worker"], true, "{s}");
    assert!(
        eventually(Duration::from_secs(30), || stats(&mut c)
            ["last_sweep_age_s"]
            .is_number()),
        "the worker started on use never swept"
    );
    // It ends with the extension (DROP EXTENSION may meet a chore's locks
    // in another order: 40P01, tried again), and is not restarted.
    assert!(
        eventually(Duration::from_secs(30), || c
            .batch_execute("DROP EXTENSION alkstore")
            .is_ok()),
        "DROP EXTENSION kept failing"
    );
    assert!(
        eventually(Duration::from_secs(10), || workers_on(&mut admin, db) == 0),
        "the worker outlived the extension"
    );
    drop(c);
    // Started again on use once the extension is back — by an outbox's
    // claim this time (the relay's only call), as by a queue's — and ends
    // with its database: the cluster is back to the workers it had.
    let mut c = connect();
    c.batch_execute("CREATE EXTENSION alkstore").unwrap();
    c.query("SELECT * FROM alk_outbox_claim('on-use', 'w', 1)", &[])
        .unwrap();
    assert!(
        eventually(Duration::from_secs(30), || workers_on(&mut admin, db) == 1),
        "no worker started on an outbox's claim after CREATE EXTENSION"
    );
    drop(c);
    admin
        .batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || all_workers(&mut admin)
            == before),
        "a worker outlived its database"
    );
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        all_workers(&mut admin),
        before,
        "restarted after its database went"
    );
}

fn all_workers(c: &mut postgres::Client) -> i64 {
    c.query_one(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'alkstore maintenance'",
        &[],
    )
    .unwrap()
    .get(0)
}
