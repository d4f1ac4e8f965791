//! One cell of `scripts/bench-workers.sh`: drains a queue the script filled
//! with no-op jobs, through alkstore's own worker as an application runs
//! it (its defaults, a local queue of its concurrency; with the `-pace`
//! kinds sized by the handlers' pace instead, `prefetch_by_pace`; or
//! `ALK_DRAIN_PREFETCH=n`), and prints the jobs/s from the worker's start
//! (its first claim) to the last handler's return (as the other systems'
//! drains: its ack, batched, commits within the flush window after; the
//! worker's shutdown is not timed).
//!
//! `ALK_DRAIN_URL=postgres://… ALK_DRAIN_QUEUE=q ALK_DRAIN_JOBS=20000
//! ALK_DRAIN_CONCURRENCY=8
//! ALK_DRAIN_KIND=blocking|blocking-pace|async|async-pace|floor cargo bench
//! -p alkstore --features sqlx-postgres --bench drain`. Not run by the tests.
//!
//! SQLite (its third table): kinds `sqlite` and `sqlite-pace` (the blocking
//! Worker, as `blocking` and `blocking-pace`), `sqlite-floor` (as `floor`)
//! and `sqlite-hand` (the loop a
//! user would write by hand on a plain table), each on a fresh file in the
//! directory ALK_DRAIN_URL names, filled first (not timed).
//!
//! The latency mode of `scripts/bench-workers.sh` (`ALK_BENCH_LATENCY`):
//! kind `latency` (or `latency-async`) runs the worker with its defaults
//! until ALK_DRAIN_JOBS jobs started, each one's pickup latency the time
//! from the `t` in its payload (epoch microseconds, written by the
//! enqueuer just before its enqueue) to its handler's start, and prints
//! the p50 and p99 in milliseconds. Kind `enqueue-at` is that enqueuer, for
//! every system: ALK_DRAIN_SQL (one statement whose `$1` is the `t`, a
//! bigint) run ALK_DRAIN_JOBS times, ALK_DRAIN_RATE a second, on a
//! schedule (each at start + k / rate), each in its own transaction.

use alkstore::{AsyncStore, AsyncWorker, Stop, Store, Worker};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn var(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"))
}

fn blocking(url: &str, queue: &str, n: u64, c: usize, pace: bool) -> f64 {
    blocking_on(alkstore::open(url).unwrap(), queue, n, c, pace)
}

fn blocking_on(store: Store, queue: &str, n: u64, c: usize, pace: bool) -> f64 {
    let (stop, done, end) = (Stop::new(), AtomicU64::new(0), OnceLock::new());
    let start = Instant::now();
    let mut worker = Worker::new(store.queue(queue).unwrap(), "drain").concurrency(c);
    if pace {
        worker = worker.prefetch_by_pace();
    }
    if let Ok(p) = std::env::var("ALK_DRAIN_PREFETCH") {
        worker = worker.prefetch(p.parse().unwrap());
    }
    worker
        .run(&stop, |_job| {
            if done.fetch_add(1, Ordering::SeqCst) + 1 == n {
                let _ = end.set(Instant::now());
                stop.stop();
            }
            Ok(())
        })
        .unwrap();
    n as f64 / (*end.get().expect("every job ran") - start).as_secs_f64()
}

/// The SQL floor the workers are measured against: one thread claiming 32
/// and acking them with one `alk_ack_batch`.
fn floor(url: &str, queue: &str, n: u64) -> f64 {
    let store: Store = alkstore::open(url).unwrap();
    let start = Instant::now();
    drain_floor(&store, queue, n);
    n as f64 / start.elapsed().as_secs_f64()
}

/// Claims 32 and acks them together until n jobs are done; 0 left.
fn drain_floor(store: &Store, queue: &str, n: u64) -> u64 {
    let queue = store.queue(queue).unwrap();
    let mut left = n;
    while left > 0 {
        let ids: Vec<i64> = queue
            .claim("floor", 32)
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect();
        assert!(!ids.is_empty(), "the queue ran dry");
        queue.ack_batch(&ids, "floor").unwrap();
        left -= ids.len() as u64;
    }
    left
}

fn asynchronous(url: &str, queue: &str, n: u64, c: usize, pace: bool) -> f64 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = AsyncStore::connect(url).await.unwrap();
        let done = Arc::new(AtomicU64::new(0));
        let finished = Arc::new(tokio::sync::Notify::new());
        let end = Arc::new(OnceLock::new());
        let start = Instant::now();
        let (d, f, e) = (done.clone(), finished.clone(), end.clone());
        let mut worker = AsyncWorker::new(store.queue(queue).unwrap(), "drain").concurrency(c);
        if pace {
            worker = worker.prefetch_by_pace();
        }
        worker
            .run(finished.notified(), move |_job| {
                let (d, f, e) = (d.clone(), f.clone(), e.clone());
                async move {
                    if d.fetch_add(1, Ordering::SeqCst) + 1 == n {
                        let _ = e.set(Instant::now());
                        f.notify_one();
                    }
                    Ok::<(), std::io::Error>(())
                }
            })
            .await
            .unwrap();
        n as f64 / (*end.get().expect("every job ran") - start).as_secs_f64()
    })
}

/// A fresh SQLite file in `dir`.
fn sqlite_file(dir: &str, what: &str) -> std::path::PathBuf {
    std::path::Path::new(dir).join(format!("{what}-{}.db", now_us()))
}

/// No-op payloads as the other drains' ({"n": i}).
fn payloads(from: u64, count: u64) -> Vec<serde_json::Value> {
    (from..from + count)
        .map(|i| serde_json::json!({ "n": i }))
        .collect()
}

/// A store on a fresh SQLite file in `dir` whose queue "work" holds n
/// no-op jobs (enqueued a batch of 1,000 a call).
fn sqlite_filled(dir: &str, what: &str, n: u64) -> Store {
    let store: Store = alkstore::SqliteStore::open(sqlite_file(dir, what))
        .unwrap()
        .into();
    let queue = store.queue("work").unwrap();
    for from in (0..n).step_by(1000) {
        let jobs = payloads(from, 1000.min(n - from));
        queue
            .enqueue_batch(&alkstore::EnqueueOpts::new(), &jobs)
            .unwrap();
    }
    store
}

/// SQLite: alkstore's blocking Worker on a fresh file in `dir`, after n
/// jobs were enqueued (not timed).
fn sqlite_worker(dir: &str, n: u64, c: usize, pace: bool) -> f64 {
    blocking_on(sqlite_filled(dir, "alk", n), "work", n, c, pace)
}

/// SQLite: the SQL alone, as `floor` on PostgreSQL: one thread claiming 32
/// and acking them with one `alk_ack_batch`, on a fresh file after n jobs
/// were enqueued (not timed).
fn sqlite_floor(dir: &str, n: u64) -> f64 {
    let store = sqlite_filled(dir, "floor", n);
    let start = Instant::now();
    let left = drain_floor(&store, "work", n);
    assert_eq!(left, 0);
    n as f64 / start.elapsed().as_secs_f64()
}

/// SQLite: the loop a user would write by hand instead, on the plain job
/// table of sqlite_ext/benches/sqlite.rs (`ALK_BENCH_RAW=plain`: the columns
/// a queue needs, one claim index) in a fresh file, with the pragmas
/// alkstore's store uses (WAL, synchronous NORMAL, a busy timeout): c
/// threads on a connection each, each claiming up to 32 pending jobs in one
/// statement (its own transaction), reading each payload as JSON, and
/// deleting them (the ack) in one transaction. n jobs inserted first, not
/// timed.
fn sqlite_hand(dir: &str, n: u64, c: usize) -> f64 {
    let path = sqlite_file(dir, "hand");
    let open = || {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn
    };
    let mut conn = open();
    conn.execute_batch(
        "CREATE TABLE raw_jobs (
           id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL, state TEXT NOT NULL,
           run_at INTEGER NOT NULL, priority INTEGER NOT NULL, attempts INTEGER NOT NULL,
           claimed_by TEXT, claim_expires_at INTEGER);
         CREATE INDEX raw_jobs_claim ON raw_jobs (queue, state, priority DESC, run_at, id);",
    )
    .unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO raw_jobs (queue, state, payload, priority, attempts, run_at)                  VALUES ('work', 'pending', ?1, 0, 0, ?2)",
            )
            .unwrap();
        for p in payloads(0, n) {
            insert
                .execute(rusqlite::params![p.to_string(), now_us() / 1000])
                .unwrap();
        }
    }
    tx.commit().unwrap();
    let done = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for w in 0..c {
            let (done, mut conn) = (&done, open());
            s.spawn(move || {
                let me = format!("hand-{w}");
                while done.load(Ordering::SeqCst) < n {
                    let now = now_us() / 1000;
                    let claimed: Vec<(i64, String)> = {
                        let mut claim = conn
                            .prepare_cached(
                                "UPDATE raw_jobs SET state = 'running', attempts = attempts + 1,                                  claimed_by = ?2, claim_expires_at = ?3 + 60000                                  WHERE id IN (SELECT id FROM raw_jobs WHERE queue = ?1 AND state = 'pending'                                  AND run_at <= ?3 ORDER BY priority DESC, run_at, id LIMIT 32)                                  RETURNING id, payload",
                            )
                            .unwrap();
                        let rows = claim
                            .query_map(rusqlite::params!["work", me, now], |r| {
                                Ok((r.get(0)?, r.get(1)?))
                            })
                            .unwrap();
                        rows.map(|r| r.unwrap()).collect()
                    };
                    if claimed.is_empty() {
                        break; // the rest is claimed by the others: nothing new comes
                    }
                    for (_, payload) in &claimed {
                        let _: serde_json::Value = serde_json::from_str(payload).unwrap();
                    }
                    let tx = conn.transaction().unwrap();
                    {
                        let mut ack = tx
                            .prepare_cached("DELETE FROM raw_jobs WHERE id = ?1 AND claimed_by = ?2")
                            .unwrap();
                        for (id, _) in &claimed {
                            ack.execute(rusqlite::params![id, me]).unwrap();
                        }
                    }
                    tx.commit().unwrap();
                    done.fetch_add(claimed.len() as u64, Ordering::SeqCst);
                }
            });
        }
    });
    n as f64 / start.elapsed().as_secs_f64()
}

/// Epoch microseconds, as every system's latency probe reads them.
fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// The p50 and p99 of latencies in microseconds, in milliseconds.
fn percentiles(mut us: Vec<i64>) -> String {
    us.sort_unstable();
    let at =
        |p: f64| us[((us.len() as f64 * p).ceil() as usize).clamp(1, us.len()) - 1] as f64 / 1000.0;
    format!("{:.2} {:.2}", at(0.50), at(0.99))
}

/// The pickup latency of the job (its payload's `t` to now).
fn picked(job: &alkstore::Job) -> i64 {
    now_us() - job.payload["t"].as_i64().expect("a payload with t")
}

fn latency(url: &str, queue: &str, n: u64, c: usize) -> String {
    let store: Store = alkstore::open(url).unwrap();
    let (stop, seen) = (Stop::new(), Mutex::new(Vec::new()));
    Worker::new(store.queue(queue).unwrap(), "latency")
        .concurrency(c)
        .run(&stop, |job| {
            let us = picked(job);
            let mut seen = seen.lock().unwrap();
            seen.push(us);
            if seen.len() as u64 == n {
                stop.stop();
            }
            Ok(())
        })
        .unwrap();
    percentiles(seen.into_inner().unwrap())
}

fn latency_async(url: &str, queue: &str, n: u64, c: usize) -> String {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = AsyncStore::connect(url).await.unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let finished = Arc::new(tokio::sync::Notify::new());
        let (s, f) = (seen.clone(), finished.clone());
        AsyncWorker::new(store.queue(queue).unwrap(), "latency")
            .concurrency(c)
            .run(finished.notified(), move |job| {
                let us = picked(&job);
                let mut seen = s.lock().unwrap();
                seen.push(us);
                if seen.len() as u64 == n {
                    f.notify_one();
                }
                async { Ok::<(), std::io::Error>(()) }
            })
            .await
            .unwrap();
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        percentiles(seen)
    })
}

/// Runs `sql` n times, `rate` a second, on a schedule; prints how far
/// behind it the last one was sent (ms), to show the rate held.
fn enqueue_at(url: &str, sql: &str, n: u64, rate: f64) -> String {
    let config: postgres::Config = url.parse().unwrap();
    let mut client = config.connect(postgres::NoTls).unwrap();
    let st = client
        .prepare_typed(sql, &[postgres::types::Type::INT8])
        .unwrap();
    let start = Instant::now();
    let mut behind = Duration::ZERO;
    for k in 0..n {
        let at = start + Duration::from_secs_f64(k as f64 / rate);
        match at.checked_duration_since(Instant::now()) {
            Some(wait) => std::thread::sleep(wait),
            None => behind = behind.max(at.elapsed()),
        }
        client.execute(&st, &[&now_us()]).unwrap();
    }
    format!("{:.1}", behind.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` must not run it.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let url = var("ALK_DRAIN_URL");
    let n: u64 = var("ALK_DRAIN_JOBS").parse().unwrap();
    if var("ALK_DRAIN_KIND") == "enqueue-at" {
        let rate: f64 = var("ALK_DRAIN_RATE").parse().unwrap();
        println!("{}", enqueue_at(&url, &var("ALK_DRAIN_SQL"), n, rate));
        return;
    }
    let c: usize = var("ALK_DRAIN_CONCURRENCY").parse().unwrap();
    // SQLite: ALK_DRAIN_URL is a directory for the files.
    match var("ALK_DRAIN_KIND").as_str() {
        "sqlite" => return println!("{:.0}", sqlite_worker(&url, n, c, false)),
        "sqlite-pace" => return println!("{:.0}", sqlite_worker(&url, n, c, true)),
        "sqlite-hand" => return println!("{:.0}", sqlite_hand(&url, n, c)),
        "sqlite-floor" => return println!("{:.0}", sqlite_floor(&url, n)),
        _ => {}
    }
    let queue = var("ALK_DRAIN_QUEUE");
    match var("ALK_DRAIN_KIND").as_str() {
        "latency" => return println!("{}", latency(&url, &queue, n, c)),
        "latency-async" => return println!("{}", latency_async(&url, &queue, n, c)),
        _ => {}
    }
    let rate = match var("ALK_DRAIN_KIND").as_str() {
        "blocking" => blocking(&url, &queue, n, c, false),
        "blocking-pace" => blocking(&url, &queue, n, c, true),
        "async" => asynchronous(&url, &queue, n, c, false),
        "async-pace" => asynchronous(&url, &queue, n, c, true),
        "floor" => floor(&url, &queue, n),
        other => panic!(
            "ALK_DRAIN_KIND {other}: blocking[-pace], async[-pace], floor, latency[-async] or enqueue-at"
        ),
    };
    println!("{rate:.0}");
}
