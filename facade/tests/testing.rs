//! `alkstore::testing` (feature `testing`): what a user's own tests see.

use alkstore::testing::{Ran, TestStore};
use alkstore::EnqueueOpts;
use serde_json::json;
use std::time::Duration;

#[test]
fn enqueued_lists_every_pending_job_in_order_and_nothing_else() {
    let t = TestStore::new().unwrap();
    let q = t.queue("emails").unwrap();
    q.enqueue(&EnqueueOpts::new(), &json!({"n": 1})).unwrap();
    q.enqueue(
        &EnqueueOpts::new().delay(Duration::from_secs(3600)),
        &json!({"n": 2}),
    )
    .unwrap();
    for n in [3, 4] {
        // The second waits behind the first in its group: pending all the same.
        q.enqueue(&EnqueueOpts::new().group_key("g"), &json!({"n": n}))
            .unwrap();
    }
    // More than a page of them.
    for n in 5..=250 {
        q.enqueue(&EnqueueOpts::new(), &json!({"n": n})).unwrap();
    }
    t.queue("other")
        .unwrap()
        .enqueue(&EnqueueOpts::new(), &json!({"n": 0}))
        .unwrap();
    let want: Vec<_> = (1..=250).map(|n| json!({"n": n})).collect();
    assert_eq!(t.enqueued("emails").unwrap(), want);
    // Claimed (running) jobs are no longer pending.
    let running = q.claim("someone", 1).unwrap();
    assert_eq!(running[0].payload, json!({"n": 1}));
    assert_eq!(t.enqueued("emails").unwrap().len(), 249);
    assert!(t.enqueued("nothing-here").unwrap().is_empty());
}

#[test]
fn run_pending_acks_retries_and_dead_letters_as_a_worker_would() {
    let t = TestStore::new().unwrap();
    let q = t.queue("work").unwrap();
    q.enqueue(&EnqueueOpts::new(), &json!({"ok": true}))
        .unwrap();
    q.enqueue(&EnqueueOpts::new(), &json!({"ok": false}))
        .unwrap();
    let last = q
        .enqueue(&EnqueueOpts::new().max_attempts(1), &json!({"ok": false}))
        .unwrap();
    q.enqueue(
        &EnqueueOpts::new().delay(Duration::from_secs(3600)),
        &json!({"later": 1}),
    )
    .unwrap();
    let mut seen = Vec::new();
    let ran = t
        .run_pending("work", |job| {
            seen.push(job.payload.clone());
            if job.payload["ok"] == true && job.payload.get("child").is_none() {
                // A handler that enqueues more work: that runs in the same call.
                t.queue("work")
                    .unwrap()
                    .enqueue(&EnqueueOpts::new(), &json!({"ok": true, "child": 1}))?;
                return Ok(());
            }
            if job.payload["ok"] == false {
                return Err(alkstore::Error::InvalidArgument("boom".into()));
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(
        ran,
        Ran {
            acked: 2,
            retried: 1,
            dead: 1
        }
    );
    assert_eq!(seen.len(), 4, "{seen:?}");
    // The retried job waits for its backoff; the dead one is dead; the
    // delayed one was not run.
    assert_eq!(t.get_job(last).unwrap().unwrap()["state"], "dead");
    assert_eq!(
        t.get_job(last).unwrap().unwrap()["last_error"],
        "ALK05 InvalidArgument: boom"
    );
    let pending = t.enqueued("work").unwrap();
    assert_eq!(pending, vec![json!({"ok": false}), json!({"later": 1})]);
    // Nothing runnable now.
    assert_eq!(
        t.run_pending("work", |_| Ok::<_, String>(())).unwrap(),
        Ran::default()
    );
}
