//! A schedule and its job (contract v1.1 §F): every second, a report job,
//! enqueued once per occurrence however many workers tick.
//!
//! `cargo run -p alkstore --example schedules [URL]` — an embedded SQLite
//! file by default, or any `sqlite:` / `postgres://` URL.

use alkstore::{EnqueueOpts, ScheduleSpec, Stop, Worker};
use serde_json::json;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = std::env::args().nth(1).unwrap_or(format!(
        "sqlite:{}",
        dir.path().join("schedules.db").display()
    ));
    let store = alkstore::open(&url)?;
    let (name, queue) = (
        format!("report-{}", std::process::id()),
        format!("reports-{}", std::process::id()),
    );

    // Cron in UTC ({"cron": "0 3 * * *"}: 03:00 daily), or a period.
    let next = store.schedule(
        &name,
        &queue,
        &ScheduleSpec::Every(Duration::from_secs(1)),
        &json!({"report": "sales"}),
        &EnqueueOpts::new().priority(5),
    )?;
    println!("scheduled, next run at {next}");

    // Workers tick schedules (every 5 s by default; every second here) and
    // run the jobs the occurrences enqueue.
    let stop = Stop::new();
    let worker =
        Worker::new(store.queue(&queue)?, "reporter").tick_every(Some(Duration::from_secs(1)));
    std::thread::scope(|s| {
        s.spawn(|| {
            worker.run(&stop, |job| {
                println!("ran job {} with {}", job.id, job.payload);
                stop.stop(); // one is enough for the example
                Ok(())
            })
        })
        .join()
        .expect("worker thread")
    })?;
    store.unschedule(&name)?;
    Ok(())
}
