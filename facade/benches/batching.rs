//! Jobs/s of the blocking `Worker` with its claims and acks batched
//! (contract v1.3 §P: a local queue of prefetched jobs sized by the
//! handlers' pace, `prefetch_by_pace`, acks flushed every
//! 10 ms or 100 jobs), beside the same worker acking each job on its own
//! and claiming only for free handlers (`prefetch(0)`, a zero flush
//! window), and beside the SQL floor measured in the same run: one thread
//! claiming 32 and acking them with one `alk_ack_batch`, through the same
//! store. No-op handlers, concurrency 1, 8 and 32, on SQLite and (with
//! `ALKSTORE_PG_URL`) PostgreSQL.
//!
//! `ALKSTORE_PG_URL=postgres://… cargo bench -p alkstore --bench batching`
//! (`ALK_BENCH_JOBS`: jobs per cell, default 5000; each cell the best of
//! `ALK_BENCH_ROUNDS`, default 3). Not run by the tests.

use alkstore::{EnqueueOpts, FlushWindow, Queue, Stop, Store, Worker};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn fill(queue: &Queue, n: u64) {
    let jobs: Vec<_> = (0..n).map(|i| json!({ "n": i })).collect();
    for chunk in jobs.chunks(1000) {
        queue.enqueue_batch(&EnqueueOpts::new(), chunk).unwrap();
    }
}

fn fresh(store: &Store, base: &str, n: u64) -> Queue {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "bench-{base}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let queue = store.queue(&name).unwrap();
    fill(&queue, n);
    queue
}

/// Jobs/s of `worker` draining `n` jobs, from start to the last handler's
/// return (the acks of the last flush included: `run` returns after them).
fn drain(worker: Worker, n: u64) -> f64 {
    let (stop, done) = (Stop::new(), AtomicU64::new(0));
    let start = Instant::now();
    worker
        .prune_every(None)
        .tick_every(None)
        .sweep_every(None)
        .run(&stop, |_job| {
            if done.fetch_add(1, Ordering::SeqCst) + 1 == n {
                stop.stop();
            }
            Ok(())
        })
        .unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

/// Jobs/s of one thread claiming 32 and acking them in one call.
fn floor(queue: &Queue, n: u64) -> f64 {
    let start = Instant::now();
    let mut left = n;
    while left > 0 {
        let jobs = queue.claim("floor", 32).unwrap();
        assert!(!jobs.is_empty(), "the queue ran dry");
        let ids: Vec<i64> = jobs.iter().map(|j| j.id).collect();
        queue.ack_batch(&ids, "floor").unwrap();
        left -= ids.len() as u64;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn cells(label: &str, store: &Store, n: u64, rounds: usize) {
    for c in [1, 8, 32] {
        let (mut batched, mut single, mut sql) = (0f64, 0f64, 0f64);
        for _ in 0..rounds {
            let q = fresh(store, "batched", n);
            batched = batched.max(drain(
                Worker::new(q, "bench").concurrency(c).prefetch_by_pace(),
                n,
            ));
            let q = fresh(store, "single", n);
            single = single.max(drain(
                Worker::new(q, "bench")
                    .concurrency(c)
                    .prefetch(0)
                    .flush_window(FlushWindow {
                        wait: Duration::ZERO,
                        max_jobs: 1,
                    }),
                n,
            ));
            let q = fresh(store, "floor", n);
            sql = sql.max(floor(&q, n));
        }
        println!(
            "{label:<10} {c:>3} {batched:>10.0} {single:>10.0} {:>7.2}x {sql:>10.0} {:>7.2}",
            batched / single,
            batched / sql
        );
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` must not run it.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let var = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (n, rounds) = (
        var("ALK_BENCH_JOBS", 5000),
        var("ALK_BENCH_ROUNDS", 3) as usize,
    );
    println!("{n} no-op jobs per cell, jobs/s, best of {rounds}");
    println!(
        "{:<10} {:>3} {:>10} {:>10} {:>8} {:>10} {:>7}",
        "engine", "c", "batched", "per job", "gain", "SQL floor", "/floor"
    );
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Store = alkstore::SqliteStore::open(dir.path().join("bench.db"))
        .unwrap()
        .into();
    cells("sqlite", &sqlite, n, rounds);
    match std::env::var("ALKSTORE_PG_URL") {
        Ok(url) => cells(
            "postgres",
            &alkstore::PgStore::connect(&url).unwrap().into(),
            n,
            rounds,
        ),
        Err(_) => println!("ALKSTORE_PG_URL not set: PostgreSQL skipped"),
    }
}
