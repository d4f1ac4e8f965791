//! Issue 57 item 3: what one request of the dashboard may hold in memory,
//! whatever the payloads weigh (any `alkstore_user` can enqueue 1 MB
//! payloads). A filtered page and a bulk dry-run scan 100 jobs of 1 MB on
//! SQLite; the process's peak resident memory may grow by at most 300 MB
//! (it grew by 495 MB when they held every document they read; 175–200 MB
//! now, a page of 25 documents in SQLite's JSON text, its copy and its
//! parse, across the allocator's per-thread arenas). Alone in its binary:
//! the peak is the whole process's.

mod common;

use alkstore::EnqueueOpts;
use alkstore_web::Config;
use common::*;
use serde_json::json;

/// The process's peak resident set (`VmHWM`), in MB.
fn peak_mb() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: i64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status");
    kb / 1024
}

#[test]
fn a_scan_of_large_payloads_holds_a_page_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("big.db").display());
    let store = alkstore::open(&url).unwrap();
    let name = fresh("big");
    let q = store.queue(&name).unwrap();
    let blob = "x".repeat(1 << 20);
    for n in 0..100 {
        q.enqueue(&EnqueueOpts::new(), &json!({"n": n, "blob": blob}))
            .unwrap();
    }
    drop(blob);
    let server = serve(&url, Config::default());
    // Warm up: the server's first answers (its sampler, its pages).
    assert_eq!(get(&server.url("/api/queues"), &[]).status, 200);
    let before = peak_mb();
    let page = get(
        &server.url(&format!("/api/queues/{name}/jobs?filter=n=-1")),
        &[],
    );
    assert_eq!((page.status, page.json()), (200, json!([])), "no match");
    let bulk = post(
        &server.url(&format!(
            "/api/queues/{name}/bulk?action=cancel&state=pending&filter=n=-1&dry_run=true"
        )),
        &[],
        None,
    );
    assert_eq!(bulk.status, 200, "{}", bulk.text);
    assert_eq!(bulk.json()["matched"], 0);
    let all = post(
        &server.url(&format!(
            "/api/queues/{name}/bulk?action=cancel&state=pending&dry_run=true"
        )),
        &[],
        None,
    );
    assert_eq!(all.json()["matched"], 100, "{}", all.text);
    let grew = peak_mb() - before;
    assert!(
        grew < 300,
        "the peak resident memory grew by {grew} MB scanning 100 jobs of 1 MB"
    );
}
