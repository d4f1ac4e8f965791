//! Workers, outbox delivery loops and leases through the facade.

mod common;
use alkstore::{EnqueueOpts, QueueOpts, Retried, Stop, Worker};
use common::*;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

#[test]
fn a_worker_runs_handlers_concurrently_retries_errors_survives_panics_and_stops_gracefully() {
    for target in targets() {
        let store = target.open();
        let queue = store.queue(&fresh("work")).unwrap();
        queue
            .configure(&QueueOpts::new().backoff(ms(10), ms(10)))
            .unwrap();
        let ids = queue
            .enqueue_batch(
                &EnqueueOpts::new(),
                &(0..40).map(|i| json!({"n": i})).collect::<Vec<_>>(),
            )
            .unwrap();
        let runs: Mutex<HashMap<i64, u32>> = Mutex::new(HashMap::new());
        let stop = Stop::new();
        let handled = std::thread::scope(|s| {
            let worker = s.spawn(|| {
                Worker::new(queue.clone(), "pool")
                    .concurrency(4)
                    .run(&stop, |job| {
                        let n = job.payload["n"].as_i64().unwrap();
                        let attempt = {
                            let mut r = runs.lock().unwrap();
                            let a = r.entry(job.id).or_default();
                            *a += 1;
                            *a
                        };
                        match (n % 10, attempt) {
                            (3, 1) => Err("transient".to_string()),
                            (7, 1) => panic!("handler bug"),
                            _ => Ok(()),
                        }
                    })
            });
            // Graceful stop once everything is done.
            for _ in 0..200 {
                if queue.stats().unwrap()["pending"] == 0 && queue.stats().unwrap()["running"] == 0
                {
                    break;
                }
                std::thread::sleep(ms(50));
            }
            stop.stop();
            worker.join().unwrap().unwrap()
        });
        let runs = runs.into_inner().unwrap();
        assert_eq!(runs.len(), 40, "[{}] every job ran", target.name());
        for id in &ids {
            assert!(
                store.get_job(*id).unwrap().is_none(),
                "[{}] job {id} acked in the end",
                target.name()
            );
        }
        let retried = runs.values().filter(|&&a| a == 2).count();
        assert_eq!(retried, 8, "errors and panics were retried once each");
        assert_eq!(handled, 48);
    }
}

#[test]
fn a_handler_that_outlives_the_visibility_timeout_keeps_its_claim_by_heartbeat() {
    for target in targets() {
        let store = target.open();
        let queue = store.queue(&fresh("slow")).unwrap();
        queue
            .configure(&QueueOpts::new().visibility_timeout(ms(300)))
            .unwrap();
        queue.enqueue(&EnqueueOpts::new(), &json!("slow")).unwrap();
        let stop = Stop::new();
        let stolen = std::thread::scope(|s| {
            s.spawn(|| {
                Worker::new(queue.clone(), "slowpoke")
                    .run(&stop, |_| {
                        std::thread::sleep(ms(1000)); // > 3 visibility timeouts
                        Ok(())
                    })
                    .unwrap()
            });
            std::thread::sleep(ms(600));
            let stolen = queue.claim("thief", 1).unwrap();
            stop.stop();
            stolen
        });
        assert!(
            stolen.is_empty(),
            "[{}] heartbeats kept the claim",
            target.name()
        );
        assert_eq!(queue.stats().unwrap()["running"], 0);
        assert_eq!(queue.stats().unwrap()["pending"], 0);
    }
}

#[test]
fn outbox_run_once_and_run_deliver_retry_and_dead_letter() {
    for target in targets() {
        let store = target.open();
        let outbox = store.outbox(&fresh("hooks")).unwrap();
        let ok = outbox
            .enqueue(&EnqueueOpts::new(), &json!({"hook": "ok"}))
            .unwrap();
        let bad = outbox
            .enqueue(&EnqueueOpts::new().max_attempts(1), &json!({"hook": "bad"}))
            .unwrap();
        let mut delivered = Vec::new();
        let mut deliver = |job: &alkstore::Job| -> Result<(), String> {
            if job.payload["hook"] == "bad" {
                return Err("HTTP 500".into());
            }
            delivered.push(job.id);
            Ok(())
        };
        assert!(outbox.run_once("d", &mut deliver).unwrap());
        assert!(outbox.run_once("d", &mut deliver).unwrap());
        assert!(!outbox.run_once("d", &mut deliver).unwrap());
        assert_eq!(delivered, vec![ok]);
        let dead = store.get_job(bad).unwrap().unwrap();
        assert_eq!(
            (dead["state"].as_str(), dead["last_error"].as_str()),
            (Some("dead"), Some("HTTP 500")),
            "[{}]",
            target.name()
        );
        // The loop delivers what arrives while it runs, then stops.
        let stop = Stop::new();
        let count = std::thread::scope(|s| {
            let runner = s.spawn(|| outbox.run("loop", &mut |_| Ok(()), &stop).unwrap());
            for i in 0..5 {
                outbox.enqueue(&EnqueueOpts::new(), &json!(i)).unwrap();
            }
            for _ in 0..100 {
                if outbox.stats().unwrap()["pending"] == 0
                    && outbox.stats().unwrap()["running"] == 0
                {
                    break;
                }
                std::thread::sleep(ms(20));
            }
            stop.stop();
            runner.join().unwrap()
        });
        assert_eq!(count, 5);
        assert_eq!(
            outbox.jobs().retry(ok, "d", "x", None).unwrap(),
            Retried::NotHeld
        );
    }
}

#[test]
fn lock_guards_fence_renew_and_release_on_drop() {
    for target in targets() {
        let store = target.open();
        let name = fresh("lease");
        let a = store
            .lock(&name, "a", Duration::from_secs(10))
            .unwrap()
            .expect("free");
        assert!(
            store
                .lock(&name, "b", Duration::from_secs(10))
                .unwrap()
                .is_none(),
            "[{}]",
            target.name()
        );
        assert!(a.renew(Duration::from_secs(10)).unwrap());
        let first = a.token();
        drop(a); // released
        let b = store
            .lock(&name, "b", Duration::from_secs(10))
            .unwrap()
            .expect("released on drop");
        assert!(b.token() > first);
        assert!(b.release().unwrap());
        let short = store.lock(&name, "c", ms(50)).unwrap().unwrap();
        std::thread::sleep(ms(100));
        assert!(
            !short.renew(Duration::from_secs(1)).unwrap(),
            "expired leases are not renewed"
        );
    }
}
