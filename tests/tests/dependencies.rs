//! Job dependencies (contract v1.2 §J): `depends_on` makes a job wait,
//! reported as pending, until every job it names was acked; a dependency
//! that goes dead or is cancelled kills its dependents at once, down the
//! graph, naming the direct dependency; completions are remembered when
//! retention deleted the row; requeues, outboxes, batches, groups, limits
//! and other queues combine with it. One body per behaviour, on SQLite and
//! on PostgreSQL (extension, plain install, PgBouncer).

use alkstore_tests::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

fn deps(ids: &[i64]) -> Arg {
    j(&json!({ "depends_on": ids }).to_string())
}

fn enqueue(db: &mut dyn Db, q: &str, opts: Arg) -> i64 {
    db.int("alk_enqueue", &[t(q), opts, j("{}")])
}

fn job(db: &mut dyn Db, id: i64) -> Value {
    db.ok("alk_get_job", &[Arg::Int(id)])
}

/// Claims everything claimable in `q` (up to 100) and returns the ids.
fn claim(db: &mut dyn Db, q: &str) -> Vec<i64> {
    ids(&db.ok("alk_claim", &[t(q), t("w"), Arg::Int(100)]))
}

fn ack(db: &mut dyn Db, id: i64) {
    assert!(
        db.yes("alk_ack", &[Arg::Int(id), t("w")]),
        "[{}] ack {id}",
        db.engine()
    );
}

/// (state, last_error) of a job.
fn fate(db: &mut dyn Db, id: i64) -> (Value, Value) {
    let doc = job(db, id);
    (doc["state"].clone(), doc["last_error"].clone())
}

fn dead(why: String) -> (Value, Value) {
    (json!("dead"), json!(why))
}

per_engine! {
    /// An enqueue naming a job that another transaction is still enqueuing
    /// waits for that transaction, as SQLite's one writer makes it wait:
    /// committed, the job is a dependency like any other; rolled back, the
    /// id names no job (InvalidOptions, nothing written). Before (issue 57),
    /// PostgreSQL took the unseen id for a job acked and gone, and the
    /// dependent ran at once.
    fn an_enqueue_naming_a_job_not_committed_yet_waits_for_its_transaction(_target) {
        for outcome in ["commit", "rollback"] {
            let mut writer = _target.connect();
            let e = writer.engine();
            let q = fresh("deps-in-flight");
            writer.begin();
            let a = enqueue(&mut *writer, &q, Arg::Null);
            // (Through PgBouncer too: the open transaction keeps its server.)
            let writer_pid = if _target.is_postgres() {
                writer.query_i64("SELECT pg_backend_pid()::bigint")
            } else {
                0
            };
            let mut other = _target.connect();
            // The dependent in a queue of its own: an enqueue into the
            // writer's new queue would wait for the writer on the queue's
            // row first, and look at the dependency only after it ended.
            let q2 = fresh("deps-in-flight-b");
            let (q2c, (done, finished)) = (q2.clone(), std::sync::mpsc::channel());
            let naming = std::thread::spawn(move || {
                let got = other.call("alk_enqueue", &[t(&q2c), deps(&[a]), j("{}")]);
                done.send(()).unwrap();
                (got, other)
            });
            // Waiting: on PostgreSQL seen in pg_stat_activity (for the
            // writer's transaction), on SQLite for the write lock (busy).
            if _target.is_postgres() {
                let mut watch =
                    postgres::Client::connect(_target.pg_direct_url(), postgres::NoTls).unwrap();
                let until = Instant::now() + Duration::from_secs(30);
                loop {
                    assert!(
                        finished.try_recv().is_err(),
                        "[{e}] {outcome}: the enqueue naming {a} did not wait for its transaction"
                    );
                    let waiting: i64 = watch
                        .query_one(
                            "SELECT count(*) FROM pg_stat_activity
                              WHERE $1::int = ANY (pg_blocking_pids(pid))",
                            &[&(writer_pid as i32)],
                        )
                        .unwrap()
                        .get(0);
                    if waiting > 0 {
                        break;
                    }
                    assert!(Instant::now() < until, "[{e}] {outcome}: never seen waiting");
                    std::thread::sleep(Duration::from_millis(20));
                }
                // The probe's first try waits 1 ms for the writer: one that
                // rolls back within it is taken for one that rolled back
                // before the probe looked (deps.sql, docs/sql-api.md). So the
                // writer ends once the enqueue is in its wait for it (this
                // test rolled back in that millisecond about once in a few
                // dozen runs: "a rolled-back id names no job").
                std::thread::sleep(Duration::from_millis(50));
                assert!(
                    finished.try_recv().is_err(),
                    "[{e}] {outcome}: the enqueue naming {a} stopped waiting for its transaction"
                );
            } else {
                assert!(
                    finished.recv_timeout(Duration::from_millis(700)).is_err(),
                    "[{e}] {outcome}: the enqueue naming {a} did not wait for its transaction"
                );
            }
            if outcome == "commit" {
                writer.commit();
            } else {
                writer.rollback();
            }
            let (got, mut other) = naming.join().unwrap();
            if outcome == "commit" {
                let b = got.unwrap_or_else(|f| panic!("[{e}] {f:?}")).as_i64().unwrap();
                assert_eq!(job(&mut *other, b)["waiting_for"], json!([a]), "[{e}]");
                assert_eq!(claim(&mut *other, &q2), Vec::<i64>::new(), "[{e}] {b} waits");
                assert_eq!(claim(&mut *other, &q), [a], "[{e}]");
                ack(&mut *other, a);
                assert_eq!(claim(&mut *other, &q2), [b], "[{e}] then {b} runs");
            } else {
                let f = got.expect_err("a rolled-back id names no job");
                assert_eq!(f.code, "ALK03", "[{e}] {f:?}");
                assert_eq!(
                    other.ok("alk_queue_stats", &[t(&q2)])["pending"],
                    0,
                    "[{e}] nothing written"
                );
            }
        }
    }

    fn a_job_waits_until_every_dependency_is_acked(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("deps-wait");
        let a = enqueue(db, &q, Arg::Null);
        let b = enqueue(db, &q, Arg::Null);
        let c = enqueue(db, &q, deps(&[b, a, b]));
        let doc = job(db, c);
        assert_eq!(doc["state"], "pending", "[{e}] waiting jobs are reported pending");
        assert_eq!(doc["depends_on"], json!([b, a]), "[{e}] duplicates dropped, order kept");
        assert_eq!(doc["waiting_for"], json!([b, a]), "[{e}]");
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!(stats["pending"], 3, "[{e}] {stats}");
        let listed = db.ok("alk_list_jobs", &[t(&q), t("pending"), Arg::Int(0), Arg::Int(10)]);
        assert_eq!(ids(&listed), vec![a, b, c], "[{e}]");
        assert_eq!(claim(db, &q), vec![a, b], "[{e}] not claimable while it waits");
        ack(db, a);
        assert_eq!(job(db, c)["waiting_for"], json!([b]), "[{e}]");
        assert_eq!(claim(db, &q), Vec::<i64>::new(), "[{e}] one dependency left");
        sleep_ms(20);
        ack(db, b);
        let doc = job(db, c);
        assert_eq!((doc["state"].clone(), doc["waiting_for"].clone()), (json!("pending"), json!(null)));
        // run_at: the later of its own and when it became pending.
        assert!(instant(&doc["run_at"]) > instant(&doc["created_at"]) + 10, "[{e}] {doc}");
        assert_eq!(claim(db, &q), vec![c], "[{e}]");
        // A dependent whose own run_at lies ahead still waits for it.
        let x = enqueue(db, &q, Arg::Null);
        let later = db.int(
            "alk_enqueue",
            &[t(&q), j(&json!({"depends_on": [x], "delay_s": 1.5}).to_string()), j("{}")],
        );
        assert_eq!(claim(db, &q), vec![x]);
        ack(db, x);
        assert_eq!(claim(db, &q), Vec::<i64>::new(), "[{e}] not before its run_at");
        sleep_ms(1600);
        assert_eq!(claim(db, &q), vec![later], "[{e}]");
    }

    fn a_dead_or_cancelled_dependency_kills_its_dependents_down_the_graph(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("deps-die");
        // a -> b -> c, and a diamond a -> (d, f) -> g: a dies, all die.
        let a = enqueue(db, &q, Arg::Null);
        let b = enqueue(db, &q, deps(&[a]));
        let c = enqueue(db, &q, deps(&[b]));
        let d = enqueue(db, &q, deps(&[a]));
        let f = enqueue(db, &q, deps(&[a]));
        let g = enqueue(db, &q, deps(&[f, d]));
        let other = enqueue(db, &q, Arg::Null);
        assert_eq!(claim(db, &q), vec![a, other]);
        assert!(db.yes("alk_fail", &[Arg::Int(a), t("w"), t("boom")]));
        assert_eq!(fate(db, b), dead(format!("dependency {a} dead")), "[{e}]");
        assert_eq!(fate(db, c), dead(format!("dependency {b} dead")), "[{e}] the direct dependency");
        assert_eq!(fate(db, d), dead(format!("dependency {a} dead")), "[{e}]");
        assert_eq!(fate(db, f), dead(format!("dependency {a} dead")), "[{e}]");
        assert_eq!(fate(db, g), dead(format!("dependency {d} dead")), "[{e}] the lower of two");
        assert_eq!(db.ok("alk_queue_stats", &[t(&q)])["dead"], 6, "[{e}]");
        // Cancelled, and a retry past max_attempts.
        let x = enqueue(db, &q, Arg::Null);
        let y = enqueue(db, &q, deps(&[x]));
        assert!(db.yes("alk_cancel", &[Arg::Int(x)]));
        assert_eq!(fate(db, y), dead(format!("dependency {x} cancelled")), "[{e}]");
        let r = db.int("alk_enqueue", &[t(&q), j(r#"{"max_attempts": 1}"#), j("{}")]);
        let s = enqueue(db, &q, deps(&[r]));
        assert_eq!(claim(db, &q), vec![r]);
        assert_eq!(db.ok("alk_retry", &[Arg::Int(r), t("w"), t("again")]), json!("dead"));
        assert_eq!(fate(db, s), dead(format!("dependency {r} dead")), "[{e}]");
        // Expired, dead-lettered by a sweep; a dependent that expires
        // itself while it waits goes dead as expired, and so do its own.
        let p = db.int("alk_enqueue", &[t(&q), j(r#"{"delay_s": 0.1, "expires_in_s": 0.05}"#), j("{}")]);
        let p2 = enqueue(db, &q, deps(&[p]));
        let z = enqueue(db, &q, Arg::Null);
        let w = db.int(
            "alk_enqueue",
            &[t(&q), j(&json!({"depends_on": [z], "expires_in_s": 0.05}).to_string()), j("{}")],
        );
        let w2 = enqueue(db, &q, deps(&[w]));
        sleep_ms(150);
        assert_eq!(db.int("alk_sweep", &[t(&q)]), 2, "[{e}] p and w (their dependents die with them)");
        assert_eq!(fate(db, p2), dead(format!("dependency {p} dead")), "[{e}]");
        assert_eq!(fate(db, w), dead("expired".into()), "[{e}]");
        assert_eq!(fate(db, w2), dead(format!("dependency {w} dead")), "[{e}]");
        // Purging a queue's pending jobs counts as cancelling them.
        let q2 = fresh("deps-die-purged");
        let m = enqueue(db, &q2, Arg::Null);
        let n = enqueue(db, &q, deps(&[m]));
        assert_eq!(db.int("alk_purge", &[t(&q2), t("pending")]), 1);
        assert_eq!(fate(db, n), dead(format!("dependency {m} cancelled")), "[{e}]");
    }

    fn how_a_dependency_ended_before_the_enqueue_counts(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("deps-before");
        let kept = fresh("deps-before-kept");
        db.ok("alk_queue_configure", &[t(&kept), j(r#"{"retain_completed_s": 3600}"#)]);
        // Acked and deleted (retention 0), and acked and kept.
        let a = enqueue(db, &q, Arg::Null);
        let k = enqueue(db, &kept, Arg::Null);
        assert_eq!(claim(db, &q), vec![a]);
        assert_eq!(claim(db, &kept), vec![k]);
        ack(db, a);
        ack(db, k);
        assert_eq!(job(db, a), json!(null), "[{e}] the row is gone");
        let b = enqueue(db, &q, deps(&[a, k]));
        let doc = job(db, b);
        assert_eq!((doc["state"].clone(), doc["waiting_for"].clone()), (json!("pending"), json!(null)), "[{e}]");
        assert_eq!(doc["depends_on"], json!([a, k]));
        assert_eq!(claim(db, &q), vec![b], "[{e}] runnable at once");
        // Dead (kept), dead and purged, cancelled: the dependent is dead at once.
        let d = enqueue(db, &q, Arg::Null);
        assert_eq!(claim(db, &q), vec![d]);
        assert!(db.yes("alk_fail", &[Arg::Int(d), t("w"), t("boom")]));
        let x = enqueue(db, &q, Arg::Null);
        assert!(db.yes("alk_cancel", &[Arg::Int(x)]));
        let after_dead = enqueue(db, &q, deps(&[a, d]));
        assert_eq!(fate(db, after_dead), dead(format!("dependency {d} dead")), "[{e}]");
        let after_cancel = enqueue(db, &q, deps(&[x]));
        assert_eq!(fate(db, after_cancel), dead(format!("dependency {x} cancelled")), "[{e}]");
        assert_eq!(db.int("alk_purge", &[t(&q), t("dead")]), 3);
        let after_purge = enqueue(db, &q, deps(&[d]));
        assert_eq!(fate(db, after_purge), dead(format!("dependency {d} dead")), "[{e}]");
        // A dependency enqueued earlier in the same transaction.
        db.begin();
        let first = enqueue(db, &q, Arg::Null);
        let second = enqueue(db, &q, deps(&[first]));
        db.commit();
        assert_eq!(job(db, second)["waiting_for"], json!([first]), "[{e}]");
    }

    fn bad_depends_on_is_invalid_options_and_writes_nothing(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("deps-bad");
        let a = enqueue(db, &q, Arg::Null);
        let many: Vec<i64> = (0..101).map(|i| a + i).collect();
        for bad in [
            json!({"depends_on": []}),
            json!({"depends_on": null}),
            json!({"depends_on": a}),
            json!({"depends_on": [0]}),
            json!({"depends_on": [-1]}),
            json!({"depends_on": [1.5]}),
            json!({"depends_on": [a.to_string()]}),
            json!({"depends_on": many}),
            json!({"depends_on": [a, 9_000_000_000_000_000_000i64]}),
        ] {
            let opts = j(&bad.to_string());
            assert_eq!(db.code("alk_enqueue", &[t(&q), opts.clone(), j("{}")]), "ALK03", "[{e}] {bad}");
            assert_eq!(db.code("alk_enqueue_batch", &[t(&q), opts.clone(), j("[1]")]), "ALK03", "[{e}] {bad}");
            assert_eq!(db.code("alk_outbox_enqueue", &[t(&q), opts, j("{}")]), "ALK03", "[{e}] {bad}");
        }
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!((stats["pending"].clone(), stats["dead"].clone()), (json!(1), json!(0)), "[{e}] {stats}");
        let outbox = db.ok("alk_outbox_stats", &[t(&q)]);
        assert_eq!(outbox["pending"], 0, "[{e}]");
        // Nothing marked either: a's ack deletes it the plain way.
        assert_eq!(claim(db, &q), vec![a]);
        ack(db, a);
    }

    /// One rule on every engine (issue 57 item 5): a job id is a whole
    /// number however it is written (PostgreSQL's jsonb reads 1e0 as 1,
    /// SQLite refused it), and a key option holding NUL is refused with
    /// nothing written, ALK03 (SQLite accepted it; PostgreSQL's jsonb
    /// cannot hold one: the call layer refuses it before sending, and raw
    /// SQL there meets jsonb's own 22P05 before any function runs).
    fn the_engines_read_the_same_odd_input_alike(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("deps-written");
        let a = enqueue(db, &q, Arg::Null);
        let b = enqueue(db, &q, Arg::Null);
        for written in [format!("[{a}e0]"), format!("[{a}.0]"), format!("[{a}.000, {b}E0]")] {
            let id = enqueue(db, &q, j(&format!(r#"{{"depends_on": {written}}}"#)));
            let waits: Vec<i64> = serde_json::from_value(job(db, id)["waiting_for"].clone()).unwrap();
            assert!(waits == vec![a] || waits == vec![a, b], "[{e}] {written}: {waits:?}");
            assert!(db.yes("alk_cancel", &[Arg::Int(id)]));
        }
        let counts = |db: &mut dyn Db| {
            let s = db.ok("alk_queue_stats", &[t(&q)]);
            (s["pending"].clone(), s["running"].clone(), s["dead"].clone())
        };
        let before = counts(db);
        for key in ["limit_key", "group_key", "idempotency_key"] {
            let opts = j(&format!(r#"{{"{key}": "a\u0000b"}}"#));
            let code = db.code("alk_enqueue", &[t(&q), opts.clone(), j("{}")]);
            let expected = "ALK03";
            assert_eq!(code, expected, "[{e}] {key}");
            assert_eq!(db.code("alk_enqueue_batch", &[t(&q), opts, j("[1]")]), expected, "[{e}] {key}");
        }
        assert_eq!(counts(db), before, "[{e}] nothing written");
    }

    fn requeues_revive_only_what_is_requeued(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("deps-requeue");
        let a = enqueue(db, &q, Arg::Null);
        let ok = enqueue(db, &q, Arg::Null);
        let b = enqueue(db, &q, deps(&[ok, a]));
        let c = enqueue(db, &q, deps(&[b]));
        assert_eq!(claim(db, &q), vec![a, ok]);
        ack(db, ok);
        assert!(db.yes("alk_fail", &[Arg::Int(a), t("w"), t("boom")]));
        // Requeueing the dead dependency does not revive its dependents.
        assert!(db.yes("alk_requeue_dead", &[Arg::Int(a)]));
        assert_eq!(fate(db, b), dead(format!("dependency {a} dead")), "[{e}]");
        // Requeueing a dependent makes it wait for what was not acked.
        assert!(db.yes("alk_requeue_dead", &[Arg::Int(b)]));
        let doc = job(db, b);
        assert_eq!((doc["state"].clone(), doc["waiting_for"].clone()), (json!("pending"), json!([a])), "[{e}]");
        assert_eq!(fate(db, c).0, json!("dead"), "[{e}] still dead");
        assert_eq!(claim(db, &q), vec![a], "[{e}]");
        ack(db, a);
        assert_eq!(claim(db, &q), vec![b], "[{e}]");
        ack(db, b);
        // alk_requeue_dead_all does the same for every dead job: c waits for nothing now.
        assert_eq!(db.int("alk_requeue_dead_all", &[t(&q)]), 1);
        assert_eq!(claim(db, &q), vec![c], "[{e}]");
        // A dependent requeued while its dependency is still dead waits
        // for it; one whose dependency is gone unacked dies again.
        let x = enqueue(db, &q, Arg::Null);
        let y = enqueue(db, &q, deps(&[x]));
        assert_eq!(claim(db, &q), vec![x]);
        assert!(db.yes("alk_fail", &[Arg::Int(x), t("w"), t("boom")]));
        assert!(db.yes("alk_requeue_dead", &[Arg::Int(y)]));
        assert_eq!(job(db, y)["waiting_for"], json!([x]), "[{e}]");
        assert!(db.yes("alk_cancel", &[Arg::Int(y)]));
        let z = enqueue(db, &q, Arg::Null);
        let v = enqueue(db, &q, deps(&[z]));
        assert!(db.yes("alk_cancel", &[Arg::Int(z)]));
        assert!(db.yes("alk_requeue_dead", &[Arg::Int(v)]));
        assert_eq!(fate(db, v), dead(format!("dependency {z} cancelled")), "[{e}]");
    }

    fn outboxes_batches_groups_limits_and_other_queues_combine(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("deps-mix");
        let other = fresh("deps-mix-other");
        let o = fresh("deps-mix-outbox");
        let a = enqueue(db, &other, Arg::Null);
        // An outbox message and a batch waiting for a job of another queue.
        let m = db.int("alk_outbox_enqueue", &[t(&o), deps(&[a]), j("{}")]);
        let batch = ids_of(&db.ok("alk_enqueue_batch", &[t(&q), deps(&[a]), j("[1, 2, 3]")]));
        for id in batch.iter().chain([&m]) {
            assert_eq!(job(db, *id)["waiting_for"], json!([a]), "[{e}] every payload");
        }
        // A group whose second job waits for a dependency: when the head is
        // acked, it heads the group but may not run; the group waits.
        let g1 = db.int("alk_enqueue", &[t(&q), j(r#"{"group_key": "g", "priority": 9}"#), j("{}")]);
        let dep = enqueue(db, &other, Arg::Null);
        let g2 = db.int(
            "alk_enqueue",
            &[t(&q), j(&json!({"group_key": "g", "priority": 9, "depends_on": [dep]}).to_string()), j("{}")],
        );
        let g3 = db.int("alk_enqueue", &[t(&q), j(r#"{"group_key": "g", "priority": 9}"#), j("{}")]);
        assert_eq!(claim(db, &q), vec![g1], "[{e}] the batch waits, g1 heads its group");
        assert_eq!(ids(&db.ok("alk_outbox_claim", &[t(&o), t("w"), Arg::Int(5)])), Vec::<i64>::new());
        ack(db, g1);
        assert_eq!(claim(db, &q), Vec::<i64>::new(), "[{e}] g2 heads the group and waits");
        assert_eq!(job(db, g2)["waiting_for"], json!([dep]), "[{e}]");
        assert_eq!(claim(db, &other), vec![a, dep]);
        ack(db, dep);
        assert_eq!(claim(db, &q), vec![g2], "[{e}]");
        ack(db, g2);
        assert_eq!(claim(db, &q), vec![g3], "[{e}]");
        ack(db, g3);
        ack(db, a);
        assert_eq!(ids(&db.ok("alk_outbox_claim", &[t(&o), t("w"), Arg::Int(5)])), vec![m], "[{e}]");
        // Limits: a released dependent still waits for a slot.
        db.ok("alk_queue_configure", &[t(&q), j(r#"{"max_running": 1}"#)]);
        assert_eq!(claim(db, &q), vec![batch[0]], "[{e}] one at a time");
        // A grouped job whose dependency dies: dead, and its group moves on.
        let h = enqueue(db, &other, Arg::Null);
        let k1 = db.int(
            "alk_enqueue",
            &[t(&other), j(&json!({"group_key": "k", "depends_on": [h]}).to_string()), j("{}")],
        );
        let k2 = db.int("alk_enqueue", &[t(&other), j(r#"{"group_key": "k"}"#), j("{}")]);
        assert_eq!(claim(db, &other), vec![h], "[{e}] k1 heads its group and waits");
        assert!(db.yes("alk_fail", &[Arg::Int(h), t("w"), t("boom")]));
        assert_eq!(fate(db, k1), dead(format!("dependency {h} dead")), "[{e}]");
        assert_eq!(claim(db, &other), vec![k2], "[{e}] the group went on");
    }
}

fn ids_of(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

per_engine! {
    fn fan_out_and_fan_in_run_each_job_once_with_eight_workers(_target) {
        let mut db = _target.connect();
        let e = db.engine();
        let q = fresh("deps-fan");
        let root = enqueue(&mut *db, &q, Arg::Null);
        let middle: Vec<i64> = (0..50).map(|_| enqueue(&mut *db, &q, deps(&[root]))).collect();
        let last = enqueue(&mut *db, &q, deps(&middle));
        let runs = Arc::new(Mutex::new(Vec::<i64>::new()));
        let acked = Arc::new(AtomicI64::new(0));
        // How many of the 50 were still there when the last one was claimed.
        let left_at_last = Arc::new(AtomicI64::new(-1));
        let middle = Arc::new(middle);
        let barrier = Arc::new(Barrier::new(8));
        let deadline = Instant::now() + Duration::from_secs(60);
        let workers: Vec<_> = (0..8)
            .map(|i| {
                let (target, q) = (_target.clone(), q.clone());
                let (runs, acked, left_at_last, barrier, middle) =
                    (runs.clone(), acked.clone(), left_at_last.clone(), barrier.clone(), middle.clone());
                std::thread::spawn(move || {
                    let mut db = target.connect();
                    let w = format!("w{i}");
                    barrier.wait();
                    while acked.load(Ordering::SeqCst) < 52 {
                        assert!(Instant::now() < deadline, "the fan did not finish");
                        let got = ids(&db.ok("alk_claim", &[t(&q), t(&w), Arg::Int(1 + i % 4)]));
                        if got.is_empty() {
                            sleep_ms(2);
                            continue;
                        }
                        for id in got {
                            if id == last {
                                let left = middle
                                    .iter()
                                    .filter(|m| !db.ok("alk_get_job", &[Arg::Int(**m)]).is_null())
                                    .count();
                                left_at_last.store(left as i64, Ordering::SeqCst);
                            }
                            runs.lock().unwrap().push(id);
                            sleep_ms(1);
                            assert!(db.yes("alk_ack", &[Arg::Int(id), t(&w)]));
                            acked.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let runs = runs.lock().unwrap().clone();
        assert_eq!(runs.len(), 52, "[{e}] each job once: {runs:?}");
        assert_eq!(runs.iter().collect::<HashSet<_>>().len(), 52, "[{e}] no job twice");
        assert_eq!(runs[0], root, "[{e}] the root first");
        assert_eq!(*runs.last().unwrap(), last, "[{e}] the fan-in last");
        assert_eq!(left_at_last.load(Ordering::SeqCst), 0, "[{e}] claimed after all 50 acks");
    }
}

/// Removals of jobs that were not acked are remembered for seven days;
/// past that, alk_prune forgets them, and an enqueue naming a gone id at
/// or below the highest forgotten one is refused (no engine can tell any
/// more how it ended), while one above it still counts as acked. Isolated
/// databases: the forgotten mark is global.
#[test]
fn a_forgotten_ending_refuses_the_enqueue_instead_of_guessing() {
    for target in isolated_targets("alkstore_test_deps_forget") {
        let mut db = target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("deps-forget");
        let acked = enqueue(db, &q, Arg::Null);
        assert_eq!(claim(db, &q), vec![acked]);
        ack(db, acked);
        let x = enqueue(db, &q, Arg::Null);
        assert!(db.yes("alk_cancel", &[Arg::Int(x)]));
        let later = enqueue(db, &q, Arg::Null);
        assert_eq!(claim(db, &q), vec![later]);
        ack(db, later);
        // Nothing is forgotten within the seven days.
        db.ok("alk_prune", &[Arg::Int(1000)]);
        let named = enqueue(db, &q, deps(&[x]));
        assert_eq!(
            fate(db, named).1,
            json!(format!("dependency {x} cancelled"))
        );
        // Eight days later.
        if target.is_postgres() {
            db.exec(&format!("UPDATE alkstore.job_ends SET ended_at = ended_at - interval '8 days' WHERE id = {x}"));
        } else {
            db.exec(&format!(
                "UPDATE alk_job_ends SET ended_at = ended_at - 691200000 WHERE id = {x}"
            ));
        }
        assert_eq!(
            db.int("alk_prune", &[Arg::Int(1000)]),
            0,
            "[{e}] not counted"
        );
        for gone in [x, acked] {
            let failure = db
                .call("alk_enqueue", &[t(&q), deps(&[gone]), j("{}")])
                .unwrap_err();
            assert_eq!(failure.code, "ALK03", "[{e}] {failure:?}");
            assert!(
                failure.message.contains("no longer remembers"),
                "[{e}] {failure:?}"
            );
        }
        let fine = enqueue(db, &q, deps(&[later]));
        assert_eq!(
            claim(db, &q),
            vec![fine],
            "[{e}] a later acked id still counts as acked"
        );
    }
}
