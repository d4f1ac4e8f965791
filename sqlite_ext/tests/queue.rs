//! SQLite-specific queue checks. The contract's queue behaviour is tested
//! once for every engine by the cross-engine suite (`tests/tests/queues.rs` and beside it),
//! which runs on SQLite files in WAL mode too.

mod common;
use common::*;
use serde_json::json;

#[test]
fn heartbeat_extends_by_the_stamped_visibility_or_extend_s() {
    let db = Db::new();
    let c = db.conn();
    let id = enqueue(&c, "q", None, "1");
    claim(&c, "q", "w", 1);
    let exp =
        |c: &rusqlite::Connection| job(c, id)["claim_expires_at"].as_str().unwrap().to_string();
    assert_eq!(int(&c, "SELECT alk_heartbeat(?1, 'w', 3600)", &[&id]), 1);
    let long = exp(&c);
    assert_eq!(int(&c, "SELECT alk_heartbeat(?1, 'w', NULL)", &[&id]), 1);
    let stamped = exp(&c);
    assert!(
        stamped < long,
        "60 s from now is before an hour from now: {stamped} {long}"
    );
    assert_eq!(int(&c, "SELECT alk_heartbeat(?1, 'nobody')", &[&id]), 0);
    assert_eq!(
        code(&c, "SELECT alk_heartbeat(?1, 'w', 0)", &[&id]),
        "ALK05"
    );
}

#[test]
fn stats_count_each_state() {
    let db = Db::new();
    let c = db.conn();
    enqueue(&c, "q", Some(r#"{"run_at": "2020-01-01T00:00:00Z"}"#), "1");
    enqueue(&c, "q", None, "2");
    enqueue(&c, "q", None, "3");
    enqueue(&c, "q", Some(r#"{"delay_s": 1000}"#), "4");
    let dead = enqueue(&c, "q", Some(r#"{"max_attempts": 1}"#), "5");
    let [first, ..] = &claim(&c, "q", "w", 1)[..] else {
        panic!()
    };
    assert_ne!(first["id"], dead);
    let s = val(&c, "SELECT alk_queue_stats('q')", &[]);
    assert_eq!(s["queue"], "q");
    assert_eq!(
        (
            s["pending"].clone(),
            s["scheduled"].clone(),
            s["running"].clone(),
            s["dead"].clone()
        ),
        (json!(3), json!(1), json!(1), json!(0))
    );
    assert!(s["oldest_runnable_age_s"].as_f64().unwrap() >= 0.0);
    assert_eq!((&s["completed"], &s["paused"]), (&json!(0), &json!(false)));
    assert_eq!(s.as_object().unwrap().len(), 12);
    let empty = val(&c, "SELECT alk_queue_stats('nothing')", &[]);
    assert_eq!(
        empty,
        json!({"queue": "nothing", "pending": 0, "scheduled": 0, "running": 0, "dead": 0,
               "completed": 0, "paused": false, "oldest_runnable_age_s": null,
               "running_limit": null, "next_slot_at": null, "maintenance_worker": false,
               "last_sweep_age_s": empty["last_sweep_age_s"]})
    );
}

#[test]
fn job_ids_are_never_reused_after_ack() {
    let db = Db::new();
    let c = db.conn();
    let a = enqueue(&c, "q", None, "1");
    claim(&c, "q", "w", 1);
    assert_eq!(int(&c, "SELECT alk_ack(?1, 'w')", &[&a]), 1);
    let b = enqueue(&c, "other", None, "2");
    assert!(b > a, "{b} > {a}");
}

#[test]
fn claim_statements_read_through_the_partial_indexes() {
    let db = Db::new();
    let c = db.conn();
    enqueue(&c, "q", None, "1");
    let plan = |name: &str| -> String {
        let mut st = c
            .prepare(&format!(
                "EXPLAIN QUERY PLAN {}",
                alkstore_sqlite::sql::get(name)
            ))
            .unwrap();
        let params: Vec<rusqlite::types::Value> = (0..st.parameter_count())
            .map(|i| {
                if i == 0 {
                    "q".to_string().into()
                } else {
                    1i64.into()
                }
            })
            .collect();
        st.query_map(rusqlite::params_from_iter(params), |r| {
            r.get::<_, String>(3)
        })
        .unwrap()
        .map(Result::unwrap)
        .collect::<Vec<_>>()
        .join("; ")
    };
    let pending = plan("claim_pending");
    assert!(
        pending.contains("USING INDEX alk_jobs_pending") && !pending.contains("TEMP B-TREE"),
        "{pending}"
    );
    let any = plan("any_expired");
    assert!(
        any.contains("INDEX alk_jobs_running (queue=? AND claim_expires_at<?)"),
        "{any}"
    );
}
