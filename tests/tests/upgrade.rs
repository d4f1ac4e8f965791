//! Upgrades from every frozen release, 0.1.0, 0.2.0 and 0.3.0 (contract v1.1 §B),
//! on all three installs: SQLite (a database that release's library wrote),
//! the PostgreSQL extension (`CREATE EXTENSION alkstore VERSION '<v>'`, then
//! `ALTER EXTENSION alkstore UPDATE`) and the plain SQL install (the frozen
//! script, then today's script over it). The data is
//! `sql/frozen/<v>/fixture.sql`, written through that release's functions;
//! 0.2.0's holds 0.1.0's first, then what 0.2.0 added; 0.3.0's holds
//! 0.2.0's, then what 0.3.0 added.
//!
//! After each upgrade: every old row reads back unchanged, the functions
//! return the fixture's values, everything keeps working (the claim taken
//! before the upgrade is acked after it; ids, offsets and tokens continue
//! upward; no job is lost or handed out twice), the upgraded database dumps
//! and restores whole (`pg_dump` / `pg_restore`; SQLite's `.dump`), and the
//! upgraded schema is the same as a fresh install's.

use alkstore_tests::*;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const FROZEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sql/frozen");
/// Claims of queue `up-q` last this long (fixture), so job 1's is live.
const CENTURY_S: i64 = 3_153_600_000;

/// A file of the frozen release `v`.
fn frozen(v: &str, file: &str) -> String {
    std::fs::read_to_string(Path::new(FROZEN).join(v).join(file)).expect(file)
}

fn pg(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect")
}

// ---- what is compared before and after ----

/// Every row of every table, as text, for the columns a table had before.
fn rows_sqlite(path: &Path, columns: &[(String, Vec<String>)]) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut out = Vec::new();
    for (table, cols) in columns {
        let sql = format!(
            "SELECT {} FROM {table} ORDER BY 1",
            cols.iter()
                .map(|c| format!("quote(\"{c}\")"))
                .collect::<Vec<_>>()
                .join(" || '|' || ")
        );
        let mut st = conn.prepare(&sql).unwrap();
        let rows = st
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .map(|r| format!("{table}: {}", r.unwrap()));
        out.extend(rows);
    }
    out
}

fn columns_sqlite(path: &Path) -> Vec<(String, Vec<String>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut st = conn
        .prepare(
            "SELECT m.name, group_concat(p.name, ',') FROM sqlite_master m, pragma_table_info(m.name) p
             WHERE m.type = 'table' AND m.name LIKE 'alk\\_%' ESCAPE '\\' GROUP BY m.name ORDER BY m.name",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?
                .split(',')
                .map(str::to_string)
                .collect(),
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// What the functions say about the fixture (time-dependent fields left out).
fn readings(db: &mut dyn Db) -> Value {
    let mut jobs = Vec::new();
    for id in 1..=9 {
        jobs.push(db.ok("alk_get_job", &[Arg::Int(id)]));
    }
    let mut stats = Vec::new();
    for q in ["up-q", "up-plain"] {
        let mut s = db.ok("alk_queue_stats", &[t(q)]);
        s.as_object_mut().unwrap().remove("oldest_runnable_age_s");
        stats.push(s);
    }
    let mut outbox = db.ok("alk_outbox_stats", &[t("up-o")]);
    outbox
        .as_object_mut()
        .unwrap()
        .remove("oldest_runnable_age_s");
    // The keys 0.3.0 added (flow control, contract v1.2 §I; dependencies,
    // §J), neutral on data of before (no limits, no limit_key, no
    // depends_on), and 0.4.0's `maintenance_worker` (v1.3 §O: no worker
    // serves these databases) and `last_sweep_age_s`, so old and new code
    // read alike.
    let neutral = [
        ("limit_key", Value::Null),
        ("depends_on", Value::Null),
        ("waiting_for", Value::Null),
        ("running_limit", Value::Null),
        ("next_slot_at", Value::Null),
        ("max_running", Value::Null),
        ("rate_max", Value::Null),
        ("rate_per_s", Value::Null),
        ("key_max_running", Value::Null),
        ("key_rate_max", Value::Null),
        ("key_rate_per_s", Value::Null),
        ("maintenance_worker", json!(false)),
        // 0.4.0's time since a sweep (issue 57): none sweeps these.
        ("last_sweep_age_s", Value::Null),
    ];
    let mut opts = db.ok("alk_queue_opts", &[t("up-q")]);
    jobs.iter_mut().for_each(|v| strip(v, &neutral));
    stats.iter_mut().for_each(|v| strip(v, &neutral));
    strip(&mut outbox, &neutral);
    strip(&mut opts, &neutral);
    json!({
        "jobs": jobs,
        "stats": stats,
        "outbox": outbox,
        "opts": opts,
        "events": db.ok("alk_read", &[t("up-s"), Arg::Int(0), Arg::Int(100)]),
        "offsets": [
            db.ok("alk_get_offset", &[t("up-s"), t("c-one")]),
            db.ok("alk_get_offset", &[t("up-s"), t("c-two")]),
        ],
    })
}

/// The fixture's values, read through the upgraded functions.
fn check_fixture(db: &mut dyn Db, engine: &str, v: &str) {
    let r = readings(db);
    let job = |i: usize| &r["jobs"][i - 1];
    assert_eq!(job(1)["state"], "running", "[{engine}]");
    assert_eq!(job(1)["claimed_by"], "w-live", "[{engine}]");
    assert_eq!(job(1)["attempts"], 1, "[{engine}]");
    assert_eq!(job(1)["priority"], 5, "[{engine}]");
    assert_eq!(job(1)["max_attempts"], 7, "[{engine}]");
    assert_eq!(job(1)["visibility_timeout_s"], CENTURY_S, "[{engine}]");
    assert_eq!(job(1)["backoff_base_s"], 0.25, "[{engine}]");
    assert_eq!(job(1)["backoff_max_s"], 90, "[{engine}]");
    assert_eq!(
        job(1)["payload"],
        json!({"kind": "live claim"}),
        "[{engine}]"
    );
    assert!(
        instant(&job(1)["claim_expires_at"]) > alkstore_core::time::now_ms() + 86_400_000,
        "[{engine}] the claim taken before the upgrade is still live"
    );
    assert_eq!(job(2)["state"], "dead", "[{engine}]");
    assert_eq!(job(2)["last_error"], "boom: it broke", "[{engine}]");
    assert_eq!(job(3)["state"], "pending", "[{engine}]");
    assert_eq!(job(3)["attempts"], 1, "[{engine}]");
    assert_eq!(job(3)["max_attempts"], 2, "[{engine}]");
    assert_eq!(job(3)["last_error"], "try later", "[{engine}]");
    // Errors from before 0.3.0 were not kept: each job starts with its last.
    // From 0.3.0 on each error has its time.
    for (id, error) in [(2, "boom: it broke"), (3, "try later")] {
        let mut errors = db.ok("alk_job_errors", &[Arg::Int(id)]);
        let at = errors[0]["at"].take();
        assert_eq!(at.is_string(), has_030(v), "[{engine}] job {id}: at {at}");
        assert_eq!(
            errors,
            json!([{"attempt": job(id as usize)["attempts"], "error": error, "at": null}]),
            "[{engine}] job {id}"
        );
    }
    assert_eq!(
        db.ok("alk_job_errors", &[Arg::Int(1)]),
        json!([]),
        "[{engine}]"
    );
    assert_eq!(
        job(4)["payload"],
        json!({"kind": "pending", "n": [1, 2.5, null, "x"]}),
        "[{engine}]"
    );
    assert!(job(4)["expires_at"].is_string(), "[{engine}]");
    assert_eq!(job(5)["payload"], "scheduled", "[{engine}]");
    assert_eq!(job(6)["run_at"], "2030-01-02T03:04:05.678Z", "[{engine}]");
    assert_eq!(job(6)["priority"], -2, "[{engine}]");
    assert_eq!(job(6)["payload"], Value::Null, "[{engine}]");
    assert_eq!(job(7)["queue"], "up-plain", "[{engine}]");
    assert_eq!(job(7)["max_attempts"], 5, "[{engine}]");
    assert_eq!(job(9)["queue"], "__alkstore_outbox:up-o", "[{engine}]");
    assert_eq!(
        r["stats"][0],
        json!({"queue": "up-q", "pending": 2, "scheduled": 2, "running": 1, "dead": 1, "completed": 0, "paused": false}),
        "[{engine}]"
    );
    assert_eq!(r["outbox"]["pending"], 1, "[{engine}]");
    assert_eq!(
        r["opts"],
        json!({"visibility_timeout_s": CENTURY_S, "max_attempts": 7, "backoff_base_s": 0.25, "backoff_max_s": 90,
               "retain_completed_s": 0, "retain_dead_s": null}),
        "[{engine}]"
    );
    let events = r["events"].as_array().unwrap();
    let offsets: Vec<i64> = events
        .iter()
        .map(|e| e["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, [1, 2, 3], "[{engine}]");
    assert_eq!(events[0]["key"], "k1", "[{engine}]");
    assert_eq!(events[1]["key"], Value::Null, "[{engine}]");
    assert_eq!(events[2]["payload"], json!([3]), "[{engine}]");
    assert_eq!(r["offsets"], json!([1, 2]), "[{engine}]");
}

/// What 0.2.0's fixture added (contract v1.1), read through the upgraded
/// functions.
fn check_fixture_020(db: &mut dyn Db, engine: &str) {
    let job = |db: &mut dyn Db, id: i64| db.ok("alk_get_job", &[Arg::Int(id)]);
    let kept = job(db, 10);
    assert_eq!(kept["state"], "completed", "[{engine}]");
    assert_eq!(kept["result"], json!({"charged": 1200}), "[{engine}]");
    assert_eq!(kept["idempotency_key"], "order-1", "[{engine}]");
    assert_eq!(kept["payload"], json!({"order": 1}), "[{engine}]");
    let head = job(db, 11);
    assert_eq!(
        (&head["state"], &head["group_key"], &head["claimed_by"]),
        (&json!("running"), &json!("cust-7"), &json!("w-group")),
        "[{engine}]"
    );
    for id in [12, 13, 14] {
        assert_eq!(job(db, id)["state"], "pending", "[{engine}] job {id}");
    }
    assert_eq!(
        db.ok("alk_queue_stats", &[t("up2-paused")])["paused"],
        true,
        "[{engine}]"
    );
    assert_eq!(
        db.ok("alk_outbox_stats", &[t("up2-po")])["paused"],
        true,
        "[{engine}]"
    );
    assert_eq!(
        db.ok("alk_queue_opts", &[t("up2-keep")])["retain_completed_s"],
        CENTURY_S,
        "[{engine}]"
    );
    let schedules: Vec<Value> = db
        .ok("alk_schedules", &[])
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            json!([
                s["name"],
                s["queue"],
                s["spec"],
                s["opts"],
                s["last_run_at"]
            ])
        })
        .collect();
    assert_eq!(
        schedules,
        [
            json!(["up2-hourly", "up2-pings", {"every_s": 3600}, {"priority": 5}, null]),
            json!(["up2-nightly", "up2-reports", {"cron": "0 3 * * *"}, null, null]),
        ],
        "[{engine}]"
    );
    // Published under 0.2.0 and never read: a sequencer gives its offset,
    // ahead of an event published after the upgrade (PostgreSQL: the
    // upgrade gave it a commit ticket; SQLite gave it its offset then, and
    // its rows are compared unchanged later).
    let info = db.ok("alk_stream_info", &[t("up2-s")]);
    if !engine.starts_with("postgres") {
        assert_eq!(
            (info["retain_events"].clone(), info["last_offset"].clone()),
            (json!(100), json!(1)),
            "[{engine}]"
        );
        return;
    }
    let newer = db.int(
        "alk_publish",
        &[t("up2-s"), j(r#"{"e": "new"}"#), Arg::Null],
    );
    db.int("alk_sequence", &[t("up2-s")]);
    let info = db.ok("alk_stream_info", &[t("up2-s")]);
    assert_eq!(
        (info["retain_events"].clone(), info["last_offset"].clone()),
        (json!(100), json!(2)),
        "[{engine}]"
    );
    let page = db.ok("alk_read", &[t("up2-s"), Arg::Int(0), Arg::Int(10)]);
    let read: Vec<_> = page
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["offset"].clone(), e["payload"].clone(), e["id"].clone()))
        .collect();
    assert_eq!(
        read,
        [
            (json!(1), json!({"e": "kept"}), read[0].2.clone()),
            (json!(2), json!({"e": "new"}), json!(newer)),
        ],
        "[{engine}]"
    );
}

/// Whether frozen release `v` wrote 0.3.0's fixture (dependencies, limits,
/// a deleted job).
fn has_030(v: &str) -> bool {
    !matches!(v, "0.1.0" | "0.2.0")
}

/// What 0.3.0's fixture added (contract v1.2), read through the upgraded
/// functions.
fn check_fixture_030(db: &mut dyn Db, engine: &str) {
    let job = |db: &mut dyn Db, id: i64| db.ok("alk_get_job", &[Arg::Int(id)]);
    assert_eq!(job(db, 17)["state"], "pending", "[{engine}]");
    let waiting = job(db, 18);
    assert_eq!(
        (
            &waiting["state"],
            &waiting["depends_on"],
            &waiting["waiting_for"]
        ),
        (&json!("pending"), &json!([17]), &json!([17])),
        "[{engine}] job 18 waits for 17"
    );
    let running = job(db, 19);
    assert_eq!(
        (
            &running["state"],
            &running["claimed_by"],
            &running["limit_key"]
        ),
        (&json!("running"), &json!("w-limit"), &json!("tenant-1")),
        "[{engine}]"
    );
    let held = job(db, 20);
    assert_eq!(
        (&held["state"], &held["limit_key"]),
        (&json!("pending"), &json!("tenant-1")),
        "[{engine}]"
    );
    assert_eq!(job(db, 21), Value::Null, "[{engine}] job 21 was deleted");
    let opts = db.ok("alk_queue_opts", &[t("up3-limited")]);
    assert_eq!(
        (&opts["max_running"], &opts["key_max_running"]),
        (&json!(1), &json!(1)),
        "[{engine}]"
    );
    let stats = db.ok("alk_queue_stats", &[t("up3-limited")]);
    assert_eq!(
        (
            &stats["running"],
            &stats["pending"],
            &stats["running_limit"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "[{engine}] {stats}"
    );
}

/// 0.3.0's dependencies and limits keep working after the upgrade.
fn check_030_keeps_working(db: &mut dyn Db, engine: &str) {
    let claim =
        |db: &mut dyn Db, q: &str| ids(&db.ok("alk_claim", &[t(q), t("w-030"), Arg::Int(10)]));
    // The limit holds job 20 until job 19, claimed before the upgrade, ends.
    assert_eq!(claim(db, "up3-limited"), Vec::<i64>::new(), "[{engine}]");
    assert!(
        db.yes("alk_ack", &[Arg::Int(19), t("w-limit")]),
        "[{engine}]"
    );
    assert_eq!(claim(db, "up3-limited"), [20], "[{engine}]");
    // Job 18 runs once job 17 is acked, not before.
    assert_eq!(claim(db, "up3-deps"), [17], "[{engine}]");
    assert!(db.yes("alk_ack", &[Arg::Int(17), t("w-030")]), "[{engine}]");
    assert_eq!(claim(db, "up3-deps"), [18], "[{engine}]");
}

/// 0.2.0's groups, keys, pauses and results keep working after the upgrade.
fn check_020_keeps_working(db: &mut dyn Db, engine: &str) {
    let ids = |v: Value| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_i64().unwrap())
            .collect()
    };
    let claim =
        |db: &mut dyn Db, q: &str| ids(db.ok("alk_claim", &[t(q), t("w-020"), Arg::Int(10)]));
    // Groups: cust-7's head is running, so only cust-8's head is claimable;
    // acking each head hands out the next, in order.
    assert_eq!(claim(db, "up2-g"), [13], "[{engine}]");
    assert!(
        db.yes("alk_ack", &[Arg::Int(11), t("w-group")]),
        "[{engine}]"
    );
    assert!(db.yes("alk_ack", &[Arg::Int(13), t("w-020")]), "[{engine}]");
    assert_eq!(claim(db, "up2-g"), [12, 14], "[{engine}]");
    // An idempotency key still names its job.
    assert_eq!(
        db.int(
            "alk_enqueue",
            &[
                t("up2-keep"),
                j(r#"{"idempotency_key": "order-1"}"#),
                j("2")
            ]
        ),
        10,
        "[{engine}]"
    );
    // Paused stays paused until resumed.
    assert_eq!(claim(db, "up2-paused"), Vec::<i64>::new(), "[{engine}]");
    assert!(db.yes("alk_queue_resume", &[t("up2-paused")]), "[{engine}]");
    assert_eq!(claim(db, "up2-paused"), [15], "[{engine}]");
    let outbox =
        |db: &mut dyn Db| ids(db.ok("alk_outbox_claim", &[t("up2-po"), t("w-020"), Arg::Int(10)]));
    assert_eq!(outbox(db), Vec::<i64>::new(), "[{engine}]");
    assert!(db.yes("alk_outbox_resume", &[t("up2-po")]), "[{engine}]");
    assert_eq!(outbox(db), [16], "[{engine}]");
}

/// Everything keeps working after the upgrade.
fn check_it_keeps_working(db: &mut dyn Db, engine: &str) {
    // The claim taken before the upgrade is acked after it, once.
    assert!(db.yes("alk_ack", &[Arg::Int(1), t("w-live")]), "[{engine}]");
    assert!(
        !db.yes("alk_ack", &[Arg::Int(1), t("w-live")]),
        "[{engine}]"
    );
    // Every runnable job is claimed exactly once, in claim order.
    let claimed = db.ok("alk_claim", &[t("up-q"), t("w-new"), Arg::Int(10)]);
    let ids: Vec<i64> = claimed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        ids,
        [3, 4],
        "[{engine}] priority 3, then 1; 5 and 6 are scheduled"
    );
    assert_eq!(claimed[0]["attempts"], 2, "[{engine}]");
    let again = db.ok("alk_claim", &[t("up-q"), t("w-other"), Arg::Int(10)]);
    assert_eq!(again, json!([]), "[{engine}] nothing is handed out twice");
    assert_eq!(
        db.int("alk_ack_batch", &[Arg::Ids(ids), t("w-new")]),
        2,
        "[{engine}]"
    );
    let plain = db.ok("alk_claim", &[t("up-plain"), t("w-new"), Arg::Int(10)]);
    assert_eq!(plain.as_array().unwrap().len(), 2, "[{engine}]");
    let outbox = db.ok("alk_outbox_claim", &[t("up-o"), t("w-new"), Arg::Int(10)]);
    assert_eq!(outbox[0]["id"], 9, "[{engine}]");
    assert_eq!(
        outbox[0]["payload"],
        json!({"mail": "ada@example.com"}),
        "[{engine}]"
    );
    // A dead job comes back.
    assert!(db.yes("alk_requeue_dead", &[Arg::Int(2)]), "[{engine}]");
    // Ids continue upward.
    let id = db.int("alk_enqueue", &[t("up-q"), Arg::Null, j("{}")]);
    assert!(id > 9, "[{engine}] new job id {id} after the fixture's 9");
    // Stamped from the queue's stored options.
    let new_job = db.ok("alk_get_job", &[Arg::Int(id)]);
    assert_eq!(new_job["max_attempts"], 7, "[{engine}]");
    // Offsets continue, densely; alk_publish now returns the event's id
    // (v1.1 §E), above the ids the upgrade gave the old events.
    let old_ids: Vec<i64> = db
        .ok("alk_read", &[t("up-s"), Arg::Int(0), Arg::Int(10)])
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    let published = db.int("alk_publish", &[t("up-s"), j("{\"e\": 4}"), Arg::Null]);
    assert!(
        old_ids.iter().all(|&id| id < published),
        "[{engine}] {old_ids:?} < {published}"
    );
    db.int("alk_sequence", &[t("up-s")]);
    let fourth = db.ok("alk_read", &[t("up-s"), Arg::Int(3), Arg::Int(10)]);
    assert_eq!(
        (fourth[0]["offset"].clone(), fourth[0]["id"].clone()),
        (json!(4), json!(published)),
        "[{engine}]"
    );
    let info = db.ok("alk_stream_info", &[t("up-s")]);
    assert_eq!(
        (info["first_offset"].clone(), info["last_offset"].clone()),
        (json!(1), json!(4)),
        "[{engine}]"
    );
    assert!(
        db.yes("alk_save_offset", &[t("up-s"), t("c-one"), Arg::Int(4)]),
        "[{engine}]"
    );
    assert!(
        !db.yes("alk_save_offset", &[t("up-s"), t("c-two"), Arg::Int(1)]),
        "[{engine}]"
    );
    // The job features of 0.2.0 (contract v1.1 §C) work on upgraded data:
    // the old queue's options gain retention, its old jobs join no group.
    db.ok(
        "alk_queue_configure",
        &[t("up-q"), j(r#"{"retain_completed_s": 3600}"#)],
    );
    assert_eq!(
        db.ok("alk_queue_opts", &[t("up-q")])["max_attempts"],
        7,
        "[{engine}] the old options are kept"
    );
    let g1 = db.int(
        "alk_enqueue",
        &[
            t("up-q"),
            j(r#"{"group_key": "g", "idempotency_key": "k"}"#),
            j("1"),
        ],
    );
    let g2 = db.int(
        "alk_enqueue",
        &[t("up-q"), j(r#"{"group_key": "g"}"#), j("2")],
    );
    assert_eq!(
        db.int(
            "alk_enqueue",
            &[t("up-q"), j(r#"{"idempotency_key": "k"}"#), j("3")]
        ),
        g1,
        "[{engine}]"
    );
    let first = db.ok("alk_claim", &[t("up-q"), t("w-g"), Arg::Int(10)]);
    let first: Vec<i64> = first
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert!(
        first.contains(&g1) && !first.contains(&g2),
        "[{engine}] {first:?}"
    );
    for id in &first {
        assert!(
            db.yes(
                "alk_ack",
                &[Arg::Int(*id), t("w-g"), j(r#"{"done": true}"#)]
            ),
            "[{engine}]"
        );
    }
    assert_eq!(
        db.ok("alk_get_job", &[Arg::Int(g1)])["result"],
        json!({"done": true}),
        "[{engine}]"
    );
    assert!(db.yes("alk_queue_pause", &[t("up-q")]), "[{engine}]");
    assert_eq!(
        db.ok("alk_claim", &[t("up-q"), t("w-g")]),
        json!([]),
        "[{engine}]"
    );
    assert!(db.yes("alk_queue_resume", &[t("up-q")]), "[{engine}]");
    let next = db.ok("alk_claim", &[t("up-q"), t("w-g"), Arg::Int(10)]);
    assert!(
        next.as_array().unwrap().iter().any(|j| j["id"] == g2),
        "[{engine}] {next}"
    );
    // Pruning keeps what is still within its retention (g1: an hour).
    while db.int("alk_prune", &[Arg::Int(10)]) > 0 {}
    assert_eq!(
        db.ok("alk_get_job", &[Arg::Int(g1)])["state"],
        "completed",
        "[{engine}]"
    );
    // The old stream takes a retention (v1.1 §E): the pruned prefix goes,
    // reads start at the first kept event, offsets go on from the last.
    db.ok(
        "alk_stream_configure",
        &[t("up-s"), j(r#"{"retain_events": 2}"#)],
    );
    while db.int("alk_prune", &[Arg::Int(10)]) > 0 {}
    let kept = db.ok("alk_read", &[t("up-s"), Arg::Int(0), Arg::Int(10)]);
    assert_eq!(
        kept.as_array()
            .unwrap()
            .iter()
            .map(|e| e["offset"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [3, 4],
        "[{engine}]"
    );
    db.int("alk_publish", &[t("up-s"), j("5"), Arg::Null]);
    db.int("alk_sequence", &[t("up-s")]);
    let info = db.ok("alk_stream_info", &[t("up-s")]);
    assert_eq!(
        (info["first_offset"].clone(), info["last_offset"].clone()),
        (json!(3), json!(5)),
        "[{engine}]"
    );
    // Leases: the holder keeps its token, others wait, tokens grow.
    let lock = |db: &mut dyn Db, name: &str, owner: &str| {
        db.ok("alk_lock_acquire", &[t(name), t(owner), Arg::Num(60.0)])
    };
    assert_eq!(lock(db, "up-l", "host-c"), Value::Null, "[{engine}]");
    assert_eq!(lock(db, "up-l", "host-b"), 2, "[{engine}]");
    assert!(
        db.yes("alk_lock_release", &[t("up-l"), t("host-b")]),
        "[{engine}]"
    );
    assert_eq!(lock(db, "up-l", "host-c"), 3, "[{engine}]");
    assert_eq!(lock(db, "up-free", "host-c"), 2, "[{engine}]");
    assert_eq!(
        db.ok("alk_version", &[]),
        json!({"version": alkstore_core::VERSION, "schema": alkstore_core::SCHEMA_VERSION}),
        "[{engine}]"
    );
}

// ---- the schema of an upgraded install is a fresh install's ----

fn describe_sqlite(path: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut st = conn
        .prepare(
            "SELECT 'column ' || m.name || '.' || p.name || ' ' || p.type || ' notnull=' || p.\"notnull\"
                    || ' default=' || coalesce(p.dflt_value, '') || ' pk=' || p.pk
               FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'
             UNION ALL
             SELECT 'index ' || name || ' on ' || tbl_name || ' ' || coalesce(sql, '(automatic)')
               FROM sqlite_master WHERE type = 'index'
             ORDER BY 1",
        )
        .unwrap();
    st.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|r| r.unwrap().split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn describe_pg(c: &mut postgres::Client) -> Vec<String> {
    c.query(
        r"SELECT line FROM (
            SELECT format('column %s.%s %s notnull=%s default=%s', c.relname, a.attname,
                          format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid)) AS line
              FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
              LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE c.relnamespace = 'alkstore'::regnamespace AND c.relkind IN ('r', 'c')
               AND a.attnum > 0 AND NOT a.attisdropped
            UNION ALL
            SELECT format('relation %s %s acl=%s', c.relname, c.relkind, c.relacl)
              FROM pg_class c WHERE c.relnamespace = 'alkstore'::regnamespace
            UNION ALL
            SELECT 'index ' || pg_get_indexdef(i.indexrelid)
              FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
             WHERE c.relnamespace = 'alkstore'::regnamespace
            UNION ALL
            SELECT 'statistics ' || pg_get_statisticsobjdef(s.oid)
              FROM pg_statistic_ext s WHERE s.stxnamespace = 'alkstore'::regnamespace
            UNION ALL
            SELECT format('constraint %s %s', conname, pg_get_constraintdef(oid))
              FROM pg_constraint WHERE connamespace = 'alkstore'::regnamespace
            UNION ALL
            SELECT format('schema acl=%s', nspacl) FROM pg_namespace WHERE nspname = 'alkstore'
            UNION ALL
            SELECT format('function %s.%s(%s) returns %s secdef=%s volatile=%s config=%s acl=%s src=%s',
                          p.pronamespace::regnamespace, p.proname, pg_get_function_arguments(p.oid),
                          pg_get_function_result(p.oid), p.prosecdef, p.provolatile, p.proconfig,
                          p.proacl, md5(p.prosrc))
              FROM pg_proc p
             WHERE p.pronamespace = 'alkstore'::regnamespace OR p.proname LIKE 'alk\_%'
            UNION ALL
            SELECT 'extension member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
              FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
             WHERE e.extname = 'alkstore' AND d.deptype = 'e'
          ) x ORDER BY line",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn assert_same_schema(engine: &str, upgraded: &[String], fresh: &[String]) {
    let only_up: Vec<_> = upgraded.iter().filter(|l| !fresh.contains(l)).collect();
    let only_fresh: Vec<_> = fresh.iter().filter(|l| !upgraded.contains(l)).collect();
    assert!(
        only_up.is_empty() && only_fresh.is_empty(),
        "[{engine}] the upgraded schema differs from a fresh install's:\n only upgraded: {only_up:#?}\n only fresh: {only_fresh:#?}"
    );
}

// ---- SQLite ----

/// The schema version each frozen release wrote.
fn schema_of(v: &str) -> i64 {
    match v {
        "0.1.0" => 1,
        "0.2.0" => 2,
        _ => 3,
    }
}

fn sqlite_upgrades_a_database_written_by(v: &str) {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let path = dir.path().join(format!("from-{v}.db"));
    std::fs::copy(
        Path::new(FROZEN).join(v).join(format!("sqlite-{v}.db")),
        &path,
    )
    .unwrap();
    if v != "0.1.0" {
        // The file was written once, with job 10's idempotency key on the
        // default one-day TTL (the PostgreSQL fixture is replayed, so its
        // keys are always fresh): keys are moved forward by the file's age
        // (since job 10 was enqueued) so that they have the time left they
        // had when written, whatever day the test runs.
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE alk_idempotency SET expires_at = expires_at
                   + CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
                   - (SELECT created_at FROM alk_jobs WHERE id = 10)",
                [],
            )
            .unwrap();
    }
    let columns = columns_sqlite(&path);
    let before = rows_sqlite(&path, &columns);
    let version = |p: &Path| -> String {
        rusqlite::Connection::open(p)
            .unwrap()
            .query_row(
                "SELECT value FROM alk_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    let old_schema = schema_of(v);
    assert_eq!(version(&path), old_schema.to_string());

    let target = Target::sqlite_at(path.clone(), Arc::clone(&dir));
    let mut db = target.connect();
    if old_schema < alkstore_core::SCHEMA_VERSION {
        // The first call migrates inside the caller's transaction: rolled
        // back with it, and done again by the next call.
        db.begin();
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(1)])["claimed_by"], "w-live");
        assert_eq!(
            db.query_i64(
                "SELECT CAST(value AS INTEGER) FROM alk_meta WHERE key = 'schema_version'"
            ),
            alkstore_core::SCHEMA_VERSION
        );
        db.rollback();
        assert_eq!(
            version(&path),
            old_schema.to_string(),
            "the migration rolled back with the caller"
        );
    }
    let engine = format!("sqlite from {v}");
    db.begin();
    check_fixture(&mut *db, &engine, v);
    if v != "0.1.0" {
        check_fixture_020(&mut *db, &engine);
    }
    if has_030(v) {
        check_fixture_030(&mut *db, &engine);
    }
    db.commit();
    assert_eq!(version(&path), alkstore_core::SCHEMA_VERSION.to_string());
    assert_eq!(
        rows_sqlite(&path, &columns)
            .into_iter()
            .filter(|r| !r.starts_with("alk_meta"))
            .map(|r| if has_030(v) { r } else { as_pending(&r) })
            .collect::<Vec<_>>(),
        before
            .into_iter()
            .filter(|r| !r.starts_with("alk_meta"))
            .collect::<Vec<_>>(),
        "every {v} row reads back unchanged"
    );
    // The upgraded file dumps and restores whole (the sqlite3 shell's
    // `.dump`, read back into a new file), and the restored file reads the
    // same through the functions.
    let restored = dir.path().join("restored.db");
    let dump = std::process::Command::new("sqlite3")
        .arg(&path)
        .arg(".dump")
        .output()
        .expect("sqlite3 .dump");
    assert!(dump.status.success(), "{dump:?}");
    let mut load = std::process::Command::new("sqlite3")
        .arg(&restored)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sqlite3");
    std::io::Write::write_all(load.stdin.as_mut().unwrap(), &dump.stdout).unwrap();
    drop(load.stdin.take());
    assert!(load.wait().unwrap().success());
    assert_eq!(
        rows_sqlite(&restored, &columns),
        rows_sqlite(&path, &columns),
        "{v}: every row of the upgraded file comes back from its dump"
    );
    {
        let mut r = Target::sqlite_at(restored.clone(), Arc::clone(&dir)).connect();
        assert_eq!(
            readings(&mut *r),
            readings(&mut *db),
            "{v}: restored from a dump"
        );
    }
    let ahead: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM alk_jobs WHERE state = 'scheduled'
              AND run_at > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) + 86400000",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        ahead, 2,
        "{engine}: jobs scheduled ahead are out of the claim index"
    );
    let notes = db.ok("alk_notifications", &[t("up-n"), Arg::Int(0)]);
    assert_eq!(notes[0]["payload"], json!({"hello": 1}));
    if v != "0.1.0" {
        check_020_keeps_working(&mut *db, &engine);
    }
    if has_030(v) {
        check_030_keeps_working(&mut *db, &engine);
    }
    check_it_keeps_working(&mut *db, &engine);

    let fresh_path = dir.path().join("fresh.db");
    let mut fresh = Target::sqlite_at(fresh_path.clone(), Arc::clone(&dir)).connect();
    fresh.ok("alk_init", &[]);
    assert_same_schema(
        &engine,
        &describe_sqlite(&path),
        &describe_sqlite(&fresh_path),
    );
}

#[test]
fn sqlite_upgrades_a_database_written_by_0_1_0() {
    sqlite_upgrades_a_database_written_by("0.1.0");
}

#[test]
fn sqlite_upgrades_a_database_written_by_0_2_0() {
    sqlite_upgrades_a_database_written_by("0.2.0");
}

#[test]
fn sqlite_upgrades_a_database_written_by_0_3_0() {
    sqlite_upgrades_a_database_written_by("0.3.0");
}

#[test]
fn sqlite_refuses_a_newer_schema_naming_both_versions() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let path = dir.path().join("newer.db");
    let mut db = Target::sqlite_at(path.clone(), Arc::clone(&dir)).connect();
    db.ok("alk_init", &[]);
    db.exec("UPDATE alk_meta SET value = '99' WHERE key = 'schema_version'");
    drop(db);
    let mut db = Target::sqlite_at(path.clone(), dir).connect();
    let failure = db
        .call("alk_enqueue", &[t("q"), Arg::Null, j("1")])
        .unwrap_err();
    assert!(
        failure.message.contains("schema version 99")
            && failure
                .message
                .contains(&format!("schema {}", alkstore_core::SCHEMA_VERSION)),
        "{failure:?}"
    );
    assert_eq!(
        db.query_i64("SELECT count(*) FROM alk_jobs"),
        0,
        "nothing written"
    );
}

// ---- PostgreSQL ----

/// A PostgreSQL install of a frozen release with its fixture, and a session
/// that registered to wait for queue `up-plain` before the upgrade.
struct PgOld {
    version: &'static str,
    name: String,
    url: String,
    waiter: postgres::Client,
    columns: Vec<(String, Vec<String>)>,
    rows: Vec<String>,
    readings: Value,
}

fn pg_old(
    version: &'static str,
    name: &str,
    install: impl FnOnce(&mut postgres::Client),
) -> Option<PgOld> {
    let Some(url) = pg_database(name) else {
        assert!(!pg_required(), "ALKSTORE_PG_URL is required");
        return None;
    };
    let mut c = pg(&url);
    install(&mut c);
    c.batch_execute(&frozen(version, "fixture.sql"))
        .expect("the fixture on its release");
    let mut waiter = pg(&url);
    waiter
        .batch_execute("SELECT alk_listen_queue('up-plain', 300)")
        .unwrap();
    // Read first: reading a stream sequences what was published (0.2.0),
    // which moves rows; the upgrade must not move any. From 0.3.0 a
    // sequencer gives offsets (the maintenance worker, when one serves the
    // database, at its own time): sequenced here, before anything is read.
    let mut db = Target::postgres(url.clone(), version).connect();
    if has_030(version) {
        for stream in ["up-s", "up2-s"] {
            db.int("alk_sequence", &[t(stream)]);
        }
    }
    let readings = readings(&mut *db);
    drop(db);
    let columns = columns_pg(&mut c);
    let rows = rows_pg(&mut c, &columns);
    Some(PgOld {
        version,
        name: name.to_string(),
        url,
        waiter,
        columns,
        rows,
        readings,
    })
}

/// The readings without the keys 0.2.0 added (contract v1.1 §C), after
/// checking that each of them has its neutral value on 0.1.0 data.
/// Removes the `neutral` keys from every object in `v`, each checked to
/// have its neutral value (what data from before the key reads as).
fn strip(v: &mut Value, neutral: &[(&str, Value)]) {
    match v {
        Value::Object(map) => {
            for (key, want) in neutral {
                if let Some(got) = map.remove(*key) {
                    assert_eq!(&got, want, "{key} on upgraded data");
                }
            }
            map.values_mut().for_each(|v| strip(v, neutral));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| strip(v, neutral)),
        _ => {}
    }
}

fn without_new_keys(mut v: Value) -> Value {
    let neutral = [
        ("completed_at", Value::Null),
        ("result", Value::Null),
        ("group_key", Value::Null),
        ("idempotency_key", Value::Null),
        ("completed", json!(0)),
        ("paused", json!(false)),
        ("retain_completed_s", json!(0)),
        ("retain_dead_s", Value::Null),
    ];
    for part in ["jobs", "stats", "outbox", "opts"] {
        strip(&mut v[part], &neutral);
    }
    // Old events gained ids (v1.1 §E): distinct, in offset order.
    let events = v["events"].as_array_mut().unwrap();
    let ids: Vec<i64> = events
        .iter_mut()
        .map(|e| {
            e.as_object_mut()
                .unwrap()
                .remove("id")
                .unwrap()
                .as_i64()
                .unwrap()
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "event ids {ids:?}");
    v
}

/// A job row of 0.3.0 as the release before it stored it: pending jobs
/// whose run_at lies ahead are 'scheduled' since 0.3.0 (contract v1.2 §H),
/// reported as pending (the readings below check that).
/// (Rows as `rows_pg` and `rows_sqlite` print them.)
fn as_pending(row: &str) -> String {
    for (table, from, to) in [
        ("jobs: ", ",scheduled,", ",pending,"),
        ("alk_jobs: ", "|'scheduled'|", "|'pending'|"),
    ] {
        if let Some(rest) = row.strip_prefix(table) {
            return format!("{table}{}", rest.replacen(from, to, 1));
        }
    }
    row.to_string()
}

fn check_pg_upgraded(mut old: PgOld, engine: &str, fresh_url: &str) {
    let engine = &format!("{engine} from {}", old.version);
    let mut c = pg(&old.url);
    let rows: Vec<String> = rows_pg(&mut c, &old.columns)
        .into_iter()
        .filter(|r| !r.starts_with("meta"))
        .map(|r| {
            if has_030(old.version) {
                r
            } else {
                as_pending(&r)
            }
        })
        .collect();
    let before: Vec<String> = old
        .rows
        .into_iter()
        .filter(|r| !r.starts_with("meta"))
        .collect();
    assert_eq!(
        rows, before,
        "[{engine}] every old row reads back unchanged"
    );
    let ahead: Vec<(String, i64)> = c
        .query(
            "SELECT state, count(*) FROM alkstore.jobs WHERE run_at > now() + interval '1 day'
              AND state IN ('pending', 'scheduled') GROUP BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        ahead,
        vec![("scheduled".to_string(), 2)],
        "[{engine}] jobs scheduled ahead are out of the claim index"
    );
    let mut db = Target::postgres(old.url.clone(), "upgraded").connect();
    let now = readings(&mut *db);
    let now = if old.version == "0.1.0" {
        without_new_keys(now)
    } else {
        now
    };
    assert_eq!(now, old.readings, "[{engine}] the functions read the same");
    // An upgraded database dumps and restores whole: every row, and the
    // same readings (pg_dump's custom format, pg_restore into a new
    // database; the extension's tables come back by their registrations).
    let restored = dump_and_restore(&old.url, &format!("{}_restored", old.name));
    let mut r = pg(&restored);
    assert_eq!(
        rows_pg(&mut r, &old.columns)
            .into_iter()
            .filter(|r| !r.starts_with("meta"))
            .collect::<Vec<_>>(),
        rows_pg(&mut c, &old.columns)
            .into_iter()
            .filter(|r| !r.starts_with("meta"))
            .collect::<Vec<_>>(),
        "[{engine}] every row of the upgraded database comes back from its dump"
    );
    let mut rdb = Target::postgres(restored.clone(), "restored").connect();
    let then = readings(&mut *rdb);
    let then = if old.version == "0.1.0" {
        without_new_keys(then)
    } else {
        then
    };
    assert_eq!(then, old.readings, "[{engine}] restored from a dump");
    check_fixture(&mut *db, engine, old.version);
    if old.version != "0.1.0" {
        check_fixture_020(&mut *db, engine);
    }
    if has_030(old.version) {
        check_fixture_030(&mut *db, engine);
    }

    // The session that registered before the upgrade is woken by an enqueue after it.
    let wake = db.int(
        "alk_enqueue",
        &[t("up-plain"), Arg::Null, j("{\"wake\": 1}")],
    );
    assert_eq!(
        next_notification(&mut old.waiter, &["up-plain"], Duration::from_secs(5)),
        Some(("alkstore_jobs".into(), "up-plain".into())),
        "[{engine}] a registration from before the upgrade still wakes"
    );
    assert!(db.yes("alk_cancel", &[Arg::Int(wake)]));
    if old.version != "0.1.0" {
        check_020_keeps_working(&mut *db, engine);
    }
    if has_030(old.version) {
        check_030_keeps_working(&mut *db, engine);
    }
    check_it_keeps_working(&mut *db, engine);
    assert_same_schema(
        engine,
        &describe_pg(&mut c),
        &describe_pg(&mut pg(fresh_url)),
    );
}

/// Dumps the database at `url` (custom format) and restores it into a new
/// database `name`; returns its URL.
fn dump_and_restore(url: &str, name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dump.custom");
    let run = |cmd: &mut std::process::Command| {
        let out = cmd.output().expect("run");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(std::process::Command::new("pg_dump")
        .args(["-F", "c", "-d", url, "-f"])
        .arg(&file));
    let restored = pg_database(name).unwrap();
    run(std::process::Command::new("pg_restore")
        .args(["--exit-on-error", "-d", &restored])
        .arg(&file));
    restored
}

fn postgres_extension_alter_extension_update_from(v: &'static str) {
    let db = format!("alkstore_upgrade_ext_{}", v.replace('.', "_"));
    let Some(old) = pg_old(v, &db, |c| {
        c.batch_execute(&format!("CREATE EXTENSION alkstore VERSION '{v}'"))
            .expect("CREATE EXTENSION alkstore VERSION (scripts/postgres.sh install puts the frozen scripts in place)");
    }) else {
        return;
    };
    let mut c = pg(&old.url);
    c.batch_execute("ALTER EXTENSION alkstore UPDATE").unwrap();
    let version: String = c
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = 'alkstore'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(version, alkstore_core::VERSION);
    let fresh = pg_database(&format!("{db}_fresh")).unwrap();
    pg(&fresh)
        .batch_execute("CREATE EXTENSION alkstore")
        .unwrap();
    check_pg_upgraded(old, "postgres (extension)", &fresh);
}

#[test]
fn postgres_extension_alter_extension_update_from_0_1_0() {
    postgres_extension_alter_extension_update_from("0.1.0");
}

#[test]
fn postgres_extension_alter_extension_update_from_0_2_0() {
    postgres_extension_alter_extension_update_from("0.2.0");
}

#[test]
fn postgres_extension_alter_extension_update_from_0_3_0() {
    postgres_extension_alter_extension_update_from("0.3.0");
}

/// `xmin` of every alkstore function and row: changes when anything is rewritten.
fn fingerprint(c: &mut postgres::Client) -> Vec<String> {
    c.query(
        "SELECT p.proname || ' ' || p.xmin::text FROM pg_proc p
          WHERE p.pronamespace = 'alkstore'::regnamespace OR p.proname LIKE 'alk\\_%'
         UNION ALL SELECT 'meta ' || m.key || '=' || m.value || ' ' || m.xmin::text FROM alkstore.meta m
         ORDER BY 1",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn postgres_plain_script_upgrades_in_place_and_is_rerunnable(v: &'static str) {
    let script = plain_script();
    let db = format!("alkstore_upgrade_plain_{}", v.replace('.', "_"));
    let Some(old) = pg_old(v, &db, |c| {
        c.batch_execute(&frozen(v, &format!("alkstore--{v}.plain.sql")))
            .unwrap();
    }) else {
        return;
    };
    let url = old.url.clone();
    let (ok, stderr) = psql_file(&url, &script);
    assert!(ok, "{stderr}");
    assert!(stderr.contains(&format!("upgrading {v} to")), "{stderr}");

    // Again on the same version: says so and changes nothing.
    let mut c = pg(&url);
    let before = fingerprint(&mut c);
    let (ok, stderr) = psql_file(&url, &script);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("is already installed: nothing to do"),
        "{stderr}"
    );
    assert_eq!(fingerprint(&mut c), before, "a re-run rewrote something");

    // A newer version: refused, nothing changed.
    c.batch_execute("UPDATE alkstore.meta SET value = '9.9.9' WHERE key = 'version'")
        .unwrap();
    let before = fingerprint(&mut c);
    let (ok, stderr) = psql_file(&url, &script);
    assert!(!ok, "a newer install must be refused");
    assert!(
        stderr.contains("alkstore 9.9.9, newer than this script")
            && stderr.contains(alkstore_core::VERSION),
        "{stderr}"
    );
    assert_eq!(fingerprint(&mut c), before);
    c.batch_execute(&format!(
        "UPDATE alkstore.meta SET value = '{}' WHERE key = 'version'",
        alkstore_core::VERSION
    ))
    .unwrap();

    let fresh = pg_database(&format!("{db}_fresh")).unwrap();
    let (ok, stderr) = psql_file(&fresh, &script);
    assert!(ok && stderr.contains("installing"), "{stderr}");
    check_pg_upgraded(old, "postgres (plain SQL install)", &fresh);
}

#[test]
fn postgres_plain_script_upgrades_0_1_0_in_place_and_is_rerunnable() {
    postgres_plain_script_upgrades_in_place_and_is_rerunnable("0.1.0");
}

#[test]
fn postgres_plain_script_upgrades_0_2_0_in_place_and_is_rerunnable() {
    postgres_plain_script_upgrades_in_place_and_is_rerunnable("0.2.0");
}

#[test]
fn postgres_plain_script_upgrades_0_3_0_in_place_and_is_rerunnable() {
    postgres_plain_script_upgrades_in_place_and_is_rerunnable("0.3.0");
}

#[test]
fn postgres_plain_script_failure_leaves_the_old_install_intact() {
    let script = plain_script();
    let Some(url) = pg_database("alkstore_upgrade_plain_fail") else {
        assert!(!pg_required());
        return;
    };
    let mut c = pg(&url);
    c.batch_execute(&frozen("0.1.0", "alkstore--0.1.0.plain.sql"))
        .unwrap();
    c.batch_execute(&frozen("0.1.0", "fixture.sql")).unwrap();
    // Something the upgrade cannot replace: it fails halfway through.
    c.batch_execute(
        "CREATE FUNCTION alkstore.version() RETURNS integer LANGUAGE sql AS 'SELECT 1'",
    )
    .unwrap();
    let before = fingerprint(&mut c);
    let (ok, stderr) = psql_file(&url, &script);
    assert!(!ok, "the upgrade should have failed: {stderr}");
    assert_eq!(
        fingerprint(&mut c),
        before,
        "a failed upgrade changed something"
    );
    let mut db = Target::postgres(url.clone(), "0.1.0").connect();
    assert_eq!(db.ok("alk_init", &[]), 1, "still 0.1.0");
    assert!(
        db.yes("alk_ack", &[Arg::Int(1), t("w-live")]),
        "and working"
    );

    // The extension is refused by the plain script, with the way to upgrade it.
    let ext = pg_database("alkstore_upgrade_plain_on_ext").unwrap();
    pg(&ext).batch_execute("CREATE EXTENSION alkstore").unwrap();
    let (ok, stderr) = psql_file(&ext, &script);
    assert!(
        !ok && stderr.contains("ALTER EXTENSION alkstore UPDATE"),
        "{stderr}"
    );
}

/// Issue 34 item 5: 0.1.0 let every role call the alk_* functions; 0.2.0
/// on let only members of alkstore_user. Upgrading from 0.1.0 grants
/// alkstore_user to the roles that could call them, and says so, so that
/// the application keeps working.
#[test]
fn upgrading_0_1_0_keeps_the_roles_that_called_alkstore_calling_it() {
    for install in Install::ALL {
        let name = format!("alkstore_upgrade_callers_{install:?}").to_lowercase();
        let Some(url) = pg_database(&name) else {
            assert!(!pg_required());
            return;
        };
        let mut c = pg(&url);
        match install {
            Install::Extension => c
                .batch_execute("CREATE EXTENSION alkstore VERSION '0.1.0'")
                .unwrap(),
            Install::Plain => c
                .batch_execute(&frozen("0.1.0", "alkstore--0.1.0.plain.sql"))
                .unwrap(),
        }
        let app = fresh("app").replace('-', "_");
        c.batch_execute(&format!("CREATE ROLE {app} LOGIN"))
            .unwrap();
        let enqueue_as_app = |c: &mut postgres::Client| {
            c.batch_execute(&format!("SET ROLE {app}")).unwrap();
            let r = c.batch_execute("SELECT alk_enqueue('callers-q', NULL, '1')");
            c.batch_execute("RESET ROLE").unwrap();
            r.map_err(|e| format!("{e:?}"))
        };
        enqueue_as_app(&mut c).expect("0.1.0: any role calls alk_enqueue");
        match install {
            Install::Extension => c.batch_execute("ALTER EXTENSION alkstore UPDATE").unwrap(),
            Install::Plain => {
                let (ok, stderr) = psql_file(&url, &plain_script());
                assert!(ok, "{stderr}");
                assert!(
                    stderr.contains("granted alkstore_user to") && stderr.contains(&app),
                    "the upgrade says whom it granted: {stderr}"
                );
            }
        }
        enqueue_as_app(&mut c).unwrap_or_else(|e| panic!("[{install:?}] after the upgrade: {e}"));
        let left: i64 = c
            .query_one(
                "SELECT count(*) FROM alkstore.meta WHERE key = 'callers_before_upgrade'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(left, 0, "[{install:?}] the record is gone");
        // An admin-only function stays admin-only.
        c.batch_execute(&format!("SET ROLE {app}")).unwrap();
        let admin = c.batch_execute("SELECT alk_queue_configure('callers-q', '{}')");
        c.batch_execute("RESET ROLE").unwrap();
        assert!(admin.is_err(), "[{install:?}]");
    }
}
