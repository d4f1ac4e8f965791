//! alkstore on SQLite beside the raw SQLite floor.
//!
//! Each operation runs through the `alk_*` functions and, in the same run,
//! as plain INSERT / UPDATE / DELETE / SELECT statements on tables of the
//! same shape (same columns, same indexes), so the printed ratio is the
//! cost alkstore adds over what the application could do by hand.
//!
//! A real file in WAL mode with `synchronous = NORMAL` (the facade's
//! setting). Run: `cargo bench -p alkstore-sqlite --bench sqlite`
//! (`ALK_BENCH_QUICK=1` for a short smoke run; `ALK_BENCH_HONKER=<path of
//! libhonker_ext.so>`, printed by `scripts/bench-peers.sh honker`, adds the
//! same operations through honker; `ALK_BENCH_RAW=plain`: the raw side on
//! the plain job table a user would write by hand instead of copies of
//! alkstore's tables).

use rusqlite::{params, Connection};
use std::time::{Duration, Instant};

fn open(path: &std::path::Path) -> Connection {
    let c = Connection::open(path).unwrap();
    // The busy timeout first: the pragmas read the file too.
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", "NORMAL").unwrap();
    alkstore_sqlite::register(&c).unwrap();
    c.execute_batch("SELECT alk_init()").unwrap();
    // The raw floor: copies of alkstore's job and event tables, same indexes.
    let schema = alkstore_sqlite::sql::SCHEMA
        .replace("alk_jobs", "raw_jobs")
        .replace("alk_events", "raw_events")
        .replace(
            "INSERT OR IGNORE INTO alk_meta",
            "INSERT OR IGNORE INTO raw_meta",
        )
        .replace("alk_meta", "raw_meta");
    if plain() {
        c.execute_batch(PLAIN_SCHEMA).unwrap();
    } else {
        c.execute_batch(&schema).unwrap();
    }
    c
}

/// `ALK_BENCH_RAW=plain`: the raw floor is the job table a user would write
/// by hand (issue 35 item 4) — the columns a queue needs, `INTEGER PRIMARY
/// KEY` ids (reused after a delete of the last one: no AUTOINCREMENT), one
/// claim index — and an event table keyed by (stream, offset); instead of
/// copies of alkstore's tables.
fn plain() -> bool {
    std::env::var("ALK_BENCH_RAW").as_deref() == Ok("plain")
}

const PLAIN_SCHEMA: &str = "
CREATE TABLE raw_jobs (
  id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL, state TEXT NOT NULL,
  run_at INTEGER NOT NULL, priority INTEGER NOT NULL, attempts INTEGER NOT NULL,
  claimed_by TEXT, claim_expires_at INTEGER);
CREATE INDEX raw_jobs_claim ON raw_jobs (queue, state, priority DESC, run_at, id);
CREATE TABLE raw_events (
  stream TEXT NOT NULL, \"offset\" INTEGER NOT NULL, key TEXT, payload TEXT NOT NULL,
  created_at INTEGER NOT NULL, PRIMARY KEY (stream, \"offset\"));
";

fn raw_insert() -> &'static str {
    if plain() {
        "INSERT INTO raw_jobs (queue, state, payload, priority, attempts, run_at) \
         VALUES (?1, 'pending', ?2, 0, 0, ?3)"
    } else {
        RAW_INSERT
    }
}

fn raw_claim() -> &'static str {
    if plain() {
        "UPDATE raw_jobs SET state = 'running', attempts = attempts + 1, claimed_by = ?2, \
         claim_expires_at = ?3 + 60000 \
         WHERE id IN (SELECT id FROM raw_jobs WHERE queue = ?1 AND state = 'pending' AND run_at <= ?3 \
         ORDER BY priority DESC, run_at, id LIMIT ?4) RETURNING id, payload"
    } else {
        RAW_CLAIM
    }
}

struct Report {
    rows: Vec<(String, f64, f64)>,
}

impl Report {
    fn add(&mut self, name: &str, ops: u64, alk: Duration, raw: Duration) {
        let a = ops as f64 / alk.as_secs_f64();
        let r = ops as f64 / raw.as_secs_f64();
        println!(
            "{name:<34} {a:>12.0} ops/s {r:>12.0} ops/s   {:>5.2}x",
            r / a
        );
        self.rows.push((name.to_string(), a, r));
    }
}

/// Best of three runs: the machine is shared and the first run warms caches.
fn time(mut f: impl FnMut()) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

const RAW_INSERT: &str =
    "INSERT INTO raw_jobs (queue, state, payload, priority, attempts, max_attempts, \
    visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, expires_at) \
    VALUES (?1, 'pending', ?2, 0, 0, 5, 60000, 5000, 3600000, ?3, ?3, NULL)";

const RAW_CLAIM: &str =
    "UPDATE raw_jobs SET state = 'running', attempts = attempts + 1, claimed_by = ?2, \
    claim_expires_at = ?3 + visibility_timeout_ms \
    WHERE id IN (SELECT id FROM raw_jobs WHERE queue = ?1 AND state = 'pending' AND run_at <= ?3 \
    ORDER BY priority DESC, run_at, id LIMIT ?4) RETURNING id, payload";

fn now() -> i64 {
    alkstore_core::time::now_ms()
}

fn payload(i: u64) -> String {
    format!("{{\"user\":{i},\"email\":\"user{i}@example.com\",\"plan\":\"pro\"}}")
}

/// The part of a claimed job the bench's worker looks at.
#[derive(serde::Deserialize)]
struct Claimed {
    id: i64,
    #[allow(dead_code)]
    payload: serde_json::Value,
}

fn main() {
    let quick = std::env::var_os("ALK_BENCH_QUICK").is_some();
    let n: u64 = if quick { 500 } else { 20_000 };
    let dir = tempfile::tempdir().unwrap();
    let c = open(&dir.path().join("bench.db"));
    // ALK_BENCH_ONLY=limits, =ahead or =deps: that section alone.
    match std::env::var("ALK_BENCH_ONLY").as_deref() {
        Ok("limits") => return limits(&c, quick),
        Ok("ahead") => return ahead(&c, quick),
        Ok("deps") => return deps(&c, quick),
        _ => {}
    }
    let mut report = Report { rows: Vec::new() };
    println!(
        "{:<34} {:>18} {:>18}   {:>6}",
        "operation", "alkstore", "raw SQLite", "ratio"
    );

    // 1. enqueue, one job per transaction
    let alk = time(|| {
        let mut st = c.prepare("SELECT alk_enqueue('bench', NULL, ?1)").unwrap();
        for i in 0..n {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            st.query_row([payload(i)], |r| r.get::<_, i64>(0)).unwrap();
            c.execute_batch("COMMIT").unwrap();
        }
    });
    let raw = time(|| {
        let mut st = c.prepare(raw_insert()).unwrap();
        for i in 0..n {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            st.execute(params!["bench", payload(i), now()]).unwrap();
            c.execute_batch("COMMIT").unwrap();
        }
    });
    report.add("enqueue 1/tx", n, alk, raw);

    // 2. enqueue 100 per transaction (one alk_enqueue_batch)
    let batches = n / 100;
    let alk = time(|| {
        let mut st = c
            .prepare("SELECT alk_enqueue_batch('bench', NULL, ?1)")
            .unwrap();
        for b in 0..batches {
            let items: Vec<String> = (0..100).map(|i| payload(b * 100 + i)).collect();
            let arr = format!("[{}]", items.join(","));
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            st.query_row([arr], |r| r.get::<_, String>(0)).unwrap();
            c.execute_batch("COMMIT").unwrap();
        }
    });
    let raw = time(|| {
        let mut st = c.prepare(raw_insert()).unwrap();
        for b in 0..batches {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            let t = now();
            for i in 0..100 {
                st.execute(params!["bench", payload(b * 100 + i), t])
                    .unwrap();
            }
            c.execute_batch("COMMIT").unwrap();
        }
    });
    report.add("enqueue 100/tx (batch)", batches * 100, alk, raw);

    // 3. claim + ack, one job at a time, each call its own transaction
    let ops = n / 2;
    let alk = time(|| {
        let mut claim = c.prepare("SELECT alk_claim('bench', 'w', 1)").unwrap();
        let mut ack = c.prepare("SELECT alk_ack(?1 ->> '$[0].id', 'w')").unwrap();
        for _ in 0..ops {
            let jobs: String = claim.query_row([], |r| r.get(0)).unwrap();
            assert!(ack.query_row([jobs], |r| r.get::<_, bool>(0)).unwrap());
        }
    });
    let raw = time(|| {
        let mut claim = c.prepare(raw_claim()).unwrap();
        let mut ack = c.prepare("DELETE FROM raw_jobs WHERE id = ?1").unwrap();
        for _ in 0..ops {
            let id: i64 = claim
                .query_row(params!["bench", "w", now(), 1], |r| r.get(0))
                .unwrap();
            assert_eq!(ack.execute([id]).unwrap(), 1);
        }
    });
    report.add("claim+ack 1 at a time", ops, alk, raw);

    // 4. claim + ack in batches
    for size in [32i64, 128] {
        let rounds = (n as i64 / 2 / size).max(1);
        let alk = time(|| {
            let mut claim = c.prepare("SELECT alk_claim('bench', 'w', ?1)").unwrap();
            let mut ack = c.prepare("SELECT alk_ack_batch(?1, 'w')").unwrap();
            for _ in 0..rounds {
                // As a client does: parse the claimed jobs, work, ack their ids.
                let jobs: String = claim.query_row([size], |r| r.get(0)).unwrap();
                let jobs: Vec<Claimed> = serde_json::from_str(&jobs).unwrap();
                let ids =
                    serde_json::to_string(&jobs.iter().map(|j| j.id).collect::<Vec<_>>()).unwrap();
                assert_eq!(ack.query_row([ids], |r| r.get::<_, i64>(0)).unwrap(), size);
            }
        });
        let raw = time(|| {
            let mut claim = c.prepare(raw_claim()).unwrap();
            let mut ack = c
                .prepare("DELETE FROM raw_jobs WHERE id IN (SELECT value FROM json_each(?1))")
                .unwrap();
            for _ in 0..rounds {
                c.execute_batch("BEGIN IMMEDIATE").unwrap();
                let ids: Vec<i64> = claim
                    .query_map(params!["bench", "w", now(), size], |r| {
                        let payload: String = r.get(1)?;
                        Ok((
                            r.get(0)?,
                            serde_json::from_str::<serde_json::Value>(&payload).unwrap(),
                        ))
                    })
                    .unwrap()
                    .map(|r| r.unwrap().0)
                    .collect();
                c.execute_batch("COMMIT").unwrap();
                let list = serde_json::to_string(&ids).unwrap();
                assert_eq!(ack.execute([list]).unwrap() as i64, size);
            }
        });
        report.add(
            &format!("claim {size} + ack_batch"),
            (rounds * size) as u64,
            alk,
            raw,
        );
    }

    // 5. publish, one event per transaction
    let alk = time(|| {
        let mut st = c.prepare("SELECT alk_publish('events', ?1)").unwrap();
        for i in 0..n {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            st.query_row([payload(i)], |r| r.get::<_, i64>(0)).unwrap();
            c.execute_batch("COMMIT").unwrap();
        }
    });
    let mut next_offset = 0i64; // the application's own counter, carried across runs
    let raw = time(|| {
        let mut st = c
            .prepare("INSERT INTO raw_events (stream, \"offset\", key, payload, created_at) VALUES ('events', ?1, NULL, ?2, ?3)")
            .unwrap();
        for i in 0..n {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            next_offset += 1;
            st.execute(params![next_offset, payload(i), now()]).unwrap();
            c.execute_batch("COMMIT").unwrap();
        }
    });
    report.add("publish 1/tx", n, alk, raw);

    // 6. read the stream in pages of 1000
    let pages = n / 1000;
    let alk = time(|| {
        let mut st = c.prepare("SELECT alk_read('events', ?1, 1000)").unwrap();
        for p in 0..pages.max(1) {
            let text: String = st.query_row([p as i64 * 1000], |r| r.get(0)).unwrap();
            assert!(text.len() > 2);
        }
    });
    let raw = time(|| {
        let mut st = c
            .prepare("SELECT \"offset\", key, payload, created_at FROM raw_events WHERE stream = 'events' AND \"offset\" > ?1 ORDER BY \"offset\" LIMIT 1000")
            .unwrap();
        for p in 0..pages.max(1) {
            let mut rows = st.query([p as i64 * 1000]).unwrap();
            let mut k = 0;
            while let Some(r) = rows.next().unwrap() {
                let _: (i64, Option<String>, String, i64) = (
                    r.get(0).unwrap(),
                    r.get(1).unwrap(),
                    r.get(2).unwrap(),
                    r.get(3).unwrap(),
                );
                k += 1;
            }
            assert!(k > 0);
        }
    });
    report.add(
        "read page of 1000 (events/s)",
        pages.max(1) * 1000,
        alk,
        raw,
    );

    if let Some(lib) = std::env::var_os("ALK_BENCH_HONKER") {
        honker(dir.path(), lib.as_ref(), n, &report);
    }

    job_features(&c, quick, &mut report);

    let worst = report
        .rows
        .iter()
        .map(|(_, a, r)| r / a)
        .fold(0.0, f64::max);
    println!("worst ratio (raw / alkstore): {worst:.2}x");

    admin_paging(&c, quick);
    limits(&c, quick);
    ahead(&c, quick);
    deps(&c, quick);
}

/// Job dependencies (contract v1.2 §J), each against the same work without
/// them (the "raw" column here): a transaction enqueueing a job and one
/// after it, against two jobs through the same enqueue path; claim+ack 1
/// where each ack releases a job, against a plain backlog of the same
/// size; then the ack of a job with 1,000 dependents beside a backlog.
fn deps(c: &Connection, quick: bool) {
    let ops: u64 = if quick { 200 } else { 5_000 };
    let backlog: u64 = if quick { 10_000 } else { 100_000 };
    println!(
        "
job dependencies, against the same work without them:"
    );
    let mut report = Report { rows: Vec::new() };
    let pairs = |opts: &str| {
        c.execute_batch("DELETE FROM alk_jobs; DELETE FROM alk_job_deps")
            .unwrap();
        let mut first = c.prepare("SELECT alk_enqueue('e', NULL, '1')").unwrap();
        let mut second = c.prepare("SELECT alk_enqueue('e', ?1, '2')").unwrap();
        timed(|| {
            for _ in 0..ops {
                c.execute_batch("BEGIN IMMEDIATE").unwrap();
                let id: i64 = first.query_row([], |r| r.get(0)).unwrap();
                let opts = opts.replace("ID", &id.to_string());
                second.query_row([opts], |r| r.get::<_, i64>(0)).unwrap();
                c.execute_batch("COMMIT").unwrap();
            }
        })
    };
    let (with, without) = alternate(
        || pairs(r#"{"depends_on": [ID]}"#),
        || pairs(r#"{"priority": 0}"#),
    );
    report.add("a job and one after it (2/tx)", ops, with, without);
    // Each ack releases a job (at a lower priority, so parents come first).
    let fill = |deps: bool| {
        c.execute_batch("DELETE FROM alk_jobs; DELETE FROM alk_job_deps; BEGIN IMMEDIATE")
            .unwrap();
        let mut first = c.prepare("SELECT alk_enqueue('q', NULL, '1')").unwrap();
        let mut second = c.prepare("SELECT alk_enqueue('q', ?1, '2')").unwrap();
        for _ in 0..ops {
            let id: i64 = first.query_row([], |r| r.get(0)).unwrap();
            let opts = match deps {
                true => format!(r#"{{"priority": -1, "depends_on": [{id}]}}"#),
                false => r#"{"priority": -1}"#.to_string(),
            };
            second.query_row([opts], |r| r.get::<_, i64>(0)).unwrap();
        }
        c.execute_batch("COMMIT; ANALYZE").unwrap();
    };
    let (with, without) = alternate(
        || {
            fill(true);
            claim_ack_q(c, ops)
        },
        || {
            fill(false);
            claim_ack_q(c, ops)
        },
    );
    report.add("claim+ack 1, each ack releasing 1", ops, with, without);
    // Fan-out: one ack releases 1,000 jobs, beside a backlog.
    c.execute_batch("DELETE FROM alk_jobs; DELETE FROM alk_job_deps")
        .unwrap();
    let payloads = serde_json::to_string(&(0..1_000).collect::<Vec<_>>()).unwrap();
    c.execute_batch("BEGIN IMMEDIATE").unwrap();
    for _ in 0..backlog / 1_000 {
        c.query_row(
            "SELECT alk_enqueue_batch('other', NULL, ?1)",
            [&payloads],
            |_| Ok(()),
        )
        .unwrap();
    }
    let root: i64 = c
        .query_row("SELECT alk_enqueue('fan', NULL, '0')", [], |r| r.get(0))
        .unwrap();
    c.query_row(
        "SELECT alk_enqueue_batch('fan', ?1, ?2)",
        [format!(r#"{{"depends_on": [{root}]}}"#), payloads],
        |_| Ok(()),
    )
    .unwrap();
    c.execute_batch("COMMIT; ANALYZE").unwrap();
    c.query_row("SELECT alk_claim('fan', 'w', 1)", [], |_| Ok(()))
        .unwrap();
    let d = timed(|| {
        assert!(c
            .query_row("SELECT alk_ack(?1, 'w')", [root], |r| r.get::<_, bool>(0))
            .unwrap());
    });
    println!(
        "ack of a job with 1000 dependents beside {backlog} pending jobs: {:.1} ms",
        d.as_secs_f64() * 1e3
    );
}

/// Jobs scheduled ahead (contract v1.2 §H): claim+ack 1 on a backlog of due
/// jobs at priority 0 behind 100,000 jobs at priority 10 a day ahead,
/// against the same backlog without them (the "raw" column here); then the
/// 100,000 come due at once: claims before any sweep, and the longest
/// alk_sweep call that makes them pending.
fn ahead(c: &Connection, quick: bool) {
    let (due, later) = if quick {
        (2_000, 10_000)
    } else {
        (20_000, 100_000)
    };
    let ops = if quick { 200 } else { 2_000 };
    println!(
        "
jobs scheduled ahead, claim+ack 1 ({due} due at priority 0, {later} at priority 10):"
    );
    let mut report = Report { rows: Vec::new() };
    let fill = |ahead: bool| {
        c.execute_batch("DELETE FROM alk_jobs").unwrap();
        let batch = |opts: &str, n: u64| {
            let payloads = serde_json::to_string(&(0..n).collect::<Vec<_>>()).unwrap();
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            c.query_row(
                "SELECT alk_enqueue_batch('q', ?1, ?2)",
                [opts, &payloads],
                |_| Ok(()),
            )
            .unwrap();
            c.execute_batch("COMMIT").unwrap();
        };
        batch(r#"{"priority": 0}"#, due);
        if ahead {
            batch(r#"{"priority": 10, "delay_s": 86400}"#, later);
        }
        c.execute_batch("ANALYZE").unwrap();
    };
    let claim_ack = || claim_ack_q(c, ops);
    let (with, without) = alternate(
        || {
            fill(true);
            claim_ack()
        },
        || {
            fill(false);
            claim_ack()
        },
    );
    report.add("behind jobs scheduled ahead", ops, with, without);
    // All of them come due at once (their run_at moved into the past).
    let came_due = || {
        fill(true);
        c.execute(
            "UPDATE alk_jobs SET run_at = ?1 WHERE state = 'scheduled'",
            [now() - 1_000],
        )
        .unwrap();
    };
    came_due();
    let before_sweep = claim_ack();
    report.add("came due, before a sweep", ops, before_sweep, without);
    came_due();
    let mut longest = Duration::ZERO;
    let mut calls = 0;
    while c
        .query_row(
            "SELECT count(*) FROM alk_jobs WHERE state = 'scheduled'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        > 0
    {
        let d = timed(|| {
            c.query_row("SELECT alk_sweep('q')", [], |_| Ok(()))
                .unwrap();
        });
        longest = longest.max(d);
        calls += 1;
    }
    println!(
        "{later} came due at once: {calls} alk_sweep calls made them pending, the longest {:.1} ms",
        longest.as_secs_f64() * 1e3
    );
}

/// Flow control (contract v1.2 §I): claim+ack 1 on a backlog spread over
/// 10,000 limit keys (every key's first job, then every key's second, …)
/// with each kind of limit, against the same backlog without limits (the
/// "raw" column here): `max_running` and a rate that are never reached
/// (the cost of counting), 100 of the keys at `key_max_running` 1, and one
/// key at its limit whose 10,000 jobs come first in claim order.
fn limits(c: &Connection, quick: bool) {
    let (keys, per_key) = if quick { (1_000, 10) } else { (10_000, 10) };
    let ops = if quick { 200 } else { 2_000 };
    println!(
        "\nflow control, claim+ack 1 against the same backlog without limits ({} jobs, {keys} keys):",
        keys * per_key
    );
    let mut report = Report { rows: Vec::new() };
    let fill = |limits: &str, busy_first: bool, full_keys: i64| {
        c.execute_batch(
            "DELETE FROM alk_jobs; DELETE FROM alk_queue_limits; DELETE FROM alk_claim_times;",
        )
        .unwrap();
        c.query_row("SELECT alk_queue_configure('q', ?1)", [limits], |_| Ok(()))
            .unwrap();
        let mut insert = c
            .prepare(
                "INSERT INTO alk_jobs (queue, state, payload, priority, attempts, max_attempts,
                   visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at, limit_key)
                 VALUES ('q', 'pending', ?1, 0, 0, 5, 60000, 5000, 3600000, ?2, ?2, ?3)",
            )
            .unwrap();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        let start = now() - 3_600_000;
        let mut at = start;
        if busy_first {
            for i in 0..keys {
                at += 1;
                insert.execute(params![payload(i), at, "busy"]).unwrap();
            }
        }
        let n = if busy_first { keys } else { keys * per_key };
        for i in 0..n {
            at += 1;
            let key = format!("k{}", i % keys);
            insert.execute(params![payload(i), at, key]).unwrap();
        }
        // The keys at their limit: their first job held by another worker.
        c.execute(
            "UPDATE alk_jobs SET state = 'running', attempts = 1, claimed_by = 'holder',
                    claim_expires_at = ?1
              WHERE id IN (SELECT min(id) FROM alk_jobs
                            WHERE limit_key = 'busy' OR CAST(substr(limit_key, 2) AS INTEGER) < ?2
                            GROUP BY limit_key)",
            params![now() + 3_600_000, full_keys],
        )
        .unwrap();
        c.execute_batch("COMMIT; ANALYZE").unwrap();
    };
    let claim_ack = || claim_ack_q(c, ops);
    let cells: [(&str, &str, bool, i64); 4] = [
        (
            "max_running (never reached)",
            r#"{"max_running": 1000}"#,
            false,
            0,
        ),
        (
            "rate (never reached)",
            r#"{"rate_max": 1000000, "rate_per_s": 1}"#,
            false,
            0,
        ),
        (
            "keys: 100 at their limit",
            r#"{"key_max_running": 1}"#,
            false,
            100,
        ),
        (
            "keys: a full key's jobs first",
            r#"{"key_max_running": 1}"#,
            true,
            0,
        ),
    ];
    let off =
        r#"{"max_running": null, "rate_max": null, "rate_per_s": null, "key_max_running": null}"#;
    for (name, on, busy_first, full) in cells {
        let (limited, none) = alternate(
            || {
                fill(on, busy_first, full);
                claim_ack()
            },
            || {
                fill(off, busy_first, full);
                claim_ack()
            },
        );
        report.add(name, ops, limited, none);
    }
}

/// `ops` claim+acks of one job each on queue `q`, each call its own
/// transaction; how long they took.
fn claim_ack_q(c: &Connection, ops: u64) -> Duration {
    let mut claim = c.prepare("SELECT alk_claim('q', 'w', 1)").unwrap();
    let mut ack = c.prepare("SELECT alk_ack(?1 ->> '$[0].id', 'w')").unwrap();
    let t = Instant::now();
    for _ in 0..ops {
        let jobs: String = claim.query_row([], |r| r.get(0)).unwrap();
        assert!(ack.query_row([jobs], |r| r.get::<_, bool>(0)).unwrap());
    }
    t.elapsed()
}

/// The main table's operations through honker, a peer: its loadable
/// extension on a file of its own with the same settings, set beside the
/// alkstore figures of this run. honker has no batch enqueue, so its 100
/// per transaction are 100 calls.
fn honker(dir: &std::path::Path, lib: &std::path::Path, n: u64, report: &Report) {
    let c = Connection::open(dir.join("honker.db")).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", "NORMAL").unwrap();
    // SAFETY: loads the library the user named for this bench, then turns
    // extension loading off again.
    unsafe {
        c.load_extension_enable().unwrap();
        c.load_extension(lib, None::<&str>).unwrap();
        c.load_extension_disable().unwrap();
    }
    c.query_row("SELECT honker_bootstrap()", [], |_| Ok(()))
        .unwrap();
    let mut rows: Vec<(&str, u64, Duration)> = Vec::new();

    let d = time(|| {
        let mut st = c
            .prepare("SELECT honker_enqueue('bench', ?1, NULL, NULL, 0, 5, NULL)")
            .unwrap();
        for i in 0..n {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            st.query_row([payload(i)], |r| r.get::<_, i64>(0)).unwrap();
            c.execute_batch("COMMIT").unwrap();
        }
    });
    rows.push(("enqueue 1/tx", n, d));
    let batches = n / 100;
    let d = time(|| {
        let mut st = c
            .prepare("SELECT honker_enqueue('bench', ?1, NULL, NULL, 0, 5, NULL)")
            .unwrap();
        for b in 0..batches {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            for i in 0..100 {
                st.query_row([payload(b * 100 + i)], |r| r.get::<_, i64>(0))
                    .unwrap();
            }
            c.execute_batch("COMMIT").unwrap();
        }
    });
    rows.push(("enqueue 100/tx (batch)", batches * 100, d));
    let ids = |jobs: &str| -> Vec<i64> {
        let v: Vec<serde_json::Value> = serde_json::from_str(jobs).unwrap();
        v.iter().map(|j| j["id"].as_i64().unwrap()).collect()
    };
    let ops = n / 2;
    let d = time(|| {
        let mut claim = c
            .prepare("SELECT honker_claim_batch('bench', 'w', 1, 60)")
            .unwrap();
        let mut ack = c.prepare("SELECT honker_ack(?1, 'w')").unwrap();
        for _ in 0..ops {
            let jobs: String = claim.query_row([], |r| r.get(0)).unwrap();
            assert_eq!(
                ack.query_row([ids(&jobs)[0]], |r| r.get::<_, i64>(0))
                    .unwrap(),
                1
            );
        }
    });
    rows.push(("claim+ack 1 at a time", ops, d));
    for (size, name) in [
        (32i64, "claim 32 + ack_batch"),
        (128, "claim 128 + ack_batch"),
    ] {
        let rounds = (n as i64 / 2 / size).max(1);
        let d = time(|| {
            let mut claim = c
                .prepare("SELECT honker_claim_batch('bench', 'w', ?1, 60)")
                .unwrap();
            let mut ack = c.prepare("SELECT honker_ack_batch(?1, 'w')").unwrap();
            for _ in 0..rounds {
                let jobs: String = claim.query_row([size], |r| r.get(0)).unwrap();
                let list = serde_json::to_string(&ids(&jobs)).unwrap();
                assert_eq!(ack.query_row([list], |r| r.get::<_, i64>(0)).unwrap(), size);
            }
        });
        rows.push((name, (rounds * size) as u64, d));
    }
    let d = time(|| {
        let mut st = c
            .prepare("SELECT honker_stream_publish('events', NULL, ?1)")
            .unwrap();
        for i in 0..n {
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            st.query_row([payload(i)], |r| r.get::<_, i64>(0)).unwrap();
            c.execute_batch("COMMIT").unwrap();
        }
    });
    rows.push(("publish 1/tx", n, d));
    let pages = (n / 1000).max(1);
    let d = time(|| {
        let mut st = c
            .prepare("SELECT honker_stream_read_since('events', ?1, 1000)")
            .unwrap();
        for p in 0..pages {
            let text: String = st.query_row([p as i64 * 1000], |r| r.get(0)).unwrap();
            assert!(text.len() > 2);
        }
    });
    rows.push(("read page of 1000 (events/s)", pages * 1000, d));

    println!(
        "\nhonker 0.5.0 (peer), same operations; alkstore figures from the table above:\n{:<34} {:>18} {:>18}   {:>9}",
        "operation", "alkstore", "honker", "honker/alk"
    );
    for (name, ops, d) in rows {
        let h = ops as f64 / d.as_secs_f64();
        let a = report
            .rows
            .iter()
            .find(|r| r.0 == name)
            .map_or(0.0, |r| r.1);
        println!(
            "{name:<34} {a:>12.0} ops/s {h:>12.0} ops/s   {:>8.2}x",
            h / a
        );
    }
}

/// Runs `a` and `b` in turn five times; the fastest of each. Turns, not
/// one side after the other: this shared machine drifts between runs.
fn alternate(
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
) -> (Duration, Duration) {
    let (mut best_a, mut best_b) = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        best_a = best_a.min(a());
        best_b = best_b.min(b());
    }
    (best_a, best_b)
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// Contract v1.1 §C costs, each against the same operation without the
/// feature (the "raw" column is the baseline here): claims on a backlog
/// spread over many groups against the same backlog ungrouped, and acks
/// that keep the job as completed against acks that delete it.
fn job_features(c: &Connection, quick: bool, report: &mut Report) {
    let (groups, per_group) = if quick { (1_000, 10) } else { (10_000, 10) };
    println!(
        "\njob features, against the same operation without them ({} pending jobs, {groups} groups):",
        groups * per_group
    );
    // Jobs arrive interleaved across groups, as a busy service enqueues them.
    c.execute_batch("BEGIN IMMEDIATE").unwrap();
    {
        let mut grouped = c
            .prepare("SELECT alk_enqueue('grouped', json_object('group_key', 'g' || ?1), ?2)")
            .unwrap();
        let mut plain = c.prepare("SELECT alk_enqueue('plain', NULL, ?1)").unwrap();
        for i in 0..groups * per_group {
            let p = payload(i);
            grouped
                .query_row(params![(i % groups) as i64, p], |r| r.get::<_, i64>(0))
                .unwrap();
            plain.query_row([&p], |r| r.get::<_, i64>(0)).unwrap();
        }
    }
    c.execute_batch("COMMIT; ANALYZE").unwrap();

    let claim_ack = |queue: &str, ops: u64| {
        let mut claim = c.prepare("SELECT alk_claim(?1, 'w', 1)").unwrap();
        let mut ack = c.prepare("SELECT alk_ack(?1 ->> '$[0].id', 'w')").unwrap();
        for _ in 0..ops {
            let jobs: String = claim.query_row([queue], |r| r.get(0)).unwrap();
            assert!(ack.query_row([jobs], |r| r.get::<_, bool>(0)).unwrap());
        }
    };
    let ops = if quick { 300 } else { 5_000 };
    let (grouped, plain) = alternate(
        || timed(|| claim_ack("grouped", ops)),
        || timed(|| claim_ack("plain", ops)),
    );
    report.add("grouped claim+ack 1 (vs ungrouped)", ops, grouped, plain);

    let claim_batch = |queue: &str, rounds: u64| {
        let mut claim = c.prepare("SELECT alk_claim(?1, 'w', 32)").unwrap();
        let mut ack = c.prepare("SELECT alk_ack_batch(?1, 'w')").unwrap();
        for _ in 0..rounds {
            let jobs: String = claim.query_row([queue], |r| r.get(0)).unwrap();
            let jobs: Vec<Claimed> = serde_json::from_str(&jobs).unwrap();
            let ids =
                serde_json::to_string(&jobs.iter().map(|j| j.id).collect::<Vec<_>>()).unwrap();
            assert_eq!(ack.query_row([ids], |r| r.get::<_, i64>(0)).unwrap(), 32);
        }
    };
    let rounds = if quick { 10 } else { 150 };
    let (grouped, plain) = alternate(
        || timed(|| claim_batch("grouped", rounds)),
        || timed(|| claim_batch("plain", rounds)),
    );
    report.add("grouped claim 32 + ack_batch", rounds * 32, grouped, plain);

    // The claims alone (the acks that hand each group on are not timed).
    let claims_only = |queue: &str| {
        let mut claim = c.prepare("SELECT alk_claim(?1, 'w', 32)").unwrap();
        let mut ack = c.prepare("SELECT alk_ack_batch(?1, 'w')").unwrap();
        let mut spent = Duration::ZERO;
        for _ in 0..rounds {
            let t = Instant::now();
            let jobs: String = claim.query_row([queue], |r| r.get(0)).unwrap();
            spent += t.elapsed();
            let jobs: Vec<Claimed> = serde_json::from_str(&jobs).unwrap();
            let ids =
                serde_json::to_string(&jobs.iter().map(|j| j.id).collect::<Vec<_>>()).unwrap();
            ack.query_row([ids], |r| r.get::<_, i64>(0)).unwrap();
        }
        spent
    };
    let (grouped, plain) = alternate(|| claims_only("grouped"), || claims_only("plain"));
    report.add(
        "grouped claim 32, claims alone",
        rounds * 32,
        grouped,
        plain,
    );

    // Acks alone: jobs claimed beforehand, then acked one per transaction.
    c.execute_batch(
        "SELECT alk_queue_configure('kept', '{\"retain_completed_s\": 3600}');
         SELECT alk_enqueue_batch('kept', NULL, (SELECT json_group_array(value) FROM generate_series(1, 30000)));
         SELECT alk_enqueue_batch('deleted', NULL, (SELECT json_group_array(value) FROM generate_series(1, 30000)));",
    )
    .unwrap_or_else(|_| {
        // No generate_series in this SQLite: enqueue in a loop instead.
        for q in ["kept", "deleted"] {
            let mut st = c.prepare("SELECT alk_enqueue(?1, NULL, '{}')").unwrap();
            c.execute_batch("BEGIN IMMEDIATE").unwrap();
            for _ in 0..30_000 {
                st.query_row([q], |r| r.get::<_, i64>(0)).unwrap();
            }
            c.execute_batch("COMMIT").unwrap();
        }
    });
    let acks = if quick { 300 } else { 5_000 };
    let ack_all = |queue: &str| {
        let mut claim = c
            .prepare("SELECT value ->> 'id' FROM json_each(alk_claim(?1, 'w', 1000))")
            .unwrap();
        let mut ids: Vec<i64> = Vec::new();
        while (ids.len() as u64) < acks {
            ids.extend(
                claim
                    .query_map([queue], |r| r.get::<_, i64>(0))
                    .unwrap()
                    .map(Result::unwrap),
            );
        }
        ids.truncate(acks as usize);
        let mut ack = c.prepare("SELECT alk_ack(?1, 'w')").unwrap();
        let t = Instant::now();
        for id in ids {
            assert!(ack.query_row([id], |r| r.get::<_, bool>(0)).unwrap());
        }
        t.elapsed()
    };
    let (kept, deleted) = alternate(|| ack_all("kept"), || ack_all("deleted"));
    report.add("ack keeping completed (vs deleting)", acks, kept, deleted);
}

/// Operating it (contract v1.1 §D): pages of 100 job documents at random
/// points of a queue of 1,000,000 jobs (half pending, half dead), and the
/// listing of every queue.
fn admin_paging(c: &Connection, quick: bool) {
    let jobs: i64 = if quick { 20_000 } else { 1_000_000 };
    println!("\nadmin listings, a queue of {jobs} jobs (pages of 100):");
    c.execute_batch("BEGIN IMMEDIATE").unwrap();
    c.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
         INSERT INTO alk_jobs (queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms,
           backoff_base_ms, backoff_max_ms, run_at, created_at, last_error)
         SELECT 'big', CASE WHEN i % 2 = 0 THEN 'dead' ELSE 'pending' END, json_object('n', i), 0, 0, 5, 60000,
                5000, 3600000, 0, 0, CASE WHEN i % 2 = 0 THEN 'boom' END FROM n",
        [jobs],
    )
    .unwrap();
    c.execute_batch("COMMIT; ANALYZE").unwrap();
    let (lo, hi): (i64, i64) = c
        .query_row(
            "SELECT min(id), max(id) FROM alk_jobs WHERE queue = 'big'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let calls = 200;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut random_after = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        lo + (seed % (hi - lo - 1000).max(1) as u64) as i64
    };
    let page = |state: Option<&str>, after: i64| {
        let mut st = c
            .prepare_cached("SELECT alk_list_jobs('big', ?1, ?2, 100)")
            .unwrap();
        let text: String = st.query_row(params![state, after], |r| r.get(0)).unwrap();
        assert!(text.len() > 2);
    };
    // Warm up: the first reads after a million-row insert pay for the cache.
    for _ in 0..calls {
        page(None, random_after());
    }
    for (label, state, random) in [
        ("first page of dead jobs", Some("dead"), false),
        ("dead jobs, at random ids", Some("dead"), true),
        ("every state, at random ids", None, true),
    ] {
        let t = Instant::now();
        for _ in 0..calls {
            let after = if random { random_after() } else { 0 };
            page(state, after);
        }
        println!(
            "  {label:<32} {:>10.0} calls/s",
            calls as f64 / t.elapsed().as_secs_f64()
        );
    }
    let t = Instant::now();
    for _ in 0..20 {
        let _: String = c
            .query_row("SELECT alk_queues()", [], |r| r.get(0))
            .unwrap();
    }
    println!(
        "  {:<32} {:>10.0} calls/s",
        "alk_queues()",
        20.0 / t.elapsed().as_secs_f64()
    );
}
