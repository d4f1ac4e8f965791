//! Workers, outbox delivery loops and leases through the facade.

mod common;
use alkstore::{EnqueueOpts, Handled, QueueOpts, Retried, Stop, TxHandle, Worker};
use common::*;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The application's own statement on a worker's transaction, either engine.
fn app_sql(tx: &mut dyn TxHandle, sql: &str) -> Result<(), String> {
    match tx.sqlite() {
        Some(conn) => conn.execute_batch(sql).map_err(|e| e.to_string()),
        None => tx
            .postgres()
            .expect("a PgTx")
            .batch_execute(sql)
            .map_err(|e| e.to_string()),
    }
}

/// Nothing left to run, now or after a backoff, and nothing running. (Read
/// without unwrapping while a worker runs: a panic in the scope would wait
/// for the worker forever.)
fn settled(stats: &serde_json::Value) -> bool {
    stats["pending"] == 0 && stats["scheduled"] == 0 && stats["running"] == 0
}

/// Polls until `done` holds, for at most 60 s: a deadline, not a count of
/// naps, which a loaded machine can use up first (the asserts after it
/// tell what did not happen).
fn poll_until(mut done: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !done() && std::time::Instant::now() < until {
        std::thread::sleep(ms(50));
    }
}

#[test]
fn a_worker_runs_handlers_concurrently_retries_errors_survives_panics_and_stops_gracefully() {
    for target in targets() {
        let store = target.open();
        let queue = store.queue(&fresh("work")).unwrap();
        queue
            .configure(&QueueOpts::new().backoff(ms(10), ms(10)))
            .unwrap();
        let ids = queue
            .enqueue_batch(
                &EnqueueOpts::new(),
                &(0..40).map(|i| json!({"n": i})).collect::<Vec<_>>(),
            )
            .unwrap();
        let runs: Mutex<HashMap<i64, u32>> = Mutex::new(HashMap::new());
        let stop = Stop::new();
        let handled = std::thread::scope(|s| {
            let worker = s.spawn(|| {
                Worker::new(queue.clone(), "pool")
                    .concurrency(4)
                    .run(&stop, |job| {
                        let n = job.payload["n"].as_i64().unwrap();
                        let attempt = {
                            let mut r = runs.lock().unwrap();
                            let a = r.entry(job.id).or_default();
                            *a += 1;
                            *a
                        };
                        match (n % 10, attempt) {
                            (3, 1) => Err("transient".to_string()),
                            (7, 1) => panic!("handler bug"),
                            _ => Ok(()),
                        }
                    })
            });
            // Graceful stop once everything is done.
            poll_until(|| settled(&queue.stats().unwrap_or_default()));
            stop.stop();
            worker.join().unwrap().unwrap()
        });
        let runs = runs.into_inner().unwrap();
        assert_eq!(runs.len(), 40, "[{}] every job ran", target.name());
        for id in &ids {
            assert!(
                store.get_job(*id).unwrap().is_none(),
                "[{}] job {id} acked in the end",
                target.name()
            );
        }
        let retried = runs.values().filter(|&&a| a == 2).count();
        assert_eq!(retried, 8, "errors and panics were retried once each");
        assert_eq!(handled, 48);
    }
}

#[test]
fn a_transactional_handlers_writes_and_the_jobs_ack_commit_together_or_not_at_all() {
    for target in targets() {
        let store = target.open();
        let who = target.name();
        let name = fresh("tx-work");
        let table = name.replace('-', "_");
        target.execute(&format!("CREATE TABLE {table} (job text, attempt integer)"));
        let queue = store.queue(&name).unwrap();
        let retain = Duration::from_secs(3600);
        queue
            .configure(
                &QueueOpts::new()
                    .backoff(ms(10), ms(10))
                    .retain_completed(retain),
            )
            .unwrap();
        let followups = store.queue(&fresh("tx-followups")).unwrap();
        let mut kinds = vec!["ok", "err_once", "panic_once"];
        // On SQLite the handler's transaction holds the write lock, so no
        // one can cancel the job or make it abort while the handler runs.
        if matches!(target, Target::Postgres(_)) {
            kinds.extend(["cancelled", "aborted_once"]);
        }
        let ids: HashMap<&str, i64> = kinds
            .iter()
            .map(|&kind| {
                let id = queue
                    .enqueue(&EnqueueOpts::new(), &json!({ "kind": kind }))
                    .unwrap();
                (kind, id)
            })
            .collect();
        let stop = Stop::new();
        let handled = std::thread::scope(|s| {
            let worker = s.spawn(|| {
                Worker::new(queue.clone(), "tx")
                    .concurrency(2)
                    .run_in_tx(&stop, |job, tx| {
                        let kind = job.payload["kind"].as_str().unwrap();
                        let row =
                            format!("INSERT INTO {table} VALUES ('{kind}', {})", job.attempts);
                        app_sql(tx, &row)?;
                        tx.enqueue_tx(followups.name(), &EnqueueOpts::new(), &json!(kind))
                            .map_err(|e| e.to_string())?;
                        match (kind, job.attempts) {
                            ("err_once", 1) => return Err("refused once".into()),
                            ("panic_once", 1) => panic!("handler bug"),
                            ("cancelled", _) => {
                                // Someone cancels the job while it runs.
                                let cancelled = store.call("alk_cancel", &[job.id.into()]);
                                assert_eq!(cancelled.unwrap(), json!(true));
                            }
                            ("aborted_once", 1) => {
                                // A failed statement the handler ignores.
                                let _ = tx.postgres().unwrap().batch_execute("SELECT 1/0");
                            }
                            _ => {}
                        }
                        Ok(())
                    })
            });
            poll_until(|| settled(&queue.stats().unwrap_or_default()));
            stop.stop();
            worker.join().unwrap().unwrap()
        });
        let retried = kinds.iter().filter(|k| k.ends_with("_once")).count();
        assert_eq!(handled as usize, kinds.len() + retried, "[{who}]");
        // Only the acked attempts' writes exist, alkstore's and the table's.
        let acked: Vec<(&str, i64)> = kinds
            .iter()
            .filter(|&&k| k != "cancelled")
            .map(|&k| (k, if k.ends_with("_once") { 2 } else { 1 }))
            .collect();
        let rows = target.query_i64(&format!("SELECT count(*) FROM {table}"));
        assert_eq!(
            rows as usize,
            acked.len(),
            "[{who}] one row per acked attempt"
        );
        for (kind, attempt) in &acked {
            let sql = format!(
                "SELECT count(*) FROM {table} WHERE job = '{kind}' AND attempt = {attempt}"
            );
            assert_eq!(
                target.query_i64(&sql),
                1,
                "[{who}] {kind}, attempt {attempt}"
            );
            let job = store.get_job(ids[kind]).unwrap().unwrap();
            assert_eq!(job["state"], "completed", "[{who}] {kind}: {job}");
        }
        let mut after: Vec<String> = followups
            .claim("check", 100)
            .unwrap()
            .into_iter()
            .map(|j| j.payload.as_str().unwrap().to_string())
            .collect();
        after.sort();
        let mut expected: Vec<String> = acked.iter().map(|(k, _)| k.to_string()).collect();
        expected.sort();
        assert_eq!(
            after, expected,
            "[{who}] jobs enqueued in the handler's transaction"
        );
        if let Some(id) = ids.get("cancelled") {
            assert!(
                store.get_job(*id).unwrap().is_none(),
                "[{who}] cancelled, not acked"
            );
        }
    }
}

#[test]
fn outbox_delivery_into_the_apps_own_tables_commits_with_the_messages_ack() {
    for target in targets() {
        let store = target.open();
        let who = target.name();
        let name = fresh("tx-outbox");
        let table = name.replace('-', "_");
        target.execute(&format!(
            "CREATE TABLE {table} (message text, attempt integer)"
        ));
        // (Its retry waits the default backoff, 5 s: an outbox's backing
        // queue is not configurable.)
        let outbox = store.outbox(&name).unwrap();
        for m in ["first", "refused_once"] {
            outbox.enqueue(&EnqueueOpts::new(), &json!(m)).unwrap();
        }
        let stop = Stop::new();
        let handled = std::thread::scope(|s| {
            let worker = s.spawn(|| {
                Worker::outbox(outbox.clone(), "tx-deliverer").run_in_tx(&stop, |message, tx| {
                    let m = message.payload.as_str().unwrap();
                    let row = format!("INSERT INTO {table} VALUES ('{m}', {})", message.attempts);
                    app_sql(tx, &row)?;
                    match (m, message.attempts) {
                        ("refused_once", 1) => Err("refused once".into()),
                        _ => Ok(()),
                    }
                })
            });
            poll_until(|| settled(&outbox.stats().unwrap_or_default()));
            stop.stop();
            worker.join().unwrap().unwrap()
        });
        assert_eq!(handled, 3, "[{who}] two messages, one of them twice");
        let rows = |m: &str, a: i64| {
            target.query_i64(&format!(
                "SELECT count(*) FROM {table} WHERE message = '{m}' AND attempt = {a}"
            ))
        };
        assert_eq!(
            (
                rows("first", 1),
                rows("refused_once", 1),
                rows("refused_once", 2)
            ),
            (1, 0, 1),
            "[{who}] the refused attempt's row rolled back with it"
        );
        assert!(
            outbox.claim("check", 10).unwrap().is_empty(),
            "[{who}] delivered"
        );
    }
}

#[test]
fn a_handler_that_outlives_the_visibility_timeout_keeps_its_claim_by_heartbeat() {
    for target in targets() {
        let store = target.open();
        let queue = store.queue(&fresh("slow")).unwrap();
        queue
            .configure(&QueueOpts::new().visibility_timeout(ms(600)))
            .unwrap();
        // Two, one after the other on one handler thread: the second job's
        // claim is kept alive too (the thread's heartbeat moves to it). It
        // comes due while the first runs, so the thief's first look finds
        // nothing pending to take instead.
        queue.enqueue(&EnqueueOpts::new(), &json!("slow")).unwrap();
        queue
            .enqueue(&EnqueueOpts::new().delay(ms(1600)), &json!("slow too"))
            .unwrap();
        let stop = Stop::new();
        let (first, second, handled) = std::thread::scope(|s| {
            let worker = s.spawn(|| {
                Worker::new(queue.clone(), "slowpoke")
                    .run(&stop, |_| {
                        std::thread::sleep(ms(2000)); // > 3 visibility timeouts
                        Ok(())
                    })
                    .unwrap()
            });
            std::thread::sleep(ms(1200));
            let first = queue.claim("thief", 1).unwrap();
            std::thread::sleep(ms(2000));
            let second = queue.claim("thief", 1).unwrap();
            stop.stop();
            (first, second, worker.join().unwrap())
        });
        assert!(
            first.is_empty() && second.is_empty(),
            "[{}] heartbeats kept the claims: {first:?} {second:?}",
            target.name()
        );
        assert_eq!(handled, 2, "[{}]", target.name());
        assert_eq!(queue.stats().unwrap()["running"], 0);
        assert_eq!(queue.stats().unwrap()["pending"], 0);
    }
}

#[test]
fn outbox_run_once_and_run_deliver_retry_and_dead_letter() {
    for target in targets() {
        let store = target.open();
        let outbox = store.outbox(&fresh("hooks")).unwrap();
        let ok = outbox
            .enqueue(&EnqueueOpts::new(), &json!({"hook": "ok"}))
            .unwrap();
        let bad = outbox
            .enqueue(&EnqueueOpts::new().max_attempts(1), &json!({"hook": "bad"}))
            .unwrap();
        let mut delivered = Vec::new();
        let mut deliver = |job: &alkstore::Job| -> Result<(), String> {
            if job.payload["hook"] == "bad" {
                return Err("HTTP 500".into());
            }
            delivered.push(job.id);
            Ok(())
        };
        assert!(outbox.run_once("d", &mut deliver).unwrap());
        assert!(outbox.run_once("d", &mut deliver).unwrap());
        assert!(!outbox.run_once("d", &mut deliver).unwrap());
        assert_eq!(delivered, vec![ok]);
        let dead = store.get_job(bad).unwrap().unwrap();
        assert_eq!(
            (dead["state"].as_str(), dead["last_error"].as_str()),
            (Some("dead"), Some("HTTP 500")),
            "[{}]",
            target.name()
        );
        // The loop delivers what arrives while it runs, then stops.
        let stop = Stop::new();
        let count = std::thread::scope(|s| {
            let runner = s.spawn(|| outbox.run("loop", &mut |_| Ok(()), &stop).unwrap());
            for i in 0..5 {
                outbox.enqueue(&EnqueueOpts::new(), &json!(i)).unwrap();
            }
            poll_until(|| {
                let stats = outbox.stats().unwrap();
                stats["pending"] == 0 && stats["running"] == 0
            });
            stop.stop();
            runner.join().unwrap()
        });
        assert_eq!(count, 5);
        assert_eq!(
            outbox.jobs().retry(ok, "d", "x", None).unwrap(),
            Retried::NotHeld
        );
    }
}

#[test]
fn an_outbox_worker_runs_concurrent_handlers_retries_and_keeps_claims_alive() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    for target in targets() {
        let store = target.open();
        let outbox = store.outbox(&fresh("hooks")).unwrap();
        for i in 0..8 {
            outbox.enqueue(&EnqueueOpts::new(), &json!(i)).unwrap();
        }
        let bad = outbox
            .enqueue(&EnqueueOpts::new().max_attempts(1), &json!("bad"))
            .unwrap();
        let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let stop = Stop::new();
        let handled = std::thread::scope(|s| {
            let runner = s.spawn(|| {
                Worker::outbox(outbox.clone(), "deliverer")
                    .concurrency(4)
                    .run(&stop, |job| {
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(ms(100));
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        if job.payload == "bad" {
                            panic!("HTTP 500"); // a panic counts as an error
                        }
                        Ok(())
                    })
                    .unwrap()
            });
            poll_until(|| {
                let stats = outbox.stats().unwrap();
                stats["pending"] == 0 && stats["running"] == 0
            });
            stop.stop();
            runner.join().unwrap()
        });
        let name = target.name();
        assert_eq!(handled, 9, "[{name}]");
        assert!(
            most.load(Ordering::SeqCst) >= 2,
            "[{name}] handlers ran side by side"
        );
        let dead = store.get_job(bad).unwrap().unwrap();
        assert_eq!(dead["state"], "dead", "[{name}]");
        assert!(
            dead["last_error"].as_str().unwrap().contains("HTTP 500"),
            "[{name}] {dead}"
        );
        // What the worker's heartbeats call works on an outbox message.
        outbox.enqueue(&EnqueueOpts::new(), &json!("held")).unwrap();
        let held = outbox.claim("w", 1).unwrap();
        assert!(outbox
            .jobs()
            .heartbeat(held[0].id, "w", Some(Duration::from_secs(120)))
            .unwrap());
        assert!(!outbox
            .jobs()
            .heartbeat(held[0].id, "someone-else", None)
            .unwrap());
    }
}

#[test]
fn lock_guards_fence_renew_and_release_on_drop() {
    for target in targets() {
        let store = target.open();
        let name = fresh("lease");
        let a = store
            .lock(&name, "a", Duration::from_secs(10))
            .unwrap()
            .expect("free");
        assert!(
            store
                .lock(&name, "b", Duration::from_secs(10))
                .unwrap()
                .is_none(),
            "[{}]",
            target.name()
        );
        assert!(a.renew(Duration::from_secs(10)).unwrap());
        let first = a.token();
        drop(a); // released
        let b = store
            .lock(&name, "b", Duration::from_secs(10))
            .unwrap()
            .expect("released on drop");
        assert!(b.token() > first);
        assert!(b.release().unwrap());
        let short = store.lock(&name, "c", ms(50)).unwrap().unwrap();
        std::thread::sleep(ms(100));
        assert!(
            !short.renew(Duration::from_secs(1)).unwrap(),
            "expired leases are not renewed"
        );
    }
}

/// Issue 15 item 10: default claim names differ between processes (replicas
/// all call their worker "mailer"), so a stalled handler's late ack cannot
/// land on another replica's re-claim of the same job.
#[test]
fn worker_names_are_unique_per_process() {
    let store =
        alkstore::SqliteStore::open(tempfile::tempdir().unwrap().path().join("n.db")).unwrap();
    let here = alkstore::Worker::new(store.queue("q").unwrap(), "mailer");
    let name = here.name().to_string();
    assert!(name.starts_with("mailer-"), "{name}");
    assert!(
        name.contains(&format!("-{}-", std::process::id())),
        "{name}"
    );
    let out = tempfile::NamedTempFile::new().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_worker_name",
            "--ignored",
            "--test-threads=1",
        ])
        .env("ALK_CHILD_OUT", out.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let other = std::fs::read_to_string(out.path()).unwrap();
    assert!(other.starts_with("mailer-"), "{other}");
    assert_ne!(other, name, "two processes claim under the same name");
}

#[test]
#[ignore = "started as a child process by worker_names_are_unique_per_process"]
fn child_worker_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = alkstore::SqliteStore::open(dir.path().join("n.db")).unwrap();
    let w = alkstore::Worker::new(store.queue("q").unwrap(), "mailer");
    std::fs::write(std::env::var("ALK_CHILD_OUT").unwrap(), w.name()).unwrap();
}

/// Writes a payload through the SQL API, bypassing this crate's JSON (which
/// cannot produce `1e400` or 200 levels of nesting; both engines accept them).
fn raw_call(target: &Target, f: &str, args: &[alkstore::sql::Arg]) -> serde_json::Value {
    match target {
        Target::Sqlite(dir) => {
            let c = rusqlite::Connection::open(dir.path().join("facade.db")).unwrap();
            // As the store's own connections: a write meeting another
            // connection's lock waits instead of failing at once.
            c.busy_timeout(Duration::from_secs(10)).unwrap();
            alkstore_sqlite::register(&c).unwrap();
            alkstore::sql::call_sqlite(&c, f, args).unwrap()
        }
        Target::Postgres(pg) => {
            let mut c = postgres::Client::connect(&pg.direct, postgres::NoTls).unwrap();
            alkstore::sql::call_postgres(&mut c, f, args).unwrap()
        }
    }
}

/// Issue 15 item 8: a payload this crate cannot read fails its job (dead,
/// with the reason) and the worker goes on; a stream consumer skips such an
/// event and goes on.
#[test]
fn unreadable_payloads_fail_their_job_and_never_stop_a_worker_or_consumer() {
    use alkstore::sql::Arg;
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    for target in targets() {
        let store = target.open();
        let q = fresh("unreadable");
        let enqueue = |payload: &str, priority: i64| {
            raw_call(
                &target,
                "alk_enqueue",
                &[
                    Arg::Text(q.clone()),
                    Arg::Json(format!("{{\"priority\": {priority}}}")),
                    Arg::Json(payload.into()),
                ],
            )
            .as_i64()
            .unwrap()
        };
        let huge = enqueue("{\"n\": 1e400}", 3);
        let nested = enqueue(&deep, 2);
        enqueue("{\"ok\": true}", 1);
        let stop = Stop::new();
        let seen = Mutex::new(Vec::new());
        let handled = std::thread::scope(|s| {
            let run = s.spawn(|| {
                Worker::new(store.queue(&q).unwrap(), "reader").run(&stop, |job| {
                    seen.lock().unwrap().push(job.payload.clone());
                    stop.stop();
                    Ok(())
                })
            });
            run.join().unwrap()
        })
        .unwrap_or_else(|e| panic!("[{}] the worker died: {e}", target.name()));
        assert_eq!(handled, 1, "[{}]", target.name());
        assert_eq!(
            *seen.lock().unwrap(),
            vec![json!({"ok": true})],
            "[{}]",
            target.name()
        );
        for id in [huge, nested] {
            let job = store.get_job(id).unwrap().unwrap();
            assert_eq!(job["state"], "dead", "[{}] {job}", target.name());
            assert!(
                job["last_error"]
                    .as_str()
                    .unwrap()
                    .contains("payload cannot be read"),
                "[{}] {job}",
                target.name()
            );
        }

        let s = fresh("unreadable-s");
        for payload in ["{\"n\": 1e400}", deep.as_str(), "{\"ok\": 2}"] {
            raw_call(
                &target,
                "alk_publish",
                &[Arg::Text(s.clone()), Arg::Json(payload.into()), Arg::Null],
            );
        }
        let mut consumer = store.stream(&s).unwrap().subscribe("c").unwrap();
        let events = consumer.next_batch(1, Duration::from_secs(5)).unwrap();
        assert_eq!(events.len(), 1, "[{}]", target.name());
        assert_eq!(events[0].payload, json!({"ok": 2}));
        assert_eq!(consumer.position(), 3);
    }
}

#[test]
fn a_worker_keeps_a_queues_rate_and_per_key_running_limit() {
    for target in targets() {
        let store = target.open();
        let name = fresh("paced");
        let queue = store.queue(&name).unwrap();
        let set = queue
            .configure(
                &QueueOpts::new()
                    .rate(Some((3, ms(1000))))
                    .key_max_running(Some(1)),
            )
            .unwrap();
        assert_eq!(
            (
                &set["rate_max"],
                &set["rate_per_s"],
                &set["key_max_running"]
            ),
            (&json!(3), &json!(1), &json!(1)),
            "[{}]",
            target.name()
        );
        for i in 0..7 {
            let opts = EnqueueOpts::new().limit_key(format!("k{}", i % 2));
            queue.enqueue(&opts, &json!({"n": i})).unwrap();
        }
        let started: Mutex<Vec<std::time::Instant>> = Mutex::new(Vec::new());
        let running: Mutex<HashMap<String, i32>> = Mutex::new(HashMap::new());
        let most_per_key = Mutex::new(0);
        let stop = Stop::new();
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                Worker::new(queue.clone(), "paced")
                    .concurrency(4)
                    .run(&stop, |job| {
                        started.lock().unwrap().push(std::time::Instant::now());
                        let key = format!("k{}", job.payload["n"].as_i64().unwrap() % 2);
                        {
                            let mut r = running.lock().unwrap();
                            let n = r.entry(key.clone()).or_default();
                            *n += 1;
                            let mut most = most_per_key.lock().unwrap();
                            *most = (*most).max(*n);
                        }
                        std::thread::sleep(ms(30));
                        *running.lock().unwrap().get_mut(&key).unwrap() -= 1;
                        Ok(())
                    })
            });
            poll_until(|| settled(&queue.stats().unwrap_or_default()));
            stop.stop();
            worker.join().unwrap().unwrap();
        });
        let mut started = started.into_inner().unwrap();
        started.sort();
        assert_eq!(started.len(), 7, "[{}] every job ran", target.name());
        // Three claims a second: the seventh starts two windows after the first.
        let span = started[6] - started[0];
        assert!(
            span >= ms(1900),
            "[{}] seven jobs at 3 a second took {span:?}",
            target.name()
        );
        assert_eq!(
            most_per_key.into_inner().unwrap(),
            1,
            "[{}] one job of a key at a time",
            target.name()
        );
    }
}

/// A worker sweeps its queue every second by default (contract v1.2 §H):
/// a job scheduled an hour ahead whose expiry passes first never comes due,
/// so no claim ever looks at it — only a sweep dead-letters it. With
/// `sweep_every(None)` nothing does.
#[test]
fn a_worker_sweeps_its_queue_so_a_job_expired_before_it_came_due_goes_dead() {
    for target in targets() {
        let store = target.open();
        for (every, expect) in [(Some(ms(200)), "dead"), (None, "pending")] {
            let queue = store.queue(&fresh("swept")).unwrap();
            let opts = EnqueueOpts::new()
                .delay(Duration::from_secs(3600))
                .expires_in(ms(100));
            let id = queue.enqueue(&opts, &json!("never due")).unwrap();
            let stop = Stop::new();
            std::thread::scope(|s| {
                let worker = s.spawn(|| {
                    Worker::new(queue.clone(), "sweeper")
                        .sweep_every(every)
                        .run(&stop, |_| Ok(()))
                });
                if every.is_some() {
                    poll_until(|| queue.get_job(id).unwrap().unwrap()["state"] == "dead");
                } else {
                    std::thread::sleep(ms(900));
                }
                stop.stop();
                worker.join().unwrap().unwrap();
            });
            let job = queue.get_job(id).unwrap().unwrap();
            assert_eq!(
                (job["state"].as_str(), every.is_some()),
                (Some(expect), every.is_some()),
                "[{}] {job}",
                target.name()
            );
        }
    }
}

/// Contract v1.3 §Q: a handler snoozes its job three times on a queue with
/// `max_attempts` 1; it runs a fourth time, as its first attempt still, and
/// is acked. A snooze's delay holds the job back meanwhile.
#[test]
fn a_handler_that_snoozes_runs_again_without_spending_an_attempt() {
    for target in targets() {
        let store = target.open();
        let queue = store.queue(&fresh("snooze")).unwrap();
        queue.configure(&QueueOpts::new().max_attempts(1)).unwrap();
        let id = queue.enqueue(&EnqueueOpts::new(), &json!({})).unwrap();
        let runs: Mutex<Vec<(i64, std::time::Instant)>> = Mutex::new(Vec::new());
        let stop = Stop::new();
        let handled = Worker::new(queue.clone(), "snoozer")
            .run_handled(&stop, |job| {
                let mut runs = runs.lock().unwrap();
                runs.push((job.attempts, std::time::Instant::now()));
                if runs.len() < 4 {
                    return Ok(Handled::Snooze(ms(100)));
                }
                stop.stop();
                Ok(Handled::Ack)
            })
            .unwrap();
        let runs = runs.into_inner().unwrap();
        assert_eq!(handled, 4, "[{}]", target.name());
        assert_eq!(
            runs.iter().map(|r| r.0).collect::<Vec<_>>(),
            [1, 1, 1, 1],
            "[{}]",
            target.name()
        );
        for pair in runs.windows(2) {
            assert!(
                pair[1].1 - pair[0].1 >= ms(100),
                "[{}] ran again before its snooze ended",
                target.name()
            );
        }
        assert!(
            store.get_job(id).unwrap().is_none(),
            "[{}] acked",
            target.name()
        );
        assert_eq!(queue.stats().unwrap()["dead"], 0, "[{}]", target.name());
    }
}

/// A handler's outcome the database refuses as bad input — here a snooze
/// of 2^40 s, past what `alk_release` takes (ALK05) — fails its job like a
/// handler's error (retried with the stamped backoff, the refusal as its
/// error) and the worker goes on. (It ended the worker's run with the
/// error, the job left claimed until its claim expired.)
#[test]
fn a_refused_snooze_fails_its_job_and_the_worker_goes_on() {
    for target in targets() {
        let store = target.open();
        let queue = store.queue(&fresh("bad-snooze")).unwrap();
        queue
            .configure(
                &QueueOpts::new()
                    .backoff(ms(10), ms(10))
                    .retain_completed(Duration::from_secs(600)),
            )
            .unwrap();
        let id = queue.enqueue(&EnqueueOpts::new(), &json!({})).unwrap();
        let stop = Stop::new();
        let result = Worker::new(queue.clone(), "snoozer").run_handled(&stop, |job| {
            if job.attempts == 1 {
                return Ok(Handled::Snooze(Duration::from_secs(1 << 40)));
            }
            stop.stop();
            Ok(Handled::Ack)
        });
        assert_eq!(
            result.ok(),
            Some(2),
            "[{}] the worker ended early",
            target.name()
        );
        let job = store.get_job(id).unwrap().unwrap();
        assert_eq!(job["state"], "completed", "[{}] {job}", target.name());
        let errors = store.job_errors(id).unwrap().unwrap();
        let first = errors[0]["error"].as_str().unwrap_or_default();
        assert!(
            first.starts_with("the handler's snooze was refused: "),
            "[{}] {errors}",
            target.name()
        );
    }
}
