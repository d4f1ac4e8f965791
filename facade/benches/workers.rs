//! Jobs/s through the workers (issue 9): the async worker, the blocking
//! worker, a bare loop of the async worker's calls (`claim_tx`, `ack_tx`),
//! and hand-written claim/ack SQL through sqlx (prepared statements; what an
//! async user writes without alkstore's Rust API), with 1 and 8 concurrent
//! handlers, on
//! PostgreSQL (`ALKSTORE_PG_URL`) and SQLite (the two workers; the by-hand
//! columns are PostgreSQL's), and the async worker on tokio-postgres
//! (deadpool-postgres) too.
//!
//! `ALKSTORE_PG_URL=postgres://… cargo bench -p alkstore --features sqlx-postgres,sqlx-sqlite,tokio-postgres --bench workers`
//! (`ALK_BENCH_JOBS`: jobs per cell, default 3000; SQLite's cells are the
//! best of three runs each, the three kinds in turn, the ratio async worker
//! over blocking; its claim_tx/ack_tx loop runs on sqlx's pooled connections,
//! as your own transactions do, while the async worker's calls take the
//! store's own connections). Not run by the tests.

use alkstore::{AsyncEngine, AsyncStore, AsyncWorker, EnqueueOpts, Queue, Stop, Store, Worker};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn fill(queue: &Queue, n: u64) {
    let jobs: Vec<_> = (0..n).map(|i| json!({ "n": i })).collect();
    for chunk in jobs.chunks(1000) {
        queue.enqueue_batch(&EnqueueOpts::new(), chunk).unwrap();
    }
}

fn fresh(base: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "bench-{base}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Jobs/s of the blocking worker draining `n` jobs with `c` handlers.
fn blocking(store: &Store, n: u64, c: usize) -> f64 {
    let queue = store.queue(&fresh("blocking")).unwrap();
    fill(&queue, n);
    let queue: Queue = queue;
    let (stop, done) = (Stop::new(), AtomicU64::new(0));
    let start = Instant::now();
    Worker::new(queue, "bench")
        .concurrency(c)
        .prune_every(None)
        .tick_every(None)
        .run(&stop, |_job| {
            if done.fetch_add(1, Ordering::SeqCst) + 1 == n {
                stop.stop();
            }
            Ok(())
        })
        .unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

/// Jobs/s of the async worker.
/// (The blocking client filled the queue before: it cannot run inside the runtime.)
async fn async_worker<DB: AsyncEngine>(
    store: &AsyncStore<DB>,
    queue: &str,
    n: u64,
    c: usize,
) -> f64 {
    let queue = store.queue(queue).unwrap();
    let done = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(tokio::sync::Notify::new());
    let stop = finished.clone();
    let start = Instant::now();
    AsyncWorker::new(queue, "bench")
        .concurrency(c)
        .prune_every(None)
        .tick_every(None)
        .run(async move { stop.notified().await }, move |_job| {
            let (done, finished) = (done.clone(), finished.clone());
            async move {
                if done.fetch_add(1, Ordering::SeqCst) + 1 == n {
                    finished.notify_one();
                }
                Ok::<(), String>(())
            }
        })
        .await
        .unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

/// Jobs/s of `c` tasks calling `alk_claim` and `alk_ack` by hand through
/// sqlx (prepared statements), until the queue is empty.
async fn by_hand(pool: &sqlx::PgPool, queue: &str, n: u64, c: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..c)
        .map(|i| {
            let (pool, queue) = (pool.clone(), queue.to_string());
            tokio::spawn(async move {
                let worker = format!("by-hand-{i}");
                loop {
                    let claimed: Option<(i64, serde_json::Value)> =
                        sqlx::query_as("SELECT id, payload FROM alk_claim($1, $2, 1)")
                            .bind(&queue)
                            .bind(&worker)
                            .fetch_optional(&pool)
                            .await
                            .unwrap();
                    let Some((id, _payload)) = claimed else { break };
                    sqlx::query("SELECT alk_ack($1, $2)")
                        .bind(id)
                        .bind(&worker)
                        .execute(&pool)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Jobs/s of `c` tasks calling `claim_tx` and `ack_tx` (the calls the async
/// worker makes) on pooled connections, without the worker around them.
async fn handle_calls<DB: sqlx::Database>(
    pool: &sqlx::Pool<DB>,
    queue: &str,
    n: u64,
    c: usize,
) -> f64
where
    DB::Connection: alkstore::AsyncTxHandle,
{
    use alkstore::AsyncTxHandle;
    let start = Instant::now();
    let tasks: Vec<_> = (0..c)
        .map(|i| {
            let (pool, queue) = (pool.clone(), queue.to_string());
            tokio::spawn(async move {
                let worker = format!("calls-{i}");
                loop {
                    let jobs = pool
                        .acquire()
                        .await
                        .unwrap()
                        .claim_tx(&queue, &worker, 1)
                        .await
                        .unwrap();
                    let Some(job) = jobs.first() else { break };
                    pool.acquire()
                        .await
                        .unwrap()
                        .ack_tx(job.id, &worker)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` must not run it.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let n: u64 = std::env::var("ALK_BENCH_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    println!("{n} no-op jobs per cell, jobs/s (ratio: / by-hand sqlx)");
    println!(
        "{:<10} {:>3}  {:>14} {:>14} {:>15} {:>14}",
        "engine", "c", "async worker", "blocking", "claim_tx/ack_tx", "by-hand sqlx"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let sqlite = alkstore::SqliteStore::open(&path).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let async_sqlite = rt.block_on(AsyncStore::open_sqlite(&path)).unwrap();
    // SQLite cells move by ±30% between runs on a shared machine: each
    // side three times in turn, the best of each (ratio: async / blocking).
    for c in [1, 8] {
        let (mut a, mut b, mut h) = (0f64, 0f64, 0f64);
        for _ in 0..3 {
            let queue = sqlite.queue(&fresh("async")).unwrap();
            fill(&queue, n);
            a = a.max(rt.block_on(async_worker(&async_sqlite, queue.name(), n, c)));
            b = b.max(blocking(&sqlite, n, c));
            let queue = sqlite.queue(&fresh("calls")).unwrap();
            fill(&queue, n);
            h = h.max(rt.block_on(handle_calls(async_sqlite.pool(), queue.name(), n, c)));
        }
        println!(
            "{:<10} {c:>3}  {a:>8.0} {:.2}x {b:>14.0} {h:>15.0} {:>14}",
            "sqlite",
            a / b,
            "-"
        );
    }

    let Ok(url) = std::env::var("ALKSTORE_PG_URL") else {
        println!("ALKSTORE_PG_URL not set: PostgreSQL skipped");
        return;
    };
    let pg = alkstore::PgStore::connect(&url).unwrap();
    let sqlx_url = url.replace("@/", "@localhost/");
    let store = rt.block_on(AsyncStore::connect(&sqlx_url)).unwrap();
    let pool = rt
        .block_on(
            sqlx::postgres::PgPoolOptions::new()
                .max_connections(16)
                .connect(&sqlx_url),
        )
        .unwrap();
    for c in [1, 8] {
        let filled = |base: &str| {
            let queue = pg.queue(&fresh(base)).unwrap();
            fill(&queue, n);
            queue.name().to_string()
        };
        let a = rt.block_on(async_worker(&store, &filled("async"), n, c));
        let b = blocking(&pg, n, c);
        let h = rt.block_on(by_hand(&pool, &filled("hand"), n, c));
        let k = rt.block_on(handle_calls(&pool, &filled("calls"), n, c));
        println!(
            "{:<10} {c:>3}  {a:>8.0} {:>4.2}x {b:>8.0} {:>4.2}x {k:>9.0} {:>4.2}x {h:>14.0}",
            "postgres",
            a / h,
            b / h,
            k / h,
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The same async worker on tokio-postgres with deadpool-postgres.
    let mut config = deadpool_postgres::Config::new();
    config.url = Some(url.clone());
    let deadpool = config
        .create_pool(
            Some(deadpool_postgres::Runtime::Tokio1),
            tokio_postgres::NoTls,
        )
        .unwrap();
    let tokio_store = rt
        .block_on(AsyncStore::from_deadpool(deadpool, &url))
        .unwrap();
    for c in [1, 8] {
        let queue = pg.queue(&fresh("tokio")).unwrap();
        fill(&queue, n);
        let a = rt.block_on(async_worker(&tokio_store, queue.name(), n, c));
        println!(
            "{:<10} {c:>3}  {a:>14.0} {:>14} {:>15} {:>14}",
            "tokio-pg", "-", "-", "-"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
