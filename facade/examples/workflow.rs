//! Workflows (contract v1.2 §J): a graph of jobs enqueued in one
//! transaction. Fan-out (one step, then three in parallel) and fan-in (a
//! last step after all three), run by a worker pool; then a step that dies
//! and takes the step after it along.
//!
//! `cargo run -p alkstore --example workflow [URL]` — an embedded SQLite
//! file by default, or any `sqlite:` / `postgres://` URL.

use alkstore::{QueueOpts, Stop, Worker, Workflow};
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = std::env::args().nth(1).unwrap_or(format!(
        "sqlite:{}",
        dir.path().join("workflow.db").display()
    ));
    let store = alkstore::open(&url)?;
    let name = format!("media-{}", std::process::id());
    let queue = store.queue(&name)?;

    // Fetch an image, make three sizes of it in parallel, then publish.
    let ids = Workflow::new()
        .step("fetch", &name, json!({"step": "fetch"}), &[])
        .step("small", &name, json!({"step": "small"}), &["fetch"])
        .step("medium", &name, json!({"step": "medium"}), &["fetch"])
        .step("large", &name, json!({"step": "large"}), &["fetch"])
        .step(
            "publish",
            &name,
            json!({"step": "publish"}),
            &["small", "medium", "large"],
        )
        .enqueue(&store)?;
    println!("enqueued {} steps", ids.len());

    // Four workers; each records the step it ran.
    let ran = Mutex::new(Vec::<String>::new());
    let stop = Stop::new();
    let worker = Worker::new(queue.clone(), "media").concurrency(4);
    std::thread::scope(|s| -> alkstore::Result<()> {
        let running = s.spawn(|| {
            worker.run(&stop, |job| {
                ran.lock()
                    .unwrap()
                    .push(job.payload["step"].as_str().unwrap().to_owned());
                Ok(())
            })
        });
        while ran.lock().unwrap().len() < 5 || queue.stats()?["running"] != 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.stop();
        running.join().expect("worker")?;
        Ok(())
    })?;
    let ran = ran.into_inner().unwrap();
    let mut sizes = ran[1..4].to_vec();
    sizes.sort();
    println!("first: {}", ran[0]);
    println!("then, in any order: {}", sizes.join(", "));
    println!("last: {}", ran[4]);

    // A step that dies (here: failed at once) takes the steps after it along.
    queue.configure(&QueueOpts::new().max_attempts(1))?;
    let ids = Workflow::new()
        .step("import", &name, json!({"step": "import"}), &[])
        .step("notify", &name, json!({"step": "notify"}), &["import"])
        .enqueue(&store)?;
    let claimed = queue.claim("media", 10)?;
    queue.fail(claimed[0].id, "media", "bad file")?;
    let notify = queue.get_job(ids["notify"])?.expect("kept dead");
    println!(
        "notify: {}, {}",
        notify["state"].as_str().unwrap(),
        notify["last_error"]
            .as_str()
            .unwrap()
            .replace(&ids["import"].to_string(), "<import>")
    );
    Ok(())
}
