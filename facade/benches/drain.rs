//! One cell of `scripts/bench-workers.sh`: drains a queue the script filled
//! with no-op jobs, through alkstore's own worker as an application runs
//! it (its defaults, a local queue of its concurrency; with the `-pace`
//! kinds sized by the handlers' pace instead, `prefetch_by_pace`; or
//! `ALK_DRAIN_PREFETCH=n`), and prints the jobs/s from the worker's start
//! (its first claim) to the last handler's return.
//!
//! `ALK_DRAIN_URL=postgres://… ALK_DRAIN_QUEUE=q ALK_DRAIN_JOBS=20000
//! ALK_DRAIN_CONCURRENCY=8
//! ALK_DRAIN_KIND=blocking|blocking-pace|async|async-pace|floor cargo bench
//! -p alkstore --features sqlx-postgres --bench drain`. Not run by the tests.

use alkstore::{AsyncStore, AsyncWorker, Stop, Store, Worker};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn var(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"))
}

fn blocking(url: &str, queue: &str, n: u64, c: usize, pace: bool) -> f64 {
    let store: Store = alkstore::open(url).unwrap();
    let (stop, done) = (Stop::new(), AtomicU64::new(0));
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
                stop.stop();
            }
            Ok(())
        })
        .unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

/// The SQL floor the workers are measured against: one thread claiming 32
/// and acking them with one `alk_ack_batch`.
fn floor(url: &str, queue: &str, n: u64) -> f64 {
    let store: Store = alkstore::open(url).unwrap();
    let queue = store.queue(queue).unwrap();
    let start = Instant::now();
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
    n as f64 / start.elapsed().as_secs_f64()
}

fn asynchronous(url: &str, queue: &str, n: u64, c: usize, pace: bool) -> f64 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = AsyncStore::connect(url).await.unwrap();
        let done = Arc::new(AtomicU64::new(0));
        let finished = Arc::new(tokio::sync::Notify::new());
        let start = Instant::now();
        let (d, f) = (done.clone(), finished.clone());
        let mut worker = AsyncWorker::new(store.queue(queue).unwrap(), "drain").concurrency(c);
        if pace {
            worker = worker.prefetch_by_pace();
        }
        worker
            .run(finished.notified(), move |_job| {
                let (d, f) = (d.clone(), f.clone());
                async move {
                    if d.fetch_add(1, Ordering::SeqCst) + 1 == n {
                        f.notify_one();
                    }
                    Ok::<(), std::io::Error>(())
                }
            })
            .await
            .unwrap();
        n as f64 / start.elapsed().as_secs_f64()
    })
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` must not run it.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let (url, queue) = (var("ALK_DRAIN_URL"), var("ALK_DRAIN_QUEUE"));
    let n: u64 = var("ALK_DRAIN_JOBS").parse().unwrap();
    let c: usize = var("ALK_DRAIN_CONCURRENCY").parse().unwrap();
    let rate = match var("ALK_DRAIN_KIND").as_str() {
        "blocking" => blocking(&url, &queue, n, c, false),
        "blocking-pace" => blocking(&url, &queue, n, c, true),
        "async" => asynchronous(&url, &queue, n, c, false),
        "async-pace" => asynchronous(&url, &queue, n, c, true),
        "floor" => floor(&url, &queue, n),
        other => panic!("ALK_DRAIN_KIND {other}: blocking[-pace], async[-pace] or floor"),
    };
    println!("{rate:.0}");
}
