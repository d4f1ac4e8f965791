//! The job features of contract v1.1 §C through the typed API, on every
//! engine: idempotent and grouped enqueues, results kept with completed
//! jobs, pause, and workers that prune.

mod common;
use alkstore::{EnqueueOpts, QueueOpts, Stop, Worker};
use common::*;
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;

#[test]
fn typed_options_reach_the_database() {
    for target in targets() {
        let store = target.open();
        let name = target.name();
        let queue = store.queue(&fresh("typed")).unwrap();
        let opts = queue
            .configure(
                &QueueOpts::new()
                    .retain_completed(Duration::from_secs(3600))
                    .retain_dead(Some(Duration::from_millis(1500))),
            )
            .unwrap();
        assert_eq!(opts["retain_completed_s"], 3600, "[{name}]");
        assert_eq!(opts["retain_dead_s"], 1.5, "[{name}]");
        let opts = queue
            .configure(&QueueOpts::new().retain_dead(None))
            .unwrap();
        assert_eq!(opts["retain_dead_s"], json!(null), "[{name}]");

        // Idempotent enqueue inside the caller's transaction.
        let keyed = EnqueueOpts::new()
            .idempotency_key("invoice-7")
            .idempotency_ttl(Duration::from_secs(60));
        let mut tx = store.begin().unwrap();
        let a = tx
            .enqueue_tx(queue.name(), &keyed, &json!({"invoice": 7}))
            .unwrap();
        let b = tx
            .enqueue_tx(queue.name(), &keyed, &json!({"invoice": 7}))
            .unwrap();
        assert_eq!(a, b, "[{name}]");
        tx.commit().unwrap();
        assert_eq!(
            queue.enqueue(&keyed, &json!({"invoice": 7})).unwrap(),
            a,
            "[{name}]"
        );

        // Groups, and a result kept with the completed job.
        let g = EnqueueOpts::new().group_key("customer-1");
        let first = queue.enqueue(&g, &json!(1)).unwrap();
        let second = queue.enqueue(&g, &json!(2)).unwrap();
        let claimed: Vec<i64> = queue.claim("w", 10).unwrap().iter().map(|j| j.id).collect();
        assert!(
            claimed.contains(&first) && !claimed.contains(&second),
            "[{name}] {claimed:?}"
        );
        assert!(queue
            .ack_with_result(first, "w", &json!({"sent": true}))
            .unwrap());
        let done = queue.get_job(first).unwrap().unwrap();
        assert_eq!(
            (done["state"].clone(), done["result"].clone()),
            (json!("completed"), json!({"sent": true})),
            "[{name}]"
        );
        assert_eq!(done["group_key"], "customer-1", "[{name}]");

        // Pause and resume, typed.
        assert!(queue.pause().unwrap(), "[{name}]");
        assert!(queue.claim("w", 10).unwrap().is_empty(), "[{name}]");
        assert_eq!(queue.stats().unwrap()["paused"], true, "[{name}]");
        assert!(queue.resume().unwrap(), "[{name}]");
        let outbox = store.outbox(&fresh("typed-outbox")).unwrap();
        outbox.enqueue(&EnqueueOpts::new(), &json!("m")).unwrap();
        assert!(outbox.pause().unwrap(), "[{name}]");
        assert!(outbox.claim("w", 1).unwrap().is_empty(), "[{name}]");
        assert!(outbox.resume().unwrap(), "[{name}]");
        assert_eq!(outbox.claim("w", 1).unwrap().len(), 1, "[{name}]");
        // Within its hour of retention, the completed job survives a prune.
        while store.prune(10).unwrap() > 0 {}
        assert_eq!(
            queue.get_job(first).unwrap().unwrap()["state"],
            "completed",
            "[{name}]"
        );
    }
}

#[test]
fn a_worker_keeps_results_runs_groups_in_order_and_prunes() {
    for target in targets() {
        let store = target.open();
        let name = target.name();
        let queue = store.queue(&fresh("wfeat")).unwrap();
        queue
            .configure(&QueueOpts::new().retain_completed(Duration::from_secs(2)))
            .unwrap();
        let mut ids = Vec::new();
        for i in 0..6 {
            let g = EnqueueOpts::new().group_key(format!("g{}", i % 2));
            ids.push(queue.enqueue(&g, &json!({"i": i})).unwrap());
        }
        let order = Mutex::new(Vec::new());
        let stop = Stop::new();
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                Worker::new(queue.clone(), "feat")
                    .concurrency(3)
                    .prune_every(Some(Duration::from_millis(100)))
                    .run_with_result(&stop, |job| {
                        order.lock().unwrap().push(job.id);
                        Ok(json!({"double": job.payload["i"].as_i64().unwrap() * 2}))
                    })
            });
            // The results are there while retained...
            let mut seen = false;
            for _ in 0..250 {
                if queue.stats().unwrap()["completed"] == 6 {
                    seen = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(seen, "[{name}] all six completed and retained");
            // The last job to finish is still within its two seconds.
            let doc = queue.get_job(ids[5]).unwrap().expect("retained");
            assert_eq!(doc["result"], json!({"double": 10}), "[{name}]");
            // ...and the worker prunes them once their retention ends.
            let mut pruned = false;
            for _ in 0..300 {
                if queue.stats().unwrap()["completed"] == 0 {
                    pruned = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            stop.stop();
            assert_eq!(worker.join().unwrap().unwrap(), 6, "[{name}]");
            assert!(pruned, "[{name}] the worker pruned completed jobs");
        });
        let order = order.into_inner().unwrap();
        for g in 0..2 {
            let want: Vec<i64> = ids.iter().skip(g).step_by(2).copied().collect();
            let got: Vec<i64> = order
                .iter()
                .filter(|id| want.contains(id))
                .copied()
                .collect();
            assert_eq!(got, want, "[{name}] group g{g} in order");
        }
    }
}

#[test]
fn workers_tick_schedules_without_being_told_to() {
    for target in targets() {
        let store = target.open();
        let name = target.name();
        let (sched, q) = (fresh("wtick"), fresh("wtick-q"));
        store
            .schedule(
                &sched,
                &q,
                &alkstore::ScheduleSpec::Every(Duration::from_secs(1)),
                &json!({"tick": true}),
                &EnqueueOpts::new(),
            )
            .unwrap();
        let stop = Stop::new();
        let ran = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                // Two workers, default settings: each ticks every 5 s.
                Worker::new(store.queue(&q).unwrap(), "ticker")
                    .concurrency(2)
                    .run(&stop, |job| {
                        ran.lock().unwrap().push(job.payload.clone());
                        Ok(())
                    })
            });
            // Up to 30 s: ticks come every 5 s, later on a loaded machine.
            let until = std::time::Instant::now() + Duration::from_secs(30);
            while ran.lock().unwrap().is_empty() && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(25));
            }
            stop.stop();
            w.join().unwrap().unwrap();
        });
        store.unschedule(&sched).unwrap();
        let ran = ran.into_inner().unwrap();
        assert!(!ran.is_empty(), "[{name}] a scheduled job ran");
        assert!(
            ran.iter().all(|p| p == &json!({"tick": true})),
            "[{name}] {ran:?}"
        );
    }
}

/// Stream retention and info through the typed API (contract v1.1 §E).
#[test]
fn a_stream_keeps_what_its_retention_says() {
    for target in targets() {
        let store = target.open();
        let name = target.name();
        let stream = store.stream(&fresh("kept")).unwrap();
        let opts = stream
            .configure(&alkstore::StreamOpts::new().retain_events(Some(2)))
            .unwrap();
        assert_eq!(
            opts,
            json!({"retain_s": null, "retain_events": 2}),
            "[{name}]"
        );
        let ids: Vec<i64> = (1..=4)
            .map(|n| stream.publish(&json!({"n": n}), None).unwrap())
            .collect();
        while store.prune(1000).unwrap() > 0 {}
        let info = stream.info().unwrap();
        assert_eq!(
            (
                info.first_offset,
                info.last_offset,
                info.retain,
                info.retain_events
            ),
            (3, 4, None, Some(2)),
            "[{name}]"
        );
        let kept = stream.read(0, 10).unwrap();
        assert_eq!(
            kept.iter().map(|e| (e.offset, e.id)).collect::<Vec<_>>(),
            vec![(3, ids[2]), (4, ids[3])],
            "[{name}] a read after the pruned range starts at the first kept event"
        );
        stream
            .configure(
                &alkstore::StreamOpts::new()
                    .retain(Some(Duration::from_millis(1500)))
                    .retain_events(None),
            )
            .unwrap();
        let info = stream.info().unwrap();
        assert_eq!(
            (info.retain, info.retain_events),
            (Some(Duration::from_millis(1500)), None),
            "[{name}]"
        );
    }
}
