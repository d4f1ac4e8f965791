//! Publish-to-readable latency on PostgreSQL (contract v1.2 §K, issue 36):
//! a publisher commits events one per transaction at a steady rate; a
//! reader polls `alk_read` from its last offset and notes when each event
//! first shows; the latency is that moment minus the moment the
//! publisher's COMMIT returned. p50 and p99 for four cells:
//!
//! - **worker**: the database served by the extension's maintenance worker
//!   (`ALKSTORE_PG_WORKER_URL`), a reader in plain SQL that never calls
//!   `alk_sequence` (the worker, woken by each commit, gives the offsets);
//! - **facade**: a database without the worker (`ALKSTORE_PG_URL`), read
//!   through `Stream::read`, which calls `alk_sequence` when it reaches the
//!   end of what has offsets;
//!
//! each alone and next to a **long consumer**: the exactly-once pattern,
//! a transaction that reads, works 300 ms and saves its offset, in a loop
//! (before 0.3.0 it held the stream's sequencing lock for those 300 ms).
//!
//! `ALKSTORE_PG_WORKER_URL=… ALKSTORE_PG_URL=… cargo bench -p alkstore --bench stream_latency`
//! (`ALK_BENCH_SECS`: seconds of publishing per cell, default 5;
//! `ALK_BENCH_RATE`: events per second, default 200). Not run by the tests.

use alkstore::PgStore;
use postgres::{Client, NoTls};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The exactly-once consumer: read, work 300 ms, save, commit; again.
fn long_consumer(url: &str, stream: &str, stop: &AtomicBool) {
    let mut c = Client::connect(url, NoTls).unwrap();
    while !stop.load(Ordering::Relaxed) {
        let mut tx = c.transaction().unwrap();
        let from: i64 = tx
            .query_one("SELECT alk_get_offset($1, 'long')", &[&stream])
            .unwrap()
            .get(0);
        let last: Option<i64> = tx
            .query_one(
                "SELECT max(\"offset\") FROM alk_read($1, $2, 1000)",
                &[&stream, &from],
            )
            .unwrap()
            .get(0);
        std::thread::sleep(Duration::from_millis(300));
        if let Some(last) = last {
            tx.execute("SELECT alk_save_offset($1, 'long', $2)", &[&stream, &last])
                .unwrap();
        }
        tx.commit().unwrap();
    }
}

/// Polls for new events until `stop`; when each id was first seen.
fn reader(url: &str, stream: &str, facade: bool, stop: &AtomicBool) -> HashMap<i64, Instant> {
    let mut seen = HashMap::new();
    let mut last = 0i64;
    let mut page: Vec<(i64, i64)> = Vec::new();
    let store = facade.then(|| PgStore::connect(url).unwrap());
    let s = store.as_ref().map(|store| store.stream(stream).unwrap());
    let mut c = (!facade).then(|| Client::connect(url, NoTls).unwrap());
    while !stop.load(Ordering::Relaxed) {
        page.clear();
        if let Some(s) = &s {
            page.extend(s.read(last, 1000).unwrap().iter().map(|e| (e.id, e.offset)));
        } else if let Some(c) = &mut c {
            let rows = c
                .query(
                    "SELECT id, \"offset\" FROM alk_read($1, $2, 1000)",
                    &[&stream, &last],
                )
                .unwrap();
            page.extend(
                rows.iter()
                    .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1))),
            );
        }
        if page.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        for &(id, offset) in &page {
            seen.entry(id).or_insert_with(Instant::now);
            last = last.max(offset);
        }
    }
    seen
}

/// One cell: p50, p99 and max in milliseconds, and how many were read.
fn cell(url: &str, facade: bool, long: bool, secs: u64, rate: u64) -> (f64, f64, f64, usize) {
    let stream = format!("bench-latency-{}-{}-{}", std::process::id(), facade, long);
    let stop = Arc::new(AtomicBool::new(false));
    let done_reading = Arc::new(AtomicBool::new(false));
    let consumer = long.then(|| {
        let (url, stream, stop) = (url.to_string(), stream.clone(), Arc::clone(&stop));
        std::thread::spawn(move || long_consumer(&url, &stream, &stop))
    });
    let reading = {
        let (url, stream, done) = (url.to_string(), stream.clone(), Arc::clone(&done_reading));
        std::thread::spawn(move || reader(&url, &stream, facade, &done))
    };
    let committed = Arc::new(Mutex::new(HashMap::new()));
    let mut c = Client::connect(url, NoTls).unwrap();
    let n = secs * rate;
    let start = Instant::now();
    for i in 0..n {
        let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let id: i64 = c
            .query_one("SELECT alk_publish($1, '{}')", &[&stream])
            .unwrap()
            .get(0);
        committed.lock().unwrap().insert(id, Instant::now());
    }
    // Time for the last ones to show.
    std::thread::sleep(Duration::from_secs(2));
    done_reading.store(true, Ordering::Relaxed);
    let seen = reading.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = consumer {
        t.join().unwrap();
    }
    let committed = committed.lock().unwrap();
    let mut ms: Vec<f64> = committed
        .iter()
        .filter_map(|(id, at)| {
            seen.get(id)
                .map(|s| s.saturating_duration_since(*at).as_secs_f64() * 1000.0)
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let pick = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    if ms.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN, 0);
    }
    (pick(0.5), pick(0.99), pick(1.0), ms.len())
}

fn main() {
    let (Ok(worker), Ok(plain_db)) = (
        std::env::var("ALKSTORE_PG_WORKER_URL"),
        std::env::var("ALKSTORE_PG_URL"),
    ) else {
        eprintln!("set ALKSTORE_PG_WORKER_URL (a database the maintenance worker serves) and ALKSTORE_PG_URL");
        return;
    };
    let secs = env_u64("ALK_BENCH_SECS", 5);
    let rate = env_u64("ALK_BENCH_RATE", 200);
    println!(
        "publish-to-readable, {rate} events/s for {secs} s per cell, one event per transaction"
    );
    println!(
        "{:<8} {:<14} {:>9} {:>9} {:>9} {:>8}",
        "reader", "consumer", "p50 ms", "p99 ms", "max ms", "read"
    );
    for (label, url, facade) in [("worker", &worker, false), ("facade", &plain_db, true)] {
        for long in [false, true] {
            let (p50, p99, max, read) = cell(url, facade, long, secs, rate);
            println!(
                "{:<8} {:<14} {:>9.1} {:>9.1} {:>9.1} {:>8}",
                label,
                if long { "long (300 ms)" } else { "none" },
                p50,
                p99,
                max,
                read
            );
        }
    }
}
