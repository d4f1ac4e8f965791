//! `AsyncStore` and `AsyncWorker` on a real PostgreSQL server
//! (`ALKSTORE_PG_URL`), directly and through PgBouncer in transaction mode
//! (`ALKSTORE_PG_BOUNCER_URL`, the listener then connected directly):
//! concurrency, retries of errors and panics, wake-ups, transactional
//! completion, shutdown with a deadline. (A server restart under a running
//! worker: `async_faults.rs`, alone in its binary.)

#[macro_use]
mod async_common;
mod common;

use alkstore::{
    AsyncConn, AsyncEngine, AsyncStore, AsyncTransactionEnd, AsyncTxHandle, AsyncWorker,
    EnqueueOpts, Handled, QueueOpts,
};
use async_common::{eventually, queue, sqlite_store, stats, stores, tokio_stores};
use common::{fresh, ms};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_async_worker_runs_handlers_concurrently_and_retries_errors_and_panics() {
    on_every_store!(an_async_worker_runs_handlers_concurrently_and_retries_errors_and_panics_on);
}

async fn an_async_worker_runs_handlers_concurrently_and_retries_errors_and_panics_on<
    DB: AsyncEngine,
>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let name = queue(&store, "async-work", QueueOpts::new()).await;
    let q = store.queue(&name).unwrap();
    for n in 0..12 {
        let kind = match n {
            3 => "fail_once",
            7 => "panic_once",
            _ => "ok",
        };
        q.enqueue(&EnqueueOpts::new(), &json!({ "n": n, "kind": kind }))
            .await
            .unwrap();
    }
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    // n -> the attempt that succeeded
    let done: Arc<Mutex<BTreeMap<i64, i64>>> = Arc::default();
    let (all_done, shutdown) = tokio::sync::oneshot::channel::<()>();
    let all_done = Arc::new(Mutex::new(Some(all_done)));
    let handler = {
        let (running, most, done) = (running.clone(), most.clone(), done.clone());
        move |job: alkstore::Job| {
            let (running, most, done, all_done) = (
                running.clone(),
                most.clone(),
                done.clone(),
                all_done.clone(),
            );
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(ms(60)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                let n = job.payload["n"].as_i64().unwrap();
                match (job.payload["kind"].as_str().unwrap(), job.attempts) {
                    ("fail_once", 1) => return Err(format!("job {n} failed")),
                    ("panic_once", 1) => panic!("job {n} panicked"),
                    _ => {}
                }
                let mut done = done.lock().unwrap();
                assert!(done.insert(n, job.attempts).is_none(), "job {n} ran twice");
                if done.len() == 12 {
                    if let Some(tx) = all_done.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                }
                Ok(())
            }
        }
    };
    let worker = AsyncWorker::new(q.clone(), "async-worker").concurrency(4);
    let handled = worker.run(shutdown, handler);
    let handled = tokio::time::timeout(Duration::from_secs(60), handled)
        .await
        .unwrap_or_else(|_| panic!("[{target}] not every job finished"))
        .unwrap();
    assert_eq!(handled, 14, "[{target}] 12 jobs, 2 of them twice");
    let done = done.lock().unwrap().clone();
    assert_eq!(done.len(), 12, "[{target}]");
    assert_eq!(
        done[&3], 2,
        "[{target}] the failed job succeeded on its retry"
    );
    assert_eq!(
        done[&7], 2,
        "[{target}] the panicked job succeeded on its retry"
    );
    assert!(
        most.load(Ordering::SeqCst) > 1,
        "[{target}] handlers overlapped"
    );
    let s = stats(&store, &name).await;
    assert_eq!(
        (
            s["pending"].as_i64(),
            s["running"].as_i64(),
            s["dead"].as_i64()
        ),
        (Some(0), Some(0), Some(0)),
        "[{target}] {s}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_async_workers_wake_on_commit_of_a_job_or_an_outbox_message() {
    on_every_store!(idle_async_workers_wake_on_commit_of_a_job_or_an_outbox_message_on);
}

async fn idle_async_workers_wake_on_commit_of_a_job_or_an_outbox_message_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let name = queue(&store, "async-wake", QueueOpts::new()).await;
    let outbox = fresh("async-wake-outbox");
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let wait = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    // Polling only every minute: whatever runs within the test's time
    // was woken by its commit.
    let workers = [
        AsyncWorker::new(store.queue(&name).unwrap(), "queue-waker"),
        AsyncWorker::outbox(store.outbox(&outbox).unwrap(), "outbox-waker"),
    ]
    .map(|w| {
        let seen = seen.clone();
        let w = w
            .poll_every(Duration::from_secs(60))
            .prune_every(None)
            .tick_every(None);
        let shutdown = wait(stopped.clone());
        tokio::spawn(async move {
            w.run(shutdown, move |job| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(job.payload);
                    Ok::<(), String>(())
                }
            })
            .await
        })
    });
    // Both are idle and registered by now.
    tokio::time::sleep(ms(500)).await;
    let mut tx = store.begin().await.unwrap();
    let mut conn = AsyncConn::<DB>(&mut tx);
    conn.enqueue_tx(&name, &EnqueueOpts::new(), &json!({"job": 1}))
        .await
        .unwrap();
    conn.outbox_enqueue_tx(&outbox, &EnqueueOpts::new(), &json!({"message": 1}))
        .await
        .unwrap();
    // Not before the commit.
    tokio::time::sleep(ms(300)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "[{target}] ran before commit"
    );
    tx.commit().await.unwrap();
    let started = Instant::now();
    eventually("both handled", || seen.lock().unwrap().len() == 2).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "[{target}] woken, not polled"
    );
    stop.send(true).unwrap();
    for w in workers {
        assert_eq!(w.await.unwrap().unwrap(), 1, "[{target}]");
    }
}

/// One job per kind (`{"kind": …}`): kind → job id.
async fn enqueue_kinds<DB: AsyncEngine>(
    q: &alkstore::AsyncQueue<DB>,
    kinds: &[&'static str],
) -> BTreeMap<&'static str, i64> {
    let mut ids = BTreeMap::new();
    for &kind in kinds {
        let job = json!({ "kind": kind });
        ids.insert(kind, q.enqueue(&EnqueueOpts::new(), &job).await.unwrap());
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactional_completion_commits_the_handlers_writes_with_the_ack_or_neither() {
    for (target, store) in stores().await {
        let opts = QueueOpts::new().retain_completed(Duration::from_secs(3600));
        let name = queue(&store, "async-tx", opts).await;
        let table = format!("\"{}\"", fresh("async_tx_rows"));
        // One simple-protocol message: outside a transaction, PgBouncer may
        // give an extended-protocol statement's parts different servers.
        sqlx::raw_sql(&format!("CREATE TABLE {table} (job text, attempt bigint)"))
            .execute(store.pool())
            .await
            .unwrap();
        let q = store.queue(&name).unwrap();
        let ids = enqueue_kinds(&q, &["ok", "err_once", "cancelled", "aborted_once"]).await;
        let finished: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let (all_done, shutdown) = tokio::sync::oneshot::channel::<()>();
        let all_done = Arc::new(Mutex::new(Some(all_done)));
        let handler = {
            let (table, store, finished) = (table.clone(), store.clone(), finished.clone());
            move |job: alkstore::Job, mut tx: alkstore::PgTransaction| {
                let (table, store, finished, all_done) = (
                    table.clone(),
                    store.clone(),
                    finished.clone(),
                    all_done.clone(),
                );
                async move {
                    let kind = job.payload["kind"].as_str().unwrap().to_string();
                    // Unnamed, as any statement of the application's own
                    // must be behind a transaction-pooling PgBouncer.
                    sqlx::query(&format!("INSERT INTO {table} VALUES ($1, $2)"))
                        .persistent(false)
                        .bind(&kind)
                        .bind(job.attempts)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| e.to_string())?;
                    let outcome = match (kind.as_str(), job.attempts) {
                        ("err_once", 1) => Err("refused once".to_string()),
                        ("cancelled", _) => {
                            // Someone cancels the job while it runs: the
                            // worker can no longer ack it.
                            let r = store.call("alk_cancel", &[job.id.into()]).await.unwrap();
                            assert_eq!(r, json!(true));
                            Ok(tx)
                        }
                        ("aborted_once", 1) => {
                            // A failed statement the handler ignores: the
                            // transaction cannot commit anything now.
                            let _ = sqlx::query("SELECT 1/0")
                                .persistent(false)
                                .execute(&mut *tx)
                                .await;
                            Ok(tx)
                        }
                        _ => Ok(tx),
                    };
                    let last = matches!(
                        (kind.as_str(), job.attempts),
                        ("ok" | "cancelled", 1) | ("err_once" | "aborted_once", 2)
                    );
                    if last {
                        let mut f = finished.lock().unwrap();
                        f.insert(kind);
                        if f.len() == 4 {
                            if let Some(s) = all_done.lock().unwrap().take() {
                                let _ = s.send(());
                            }
                        }
                    }
                    outcome
                }
            }
        };
        // The worker settles the jobs in hand before it returns.
        let shutdown = async move {
            let _ = shutdown.await;
        };
        let worker = AsyncWorker::new(q.clone(), "tx-worker").concurrency(2);
        let handled = worker.run_in_tx(shutdown, handler);
        let handled = tokio::time::timeout(Duration::from_secs(60), handled)
            .await
            .unwrap_or_else(|_| panic!("[{target}] not every job finished"))
            .unwrap();
        assert_eq!(handled, 6, "[{target}] 4 jobs, 2 of them twice");
        let mut read = store.begin().await.unwrap(); // one server for both parts
        let rows: Vec<(String, i64)> = sqlx::query_as(&format!(
            "SELECT job, attempt FROM {table} ORDER BY job, attempt"
        ))
        .persistent(false)
        .fetch_all(&mut *read)
        .await
        .unwrap();
        read.rollback().await.unwrap();
        let rows: Vec<(&str, i64)> = rows.iter().map(|(j, a)| (j.as_str(), *a)).collect();
        assert_eq!(
            rows,
            [("aborted_once", 2), ("err_once", 2), ("ok", 1)],
            "[{target}] only the acked attempts' writes committed; none of the cancelled job"
        );
        for (kind, state) in [
            ("ok", Some("completed")),
            ("err_once", Some("completed")),
            ("aborted_once", Some("completed")),
            ("cancelled", None),
        ] {
            let job = store
                .call("alk_get_job", &[ids[kind].into()])
                .await
                .unwrap();
            assert_eq!(job["state"].as_str(), state, "[{target}] {kind}: {job}");
        }
    }
}

/// The same on tokio-postgres: the handler gets a `PgClientTx` (owning
/// its pooled connection) and writes through the client it dereferences to.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactional_completion_on_tokio_postgres_commits_the_writes_with_the_ack_or_neither() {
    for (target, store) in tokio_stores().await {
        let opts = QueueOpts::new().retain_completed(Duration::from_secs(3600));
        let name = queue(&store, "tokio-tx", opts).await;
        let table = format!("\"{}\"", fresh("tokio_tx_rows"));
        let ddl = format!("CREATE TABLE {table} (job text, attempt bigint)");
        store
            .pool()
            .get()
            .await
            .unwrap()
            .batch_execute(&ddl)
            .await
            .unwrap();
        let q = store.queue(&name).unwrap();
        let ids = enqueue_kinds(&q, &["ok", "err_once", "cancelled", "aborted_once"]).await;
        let settled = Arc::new(AtomicUsize::new(0));
        let handler = {
            let (table, store, settled) = (table.clone(), store.clone(), settled.clone());
            move |job: alkstore::Job, tx: alkstore::PgClientTx| {
                let (table, store, settled) = (table.clone(), store.clone(), settled.clone());
                async move {
                    let kind = job.payload["kind"].as_str().unwrap().to_string();
                    let row = format!("INSERT INTO {table} VALUES ('{kind}', {})", job.attempts);
                    tx.batch_execute(&row).await.map_err(|e| e.to_string())?;
                    let last = matches!(
                        (kind.as_str(), job.attempts),
                        ("ok" | "cancelled", 1) | ("err_once" | "aborted_once", 2)
                    );
                    if last {
                        settled.fetch_add(1, Ordering::SeqCst);
                    }
                    match (kind.as_str(), job.attempts) {
                        ("err_once", 1) => Err("refused once".to_string()),
                        ("cancelled", _) => {
                            let r = store.call("alk_cancel", &[job.id.into()]).await.unwrap();
                            assert_eq!(r, json!(true));
                            Ok(tx)
                        }
                        ("aborted_once", 1) => {
                            let _ = tx.batch_execute("SELECT 1/0").await;
                            Ok(tx)
                        }
                        _ => Ok(tx),
                    }
                }
            }
        };
        let shutdown = {
            let settled = settled.clone();
            async move { eventually("every job settled", || settled.load(Ordering::SeqCst) == 4).await }
        };
        let worker = AsyncWorker::new(q.clone(), "tokio-tx-worker").concurrency(2);
        let handled =
            tokio::time::timeout(Duration::from_secs(60), worker.run_in_tx(shutdown, handler))
                .await
                .unwrap_or_else(|_| panic!("[{target}] not every job finished"))
                .unwrap();
        assert_eq!(handled, 6, "[{target}] 4 jobs, 2 of them twice");
        let read = store.pool().get().await.unwrap();
        let rows: Vec<(String, i64)> = read
            // Unnamed (PgBouncer: common::Target::query_i64).
            .query_typed(
                &format!("SELECT job, attempt FROM {table} ORDER BY job, attempt"),
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let rows: Vec<(&str, i64)> = rows.iter().map(|(j, a)| (j.as_str(), *a)).collect();
        assert_eq!(
            rows,
            [("aborted_once", 2), ("err_once", 2), ("ok", 1)],
            "[{target}] only the acked attempts' writes committed; none of the cancelled job"
        );
        assert!(
            store.get_job(ids["cancelled"]).await.unwrap().is_none(),
            "[{target}]"
        );
        for kind in ["ok", "err_once", "aborted_once"] {
            let job = store.get_job(ids[kind]).await.unwrap().unwrap();
            assert_eq!(job["state"], "completed", "[{target}] {kind}: {job}");
        }
        // Every connection went back to the pool outside a transaction (or
        // was closed): none of them, all checked out at once, is inside one
        // (inside one, now() is the older transaction start).
        drop(read);
        let mut conns = vec![];
        for _ in 0..store.pool().status().size {
            conns.push(store.pool().get().await.unwrap());
        }
        for conn in &conns {
            // One simple-protocol statement: outside a transaction it is
            // its own, and starts with it.
            let rows = conn
                .simple_query("SELECT now() = statement_timestamp()")
                .await
                .unwrap();
            let same = rows.iter().find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            });
            assert_eq!(
                same.as_deref(),
                Some("t"),
                "[{target}] a pooled connection inside a transaction"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_lets_handlers_finish_then_cancels_and_gives_back_the_rest() {
    on_every_store!(shutdown_lets_handlers_finish_then_cancels_and_gives_back_the_rest_on);
}

async fn shutdown_lets_handlers_finish_then_cancels_and_gives_back_the_rest_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    // Claims hold for 5 minutes: the stuck job is claimable right after
    // the shutdown only because the worker gave it back.
    let opts = QueueOpts::new()
        .visibility_timeout(Duration::from_secs(300))
        .retain_completed(Duration::from_secs(3600));
    let name = queue(&store, "async-stop", opts).await;
    let q = store.queue(&name).unwrap();
    let finishing = q
        .enqueue(&EnqueueOpts::new(), &json!({"kind": "finishing"}))
        .await
        .unwrap();
    let stuck = q
        .enqueue(&EnqueueOpts::new(), &json!({"kind": "stuck"}))
        .await
        .unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let started = started.clone();
        let w = AsyncWorker::new(q.clone(), "stopper")
            .concurrency(2)
            .shutdown_timeout(ms(1500));
        tokio::spawn(async move {
            w.run(
                async move {
                    let _ = stopped.await;
                },
                move |job| {
                    let started = started.clone();
                    async move {
                        started.fetch_add(1, Ordering::SeqCst);
                        match job.payload["kind"].as_str() {
                            // Finishes within the deadline.
                            Some("finishing") => tokio::time::sleep(ms(500)).await,
                            // Never finishes by itself.
                            _ => std::future::pending::<()>().await,
                        }
                        Ok::<(), String>(())
                    }
                },
            )
            .await
        })
    };
    eventually("both handlers started", || {
        started.load(Ordering::SeqCst) == 2
    })
    .await;
    stop.send(()).unwrap();
    let handled = worker.await.unwrap().unwrap();
    assert_eq!(handled, 2, "[{target}]");
    let job = store
        .call("alk_get_job", &[finishing.into()])
        .await
        .unwrap();
    assert_eq!(
        job["state"], "completed",
        "[{target}] finished within the deadline: {job}"
    );
    let again = q.claim("after-shutdown", 1).await.unwrap();
    // Given back by alk_release: claimable at once, and its cancelled run
    // did not count as an attempt.
    assert_eq!(
        again.iter().map(|j| (j.id, j.attempts)).collect::<Vec<_>>(),
        [(stuck, 1)],
        "[{target}] the cancelled job was given back at once, its attempt not spent"
    );
    q.ack(stuck, "after-shutdown").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotes_and_backslashes_round_trip_whatever_standard_conforming_strings_says() {
    use sqlx::Connection as _;
    if stores().await.is_empty() {
        return;
    }
    let url = std::env::var("ALKSTORE_PG_URL")
        .unwrap()
        .replace("@/", "@localhost/");
    let payload = json!({"text": "it's a \\ back'slash\\' \"quoted\" $1 $$ E'x' – ü", "n": 1});
    for conforming in ["on", "off"] {
        // The calls write their parameters into the statement as literals:
        // they must read back exactly, under either setting.
        let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(&format!("SET standard_conforming_strings = {conforming}"))
            .execute(&mut conn)
            .await
            .unwrap();
        let name = format!("{} it's \\ odd", fresh("quoted"));
        let id = conn
            .enqueue_tx(&name, &EnqueueOpts::new(), &payload)
            .await
            .unwrap();
        let jobs = conn.claim_tx(&name, "it's \\ me", 10).await.unwrap();
        assert_eq!(jobs.len(), 1, "standard_conforming_strings={conforming}");
        assert_eq!(
            (jobs[0].id, &jobs[0].queue, &jobs[0].payload),
            (id, &name, &payload)
        );
        assert!(conn.ack_tx(id, "it's \\ me").await.unwrap());
    }
}

/// The same transactional completion on SQLite (its own SQL; a failed
/// statement does not abort a SQLite transaction, so that case is
/// PostgreSQL's alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactional_completion_on_sqlite_commits_the_writes_with_the_ack_or_neither() {
    let (store, _dir) = sqlite_store().await;
    let opts = QueueOpts::new().retain_completed(Duration::from_secs(3600));
    let name = queue(&store, "async-tx", opts).await;
    sqlx::query("CREATE TABLE rows (job TEXT, attempt INTEGER)")
        .execute(store.pool())
        .await
        .unwrap();
    let q = store.queue(&name).unwrap();
    let mut ids = BTreeMap::new();
    for kind in ["ok", "err_once", "cancelled"] {
        let id = q
            .enqueue(&EnqueueOpts::new(), &json!({ "kind": kind }))
            .await
            .unwrap();
        ids.insert(kind, id);
    }
    let finished: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let (all_done, shutdown) = tokio::sync::oneshot::channel::<()>();
    let all_done = Arc::new(Mutex::new(Some(all_done)));
    let handler = {
        let (store, finished) = (store.clone(), finished.clone());
        move |job: alkstore::Job, mut tx: alkstore::AsyncTransaction<sqlx::Sqlite>| {
            let (store, finished, all_done) = (store.clone(), finished.clone(), all_done.clone());
            async move {
                let kind = job.payload["kind"].as_str().unwrap().to_string();
                if kind == "cancelled" {
                    // Cancelled from another connection while the handler
                    // runs (before its first write: SQLite has one writer,
                    // and the handler's transaction holds it from then on).
                    let r = store.call("alk_cancel", &[job.id.into()]).await.unwrap();
                    assert_eq!(r, json!(true));
                }
                sqlx::query("INSERT INTO rows VALUES (?, ?)")
                    .bind(&kind)
                    .bind(job.attempts)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.to_string())?;
                let outcome = match (kind.as_str(), job.attempts) {
                    ("err_once", 1) => Err("refused once".to_string()),
                    _ => Ok(tx),
                };
                if matches!(
                    (kind.as_str(), job.attempts),
                    ("ok" | "cancelled", 1) | ("err_once", 2)
                ) {
                    let mut f = finished.lock().unwrap();
                    f.insert(kind);
                    if f.len() == 3 {
                        if let Some(s) = all_done.lock().unwrap().take() {
                            let _ = s.send(());
                        }
                    }
                }
                outcome
            }
        }
    };
    let worker = AsyncWorker::new(q.clone(), "tx-worker").concurrency(2);
    let handled = worker.run_in_tx(
        async move {
            let _ = shutdown.await;
        },
        handler,
    );
    let handled = tokio::time::timeout(Duration::from_secs(60), handled)
        .await
        .expect("not every job finished")
        .unwrap();
    assert_eq!(handled, 4, "3 jobs, 1 of them twice");
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT job, attempt FROM rows ORDER BY job, attempt")
            .fetch_all(store.pool())
            .await
            .unwrap();
    let rows: Vec<(&str, i64)> = rows.iter().map(|(j, a)| (j.as_str(), *a)).collect();
    assert_eq!(
        rows,
        [("err_once", 2), ("ok", 1)],
        "only the acked attempts' writes"
    );
    for (kind, state) in [
        ("ok", Some("completed")),
        ("err_once", Some("completed")),
        ("cancelled", None),
    ] {
        let job = store.get_job(ids[kind]).await.unwrap();
        assert_eq!(
            job.as_ref().and_then(|j| j["state"].as_str()),
            state,
            "{kind}: {job:?}"
        );
    }
}

/// A handler that outlives the visibility timeout keeps its claim by
/// heartbeats, and so does the next job of the same slot (the slot's
/// heartbeat moves to it), on SQLite and PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_jobs_in_a_row_keep_their_claims_by_heartbeat() {
    let (lite, _dir) = sqlite_store().await;
    run_slow_jobs_in_a_row("sqlite", &lite).await;
    for (label, store) in stores().await {
        run_slow_jobs_in_a_row(label, &store).await;
    }
}

async fn run_slow_jobs_in_a_row<DB: AsyncEngine>(label: &str, store: &AsyncStore<DB>) {
    let opts = QueueOpts::new().visibility_timeout(ms(600));
    let name = queue(store, "async-slow", opts).await;
    let q = store.queue(&name).unwrap();
    // The second comes due while the first runs, so the thief's first look
    // finds nothing pending to take instead.
    q.enqueue(&EnqueueOpts::new(), &json!(1)).await.unwrap();
    q.enqueue(&EnqueueOpts::new().delay(ms(1600)), &json!(2))
        .await
        .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let worker = AsyncWorker::new(q.clone(), "slowpoke").concurrency(1);
    let run = tokio::spawn(async move {
        worker
            .run(
                async move {
                    let _ = stop_rx.await;
                },
                |_job| async {
                    tokio::time::sleep(ms(2000)).await; // > 3 visibility timeouts
                    Ok::<(), String>(())
                },
            )
            .await
    });
    tokio::time::sleep(ms(1200)).await;
    let first = q.claim("thief", 1).await.unwrap();
    tokio::time::sleep(ms(2000)).await;
    let second = q.claim("thief", 1).await.unwrap();
    let _ = stop_tx.send(());
    let handled = run.await.unwrap().unwrap();
    assert!(
        first.is_empty() && second.is_empty(),
        "[{label}] heartbeats kept the claims: {first:?} {second:?}"
    );
    assert_eq!(handled, 2, "[{label}]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_handler_that_snoozes_runs_again_without_spending_an_attempt() {
    on_every_store!(a_handler_that_snoozes_runs_again_without_spending_an_attempt_on);
}

/// Contract v1.3 §Q: a handler snoozes its job three times on a queue with
/// `max_attempts` 1; it runs a fourth time, as its first attempt still, and
/// is acked.
async fn a_handler_that_snoozes_runs_again_without_spending_an_attempt_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let name = queue(&store, "async-snooze", QueueOpts::new().max_attempts(1)).await;
    let q = store.queue(&name).unwrap();
    let id = q.enqueue(&EnqueueOpts::new(), &json!({})).await.unwrap();
    let (handled, attempts) = until_acked(target, &q, |_job, before| {
        if before < 3 {
            Handled::Snooze(ms(20))
        } else {
            Handled::Ack
        }
    })
    .await;
    let handled = handled.unwrap();
    assert_eq!(handled, 4, "[{target}]");
    assert_eq!(attempts, [1, 1, 1, 1], "[{target}]");
    let job = store.call("alk_get_job", &[id.into()]).await.unwrap();
    assert_eq!(job, Value::Null, "[{target}] acked: {job}");
    assert_eq!(stats(&store, &name).await["dead"], 0, "[{target}]");
}

/// A snooze the database refuses (2^40 s, past what `alk_release` takes)
/// fails its job like a handler's error and the worker goes on, as the
/// blocking worker's (workers.rs). (It ended the run with the error.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_snooze_fails_its_job_and_the_async_worker_goes_on() {
    on_every_store!(a_refused_snooze_fails_its_job_and_the_async_worker_goes_on_on);
}

async fn a_refused_snooze_fails_its_job_and_the_async_worker_goes_on_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let opts = QueueOpts::new().retain_completed(Duration::from_secs(600));
    let name = queue(&store, "async-bad-snooze", opts).await;
    let q = store.queue(&name).unwrap();
    let id = q.enqueue(&EnqueueOpts::new(), &json!({})).await.unwrap();
    let (handled, _) = until_acked(target, &q, |job, _before| {
        if job.attempts == 1 {
            Handled::Snooze(Duration::from_secs(1 << 40))
        } else {
            Handled::Ack
        }
    })
    .await;
    assert_eq!(handled.ok(), Some(2), "[{target}] the worker ended early");
    let errors = store
        .run(alkstore::call::job_errors(id))
        .await
        .unwrap()
        .unwrap();
    let first = errors[0]["error"].as_str().unwrap_or_default();
    assert!(
        first.starts_with("the handler's snooze was refused: "),
        "[{target}] {errors}"
    );
}

/// Runs a worker on `q` (polling every 20 ms) until `decide` acks a job,
/// 60 s at most: `decide` sees each job and how many runs came before it,
/// and says how to settle it. The run's result, and each run's attempt.
async fn until_acked<DB: AsyncEngine>(
    target: &str,
    q: &alkstore::AsyncQueue<DB>,
    decide: impl Fn(&alkstore::Job, usize) -> Handled + Send + Sync + 'static,
) -> (alkstore::Result<u64>, Vec<i64>) {
    let attempts: Arc<Mutex<Vec<i64>>> = Arc::default();
    let (done, shutdown) = tokio::sync::oneshot::channel::<()>();
    let (done, decide) = (Arc::new(Mutex::new(Some(done))), Arc::new(decide));
    let handler = {
        let attempts = attempts.clone();
        move |job: alkstore::Job| {
            let (attempts, done, decide) = (attempts.clone(), done.clone(), decide.clone());
            async move {
                let handled = {
                    let mut seen = attempts.lock().unwrap();
                    let handled = decide(&job, seen.len());
                    seen.push(job.attempts);
                    handled
                };
                if matches!(handled, Handled::Ack) {
                    if let Some(tx) = done.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                }
                Ok::<_, String>(handled)
            }
        }
    };
    let worker = AsyncWorker::new(q.clone(), "snoozer").poll_every(ms(20));
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        worker.run_handled(shutdown, handler),
    )
    .await
    .unwrap_or_else(|_| panic!("[{target}] no job was acked within 60 s"));
    let seen = attempts.lock().unwrap().clone();
    (result, seen)
}

/// A fresh queue whose claims hold for 5 minutes, with six jobs: a job is
/// claimable again within the test only if a worker gave it back.
async fn six_jobs_claimed_long<DB: AsyncEngine>(
    store: &AsyncStore<DB>,
    prefix: &str,
) -> (String, alkstore::AsyncQueue<DB>) {
    let opts = QueueOpts::new().visibility_timeout(Duration::from_secs(300));
    let name = queue(store, prefix, opts).await;
    let q = store.queue(&name).unwrap();
    for n in 0..6 {
        q.enqueue(&EnqueueOpts::new(), &json!(n)).await.unwrap();
    }
    (name, q)
}

/// Claims until `n` jobs came back, within 10 s.
async fn given_back<DB: AsyncEngine>(
    target: &str,
    q: &alkstore::AsyncQueue<DB>,
    n: usize,
) -> Vec<alkstore::Job> {
    let since = Instant::now();
    let mut again = Vec::new();
    while again.len() < n {
        again.extend(q.claim("after-stop", 10).await.unwrap());
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "[{target}] given back after 10 s: {again:?}"
        );
        tokio::time::sleep(ms(20)).await;
    }
    again
}

/// The async worker batches as the blocking one does (contract v1.3 §P):
/// it claims for its handlers and a local queue at once (all six jobs
/// claimed while one handler runs), and when it stops it gives the jobs
/// it prefetched and did not start back at once, their attempts unspent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_worker_prefetches_and_gives_back_what_it_did_not_start() {
    on_every_store!(an_async_worker_prefetches_and_gives_back_what_it_did_not_start_on);
}

async fn an_async_worker_prefetches_and_gives_back_what_it_did_not_start_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let (name, q) = six_jobs_claimed_long(&store, "async-prefetch").await;
    let started = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let started = started.clone();
        let w = AsyncWorker::new(q.clone(), "prefetcher").prefetch(5);
        tokio::spawn(async move {
            w.run(
                async move {
                    let _ = stopped.await;
                },
                move |_job| {
                    let started = started.clone();
                    async move {
                        started.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(ms(1000)).await;
                        Ok::<(), String>(())
                    }
                },
            )
            .await
        })
    };
    eventually("the first handler started", || {
        started.load(Ordering::SeqCst) == 1
    })
    .await;
    let held = stats(&store, &name).await;
    assert_eq!(
        held["running"], 6,
        "[{target}] one running, five prefetched: {held}"
    );
    stop.send(()).unwrap();
    let again = given_back(target, &q, 5).await;
    assert!(
        again.iter().all(|j| j.attempts == 1),
        "[{target}] {again:?}"
    );
    assert_eq!(worker.await.unwrap().unwrap(), 1, "[{target}]");
    assert_eq!(started.load(Ordering::SeqCst), 1, "[{target}]");
}

/// A run whose future is dropped (a `tokio::select!` branch that lost, a
/// timeout around it) stops as a shutdown does for the jobs it prefetched:
/// they go back at once, their attempts unspent (contract v1.3 §P). The
/// job a handler had started keeps its claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_async_run_gives_back_what_it_prefetched() {
    on_every_store!(a_dropped_async_run_gives_back_what_it_prefetched_on);
}

async fn a_dropped_async_run_gives_back_what_it_prefetched_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let (name, q) = six_jobs_claimed_long(&store, "async-dropped").await;
    let started = Arc::new(AtomicUsize::new(0));
    let worker = AsyncWorker::new(q.clone(), "dropped").prefetch(5);
    let run = {
        let started = started.clone();
        worker.run(std::future::pending::<()>(), move |_job| {
            let started = started.clone();
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<()>().await;
                Ok::<(), String>(())
            }
        })
    };
    let watched = async {
        eventually("the first handler started", || {
            started.load(Ordering::SeqCst) == 1
        })
        .await;
        let held = stats(&store, &name).await;
        assert_eq!(
            held["running"], 6,
            "[{target}] one running, five prefetched: {held}"
        );
    };
    tokio::select! {
        ended = run => panic!("[{target}] the run ended: {ended:?}"),
        () = watched => {} // and the run's future is dropped here
    }
    let again = given_back(target, &q, 5).await;
    assert_eq!(again.len(), 5, "[{target}] {again:?}");
    assert!(
        again.iter().all(|j| j.attempts == 1),
        "[{target}] {again:?}"
    );
    let after = stats(&store, &name).await;
    assert_eq!(
        after["running"], 6,
        "[{target}] the started one is still claimed: {after}"
    );
    assert_eq!(started.load(Ordering::SeqCst), 1, "[{target}]");
}

/// `prefetch_by_pace` follows the handlers' pace, as the blocking
/// worker's: fast jobs are claimed far beyond the concurrency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_workers_prefetch_by_pace_follows_the_handlers_pace() {
    on_every_store!(prefetch_by_pace_on);
}

/// By default the local queue holds as many jobs as the worker has
/// handlers (contract v1.3 §P): a worker of concurrency 1 holds at most 2
/// claims, however fast its jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_workers_default_prefetch_is_its_concurrency() {
    on_every_store!(default_prefetch_on);
}

async fn prefetch_by_pace_on<DB: AsyncEngine>(target: &str, store: AsyncStore<DB>) {
    let (most, rate) = most_held(&store, true).await;
    // Concurrency 1: a prefetch that ignored the pace holds 1 or 2. Ten
    // times that is a pace of 100 jobs/s, which a loaded 2-core machine
    // still keeps; the figure itself follows the machine, so it is printed.
    assert!(
        most >= 10,
        "[{target}] at most {most} claimed at once, at {rate:.0} jobs/s"
    );
}

async fn default_prefetch_on<DB: AsyncEngine>(target: &str, store: AsyncStore<DB>) {
    let (most, rate) = most_held(&store, false).await;
    // One running and one waiting in the local queue: it does prefetch,
    // and no further.
    assert_eq!(
        most, 2,
        "[{target}] at most {most} claimed at once, at {rate:.0} jobs/s"
    );
}

/// 3,000 no-op jobs through a worker of concurrency 1: the most claims it
/// held at once (sampled every 49 jobs, a number prime to short claim
/// cycles: with a local queue of one, every second job is taken from it
/// without a claim, and a sample every 50 saw only those) and the jobs per
/// second.
async fn most_held<DB: AsyncEngine>(store: &AsyncStore<DB>, by_pace: bool) -> (usize, f64) {
    let name = queue(store, "async-pace", QueueOpts::new()).await;
    let q = store.queue(&name).unwrap();
    let payloads: Vec<_> = (0..3000).map(|i| json!(i)).collect();
    for chunk in payloads.chunks(1000) {
        let args = [
            name.as_str().into(),
            alkstore::sql::Arg::Null,
            alkstore::sql::Arg::json(&json!(chunk)),
        ];
        store.call("alk_enqueue_batch", &args).await.unwrap();
    }
    let (done, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (finished, shutdown) = tokio::sync::oneshot::channel::<()>();
    let finished = Arc::new(Mutex::new(Some(finished)));
    let (s, n, seen) = (store.clone(), name.clone(), most.clone());
    let began = std::time::Instant::now();
    // Each job acked as its handler returns: the claims counted running
    // are those held, waiting or running.
    let worker = AsyncWorker::new(q.clone(), "pace");
    let worker = if by_pace {
        worker.prefetch_by_pace()
    } else {
        worker
    };
    worker
        .flush_window(alkstore::FlushWindow {
            wait: Duration::ZERO,
            max_jobs: 1,
        })
        .run(
            async move {
                let _ = shutdown.await;
            },
            move |_job| {
                let (done, most, finished, s, n) = (
                    done.clone(),
                    seen.clone(),
                    finished.clone(),
                    s.clone(),
                    n.clone(),
                );
                async move {
                    let k = done.fetch_add(1, Ordering::SeqCst) + 1;
                    if k % 49 == 0 {
                        let held = stats(&s, &n).await["running"].as_u64().unwrap() as usize;
                        most.fetch_max(held, Ordering::SeqCst);
                    }
                    if k == 3000 {
                        if let Some(tx) = finished.lock().unwrap().take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok::<(), String>(())
                }
            },
        )
        .await
        .unwrap();
    let most = most.load(Ordering::SeqCst);
    (most, 3000.0 / began.elapsed().as_secs_f64())
}
