//! Load: 4 producer threads and 8 worker threads on each engine, 20,000
//! jobs: every job processed, none twice.

mod common;
use alkstore::{EnqueueOpts, Stop, Worker};
use common::*;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const JOBS: usize = 20_000;

#[test]
fn four_producers_and_eight_workers_process_twenty_thousand_jobs_exactly_once() {
    for target in targets() {
        let q = fresh("load");
        let seen: Mutex<HashMap<i64, u32>> = Mutex::new(HashMap::new());
        let done = AtomicUsize::new(0);
        let stop = Stop::new();
        let started = Instant::now();
        let enqueued: Vec<i64> = std::thread::scope(|s| {
            let workers = s.spawn(|| {
                let store = target.open();
                Worker::new(store.queue(&q).unwrap(), "load")
                    .concurrency(8)
                    .run(&stop, |job| {
                        *seen.lock().unwrap().entry(job.id).or_default() += 1;
                        done.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
            });
            let producers: Vec<_> = (0..4)
                .map(|p| {
                    let (target, q) = (&target, &q);
                    s.spawn(move || {
                        let store = target.open();
                        let mut ids = Vec::new();
                        for chunk in 0..(JOBS / 4 / 50) {
                            let mut tx = store.begin().unwrap();
                            for i in 0..50 {
                                ids.push(
                                    tx.enqueue_tx(
                                        q,
                                        &EnqueueOpts::new(),
                                        &json!({"p": p, "n": chunk * 50 + i}),
                                    )
                                    .unwrap(),
                                );
                            }
                            tx.commit().unwrap();
                        }
                        ids
                    })
                })
                .collect();
            let ids: Vec<i64> = producers
                .into_iter()
                .flat_map(|p| p.join().unwrap())
                .collect();
            while done.load(Ordering::SeqCst) < JOBS && started.elapsed() < Duration::from_secs(240)
            {
                std::thread::sleep(ms(20));
            }
            stop.stop();
            workers.join().unwrap().unwrap();
            ids
        });
        let seen = seen.into_inner().unwrap();
        assert_eq!(enqueued.len(), JOBS);
        let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
        assert!(
            twice.is_empty(),
            "[{}] processed twice: {twice:?}",
            target.name()
        );
        let missing: Vec<_> = enqueued
            .iter()
            .filter(|id| !seen.contains_key(id))
            .take(5)
            .collect();
        assert!(
            missing.is_empty(),
            "[{}] never processed: {missing:?}",
            target.name()
        );
        eprintln!(
            "[{}] {JOBS} jobs produced and processed in {:?}",
            target.name(),
            started.elapsed()
        );
    }
}
