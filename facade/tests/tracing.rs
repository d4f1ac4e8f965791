//! Workers emit tracing spans a user's subscriber sees: the claim, and per
//! job one span with its id, queue and attempt around the handler's run and
//! the ack or retry.

use alkstore::{EnqueueOpts, QueueOpts, Stop, Worker};
use serde_json::json;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// Records every new span's name and fields.
struct Capture(Seen);

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut fields = String::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_string();
        self.0.lock().unwrap().push((name, fields));
    }
}

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

#[test]
fn a_worker_traces_claims_jobs_handlers_and_acks() {
    let seen: Seen = Arc::default();
    // Global: the worker's handlers run on threads of their own.
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(Capture(seen.clone())),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = alkstore::SqliteStore::open(dir.path().join("t.db")).unwrap();
    let queue = store.queue("traced").unwrap();
    queue
        .configure(&QueueOpts::new().backoff(Duration::from_millis(10), Duration::from_millis(10)))
        .unwrap();
    let ok = queue.enqueue(&EnqueueOpts::new(), &json!("fine")).unwrap();
    let flaky = queue.enqueue(&EnqueueOpts::new(), &json!("flaky")).unwrap();
    let stop = Stop::new();
    let runs = Mutex::new(0);
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            Worker::new(queue.clone(), "tracer").run(&stop, |job| {
                let mut n = runs.lock().unwrap();
                *n += 1;
                if job.payload == "flaky" && *n <= 2 {
                    return Err("not yet".into());
                }
                Ok(())
            })
        });
        while queue.stats().unwrap()["pending"] != 0 || queue.stats().unwrap()["running"] != 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.stop();
        w.join().unwrap().unwrap();
    });
    let seen = seen.lock().unwrap();
    let spans = |name: &str| -> Vec<&String> {
        seen.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, f)| f)
            .collect()
    };
    assert!(
        spans("alkstore.claim")
            .iter()
            .any(|f| f.contains("queue=traced")),
        "{seen:?}"
    );
    let jobs = spans("alkstore.job");
    assert!(
        jobs.iter()
            .any(|f| f.contains(&format!("job.id={ok} ")) && f.contains("attempt=1 ")),
        "{jobs:?}"
    );
    assert!(
        jobs.iter()
            .any(|f| f.contains(&format!("job.id={flaky} ")) && f.contains("attempt=2 ")),
        "the retried job's second attempt: {jobs:?}"
    );
    assert!(jobs.iter().all(|f| f.contains("queue=traced")), "{jobs:?}");
    assert_eq!(spans("alkstore.handler").len(), jobs.len());
    let acks = spans("alkstore.ack");
    assert!(
        acks.iter().any(|f| f.contains("outcome=\"retry\"")),
        "{acks:?}"
    );
    assert!(
        acks.iter().any(|f| f.contains("outcome=\"ack\"")),
        "{acks:?}"
    );
}
