//! Faults under load (issue 15): 4 producers and 8 workers through the
//! facade on PostgreSQL while the server restarts and backends are killed.
//! Every job whose enqueue returned Ok is processed at least once; workers
//! and listeners recover on their own. A stream is published to and read
//! through the same faults: every event whose publish returned Ok is read,
//! with offsets that never skip, go back or change.
//!
//! The restart runs the command in `ALKSTORE_PG_RESTART` (the test command
//! sets `pg_ctlcluster 15 main restart`); without it only backends are killed.

mod common;
use alkstore::{EnqueueOpts, PgStore, QueueOpts, Stop, Worker};
use common::*;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const PRODUCERS: usize = 4;
const PER_PRODUCER: i64 = 300;

fn kill_backends(direct: &str) {
    // The server may be restarting: try a few times.
    for _ in 0..50 {
        if let Ok(mut c) = postgres::Client::connect(direct, postgres::NoTls) {
            if c.batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .is_ok()
            {
                return;
            }
        }
        std::thread::sleep(ms(100));
    }
    panic!("could not reach the server to kill its backends");
}

#[test]
fn committed_jobs_survive_restarts_and_killed_backends() {
    for target in targets() {
        let Target::Postgres(pg) = &target else {
            continue;
        };
        if pg.pooled() {
            continue; // the same server: once is enough
        }
        let q = fresh("faults");
        let producer_store = PgStore::connect(&pg.url).unwrap();
        let worker_store = PgStore::connect(&pg.url).unwrap();
        // Claims lost with a connection come back quickly.
        worker_store
            .queue(&q)
            .unwrap()
            .configure(&QueueOpts::new().visibility_timeout(Duration::from_secs(2)))
            .unwrap();
        let committed = Mutex::new(HashSet::new());
        let processed = Mutex::new(HashSet::new());
        let stream = fresh("faults-s");
        let published = Mutex::new(HashSet::new());
        let read = Mutex::new(Vec::<i64>::new());
        let stop = Stop::new();
        let done_producing = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                Worker::new(worker_store.queue(&q).unwrap(), "faulty")
                    .concurrency(8)
                    .run(&stop, |job| {
                        processed
                            .lock()
                            .unwrap()
                            .insert(job.payload["n"].as_i64().unwrap());
                        Ok(())
                    })
            });
            for p in 0..PRODUCERS as i64 {
                let (committed, store, q, done) =
                    (&committed, &producer_store, &q, &done_producing);
                s.spawn(move || {
                    let queue = store.queue(q).unwrap();
                    for i in 0..PER_PRODUCER {
                        let n = p * PER_PRODUCER + i;
                        // Retried until it returns Ok: an enqueue whose commit
                        // outcome was lost may exist twice, never zero times.
                        loop {
                            match queue.enqueue(&EnqueueOpts::new(), &json!({ "n": n })) {
                                Ok(_) => break,
                                Err(_) => std::thread::sleep(ms(50)),
                            }
                        }
                        committed.lock().unwrap().insert(n);
                        std::thread::sleep(ms(2));
                    }
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                });
            }
            {
                let (store, stream, published) = (&producer_store, &stream, &published);
                s.spawn(move || {
                    let stream = store.stream(stream).unwrap();
                    for n in 0..PER_PRODUCER {
                        loop {
                            match stream.publish(&json!({ "n": n }), None) {
                                Ok(id) => {
                                    published.lock().unwrap().insert(id);
                                    break;
                                }
                                Err(_) => std::thread::sleep(ms(50)),
                            }
                        }
                        std::thread::sleep(ms(2));
                    }
                });
            }
            let reader = {
                let (store, stream, read, stop) = (&worker_store, &stream, &read, &stop);
                s.spawn(move || {
                    let stream = store.stream(stream).unwrap();
                    let mut after = 0;
                    while !stop.is_stopped() {
                        let Ok(page) = stream.read(after, 100) else {
                            std::thread::sleep(ms(50));
                            continue;
                        };
                        for event in &page {
                            assert_eq!(event.offset, after + 1, "an offset skipped or went back");
                            after = event.offset;
                        }
                        read.lock().unwrap().extend(page.iter().map(|e| e.id));
                        if page.is_empty() {
                            std::thread::sleep(ms(10));
                        }
                    }
                    // What was read is what is there now: no offset changed.
                    let again: Vec<i64> = (0..)
                        .map_while(|k| {
                            let page = stream.read(k * 1000, 1000).unwrap();
                            (!page.is_empty()).then_some(page)
                        })
                        .flatten()
                        .map(|e| e.id)
                        .collect();
                    assert_eq!(again, *read.lock().unwrap(), "the events read changed");
                })
            };
            // Backends killed every 30 ms for 3 s, so that calls die in
            // flight (idle pooled connections are re-made at checkout), and
            // the server restarted in the middle of it.
            std::thread::sleep(ms(300));
            let faults_until = Instant::now() + Duration::from_secs(3);
            let mut restarted = std::env::var("ALKSTORE_PG_RESTART").is_err();
            while Instant::now() < faults_until {
                kill_backends(&pg.direct);
                if !restarted && faults_until - Instant::now() < Duration::from_millis(1500) {
                    let cmd = std::env::var("ALKSTORE_PG_RESTART").unwrap();
                    let status = std::process::Command::new("sh")
                        .args(["-c", &cmd])
                        .status()
                        .unwrap();
                    assert!(status.success(), "{cmd}");
                    restarted = true;
                }
                std::thread::sleep(ms(30));
            }
            let until = Instant::now() + Duration::from_secs(90);
            loop {
                let all_produced =
                    done_producing.load(std::sync::atomic::Ordering::SeqCst) == PRODUCERS;
                let missing = {
                    let (c, p) = (committed.lock().unwrap(), processed.lock().unwrap());
                    c.difference(&p).count()
                };
                let unread = {
                    let (p, r) = (published.lock().unwrap(), read.lock().unwrap());
                    let r: HashSet<i64> = r.iter().copied().collect();
                    p.len() < PER_PRODUCER as usize || p.difference(&r).count() > 0
                };
                if all_produced && missing == 0 && !unread {
                    break;
                }
                assert!(
                    Instant::now() < until,
                    "[{}] {missing} committed jobs never processed, or events \
                     published never read ({unread})",
                    target.name()
                );
                std::thread::sleep(ms(100));
            }
            stop.stop();
            reader.join().unwrap();
            let handled = worker.join().unwrap().expect("the worker survived");
            assert!(handled >= PRODUCERS as u64 * PER_PRODUCER as u64);
        });
        assert_eq!(
            committed.lock().unwrap().len(),
            PRODUCERS * PER_PRODUCER as usize
        );
    }
}
