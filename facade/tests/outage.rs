//! A long outage (issue 64 item 10): the server is stopped for 15 s, then
//! started again, and a job enqueued as soon as it accepts connections is
//! handled within seconds by the blocking `Worker` and the async one. The
//! blocking store's pool (r2d2) used to wait up to 15 s between attempts to
//! reconnect, so the worker sat idle for about 10 s after the server came
//! back. Alone in its test binary: stopping the server drops every
//! connection. Runs where the test command sets `ALKSTORE_PG_STOP` and
//! `ALKSTORE_PG_START` (`pg_ctlcluster 15 main stop` / `start`).

mod async_common;
mod common;

use alkstore::{AsyncWorker, PgStore, QueueOpts, Stop, Worker};
use common::*;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The outage: long enough for a doubling reconnect pause to reach seconds.
const DOWN: Duration = Duration::from_secs(15);
/// What "resumes within seconds" allows on a loaded 2-core machine: a
/// reconnect pause of at most a second, the worker's own pause of at most
/// a second, and room for the load.
const RESUMED_WITHIN: Duration = Duration::from_secs(5);

fn sh(cmd: &str) {
    let status = std::process::Command::new("sh")
        .args(["-c", cmd])
        .status()
        .unwrap();
    assert!(status.success(), "{cmd}");
}

/// Enqueues through a connection of its own, retrying while the server
/// finishes coming up.
fn enqueue(direct: &str, queue: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let done = postgres::Client::connect(direct, postgres::NoTls).and_then(|mut c| {
            c.execute(
                "SELECT alk_enqueue($1, NULL, '{\"after\": \"the outage\"}')",
                &[&queue],
            )
        });
        match done {
            Ok(_) => return,
            Err(e) if Instant::now() < until => {
                eprintln!("enqueue after the outage: {e}");
                std::thread::sleep(ms(100));
            }
            Err(e) => panic!("enqueue after the outage: {e}"),
        }
    }
}

#[test]
fn workers_resume_within_seconds_of_a_long_outage() {
    let (Ok(stop_cmd), Ok(start_cmd)) = (
        std::env::var("ALKSTORE_PG_STOP"),
        std::env::var("ALKSTORE_PG_START"),
    ) else {
        eprintln!("note: ALKSTORE_PG_STOP / ALKSTORE_PG_START not set: outage not tested");
        return;
    };
    let Some(Target::Postgres(pg)) = targets()
        .into_iter()
        .find(|t| matches!(t, Target::Postgres(pg) if !pg.pooled()))
    else {
        return;
    };
    let blocking_q = fresh("outage");
    let async_q = fresh("outage-async");
    let store = PgStore::connect(&pg.url).unwrap();
    for q in [&blocking_q, &async_q] {
        store
            .queue(q)
            .unwrap()
            .configure(&QueueOpts::new().visibility_timeout(Duration::from_secs(2)))
            .unwrap();
    }
    let stop = Stop::new();
    let (handled_tx, handled) = mpsc::channel::<(&str, Instant)>();
    std::thread::scope(|s| {
        {
            let (tx, stop, store, q) = (handled_tx.clone(), &stop, &store, &blocking_q);
            s.spawn(move || {
                Worker::new(store.queue(q).unwrap(), "outage")
                    .run(stop, |_| {
                        let _ = tx.send(("blocking", Instant::now()));
                        Ok(())
                    })
                    .expect("the blocking worker survived the outage")
            });
        }
        {
            let (tx, stop, q) = (handled_tx.clone(), &stop, &async_q);
            s.spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let (_, store) = async_common::tokio_stores()
                        .await
                        .into_iter()
                        .next()
                        .unwrap();
                    AsyncWorker::new(store.queue(q).unwrap(), "outage")
                        .run(
                            async move {
                                while !stop.is_stopped() {
                                    tokio::time::sleep(ms(50)).await;
                                }
                            },
                            move |_| {
                                let tx = tx.clone();
                                async move {
                                    let _ = tx.send(("async", Instant::now()));
                                    Ok::<(), String>(())
                                }
                            },
                        )
                        .await
                        .expect("the async worker survived the outage")
                })
            });
        }
        // Both work before the outage.
        for q in [&blocking_q, &async_q] {
            enqueue(&pg.direct, q);
        }
        let mut seen = vec![];
        while seen.len() < 2 {
            let (who, _) = handled.recv_timeout(Duration::from_secs(60)).unwrap();
            seen.push(who);
        }
        sh(&stop_cmd);
        std::thread::sleep(DOWN);
        sh(&start_cmd); // returns once the server accepts connections
        let back = Instant::now();
        for q in [&blocking_q, &async_q] {
            enqueue(&pg.direct, q);
        }
        let mut waits = vec![];
        while waits.len() < 2 {
            match handled.recv_timeout(Duration::from_secs(60)) {
                Ok((who, at)) => waits.push((who, at - back)),
                Err(_) => break,
            }
        }
        stop.stop();
        eprintln!("handled after the server came back: {waits:?}");
        assert_eq!(
            waits.len(),
            2,
            "both workers handled a job after the outage"
        );
        for (who, wait) in waits {
            assert!(
                wait < RESUMED_WITHIN,
                "the {who} worker handled its first job {wait:?} after the server came back"
            );
        }
    });
}
