//! Contract v1.1 §C (job features): idempotency keys, ordered groups,
//! completed history and results, pause, pruning — one body per rule, run on
//! SQLite, the extension, the plain install and through PgBouncer; races on
//! real concurrent connections.

use alkstore_tests::*;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Barrier, Mutex};

fn enqueue(db: &mut dyn Db, q: &str, opts: &str, payload: &str) -> i64 {
    db.int("alk_enqueue", &[t(q), j(opts), j(payload)])
}

fn claim(db: &mut dyn Db, q: &str, worker: &str, n: i64) -> Vec<i64> {
    ids(&db.ok("alk_claim", &[t(q), t(worker), Arg::Int(n)]))
}

fn ack(db: &mut dyn Db, id: i64, worker: &str) -> bool {
    db.yes("alk_ack", &[Arg::Int(id), t(worker)])
}

fn job(db: &mut dyn Db, id: i64) -> Value {
    db.ok("alk_get_job", &[Arg::Int(id)])
}

fn stats(db: &mut dyn Db, q: &str) -> Value {
    db.ok("alk_queue_stats", &[t(q)])
}

// ---- C1 idempotency keys ----

per_engine! {
    fn an_idempotency_key_returns_the_first_job_for_its_ttl_whatever_became_of_it(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("idem");
        let first = enqueue(db, &q, r#"{"idempotency_key": "order-1"}"#, r#"{"n": 1}"#);
        let again = enqueue(
            db,
            &q,
            r#"{"idempotency_key": "order-1", "priority": 9}"#,
            "2",
        );
        assert_eq!(again, first, "[{e}] same key, same job");
        assert_eq!(stats(db, &q)["pending"], 1, "[{e}] nothing written");
        let doc = job(db, first);
        assert_eq!(doc["idempotency_key"], "order-1", "[{e}]");
        assert_eq!(
            doc["payload"],
            json!({"n": 1}),
            "[{e}] the first payload stays"
        );
        assert_eq!(doc["priority"], 0, "[{e}]");
        // Acked (deleted): the key still answers with the first id.
        assert_eq!(claim(db, &q, "w", 1), [first], "[{e}]");
        assert!(ack(db, first, "w"), "[{e}]");
        assert_eq!(job(db, first), Value::Null, "[{e}]");
        assert_eq!(
            enqueue(db, &q, r#"{"idempotency_key": "order-1"}"#, "3"),
            first,
            "[{e}]"
        );
        assert_eq!(stats(db, &q)["pending"], 0, "[{e}]");
        // Cancelled and dead-lettered jobs hold their keys too.
        let c = enqueue(db, &q, r#"{"idempotency_key": "c"}"#, "4");
        assert!(db.yes("alk_cancel", &[Arg::Int(c)]), "[{e}]");
        assert_eq!(
            enqueue(db, &q, r#"{"idempotency_key": "c"}"#, "5"),
            c,
            "[{e}]"
        );
        let d = enqueue(
            db,
            &q,
            r#"{"idempotency_key": "d", "max_attempts": 1}"#,
            "6",
        );
        assert_eq!(claim(db, &q, "w", 1), [d], "[{e}]");
        assert!(
            db.yes("alk_fail", &[Arg::Int(d), t("w"), t("boom")]),
            "[{e}]"
        );
        assert_eq!(
            enqueue(db, &q, r#"{"idempotency_key": "d"}"#, "7"),
            d,
            "[{e}]"
        );
        // Keys are per queue, and per outbox.
        let other = fresh("idem-other");
        assert_ne!(
            enqueue(db, &other, r#"{"idempotency_key": "order-1"}"#, "8"),
            first,
            "[{e}]"
        );
        let o = fresh("idem-outbox");
        let m = db.int(
            "alk_outbox_enqueue",
            &[t(&o), j(r#"{"idempotency_key": "order-1"}"#), j("9")],
        );
        assert_ne!(m, first, "[{e}]");
        assert_eq!(
            db.int(
                "alk_outbox_enqueue",
                &[t(&o), j(r#"{"idempotency_key": "order-1"}"#), j("10")]
            ),
            m,
            "[{e}]"
        );
        assert_eq!(db.ok("alk_outbox_stats", &[t(&o)])["pending"], 1, "[{e}]");
        // Past its TTL the key is free again, pruned or not.
        let short = enqueue(
            db,
            &q,
            r#"{"idempotency_key": "short", "idempotency_ttl_s": 1.0}"#,
            "11",
        );
        assert_eq!(
            enqueue(db, &q, r#"{"idempotency_key": "short"}"#, "12"),
            short,
            "[{e}]"
        );
        sleep_ms(1100);
        let renewed = enqueue(db, &q, r#"{"idempotency_key": "short"}"#, "13");
        assert!(renewed > short, "[{e}] a new job after the TTL");
        assert_eq!(
            enqueue(db, &q, r#"{"idempotency_key": "short"}"#, "14"),
            renewed,
            "[{e}]"
        );
    }
}

per_engine! {
    fn one_key_twice_in_a_transaction_and_a_rolled_back_key(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("idem-tx");
        db.begin();
        let a = enqueue(db, &q, r#"{"idempotency_key": "k"}"#, "1");
        assert_eq!(
            enqueue(db, &q, r#"{"idempotency_key": "k"}"#, "2"),
            a,
            "[{e}]"
        );
        db.rollback();
        // The rollback took the key with the job (SQLite may hand out the
        // rolled-back id again: the new payload tells them apart).
        let b = enqueue(db, &q, r#"{"idempotency_key": "k"}"#, "3");
        assert_eq!(job(db, b)["payload"], 3, "[{e}] {a} {b}");
        assert_eq!(stats(db, &q)["pending"], 1, "[{e}]");
    }
}

per_engine! {
    fn bad_idempotency_and_group_options_are_invalid_options_and_write_nothing(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("idem-bad");
        let long = format!(r#"{{"idempotency_key": "{}"}}"#, "k".repeat(1025));
        for bad in [
            r#"{"idempotency_key": ""}"#,
            r#"{"idempotency_key": 7}"#,
            r#"{"idempotency_key": null}"#,
            long.as_str(),
            r#"{"idempotency_key": "k", "idempotency_ttl_s": 0}"#,
            r#"{"idempotency_key": "k", "idempotency_ttl_s": -1}"#,
            r#"{"group_key": ""}"#,
            r#"{"group_key": ["g"]}"#,
        ] {
            assert_eq!(
                db.code("alk_enqueue", &[t(&q), j(bad), j("1")]),
                "ALK03",
                "[{e}] {bad}"
            );
        }
        // A batch's options apply to every payload: no key, no key TTL.
        for bad in [
            r#"{"idempotency_key": "k"}"#,
            r#"{"idempotency_ttl_s": 60}"#,
        ] {
            assert_eq!(
                db.code("alk_enqueue_batch", &[t(&q), j(bad), j("[1, 2]")]),
                "ALK03",
                "[{e}] {bad}"
            );
        }
        let s = stats(db, &q);
        assert_eq!(
            (&s["pending"], &s["scheduled"]),
            (&json!(0), &json!(0)),
            "[{e}]"
        );
        // The first key of 1024 bytes is fine.
        let ok = format!(r#"{{"idempotency_key": "{}"}}"#, "k".repeat(1024));
        assert!(db.int("alk_enqueue", &[t(&q), j(&ok), j("1")]) > 0, "[{e}]");
    }
}

per_engine! {
    fn racing_enqueues_with_one_key_make_exactly_one_job(target) {
        // The first transaction holds the key; the second waits for it, then
        // returns its id (commit) or inserts (rollback).
        for commit in [true, false] {
            let q = fresh("idem-race");
            let mut a = target.connect();
            let e = a.engine();
            a.begin();
            let first = enqueue(&mut *a, &q, r#"{"idempotency_key": "k"}"#, "1");
            let (tq, tt) = (q.clone(), target.clone());
            let second = std::thread::spawn(move || {
                let mut b = tt.connect();
                enqueue(&mut *b, &tq, r#"{"idempotency_key": "k"}"#, "2")
            });
            sleep_ms(300);
            assert!(
                !second.is_finished(),
                "[{e}] the second enqueue waits for the first"
            );
            if commit {
                a.commit();
            } else {
                a.rollback();
            }
            let got = second.join().unwrap();
            let payload = job(&mut *a, got)["payload"].clone();
            let want = if commit { (first, 1) } else { (got, 2) };
            assert_eq!(
                (got, payload),
                (want.0, json!(want.1)),
                "[{e}] commit={commit}"
            );
            assert_eq!(stats(&mut *a, &q)["pending"], 1, "[{e}] exactly one job");
        }
        // Eight sessions at once, each in its own transaction.
        let q = fresh("idem-race8");
        let barrier = Arc::new(Barrier::new(8));
        let got: Vec<i64> = (0..8)
            .map(|i| {
                let (tq, tt, b) = (q.clone(), target.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut db = tt.connect();
                    b.wait();
                    db.begin();
                    let id = enqueue(&mut *db, &tq, r#"{"idempotency_key": "k"}"#, &i.to_string());
                    db.commit();
                    id
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let mut db = target.connect();
        let e = db.engine();
        assert!(got.iter().all(|id| *id == got[0]), "[{e}] {got:?}");
        assert_eq!(stats(&mut *db, &q)["pending"], 1, "[{e}]");
    }
}

// ---- C2 ordered groups ----

/// A job that ran: its group (if any) and id.
type Ran = (Option<String>, i64);

per_engine! {
    fn a_group_runs_one_job_at_a_time_in_id_order(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("group");
        let g = |k: &str| format!(r#"{{"group_key": "{k}"}}"#);
        let a1 = enqueue(db, &q, &g("a"), r#""a1""#);
        let a2 = enqueue(db, &q, &g("a"), r#""a2""#);
        // A later job of higher priority does not overtake its group's head.
        let a3 = enqueue(db, &q, r#"{"group_key": "a", "priority": 10}"#, r#""a3""#);
        let b1 = enqueue(db, &q, &g("b"), r#""b1""#);
        let b2 = enqueue(db, &q, &g("b"), r#""b2""#);
        let plain = enqueue(db, &q, "{}", r#""plain""#);
        // Waiting jobs are pending to everyone outside.
        let doc = job(db, a2);
        assert_eq!(
            (&doc["state"], &doc["group_key"]),
            (&json!("pending"), &json!("a")),
            "[{e}]"
        );
        assert_eq!(stats(db, &q)["pending"], 6, "[{e}]");
        // One claim: at most one job per group.
        let mut got = claim(db, &q, "w", 10);
        got.sort();
        assert_eq!(got, [a1, b1, plain], "[{e}]");
        assert_eq!(
            claim(db, &q, "w", 10),
            Vec::<i64>::new(),
            "[{e}] the heads are running"
        );
        // A retried head stays the head.
        assert_eq!(
            db.ok(
                "alk_retry",
                &[Arg::Int(b1), t("w"), t("again"), Arg::Num(0.0)]
            ),
            "pending",
            "[{e}]"
        );
        assert_eq!(claim(db, &q, "w", 10), [b1], "[{e}] b1 again, not b2");
        // Acked: the next job of the group (lowest id) takes over.
        assert!(ack(db, a1, "w"), "[{e}]");
        assert_eq!(claim(db, &q, "w", 10), [a2], "[{e}]");
        // Dead-lettered and cancelled heads hand the group on too.
        assert!(
            db.yes("alk_fail", &[Arg::Int(b1), t("w"), t("no")]),
            "[{e}]"
        );
        assert_eq!(claim(db, &q, "w", 10), [b2], "[{e}]");
        assert!(db.yes("alk_cancel", &[Arg::Int(a2)]), "[{e}]");
        assert_eq!(claim(db, &q, "w", 10), [a3], "[{e}]");
        for id in [a3, b2, plain] {
            assert!(ack(db, id, "w"), "[{e}]");
        }
        let s = stats(db, &q);
        assert_eq!(
            (&s["pending"], &s["running"], &s["dead"]),
            (&json!(0), &json!(0), &json!(1)),
            "[{e}]"
        );
        // An emptied group starts over with its next job as the head.
        let a4 = enqueue(db, &q, &g("a"), r#""a4""#);
        assert_eq!(claim(db, &q, "w", 10), [a4], "[{e}]");
        assert!(ack(db, a4, "w"), "[{e}]");
    }
}

per_engine! {
    fn waiting_jobs_can_be_cancelled_expire_and_a_requeued_job_runs_next(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("group-edge");
        let h = enqueue(db, &q, r#"{"group_key": "g", "max_attempts": 1}"#, "1");
        let w1 = enqueue(db, &q, r#"{"group_key": "g"}"#, "2");
        let w2 = enqueue(db, &q, r#"{"group_key": "g", "expires_in_s": 0.1}"#, "3");
        let w3 = enqueue(db, &q, r#"{"group_key": "g"}"#, "4");
        // Cancelling a waiting job leaves the head alone.
        assert!(db.yes("alk_cancel", &[Arg::Int(w1)]), "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [h], "[{e}]");
        assert!(db.yes("alk_fail", &[Arg::Int(h), t("w"), t("x")]), "[{e}]");
        // w2 expired while it waited: dead-lettered, never run; w3 is next.
        sleep_ms(150);
        assert_eq!(claim(db, &q, "w", 5), [w3], "[{e}]");
        assert_eq!(job(db, w2)["state"], "dead", "[{e}]");
        assert_eq!(job(db, w2)["last_error"], "expired", "[{e}]");
        // The dead head, requeued while w3 runs, waits for it and runs next.
        assert!(db.yes("alk_requeue_dead", &[Arg::Int(h)]), "[{e}]");
        assert_eq!(job(db, h)["state"], "pending", "[{e}]");
        assert_eq!(
            claim(db, &q, "w", 5),
            Vec::<i64>::new(),
            "[{e}] one at a time"
        );
        assert!(ack(db, w3, "w"), "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [h], "[{e}]");
        assert!(ack(db, h, "w"), "[{e}]");
        // A batch with a group joins it in payload order.
        let batch: Vec<i64> = serde_json::from_value(db.ok(
            "alk_enqueue_batch",
            &[t(&q), j(r#"{"group_key": "g"}"#), j("[1, 2, 3]")],
        ))
        .unwrap();
        for id in &batch {
            assert_eq!(claim(db, &q, "w", 5), [*id], "[{e}]");
            assert!(ack(db, *id, "w"), "[{e}]");
        }
        assert_eq!(stats(db, &q)["pending"], 0, "[{e}]");
    }
}

per_engine! {
    fn an_expired_claim_on_a_head_is_reclaimed_before_the_group_moves_on(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("group-vt");
        db.ok(
            "alk_queue_configure",
            &[t(&q), j(r#"{"visibility_timeout_s": 0.1}"#)],
        );
        let h = enqueue(db, &q, r#"{"group_key": "g"}"#, "1");
        let n = enqueue(db, &q, r#"{"group_key": "g"}"#, "2");
        assert_eq!(claim(db, &q, "w1", 5), [h], "[{e}]");
        sleep_ms(150);
        assert_eq!(claim(db, &q, "w2", 5), [h], "[{e}] the head again, not {n}");
        assert!(!ack(db, h, "w1"), "[{e}]");
        assert!(ack(db, h, "w2"), "[{e}]");
        assert_eq!(claim(db, &q, "w2", 5), [n], "[{e}]");
    }
}

per_engine! {
    fn workers_racing_on_grouped_jobs_never_run_two_of_a_group_at_once(target) {
        let q = fresh("group-race");
        let mut db = target.connect();
        let e = db.engine();
        // 6 groups of 8 jobs, enqueued interleaved, plus 8 ungrouped.
        let mut order: HashMap<String, Vec<i64>> = HashMap::new();
        for i in 0..8 {
            for g in 0..6 {
                let group = format!("g{g}");
                let id = enqueue(
                    &mut *db,
                    &q,
                    &format!(r#"{{"group_key": "{group}"}}"#),
                    &i.to_string(),
                );
                order.entry(group).or_default().push(id);
            }
            enqueue(&mut *db, &q, "{}", "0");
        }
        let running: Arc<Mutex<HashSet<String>>> = Arc::default();
        let done: Arc<Mutex<Vec<Ran>>> = Arc::default();
        let workers: Vec<_> = (0..6)
            .map(|w| {
                let (tt, tq, running, done) =
                    (target.clone(), q.clone(), running.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut db = tt.connect();
                    let me = format!("w{w}");
                    let mut idle = 0;
                    while idle < 20 {
                        let jobs = db.ok("alk_claim", &[t(&tq), t(&me), Arg::Int(3)]);
                        let jobs = jobs.as_array().unwrap();
                        if jobs.is_empty() {
                            idle += 1;
                            sleep_ms(20);
                            continue;
                        }
                        idle = 0;
                        for job in jobs {
                            let id = job["id"].as_i64().unwrap();
                            let group = db.ok("alk_get_job", &[Arg::Int(id)])["group_key"]
                                .as_str()
                                .map(str::to_owned);
                            if let Some(g) = &group {
                                assert!(
                                    running.lock().unwrap().insert(g.clone()),
                                    "two jobs of group {g} run at once"
                                );
                            }
                            sleep_ms(2);
                            if let Some(g) = &group {
                                running.lock().unwrap().remove(g);
                            }
                            // Recorded before the ack commits: the next job of the
                            // group cannot be claimed before that.
                            done.lock().unwrap().push((group, id));
                            assert!(db.yes("alk_ack", &[Arg::Int(id), t(&me)]));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let done = done.lock().unwrap();
        assert_eq!(done.len(), 56, "[{e}] every job ran once");
        for (group, ids) in &order {
            let ran: Vec<i64> = done
                .iter()
                .filter(|(g, _)| g.as_deref() == Some(group.as_str()))
                .map(|(_, id)| *id)
                .collect();
            assert_eq!(&ran, ids, "[{e}] group {group} ran in id order");
        }
    }
}

/// Issue 34 item 2, as a stress run: purges of pending jobs race grouped
/// enqueues held open in transactions, acks and fails (dead-letters) of
/// group heads. No call deadlocks or fails, and once the purges stop every
/// job left runs: no group is left waiting behind a head that was purged.
/// (A 25 s run of this kind left 5 stuck groups and 14 deadlocks on 0.2.0.)
#[test]
fn purging_while_groups_enqueue_ack_and_fail_strands_no_group() {
    use std::sync::atomic::{AtomicBool, Ordering};
    for target in targets() {
        let q = fresh("purge-race");
        let mut db = target.connect();
        let e = db.engine();
        db.ok("alk_queue_configure", &[t(&q), j(r#"{"max_attempts": 1}"#)]);
        let stop = Arc::new(AtomicBool::new(false));
        let purging = Arc::new(AtomicBool::new(true));
        let mut threads = Vec::new();
        for p in 0..3 {
            let (tt, tq, stop) = (target.clone(), q.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                let mut db = tt.connect();
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    // Two jobs of one group per transaction (jobs of two
                    // groups in varying order would deadlock transactions
                    // like any two rows locked in varying order).
                    db.begin();
                    let opts = format!(r#"{{"group_key": "g{}"}}"#, (n + p) % 4);
                    for _ in 0..2 {
                        db.ok("alk_enqueue", &[t(&tq), j(&opts), j("1")]);
                    }
                    n += 1;
                    sleep_ms(3); // held open: a purge may come in between
                    db.commit();
                }
            }));
        }
        for w in 0..2 {
            let (tt, tq, stop) = (target.clone(), q.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                let mut db = tt.connect();
                let me = format!("w{w}");
                let mut k = 0;
                while !stop.load(Ordering::SeqCst) {
                    for id in ids(&db.ok("alk_claim", &[t(&tq), t(&me), Arg::Int(2)])) {
                        k += 1;
                        if k % 3 == 0 {
                            db.ok("alk_fail", &[Arg::Int(id), t(&me), t("boom")]);
                        } else {
                            db.ok("alk_ack", &[Arg::Int(id), t(&me)]);
                        }
                    }
                }
            }));
        }
        {
            let (tt, tq, purging) = (target.clone(), q.clone(), purging.clone());
            threads.push(std::thread::spawn(move || {
                let mut db = tt.connect();
                while purging.load(Ordering::SeqCst) {
                    db.ok("alk_purge", &[t(&tq), t("pending")]);
                    sleep_ms(10);
                }
            }));
        }
        sleep_ms(2500);
        purging.store(false, Ordering::SeqCst);
        sleep_ms(300);
        stop.store(true, Ordering::SeqCst);
        for th in threads {
            th.join()
                .unwrap_or_else(|_| panic!("[{e}] a racing call failed"));
        }
        // Every job left is claimable in turn: drain, then nothing waits.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let got = ids(&db.ok("alk_claim", &[t(&q), t("drain"), Arg::Int(100)]));
            for id in &got {
                db.ok("alk_ack", &[Arg::Int(*id), t("drain")]);
            }
            if got.is_empty() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "[{e}] still draining");
        }
        let st = stats(&mut *db, &q);
        assert_eq!(
            (st["pending"].clone(), st["running"].clone()),
            (json!(0), json!(0)),
            "[{e}] jobs left waiting behind a purged head: {st}"
        );
    }
}

// ---- C3 completed history and results ----

per_engine! {
    fn completed_jobs_keep_their_results_while_retained(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("keep");
        // Without a retention an acked job is gone, its result dropped.
        let gone = enqueue(db, &q, "{}", "1");
        claim(db, &q, "w", 1);
        assert!(
            db.yes("alk_ack", &[Arg::Int(gone), t("w"), j(r#"{"x": 1}"#)]),
            "[{e}]"
        );
        assert_eq!(job(db, gone), Value::Null, "[{e}]");
        let opts = db.ok(
            "alk_queue_configure",
            &[
                t(&q),
                j(r#"{"retain_completed_s": 3600, "retain_dead_s": 7200}"#),
            ],
        );
        assert_eq!(
            (&opts["retain_completed_s"], &opts["retain_dead_s"]),
            (&json!(3600), &json!(7200)),
            "[{e}]"
        );
        let kept = enqueue(db, &q, "{}", r#""report""#);
        let plain = enqueue(db, &q, "{}", "2");
        assert_eq!(claim(db, &q, "w", 2).len(), 2, "[{e}]");
        assert!(
            db.yes("alk_ack", &[Arg::Int(kept), t("w"), j(r#"{"rows": 42}"#)]),
            "[{e}]"
        );
        assert!(ack(db, plain, "w"), "[{e}] no result given");
        let doc = job(db, kept);
        assert_eq!(doc["state"], "completed", "[{e}]");
        assert_eq!(doc["result"], json!({"rows": 42}), "[{e}]");
        assert_eq!(doc["payload"], "report", "[{e}]");
        assert!(
            instant(&doc["completed_at"]) >= instant(&doc["created_at"]),
            "[{e}]"
        );
        assert_eq!(job(db, plain)["result"], Value::Null, "[{e}]");
        assert_eq!(job(db, plain)["state"], "completed", "[{e}]");
        let s = stats(db, &q);
        assert_eq!(
            (&s["completed"], &s["running"], &s["pending"]),
            (&json!(2), &json!(0), &json!(0)),
            "[{e}]"
        );
        // A completed job is finished: nothing acts on it again.
        assert!(!ack(db, kept, "w"), "[{e}]");
        assert!(
            !db.yes("alk_fail", &[Arg::Int(kept), t("w"), t("x")]),
            "[{e}]"
        );
        assert_eq!(
            db.ok("alk_retry", &[Arg::Int(kept), t("w"), t("x")]),
            Value::Null,
            "[{e}]"
        );
        assert!(!db.yes("alk_cancel", &[Arg::Int(kept)]), "[{e}]");
        assert!(!db.yes("alk_requeue_dead", &[Arg::Int(kept)]), "[{e}]");
        assert!(!db.yes("alk_heartbeat", &[Arg::Int(kept), t("w")]), "[{e}]");
        // ack_batch keeps them too; retain_dead_s null sets the default back.
        let b = enqueue(db, &q, "{}", "3");
        claim(db, &q, "w", 1);
        assert_eq!(
            db.int("alk_ack_batch", &[Arg::Ids(vec![b]), t("w")]),
            1,
            "[{e}]"
        );
        assert_eq!(job(db, b)["state"], "completed", "[{e}]");
        let opts = db.ok(
            "alk_queue_configure",
            &[t(&q), j(r#"{"retain_dead_s": null}"#)],
        );
        assert_eq!(
            (&opts["retain_dead_s"], &opts["retain_completed_s"]),
            (&Value::Null, &json!(3600)),
            "[{e}]"
        );
        assert_eq!(
            db.code(
                "alk_queue_configure",
                &[t(&q), j(r#"{"retain_completed_s": -1}"#)]
            ),
            "ALK03",
            "[{e}]"
        );
        assert_eq!(
            db.code(
                "alk_queue_configure",
                &[t(&q), j(r#"{"retain_completed_s": null}"#)]
            ),
            "ALK03",
            "[{e}]"
        );
    }
}

per_engine! {
    fn retention_is_read_when_a_job_finishes_and_prune_deletes_what_outlived_it(target) {
        let mut db = target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("prune");
        let a = enqueue(db, &q, "{}", "1");
        let d = enqueue(db, &q, r#"{"max_attempts": 1}"#, "2");
        let keep = enqueue(db, &q, "{}", "3");
        let dead_kept = enqueue(db, &q, r#"{"max_attempts": 1}"#, "4");
        // Configured after enqueue, before the jobs finish: it applies.
        db.ok(
            "alk_queue_configure",
            &[
                t(&q),
                j(r#"{"retain_completed_s": 0.1, "retain_dead_s": 0.1}"#),
            ],
        );
        assert_eq!(claim(db, &q, "w", 2), [a, d], "[{e}]");
        assert!(ack(db, a, "w"), "[{e}]");
        assert!(db.yes("alk_fail", &[Arg::Int(d), t("w"), t("x")]), "[{e}]");
        db.ok(
            "alk_queue_configure",
            &[
                t(&q),
                j(r#"{"retain_completed_s": 3600, "retain_dead_s": null}"#),
            ],
        );
        assert_eq!(claim(db, &q, "w", 2), [keep, dead_kept], "[{e}]");
        assert!(ack(db, keep, "w"), "[{e}]");
        assert_eq!(
            db.ok("alk_retry", &[Arg::Int(dead_kept), t("w"), t("x")]),
            "dead",
            "[{e}]"
        );
        sleep_ms(150);
        // Bounded batches: never more than max_rows per call. Other tests
        // prune the shared PostgreSQL databases too (so no total here), and
        // a call skips the rows another pruner holds until it commits: there
        // a 0 while `a` or `d` is left is retried, for at most 10 s. A SQLite
        // file has no other pruner: a 0 there means they were not pruned.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while job(db, a) != Value::Null || job(db, d) != Value::Null {
            let n = db.int("alk_prune", &[Arg::Int(1)]);
            assert!((0..=1).contains(&n), "[{e}] {n}");
            if n == 0 {
                assert!(
                    target.is_postgres() && std::time::Instant::now() < deadline,
                    "[{e}] past retention, not pruned: completed {}, dead {}",
                    job(db, a),
                    job(db, d)
                );
                sleep_ms(10);
            }
        }
        assert_eq!(job(db, keep)["state"], "completed", "[{e}]");
        assert_eq!(
            job(db, dead_kept)["state"],
            "dead",
            "[{e}] retain_dead_s null: kept"
        );
        for bad in [Arg::Int(0), Arg::Int(100_001), Arg::Null] {
            assert_eq!(db.code("alk_prune", &[bad]), "ALK05", "[{e}]");
        }
        // Idempotency keys past their TTL are pruned too (one row each).
        let k = enqueue(
            db,
            &q,
            r#"{"idempotency_key": "p", "idempotency_ttl_s": 0.05}"#,
            "5",
        );
        sleep_ms(100);
        while db.int("alk_prune", &[Arg::Int(100_000)]) > 0 {}
        assert!(
            enqueue(db, &q, r#"{"idempotency_key": "p"}"#, "6") > k,
            "[{e}]"
        );
    }
}

per_engine! {
    fn pruning_while_workers_claim_loses_nothing(target) {
        let q = fresh("prune-race");
        let mut db = target.connect();
        let e = db.engine();
        db.ok(
            "alk_queue_configure",
            &[
                t(&q),
                j(r#"{"retain_completed_s": 0.01, "retain_dead_s": 0.01}"#),
            ],
        );
        let mut all = Vec::new();
        for i in 0..200 {
            all.push(enqueue(&mut *db, &q, "{}", &i.to_string()));
        }
        let acked: Arc<Mutex<Vec<i64>>> = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pruner = {
            let (tt, stop) = (target.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut db = tt.connect();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    db.int("alk_prune", &[Arg::Int(10)]);
                }
            })
        };
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let (tt, tq, acked) = (target.clone(), q.clone(), acked.clone());
                std::thread::spawn(move || {
                    let mut db = tt.connect();
                    let me = format!("w{w}");
                    loop {
                        let got = claim(&mut *db, &tq, &me, 8);
                        if got.is_empty() {
                            break;
                        }
                        for id in got {
                            assert!(ack(&mut *db, id, &me));
                            acked.lock().unwrap().push(id);
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        pruner.join().unwrap();
        let mut acked = acked.lock().unwrap().clone();
        acked.sort();
        assert_eq!(acked, all, "[{e}] every job acked exactly once");
    }
}

// ---- C4 pause ----

per_engine! {
    fn a_paused_queue_or_outbox_claims_nothing_and_everything_else_works(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("pause");
        let running = enqueue(db, &q, "{}", "1");
        assert_eq!(claim(db, &q, "w", 1), [running], "[{e}]");
        assert!(db.yes("alk_queue_pause", &[t(&q)]), "[{e}]");
        assert!(!db.yes("alk_queue_pause", &[t(&q)]), "[{e}] already paused");
        let waiting = enqueue(db, &q, "{}", "2");
        assert_eq!(claim(db, &q, "w", 5), Vec::<i64>::new(), "[{e}] paused");
        let s = stats(db, &q);
        assert_eq!(
            (&s["paused"], &s["pending"]),
            (&json!(true), &json!(1)),
            "[{e}]"
        );
        // Acks, heartbeats and retries of jobs in hand keep working.
        assert!(
            db.yes("alk_heartbeat", &[Arg::Int(running), t("w")]),
            "[{e}]"
        );
        assert!(ack(db, running, "w"), "[{e}]");
        assert!(db.yes("alk_queue_resume", &[t(&q)]), "[{e}]");
        assert!(!db.yes("alk_queue_resume", &[t(&q)]), "[{e}] not paused");
        assert_eq!(stats(db, &q)["paused"], false, "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [waiting], "[{e}]");
        // A queue never used can be paused ahead of its first job.
        let later = fresh("pause-later");
        assert!(db.yes("alk_queue_pause", &[t(&later)]), "[{e}]");
        enqueue(db, &later, "{}", "3");
        assert_eq!(claim(db, &later, "w", 5), Vec::<i64>::new(), "[{e}]");
        // Outboxes pause by name; the same name as a queue is another thing.
        let o = fresh("pause-outbox");
        db.int("alk_outbox_enqueue", &[t(&o), Arg::Null, j("4")]);
        assert!(db.yes("alk_outbox_pause", &[t(&o)]), "[{e}]");
        assert_eq!(
            db.ok("alk_outbox_claim", &[t(&o), t("w")]),
            json!([]),
            "[{e}]"
        );
        assert_eq!(db.ok("alk_outbox_stats", &[t(&o)])["paused"], true, "[{e}]");
        assert!(
            !db.yes("alk_queue_resume", &[t(&o)]),
            "[{e}] the queue {o} was never paused"
        );
        assert!(db.yes("alk_outbox_resume", &[t(&o)]), "[{e}]");
        assert_eq!(
            db.ok("alk_outbox_claim", &[t(&o), t("w")])
                .as_array()
                .unwrap()
                .len(),
            1,
            "[{e}]"
        );
        // Names are checked like everywhere else.
        assert_eq!(
            db.code("alk_queue_pause", &[t("__alkstore_x")]),
            "ALK02",
            "[{e}]"
        );
        assert_eq!(db.code("alk_outbox_resume", &[t("")]), "ALK01", "[{e}]");
    }
}

per_engine! {
    fn pause_and_retention_roll_back_with_the_transaction(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("pause-tx");
        enqueue(db, &q, "{}", "1");
        db.begin();
        assert!(db.yes("alk_queue_pause", &[t(&q)]), "[{e}]");
        db.rollback();
        assert_eq!(stats(db, &q)["paused"], false, "[{e}]");
        assert_eq!(claim(db, &q, "w", 1).len(), 1, "[{e}]");
    }
}

per_engine! {
    fn sweeping_an_expired_waiting_job_keeps_its_group_consistent(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("group-sweep");
        let head = enqueue(db, &q, r#"{"group_key": "g"}"#, "1");
        let doomed = enqueue(db, &q, r#"{"group_key": "g", "expires_in_s": 0.05}"#, "2");
        let next = enqueue(db, &q, r#"{"group_key": "g"}"#, "3");
        assert_eq!(claim(db, &q, "w", 5), [head], "[{e}]");
        sleep_ms(100);
        assert_eq!(db.int("alk_sweep", &[t(&q)]), 1, "[{e}]");
        assert_eq!(job(db, doomed)["state"], "dead", "[{e}]");
        assert_eq!(
            claim(db, &q, "w", 5),
            Vec::<i64>::new(),
            "[{e}] the head still runs"
        );
        assert!(ack(db, head, "w"), "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [next], "[{e}]");
        assert!(ack(db, next, "w"), "[{e}]");
        // The group is empty now: a new job heads it at once.
        let fresh_head = enqueue(db, &q, r#"{"group_key": "g"}"#, "4");
        assert_eq!(claim(db, &q, "w", 5), [fresh_head], "[{e}]");
    }
}

#[test]
fn prune_deletes_old_sqlite_notification_rows() {
    for target in targets().into_iter().filter(|t| !t.is_postgres()) {
        let mut db = target.connect();
        db.ok("alk_notify", &[t("fresh-channel"), j("1")]);
        // A notification from long ago, as an idle listener would leave it.
        db.exec(
            "INSERT INTO alk_notifications (channel, payload, created_at) VALUES ('old', '1', 0)",
        );
        while db.int("alk_prune", &[Arg::Int(1)]) > 0 {}
        assert_eq!(
            db.query_i64("SELECT count(*) FROM alk_notifications WHERE channel = 'old'"),
            0
        );
        assert_eq!(
            db.query_i64("SELECT count(*) FROM alk_notifications WHERE channel = 'fresh-channel'"),
            1,
            "recent notifications stay for their listeners"
        );
    }
}

per_engine! {
    /// One `alk_ack_batch` over every kind of id: a plain job, a group's head,
    /// a job of a queue that keeps completed jobs, one another worker holds,
    /// one that does not exist, and a duplicate. Exactly the held ones are
    /// acked, each in its own way.
    fn an_ack_batch_of_mixed_jobs_acks_exactly_the_held_ones(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let (plain, grouped, kept, other) = (
            fresh("mix-p"),
            fresh("mix-g"),
            fresh("mix-k"),
            fresh("mix-o"),
        );
        db.ok(
            "alk_queue_configure",
            &[t(&kept), j(r#"{"retain_completed_s": 3600}"#)],
        );
        let p = enqueue(db, &plain, "null", "1");
        let g1 = enqueue(db, &grouped, r#"{"group_key": "g"}"#, "1");
        let g2 = enqueue(db, &grouped, r#"{"group_key": "g"}"#, "2");
        let k = enqueue(db, &kept, "null", "1");
        let o = enqueue(db, &other, "null", "1");
        assert_eq!(claim(db, &plain, "w", 5), [p], "[{e}]");
        assert_eq!(claim(db, &grouped, "w", 5), [g1], "[{e}]");
        assert_eq!(claim(db, &kept, "w", 5), [k], "[{e}]");
        assert_eq!(claim(db, &other, "someone-else", 5), [o], "[{e}]");
        let acked = db.int(
            "alk_ack_batch",
            &[Arg::Ids(vec![p, g1, k, o, 999_999_999, p]), t("w")],
        );
        assert_eq!(acked, 3, "[{e}] plain, group head and kept");
        assert_eq!(job(db, p), Value::Null, "[{e}] deleted");
        assert_eq!(job(db, g1), Value::Null, "[{e}] deleted");
        assert_eq!(job(db, k)["state"], "completed", "[{e}] kept");
        assert_eq!(job(db, o)["state"], "running", "[{e}] not this worker's");
        assert_eq!(
            claim(db, &grouped, "w", 5),
            [g2],
            "[{e}] the group moved on"
        );
    }
}

/// Whether any queue keeps acked jobs decides how `alk_ack_batch` acks
/// (PostgreSQL asks once per batch, on `queues_retaining`, and looks up
/// each job's queue only when one does): with none, every acked job is
/// deleted; with one, its jobs are kept and the others' still deleted;
/// once it keeps them no more, they are deleted again. A database of its
/// own per install, since every other test's retaining queue would answer
/// for this one.
#[test]
fn ack_batch_deletes_or_keeps_whether_or_not_any_queue_keeps_acked_jobs() {
    for target in isolated_targets("alkstore_test_retaining") {
        let mut conn = target.connect();
        let db = &mut *conn;
        let e = db.engine();
        let (plain, kept) = (fresh("ret-plain"), fresh("ret-kept"));
        let ack_batch = |db: &mut dyn Db, ids: &[i64]| {
            db.int("alk_ack_batch", &[Arg::Ids(ids.to_vec()), t("w")])
        };

        // No queue keeps acked jobs.
        let a = vec![
            enqueue(db, &plain, "null", "1"),
            enqueue(db, &plain, "null", "2"),
        ];
        assert_eq!(claim(db, &plain, "w", 5), a, "[{e}]");
        assert_eq!(ack_batch(db, &a), 2, "[{e}]");
        assert_eq!(
            (job(db, a[0]), job(db, a[1])),
            (Value::Null, Value::Null),
            "[{e}] deleted"
        );

        // One queue does.
        db.ok(
            "alk_queue_configure",
            &[t(&kept), j(r#"{"retain_completed_s": 3600}"#)],
        );
        let (p, k) = (
            enqueue(db, &plain, "null", "3"),
            enqueue(db, &kept, "null", "4"),
        );
        assert_eq!(claim(db, &plain, "w", 5), [p], "[{e}]");
        assert_eq!(claim(db, &kept, "w", 5), [k], "[{e}]");
        assert_eq!(ack_batch(db, &[k, p]), 2, "[{e}]");
        assert_eq!(job(db, p), Value::Null, "[{e}] deleted");
        assert_eq!(job(db, k)["state"], "completed", "[{e}] kept");

        // It keeps them no more.
        db.ok(
            "alk_queue_configure",
            &[t(&kept), j(r#"{"retain_completed_s": 0}"#)],
        );
        let k2 = enqueue(db, &kept, "null", "5");
        assert_eq!(claim(db, &kept, "w", 5), [k2], "[{e}]");
        assert_eq!(ack_batch(db, &[k2]), 1, "[{e}]");
        assert_eq!(job(db, k2), Value::Null, "[{e}] deleted");
        assert_eq!(job(db, k)["state"], "completed", "[{e}] the kept one stays");
    }
}

// ---- every error a job met (alk_job_errors) ----

/// `alk_job_errors`' entries as (attempt, error).
fn attempts_and_errors(errors: &Value) -> Vec<(i64, &str)> {
    errors
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["attempt"].as_i64().unwrap(), x["error"].as_str().unwrap()))
        .collect()
}

per_engine! {
    /// A claim that expired leaves its trace (issue 57): the next claim
    /// records "claim expired (worker <name>)" as that attempt's error and
    /// last_error, on a plain queue and on a limited one (its own claim
    /// path); a job claimed from pending records nothing.
    fn an_expired_claim_is_recorded_as_its_attempts_error(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        for limits in [r#"{}"#, r#"{"max_running": 5}"#] {
            let q = fresh("expired-trace");
            db.ok("alk_queue_configure", &[t(&q), j(r#"{"visibility_timeout_s": 0.05}"#)]);
            db.ok("alk_queue_configure", &[t(&q), j(limits)]);
            let id = enqueue(db, &q, r#"{"max_attempts": 5}"#, "{}");
            let quiet = enqueue(db, &q, r#"{"max_attempts": 5}"#, "{}");
            assert_eq!(claim(db, &q, "first-worker", 1), vec![id], "[{e}] {limits}");
            std::thread::sleep(std::time::Duration::from_millis(120));
            // The expired claim comes first (claim order), then the pending one.
            assert_eq!(claim(db, &q, "second-worker", 2), vec![id, quiet], "[{e}] {limits}");
            let errors = db.ok("alk_job_errors", &[Arg::Int(id)]);
            assert_eq!(attempts_and_errors(&errors), vec![(1, "claim expired (worker first-worker)")], "[{e}] {limits} {errors}");
            let doc = job(db, id);
            assert_eq!(doc["last_error"], "claim expired (worker first-worker)", "[{e}] {limits}");
            assert_eq!(doc["attempts"], 2, "[{e}] {limits}");
            assert_eq!(db.ok("alk_job_errors", &[Arg::Int(quiet)]), json!([]), "[{e}] {limits}");
            // And once more, one claim at a time: attempt 2's trace names its worker.
            std::thread::sleep(std::time::Duration::from_millis(120));
            let again = claim(db, &q, "third-worker", 1);
            assert_eq!(again, vec![id], "[{e}] {limits}");
            let errors = db.ok("alk_job_errors", &[Arg::Int(id)]);
            assert_eq!(errors[1]["attempt"], 2, "[{e}] {limits} {errors}");
            assert_eq!(errors[1]["error"], "claim expired (worker second-worker)", "[{e}] {limits} {errors}");
        }
    }

    fn every_error_a_job_met_is_kept_oldest_first_across_requeues(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("errors");
        db.ok("alk_queue_configure", &[t(&q), j(r#"{"visibility_timeout_s": 0.05, "backoff_base_s": 0, "backoff_max_s": 0}"#)]);
        let id = enqueue(db, &q, r#"{"max_attempts": 3}"#, "{}");
        assert_eq!(db.ok("alk_job_errors", &[Arg::Int(id)]), json!([]), "[{e}] none yet");
        // Attempt 1: a retry; attempt 2: a fail with attempts left, the same
        // message again; attempt 3: the claim expires on the last attempt.
        let mut claimed = claim(db, &q, "w", 1);
        assert_eq!(claimed, vec![id]);
        assert_eq!(db.ok("alk_retry", &[Arg::Int(id), t("w"), t("SMTP timeout"), Arg::Num(0.0)]), "pending");
        claimed = claim(db, &q, "w", 1);
        assert_eq!(claimed, vec![id], "[{e}]");
        db.ok("alk_retry", &[Arg::Int(id), t("w"), t("SMTP timeout"), Arg::Num(0.0)]);
        assert_eq!(claim(db, &q, "w", 1), vec![id], "[{e}]");
        std::thread::sleep(std::time::Duration::from_millis(120));
        db.int("alk_sweep", &[t(&q)]);
        assert_eq!(job(db, id)["state"], "dead", "[{e}]");
        let errors = db.ok("alk_job_errors", &[Arg::Int(id)]);
        assert_eq!(
            attempts_and_errors(&errors),
            vec![(1, "SMTP timeout"), (2, "SMTP timeout"), (3, "visibility timeout exceeded on final attempt")],
            "[{e}] {errors}"
        );
        for x in errors.as_array().unwrap() {
            let at = x["at"].as_str().unwrap_or_else(|| panic!("[{e}] {x}"));
            assert!(at.len() == 24 && at.ends_with('Z') && at.contains('T'), "[{e}] {at}");
        }
        let ats: Vec<&str> = errors.as_array().unwrap().iter().map(|x| x["at"].as_str().unwrap()).collect();
        assert!(ats.windows(2).all(|w| w[0] <= w[1]), "[{e}] oldest first: {ats:?}");
        // A requeue keeps them; the next failure adds one (attempts restart at 0).
        assert!(db.yes("alk_requeue_dead", &[Arg::Int(id)]));
        assert_eq!(db.ok("alk_job_errors", &[Arg::Int(id)]).as_array().unwrap().len(), 3, "[{e}]");
        assert_eq!(claim(db, &q, "w", 1), vec![id], "[{e}]");
        assert!(db.yes("alk_fail", &[Arg::Int(id), t("w"), t("mailbox gone")]));
        let errors = db.ok("alk_job_errors", &[Arg::Int(id)]);
        assert_eq!(errors[3]["attempt"], 1, "[{e}] {errors}");
        assert_eq!(errors[3]["error"], "mailbox gone", "[{e}] {errors}");
        assert_eq!(job(db, id)["last_error"], "mailbox gone", "[{e}] last_error is the last of them");
        // A job that never failed has none; acked, it has no document at all.
        let clean = enqueue(db, &q, r#"{"max_attempts": 3}"#, "{}");
        assert_eq!(claim(db, &q, "w", 1), vec![clean], "[{e}]");
        assert_eq!(db.ok("alk_job_errors", &[Arg::Int(clean)]), json!([]), "[{e}]");
        assert!(ack(db, clean, "w"));
        assert_eq!(db.ok("alk_job_errors", &[Arg::Int(clean)]), Value::Null, "[{e}]");
        assert_eq!(db.ok("alk_job_errors", &[Arg::Int(i64::MAX)]), Value::Null, "[{e}]");
        // Ids as alk_get_job takes them.
        for bad in [Arg::Int(0), Arg::Int(-1), Arg::Null] {
            let as_get_job = db.call("alk_get_job", std::slice::from_ref(&bad)).map_err(|f| f.code);
            let as_errors = db.call("alk_job_errors", std::slice::from_ref(&bad)).map_err(|f| f.code);
            assert_eq!(as_errors, as_get_job, "[{e}] {bad:?}");
        }
    }
}

per_engine! {
    fn a_job_keeps_its_last_hundred_errors(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("errors-cap");
        db.ok("alk_queue_configure", &[t(&q), j(r#"{"backoff_base_s": 0, "backoff_max_s": 0}"#)]);
        let id = enqueue(db, &q, r#"{"max_attempts": 1000}"#, "{}");
        for n in 1..=103 {
            assert_eq!(claim(db, &q, "w", 1), vec![id], "[{e}] attempt {n}");
            db.ok("alk_retry", &[Arg::Int(id), t("w"), t(&format!("failure {n}")), Arg::Num(0.0)]);
        }
        let errors = db.ok("alk_job_errors", &[Arg::Int(id)]);
        let errors = errors.as_array().unwrap();
        assert_eq!(errors.len(), 100, "[{e}]");
        assert_eq!(errors[0]["error"], "failure 4", "[{e}] the oldest three went");
        assert_eq!(errors[99]["error"], "failure 103", "[{e}]");
        assert_eq!(errors[99]["attempt"], 103, "[{e}]");
    }
}
