//! Queue behaviour of contract §5 on a real SQLite file.

mod common;
use common::*;
use serde_json::{json, Value};

const JOB_KEYS: [&str; 16] = [
    "id",
    "queue",
    "state",
    "payload",
    "priority",
    "attempts",
    "max_attempts",
    "visibility_timeout_s",
    "backoff_base_s",
    "backoff_max_s",
    "run_at",
    "created_at",
    "claimed_by",
    "claim_expires_at",
    "expires_at",
    "last_error",
];

fn ids(jobs: &[Value]) -> Vec<i64> {
    jobs.iter().map(|j| j["id"].as_i64().unwrap()).collect()
}

#[test]
fn get_job_has_exactly_the_pinned_keys_and_stamped_values() {
    let db = Db::new();
    let c = db.conn();
    val(&c, "SELECT alk_queue_configure('q', '{\"visibility_timeout_s\": 30, \"backoff_base_s\": 0.25}')", &[]);
    let id = enqueue(
        &c,
        "q",
        Some(r#"{"priority": 3, "max_attempts": 2, "expires_in_s": 100}"#),
        r#"{"k":[1,2]}"#,
    );
    let j = job(&c, id);
    let mut keys: Vec<_> = j.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    let mut want: Vec<_> = JOB_KEYS.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(keys, want);
    assert_eq!(j["queue"], "q");
    assert_eq!(j["state"], "pending");
    assert_eq!(j["payload"], json!({"k": [1, 2]}));
    assert_eq!(j["priority"], 3);
    assert_eq!(j["attempts"], 0);
    assert_eq!(j["max_attempts"], 2);
    assert_eq!(j["visibility_timeout_s"], 30);
    assert_eq!(j["backoff_base_s"], 0.25);
    assert_eq!(j["backoff_max_s"], 3600);
    assert_eq!(j["claimed_by"], Value::Null);
    assert_eq!(j["last_error"], Value::Null);
    for k in ["run_at", "created_at", "expires_at"] {
        let s = j[k].as_str().unwrap();
        assert!(
            s.len() == 24 && s.ends_with('Z') && s.as_bytes()[19] == b'.',
            "{k}: {s}"
        );
    }
    // Stamping: later configuration does not change jobs already enqueued.
    val(
        &c,
        "SELECT alk_queue_configure('q', '{\"visibility_timeout_s\": 5, \"max_attempts\": 9}')",
        &[],
    );
    assert_eq!(job(&c, id)["visibility_timeout_s"], 30);
    assert_eq!(job(&c, id)["max_attempts"], 2);
    let id2 = enqueue(&c, "q", None, "1");
    assert_eq!(job(&c, id2)["visibility_timeout_s"], 5);
    assert_eq!(job(&c, id2)["max_attempts"], 9);
    assert_eq!(job(&c, id2)["backoff_base_s"], 0.25);
    assert_eq!(val(&c, "SELECT alk_get_job(424242)", &[]), Value::Null);
}

#[test]
fn defaults_and_configure_merge() {
    let db = Db::new();
    let c = db.conn();
    let defaults = json!({"visibility_timeout_s": 60, "max_attempts": 5, "backoff_base_s": 5, "backoff_max_s": 3600});
    assert_eq!(val(&c, "SELECT alk_queue_opts('fresh')", &[]), defaults);
    val(
        &c,
        "SELECT alk_queue_configure('q', '{\"max_attempts\": 3}')",
        &[],
    );
    let merged = val(
        &c,
        "SELECT alk_queue_configure('q', '{\"backoff_max_s\": 10}')",
        &[],
    );
    assert_eq!(
        merged,
        json!({"visibility_timeout_s": 60, "max_attempts": 3, "backoff_base_s": 5, "backoff_max_s": 10})
    );
    assert_eq!(val(&c, "SELECT alk_queue_opts('q')", &[]), merged);
    assert_eq!(
        val(&c, "SELECT alk_queue_configure('q', NULL)", &[]),
        merged
    );
    let id = enqueue(&c, "q", None, "null");
    assert_eq!(job(&c, id)["payload"], Value::Null);
    assert_eq!(job(&c, id)["max_attempts"], 3);
}

#[test]
fn claim_order_is_priority_then_run_at_then_id() {
    let db = Db::new();
    let c = db.conn();
    let a = enqueue(&c, "q", None, "\"a\"");
    let b = enqueue(&c, "q", Some(r#"{"priority": 10}"#), "\"b\"");
    let old = enqueue(
        &c,
        "q",
        Some(r#"{"run_at": "2020-01-01T00:00:00Z"}"#),
        "\"old\"",
    );
    let d = enqueue(&c, "q", None, "\"d\"");
    let low = enqueue(&c, "q", Some(r#"{"priority": -1}"#), "\"low\"");
    enqueue(&c, "other", None, "\"elsewhere\"");
    let jobs = claim(&c, "q", "w", 10);
    assert_eq!(ids(&jobs), vec![b, old, a, d, low]);
    let first = &jobs[0];
    assert_eq!(first["queue"], "q");
    assert_eq!(first["payload"], "b");
    assert_eq!(first["attempts"], 1);
    assert_eq!(first["max_attempts"], 5);
    assert!(first["claim_expires_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(first.as_object().unwrap().len(), 6);
    assert!(claim(&c, "q", "w", 10).is_empty());
    // max_jobs defaults to 1.
    enqueue(&c, "q", None, "1");
    enqueue(&c, "q", None, "2");
    assert_eq!(
        val(&c, "SELECT json_array_length(alk_claim('q', 'w'))", &[]),
        1
    );
}

#[test]
fn delayed_and_scheduled_jobs_wait() {
    let db = Db::new();
    let c = db.conn();
    let soon = enqueue(&c, "q", Some(r#"{"delay_s": 0.3}"#), "1");
    enqueue(&c, "q", Some(r#"{"run_at": 4102444800}"#), "2"); // 2100
    let stats = val(&c, "SELECT alk_queue_stats('q')", &[]);
    assert_eq!(stats["pending"], 0);
    assert_eq!(stats["scheduled"], 2);
    assert_eq!(stats["oldest_runnable_age_s"], Value::Null);
    assert!(claim(&c, "q", "w", 5).is_empty());
    sleep_ms(350);
    assert_eq!(ids(&claim(&c, "q", "w", 5)), vec![soon]);
}

#[test]
fn a_claim_is_held_until_another_worker_reclaims_it() {
    let db = Db::new();
    let c = db.conn();
    val(
        &c,
        "SELECT alk_queue_configure('q', '{\"visibility_timeout_s\": 0.1}')",
        &[],
    );
    let id = enqueue(&c, "q", None, "1");
    assert_eq!(ids(&claim(&c, "q", "w1", 1)), vec![id]);
    // Not claimable while the claim runs.
    assert!(claim(&c, "q", "w2", 1).is_empty());
    sleep_ms(150);
    // Expired but not re-claimed: the holder may still heartbeat and ack.
    assert_eq!(int(&c, "SELECT alk_heartbeat(?1, 'w1')", &[&id]), 1);
    assert!(
        claim(&c, "q", "w2", 1).is_empty(),
        "heartbeat extended the claim"
    );
    sleep_ms(150);
    let again = claim(&c, "q", "w2", 1);
    assert_eq!(ids(&again), vec![id]);
    assert_eq!(again[0]["attempts"], 2);
    assert_eq!(job(&c, id)["claimed_by"], "w2");
    // The old holder lost it: everything is false / NULL and changes nothing.
    let before = snapshot(&c);
    assert_eq!(int(&c, "SELECT alk_ack(?1, 'w1')", &[&id]), 0);
    assert_eq!(int(&c, "SELECT alk_heartbeat(?1, 'w1', 10)", &[&id]), 0);
    assert_eq!(int(&c, "SELECT alk_fail(?1, 'w1', 'x')", &[&id]), 0);
    assert_eq!(
        val(&c, "SELECT alk_retry(?1, 'w1', 'x')", &[&id]),
        Value::Null
    );
    assert_eq!(snapshot(&c), before);
    assert_eq!(int(&c, "SELECT alk_ack(?1, 'w2')", &[&id]), 1);
    assert_eq!(
        val(&c, "SELECT alk_get_job(?1)", &[&id]),
        Value::Null,
        "acked jobs are gone"
    );
    assert_eq!(int(&c, "SELECT alk_ack(?1, 'w2')", &[&id]), 0);
}

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
fn retry_goes_back_to_pending_then_dead_with_last_error() {
    let db = Db::new();
    let c = db.conn();
    let id = enqueue(&c, "q", Some(r#"{"max_attempts": 2}"#), "1");
    claim(&c, "q", "w", 1);
    assert_eq!(
        val(&c, "SELECT alk_retry(?1, 'w', 'boom', 0)", &[&id]),
        "pending"
    );
    let j = job(&c, id);
    assert_eq!(
        (
            j["state"].clone(),
            j["last_error"].clone(),
            j["claimed_by"].clone()
        ),
        (json!("pending"), json!("boom"), Value::Null)
    );
    claim(&c, "q", "w", 1);
    assert_eq!(
        val(&c, "SELECT alk_retry(?1, 'w', 'boom again', 0)", &[&id]),
        "dead"
    );
    let j = job(&c, id);
    assert_eq!(
        (
            j["state"].clone(),
            j["last_error"].clone(),
            j["attempts"].clone()
        ),
        (json!("dead"), json!("boom again"), json!(2))
    );
    assert_eq!(val(&c, "SELECT alk_queue_stats('q')", &[])["dead"], 1);
    // Dead: only requeue brings it back, with attempts reset.
    assert_eq!(
        val(&c, "SELECT alk_retry(?1, 'w', 'x', 0)", &[&id]),
        Value::Null
    );
    assert_eq!(
        int(&c, "SELECT alk_cancel(?1)", &[&id]),
        0,
        "cancel only removes pending or running jobs"
    );
    assert_eq!(int(&c, "SELECT alk_requeue_dead(?1)", &[&id]), 1);
    assert_eq!(int(&c, "SELECT alk_requeue_dead(?1)", &[&id]), 0);
    let j = job(&c, id);
    assert_eq!(
        (j["state"].clone(), j["attempts"].clone()),
        (json!("pending"), json!(0))
    );
    assert_eq!(ids(&claim(&c, "q", "w", 1)), vec![id]);
}

#[test]
fn retry_without_delay_uses_the_stamped_backoff() {
    let db = Db::new();
    let c = db.conn();
    val(
        &c,
        "SELECT alk_queue_configure('q', '{\"backoff_base_s\": 0.2, \"backoff_max_s\": 0.3}')",
        &[],
    );
    let id = enqueue(&c, "q", None, "1");
    claim(&c, "q", "w", 1);
    assert_eq!(val(&c, "SELECT alk_retry(?1, 'w', 'e')", &[&id]), "pending");
    assert!(
        claim(&c, "q", "w", 1).is_empty(),
        "backoff 0.2 s not yet over"
    );
    sleep_ms(250);
    assert_eq!(ids(&claim(&c, "q", "w", 1)), vec![id]);
    // Second retry: 0.2 * 2 = 0.4, capped at 0.3.
    assert_eq!(
        val(&c, "SELECT alk_retry(?1, 'w', 'e', NULL)", &[&id]),
        "pending"
    );
    sleep_ms(200);
    assert!(claim(&c, "q", "w", 1).is_empty());
    sleep_ms(150);
    assert_eq!(ids(&claim(&c, "q", "w", 1)), vec![id]);
}

#[test]
fn fail_moves_a_held_job_to_dead() {
    let db = Db::new();
    let c = db.conn();
    let id = enqueue(&c, "q", None, "1");
    assert_eq!(
        int(&c, "SELECT alk_fail(?1, 'w', 'nope')", &[&id]),
        0,
        "not claimed yet"
    );
    claim(&c, "q", "w", 1);
    assert_eq!(int(&c, "SELECT alk_fail(?1, 'w', 'nope')", &[&id]), 1);
    assert_eq!(job(&c, id)["state"], "dead");
    assert_eq!(job(&c, id)["last_error"], "nope");
    assert_eq!(int(&c, "SELECT alk_fail(?1, 'w', 'nope')", &[&id]), 0);
    assert_eq!(int(&c, "SELECT alk_ack(?1, 'w')", &[&id]), 0);
}

#[test]
fn final_claim_expiry_dead_letters_instead_of_handing_out_again() {
    let db = Db::new();
    let c = db.conn();
    val(
        &c,
        "SELECT alk_queue_configure('q', '{\"visibility_timeout_s\": 0.05, \"max_attempts\": 1}')",
        &[],
    );
    let id = enqueue(&c, "q", None, "1");
    let next = enqueue(&c, "q", None, "2");
    assert_eq!(ids(&claim(&c, "q", "w1", 1)), vec![id]);
    sleep_ms(100);
    // The expired final claim is dead-lettered and the next job is handed out instead.
    assert_eq!(ids(&claim(&c, "q", "w2", 2)), vec![next]);
    let j = job(&c, id);
    assert_eq!(j["state"], "dead");
    assert_eq!(
        j["last_error"],
        "visibility timeout exceeded on final attempt"
    );
}

#[test]
fn sweep_dead_letters_expired_and_final_claims() {
    let db = Db::new();
    let c = db.conn();
    val(
        &c,
        "SELECT alk_queue_configure('q', '{\"visibility_timeout_s\": 0.05, \"max_attempts\": 1}')",
        &[],
    );
    let running = enqueue(&c, "q", None, "1");
    claim(&c, "q", "w", 1);
    let expiring = enqueue(&c, "q", Some(r#"{"expires_in_s": 0.05}"#), "2");
    let other = enqueue(&c, "r", Some(r#"{"expires_in_s": 0.05}"#), "3");
    let keeps = enqueue(&c, "q", Some(r#"{"expires_in_s": 100}"#), "4");
    sleep_ms(100);
    assert_eq!(int(&c, "SELECT alk_sweep('q')", &[]), 2);
    assert_eq!(
        job(&c, running)["last_error"],
        "visibility timeout exceeded on final attempt"
    );
    assert_eq!(job(&c, expiring)["last_error"], "expired");
    assert_eq!(job(&c, other)["state"], "pending");
    assert_eq!(job(&c, keeps)["state"], "pending");
    assert_eq!(int(&c, "SELECT alk_sweep(NULL)", &[]), 1);
    assert_eq!(job(&c, other)["state"], "dead");
    assert_eq!(int(&c, "SELECT alk_sweep()", &[]), 0);
}

#[test]
fn expired_jobs_are_dead_lettered_at_claim_time_never_run() {
    let db = Db::new();
    let c = db.conn();
    let gone = enqueue(
        &c,
        "q",
        Some(r#"{"expires_in_s": 0.05, "priority": 9}"#),
        "1",
    );
    let runs = enqueue(&c, "q", None, "2");
    sleep_ms(100);
    assert_eq!(ids(&claim(&c, "q", "w", 1)), vec![runs]);
    assert_eq!(job(&c, gone)["state"], "dead");
    assert_eq!(job(&c, gone)["last_error"], "expired");
}

#[test]
fn cancel_removes_pending_and_running_jobs() {
    let db = Db::new();
    let c = db.conn();
    let p = enqueue(&c, "q", None, "1");
    let r = enqueue(&c, "q", None, "2");
    claim(&c, "q", "w", 1);
    assert_eq!(int(&c, "SELECT alk_cancel(?1)", &[&p]), 1);
    assert_eq!(int(&c, "SELECT alk_cancel(?1)", &[&r]), 1);
    assert_eq!(val(&c, "SELECT alk_get_job(?1)", &[&p]), Value::Null);
    assert_eq!(int(&c, "SELECT alk_ack(?1, 'w')", &[&p]), 0);
    assert_eq!(int(&c, "SELECT alk_cancel(?1)", &[&p]), 0);
    assert_eq!(int(&c, "SELECT alk_cancel(12345)", &[]), 0);
}

#[test]
fn batches_enqueue_in_order_and_ack_together() {
    let db = Db::new();
    let c = db.conn();
    let ids_v = val(
        &c,
        "SELECT alk_enqueue_batch('q', '{\"priority\": 2}', '[{\"n\":1}, \"two\", 3, null, [5]]')",
        &[],
    );
    let new_ids: Vec<i64> = ids_v
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(new_ids.len(), 5);
    assert!(
        new_ids.windows(2).all(|w| w[0] < w[1]),
        "ids increase in array order"
    );
    let jobs = claim(&c, "q", "w", 32);
    assert_eq!(ids(&jobs), new_ids);
    assert_eq!(jobs[1]["payload"], "two");
    assert_eq!(job(&c, new_ids[0])["priority"], 2);
    assert_eq!(
        val(&c, "SELECT alk_enqueue_batch('q', NULL, '[]')", &[]),
        json!([])
    );
    let list = serde_json::to_string(&[new_ids[0], new_ids[1], 999_999]).unwrap();
    assert_eq!(int(&c, "SELECT alk_ack_batch(?1, 'w')", &[&list]), 2);
    assert_eq!(
        int(
            &c,
            "SELECT alk_ack_batch(?1, 'other')",
            &[&serde_json::to_string(&new_ids).unwrap()]
        ),
        0
    );
    assert_eq!(
        int(
            &c,
            "SELECT alk_ack_batch(?1, 'w')",
            &[&serde_json::to_string(&new_ids).unwrap()]
        ),
        3
    );
    assert_eq!(
        code(&c, "SELECT alk_ack_batch('[1, \"x\"]', 'w')", &[]),
        "ALK05"
    );
    assert_eq!(
        code(&c, "SELECT alk_enqueue_batch('q', NULL, '{\"a\":1}')", &[]),
        "ALK04"
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
    assert_eq!(s.as_object().unwrap().len(), 6);
    let empty = val(&c, "SELECT alk_queue_stats('nothing')", &[]);
    assert_eq!(
        empty,
        json!({"queue": "nothing", "pending": 0, "scheduled": 0, "running": 0, "dead": 0, "oldest_runnable_age_s": null})
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
