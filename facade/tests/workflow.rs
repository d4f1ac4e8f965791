//! Workflows and `EnqueueOpts::depends_on` through the typed API (contract
//! v1.2 §J), on every engine: a graph enqueued in one transaction runs in
//! dependency order under a worker pool; a bad graph writes nothing; a
//! workflow in the caller's transaction exists only if it commits.

mod common;
use alkstore::{EnqueueOpts, Error, Stop, Worker, Workflow};
use common::*;
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;

#[test]
fn a_workflow_runs_each_step_after_the_steps_it_names() {
    for target in targets() {
        let store = target.open();
        let name = target.name();
        let q = fresh("wf-run");
        let other = fresh("wf-run-other");
        let queue = store.queue(&q).unwrap();
        // Listed with a step before the steps it names: the builder orders them.
        let ids = Workflow::new()
            .step("join", &q, json!("join"), &["left", "right"])
            .step("root", &q, json!("root"), &[])
            .step("left", &q, json!("left"), &["root"])
            .step_with(
                "right",
                &other,
                EnqueueOpts::new().priority(5),
                json!("right"),
                &["root"],
            )
            .enqueue(&store)
            .unwrap();
        assert_eq!(ids.len(), 4, "[{name}]");
        assert!(
            ids["root"] < ids["left"] && ids["left"] < ids["join"],
            "[{name}] {ids:?}"
        );
        let join = store.get_job(ids["join"]).unwrap().unwrap();
        assert_eq!(
            join["depends_on"],
            json!([ids["left"], ids["right"]]),
            "[{name}]"
        );
        // The typed option: a job after the whole workflow.
        let after = queue
            .enqueue(
                &EnqueueOpts::new().depends_on([ids["join"]]),
                &json!("after"),
            )
            .unwrap();
        let ran = Mutex::new(Vec::<String>::new());
        let stop = Stop::new();
        let workers = [
            Worker::new(queue.clone(), "wf").concurrency(3),
            Worker::new(store.queue(&other).unwrap(), "wf"),
        ];
        std::thread::scope(|s| {
            let running: Vec<_> = workers
                .iter()
                .map(|w| {
                    s.spawn(|| {
                        w.run(&stop, |job| {
                            ran.lock()
                                .unwrap()
                                .push(job.payload.as_str().unwrap().to_owned());
                            Ok(())
                        })
                    })
                })
                .collect();
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while ran.lock().unwrap().len() < 5 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "[{name}] {:?}",
                    ran.lock().unwrap()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            stop.stop();
            for r in running {
                r.join().unwrap().unwrap();
            }
        });
        let ran = ran.into_inner().unwrap();
        let at = |s: &str| ran.iter().position(|r| r == s).unwrap();
        assert_eq!(at("root"), 0, "[{name}] {ran:?}");
        assert!(
            at("join") > at("left") && at("join") > at("right"),
            "[{name}] {ran:?}"
        );
        assert_eq!(at("after"), 4, "[{name}] {ran:?}");
        let _ = after;
    }
}

#[test]
fn a_bad_workflow_writes_nothing_and_a_rolled_back_one_leaves_nothing() {
    for target in targets() {
        let store = target.open();
        let name = target.name();
        let q = fresh("wf-bad");
        let queue = store.queue(&q).unwrap();
        for (bad, why) in [
            (
                Workflow::new().step("a", &q, json!(1), &["b"]),
                "not a step",
            ),
            (
                Workflow::new()
                    .step("a", &q, json!(1), &[])
                    .step("a", &q, json!(2), &[]),
                "named twice",
            ),
            (
                Workflow::new()
                    .step("a", &q, json!(1), &["c"])
                    .step("b", &q, json!(2), &["a"])
                    .step("c", &q, json!(3), &["b"]),
                "cycle",
            ),
            // The database refuses: a dependency that does not exist. The
            // first step was written in the transaction, which rolls back.
            (
                Workflow::new().step("a", &q, json!(1), &[]).step_with(
                    "b",
                    &q,
                    EnqueueOpts::new().depends_on([i64::MAX]),
                    json!(2),
                    &["a"],
                ),
                "does not exist",
            ),
        ] {
            match bad.enqueue(&store) {
                Err(Error::InvalidOptions(msg)) => assert!(msg.contains(why), "[{name}] {msg}"),
                other => panic!("[{name}] {why}: {other:?}"),
            }
        }
        assert_eq!(
            queue.stats().unwrap()["pending"],
            0,
            "[{name}] nothing written"
        );
        let mut tx = store.begin().unwrap();
        let ids = Workflow::new()
            .step("a", &q, json!(1), &[])
            .step("b", &q, json!(2), &["a"])
            .enqueue_tx(&mut *tx)
            .unwrap();
        tx.rollback().unwrap();
        assert_eq!(store.get_job(ids["a"]).unwrap(), None, "[{name}]");
        assert_eq!(queue.stats().unwrap()["pending"], 0, "[{name}]");
    }
}
