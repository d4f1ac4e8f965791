//! Job features (contract v1.1 §C): idempotency keys, ordered groups,
//! results kept with completed jobs, pause, pruning.
//!
//! `cargo run -p alkstore --example job_features [URL]` — an embedded
//! SQLite file by default, or any `sqlite:` / `postgres://` URL.

use alkstore::{EnqueueOpts, QueueOpts, Stop, Worker};
use serde_json::json;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = std::env::args().nth(1).unwrap_or(format!(
        "sqlite:{}",
        dir.path().join("features.db").display()
    ));
    let store = alkstore::open(&url)?;
    let queue = store.queue(&format!("ledger-{}", std::process::id()))?;

    // Keep acked jobs and their results for a week, dead jobs for a month.
    queue.configure(
        &QueueOpts::new()
            .retain_completed(Duration::from_secs(7 * 86_400))
            .retain_dead(Some(Duration::from_secs(30 * 86_400))),
    )?;

    // A retried request enqueues once: the key returns the first job's id.
    let charge = EnqueueOpts::new().idempotency_key("order-1001");
    let first = queue.enqueue(&charge, &json!({"charge": 1200}))?;
    let again = queue.enqueue(&charge, &json!({"charge": 1200}))?;
    println!("idempotent: {}", first == again);

    // One customer's updates run one at a time, in order.
    let customer = EnqueueOpts::new().group_key("customer-7");
    for op in ["open", "deposit", "withdraw"] {
        queue.enqueue(&customer, &json!({"op": op}))?;
    }

    // Paused during an incident: nothing is claimed; enqueues still work.
    queue.pause()?;
    println!("claimed while paused: {}", queue.claim("w", 10)?.len());
    queue.resume()?;

    // A worker acks each job with a result; it also prunes every minute.
    let stop = Stop::new();
    let worker = Worker::new(queue.clone(), "ledger").concurrency(2);
    std::thread::scope(|s| -> alkstore::Result<()> {
        let running =
            s.spawn(|| worker.run_with_result(&stop, |job| Ok(json!({"done": job.payload}))));
        while queue.stats()?["completed"] != 4 {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.stop();
        running.join().expect("worker")?;
        Ok(())
    })?;
    let job = queue.get_job(first)?.expect("retained");
    println!(
        "job {} is {} with result {}",
        first, job["state"], job["result"]
    );
    println!("pruned now: {}", store.prune(1000)?);
    Ok(())
}
