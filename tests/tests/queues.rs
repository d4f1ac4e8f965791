//! Queues (contract §5): job documents, claim order, delays, claims held
//! and reclaimed, retries, dead letters, expiry, sweeps, batches and
//! options — one body per behaviour, one test per engine (`per_engine!`):
//! SQLite, and PostgreSQL as an extension, as the plain SQL install and
//! through PgBouncer whenever the test command configured them.

use alkstore_tests::*;
use serde_json::{json, Value};

/// The keys of a job document (`alk_get_job`), exactly.
const JOB_KEYS: [&str; 23] = [
    "attempts",
    "backoff_base_s",
    "backoff_max_s",
    "claim_expires_at",
    "claimed_by",
    "completed_at",
    "created_at",
    "depends_on",
    "expires_at",
    "group_key",
    "id",
    "idempotency_key",
    "last_error",
    "limit_key",
    "max_attempts",
    "payload",
    "priority",
    "queue",
    "result",
    "run_at",
    "state",
    "visibility_timeout_s",
    "waiting_for",
];

per_engine! {
    fn get_job_shows_exactly_the_pinned_keys_and_the_stamped_options(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("stamp");
        db.ok(
            "alk_queue_configure",
            &[
                t(&q),
                j(r#"{"visibility_timeout_s": 30, "backoff_base_s": 0.25}"#),
            ],
        );
        let id = db.int(
            "alk_enqueue",
            &[
                t(&q),
                j(r#"{"priority": 3, "max_attempts": 2, "expires_in_s": 100}"#),
                j(r#"{"k": [1, 2]}"#),
            ],
        );
        let job = db.ok("alk_get_job", &[Arg::Int(id)]);
        let mut keys: Vec<&str> = job
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(keys, JOB_KEYS, "[{}]", db.engine());
        assert_eq!(job["state"], "pending");
        // No dependencies (contract v1.2 §J): both null.
        assert_eq!((job["depends_on"].clone(), job["waiting_for"].clone()), (json!(null), json!(null)));
        assert_eq!(job["payload"], json!({"k": [1, 2]}));
        assert_eq!(
            (
                job["priority"].clone(),
                job["attempts"].clone(),
                job["max_attempts"].clone()
            ),
            (json!(3), json!(0), json!(2))
        );
        assert_eq!(job["visibility_timeout_s"], json!(30), "[{}]", db.engine());
        assert_eq!(job["backoff_base_s"], json!(0.25), "[{}]", db.engine());
        assert_eq!(job["backoff_max_s"], json!(3600));
        for k in ["run_at", "created_at", "expires_at"] {
            let s = job[k].as_str().unwrap();
            assert!(
                s.len() == 24 && s.ends_with('Z'),
                "[{}] {k}: {s}",
                db.engine()
            );
        }
        assert_eq!(
            instant(&job["expires_at"]) - instant(&job["created_at"]),
            100_000
        );
        // Later configuration does not change jobs already enqueued.
        db.ok(
            "alk_queue_configure",
            &[
                t(&q),
                j(r#"{"visibility_timeout_s": 5, "max_attempts": 9}"#),
            ],
        );
        assert_eq!(
            db.ok("alk_get_job", &[Arg::Int(id)])["visibility_timeout_s"],
            json!(30)
        );
        let id2 = db.int("alk_enqueue", &[t(&q), Arg::Null, j("1")]);
        let job2 = db.ok("alk_get_job", &[Arg::Int(id2)]);
        assert_eq!(
            (
                job2["visibility_timeout_s"].clone(),
                job2["max_attempts"].clone()
            ),
            (json!(5), json!(9))
        );
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(i64::MAX)]), Value::Null);
    }
}

#[test]
fn the_same_scenario_yields_the_same_documents_on_every_engine() {
    // Cross-engine identity: ignoring ids and times, get_job, stats and
    // options documents are equal.
    let mut docs: Vec<(String, Vec<Value>)> = Vec::new();
    each(|db, target| {
        let q = fresh("same");
        let o = fresh("same-outbox");
        let mut out = Vec::new();
        out.push(db.ok(
            "alk_queue_configure",
            &[t(&q), j(r#"{"max_attempts": 3, "backoff_max_s": 10.5}"#)],
        ));
        let a = db.int(
            "alk_enqueue",
            &[
                t(&q),
                j(r#"{"priority": 2, "max_attempts": 4}"#),
                j(r#"{"b": [true, null, 1.5, "x"]}"#),
            ],
        );
        let b = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"delay_s": 1000}"#), j("\"later\"")],
        );
        let c = db.int(
            "alk_outbox_enqueue",
            &[t(&o), j(r#"{"max_attempts": 1}"#), j("{}")],
        );
        db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)]);
        db.ok(
            "alk_retry",
            &[Arg::Int(a), t("w"), t("boom"), Arg::Num(0.0)],
        );
        db.ok("alk_outbox_claim", &[t(&o), t("w"), Arg::Int(5)]);
        db.ok("alk_fail", &[Arg::Int(c), t("w"), t("gave up")]);
        for id in [a, b, c] {
            let mut job = db.ok("alk_get_job", &[Arg::Int(id)]);
            let obj = job.as_object_mut().unwrap();
            for k in [
                "id",
                "queue",
                "run_at",
                "created_at",
                "claim_expires_at",
                "expires_at",
            ] {
                obj.remove(k);
            }
            out.push(job);
        }
        let mut stats = db.ok("alk_queue_stats", &[t(&q)]);
        stats.as_object_mut().unwrap().remove("queue");
        // Times that differ by the moment (and by other tests' sweeps).
        for k in ["oldest_runnable_age_s", "last_sweep_age_s"] {
            stats.as_object_mut().unwrap().remove(k);
        }
        out.push(stats);
        out.push(db.ok("alk_queue_opts", &[t(&q)]));
        docs.push((target.name(), out));
    });
    for (name, other) in &docs[1..] {
        assert_eq!(other, &docs[0].1, "{name} differs from {}", docs[0].0);
    }
}

per_engine! {
    fn claims_come_in_claim_order_with_the_pinned_shape(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("order");
        let a = db.int("alk_enqueue", &[t(&q), Arg::Null, j("\"a\"")]);
        let b = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"priority": 10}"#), j("\"b\"")],
        );
        let old = db.int(
            "alk_enqueue",
            &[
                t(&q),
                j(r#"{"run_at": "2020-01-01T00:00:00Z"}"#),
                j("\"old\""),
            ],
        );
        let d = db.int("alk_enqueue", &[t(&q), Arg::Null, j("\"d\"")]);
        let low = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"priority": -1}"#), j("\"low\"")],
        );
        let jobs = db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)]);
        assert_eq!(ids(&jobs), vec![b, old, a, d, low], "[{}]", db.engine());
        let first = jobs[0].as_object().unwrap();
        let mut keys: Vec<&str> = first.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "attempts",
                "claim_expires_at",
                "id",
                "max_attempts",
                "payload",
                "queue"
            ]
        );
        assert_eq!(
            (
                first["queue"].as_str(),
                first["payload"].as_str(),
                first["attempts"].as_i64()
            ),
            (Some(q.as_str()), Some("b"), Some(1))
        );
        assert!(instant(&first["claim_expires_at"]) > alkstore_core::time::now_ms() + 50_000);
        assert_eq!(
            db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)]),
            json!([])
        );
        db.int("alk_enqueue", &[t(&q), Arg::Null, j("1")]);
        db.int("alk_enqueue", &[t(&q), Arg::Null, j("2")]);
        assert_eq!(
            db.ok("alk_claim", &[t(&q), t("w")])
                .as_array()
                .unwrap()
                .len(),
            1,
            "max_jobs defaults to 1"
        );
    }
}

per_engine! {
    fn delayed_jobs_wait_for_their_time(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("delay");
        let soon = db.int("alk_enqueue", &[t(&q), j(r#"{"delay_s": 1.5}"#), j("1")]);
        db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"run_at": 4102444800}"#), j("2")],
        );
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!(
            (stats["pending"].clone(), stats["scheduled"].clone()),
            (json!(0), json!(2)),
            "[{}]",
            db.engine()
        );
        assert_eq!(stats["oldest_runnable_age_s"], Value::Null);
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)]), json!([]));
        sleep_ms(1600);
        assert_eq!(
            ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])),
            vec![soon]
        );
    }
}

per_engine! {
    fn a_claim_is_held_until_another_worker_reclaims_it(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("hold");
        db.ok(
            "alk_queue_configure",
            // A second: long enough that a loaded machine's steps between
            // a claim and the check that it still holds fit in it.
            &[t(&q), j(r#"{"visibility_timeout_s": 1}"#)],
        );
        let id = db.int("alk_enqueue", &[t(&q), Arg::Null, j("1")]);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w1")])), vec![id]);
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w2")]), json!([]));
        sleep_ms(1100);
        assert!(
            db.yes("alk_heartbeat", &[Arg::Int(id), t("w1")]),
            "[{}] the holder may heartbeat after expiry",
            db.engine()
        );
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w2")]), json!([]));
        sleep_ms(1100);
        let again = db.ok("alk_claim", &[t(&q), t("w2")]);
        assert_eq!(
            (ids(&again), again[0]["attempts"].clone()),
            (vec![id], json!(2))
        );
        assert!(!db.yes("alk_ack", &[Arg::Int(id), t("w1")]));
        assert!(!db.yes("alk_heartbeat", &[Arg::Int(id), t("w1"), Arg::Num(10.0)]));
        assert!(!db.yes("alk_fail", &[Arg::Int(id), t("w1"), t("x")]));
        assert_eq!(
            db.ok("alk_retry", &[Arg::Int(id), t("w1"), t("x")]),
            Value::Null
        );
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(id)])["claimed_by"], "w2");
        assert!(db.yes("alk_ack", &[Arg::Int(id), t("w2")]));
        assert_eq!(
            db.ok("alk_get_job", &[Arg::Int(id)]),
            Value::Null,
            "acked jobs are gone"
        );
        assert!(!db.yes("alk_ack", &[Arg::Int(id), t("w2")]));
    }
}

per_engine! {
    fn retry_fail_dead_and_requeue(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("retry");
        let id = db.int("alk_enqueue", &[t(&q), j(r#"{"max_attempts": 2}"#), j("1")]);
        db.ok("alk_claim", &[t(&q), t("w")]);
        assert_eq!(
            db.ok(
                "alk_retry",
                &[Arg::Int(id), t("w"), t("boom"), Arg::Num(0.0)]
            ),
            "pending"
        );
        let job = db.ok("alk_get_job", &[Arg::Int(id)]);
        assert_eq!(
            (
                job["state"].clone(),
                job["last_error"].clone(),
                job["claimed_by"].clone()
            ),
            (json!("pending"), json!("boom"), Value::Null)
        );
        db.ok("alk_claim", &[t(&q), t("w")]);
        assert_eq!(
            db.ok(
                "alk_retry",
                &[Arg::Int(id), t("w"), t("again"), Arg::Num(0.0)]
            ),
            "dead"
        );
        let job = db.ok("alk_get_job", &[Arg::Int(id)]);
        assert_eq!(
            (
                job["state"].clone(),
                job["last_error"].clone(),
                job["attempts"].clone()
            ),
            (json!("dead"), json!("again"), json!(2))
        );
        assert_eq!(db.ok("alk_queue_stats", &[t(&q)])["dead"], 1);
        assert_eq!(
            db.ok("alk_retry", &[Arg::Int(id), t("w"), t("x"), Arg::Num(0.0)]),
            Value::Null
        );
        assert!(!db.yes("alk_cancel", &[Arg::Int(id)]));
        assert!(db.yes("alk_requeue_dead", &[Arg::Int(id)]));
        assert!(!db.yes("alk_requeue_dead", &[Arg::Int(id)]));
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(id)])["attempts"], 0);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w")])), vec![id]);
        assert!(db.yes("alk_fail", &[Arg::Int(id), t("w"), t("nope")]));
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(id)])["state"], "dead");
    }
}

per_engine! {
    fn retry_without_delay_uses_the_stamped_backoff(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("backoff");
        db.ok(
            "alk_queue_configure",
            &[t(&q), j(r#"{"backoff_base_s": 0.2, "backoff_max_s": 0.3}"#)],
        );
        let id = db.int("alk_enqueue", &[t(&q), Arg::Null, j("1")]);
        // run_at is the retry's own time plus the delay: between the clock
        // before the call and after it, plus the delay (1 ms for rounding),
        // however long the call takes on a loaded machine.
        // The delay left out, then given as NULL: both mean the backoff.
        let retry = |db: &mut dyn Db, delay_ms: i64, what: &str, args: &[Arg]| {
            db.ok("alk_claim", &[t(&q), t("w")]);
            let before = alkstore_core::time::now_ms();
            db.ok("alk_retry", args);
            let after = alkstore_core::time::now_ms();
            let run_at = instant(&db.ok("alk_get_job", &[Arg::Int(id)])["run_at"]);
            assert!(
                (before + delay_ms - 1..=after + delay_ms + 1).contains(&run_at),
                "[{}] {what}: run_at {} ms after the call began, {} ms after it ended",
                db.engine(),
                run_at - before,
                run_at - after
            );
        };
        retry(
            db,
            200,
            "first backoff (base)",
            &[Arg::Int(id), t("w"), t("e")],
        );
        sleep_ms(250);
        let null_delay = [Arg::Int(id), t("w"), t("e"), Arg::Null];
        retry(db, 300, "second backoff (base * 2, capped)", &null_delay);
    }
}

per_engine! {
    fn expiry_and_final_claims_are_dead_lettered_never_run(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("expire");
        db.ok(
            "alk_queue_configure",
            &[
                t(&q),
                j(r#"{"visibility_timeout_s": 0.05, "max_attempts": 1}"#),
            ],
        );
        let final_claim = db.int("alk_enqueue", &[t(&q), j(r#"{"priority": 9}"#), j("1")]);
        assert_eq!(
            ids(&db.ok("alk_claim", &[t(&q), t("w1")])),
            vec![final_claim]
        );
        let gone = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"expires_in_s": 0.05, "priority": 5}"#), j("2")],
        );
        let runs = db.int("alk_enqueue", &[t(&q), Arg::Null, j("3")]);
        sleep_ms(100);
        assert_eq!(
            ids(&db.ok("alk_claim", &[t(&q), t("w2"), Arg::Int(5)])),
            vec![runs],
            "[{}]",
            db.engine()
        );
        let a = db.ok("alk_get_job", &[Arg::Int(final_claim)]);
        assert_eq!(
            (a["state"].clone(), a["last_error"].clone()),
            (
                json!("dead"),
                json!("visibility timeout exceeded on final attempt")
            )
        );
        let b = db.ok("alk_get_job", &[Arg::Int(gone)]);
        assert_eq!(
            (b["state"].clone(), b["last_error"].clone()),
            (json!("dead"), json!("expired"))
        );
    }
}

/// Held by the one test that sweeps every queue: its runs on the
/// extension and through PgBouncer share a database, and one run's global
/// sweep would dead-letter the other's jobs before its per-queue sweep
/// counts them.
static SWEEPS_ALL: std::sync::Mutex<()> = std::sync::Mutex::new(());

per_engine! {
    fn sweep_dead_letters_per_queue_or_everywhere(_target) {
        let _serial = SWEEPS_ALL.lock().unwrap_or_else(|e| e.into_inner());
        let mut db = _target.connect();
        let db = &mut *db;
        let (q, r) = (fresh("sweep-q"), fresh("sweep-r"));
        db.ok(
            "alk_queue_configure",
            &[
                t(&q),
                j(r#"{"visibility_timeout_s": 0.05, "max_attempts": 1}"#),
            ],
        );
        let running = db.int("alk_enqueue", &[t(&q), Arg::Null, j("1")]);
        db.ok("alk_claim", &[t(&q), t("w")]);
        let expiring = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"expires_in_s": 0.05}"#), j("2")],
        );
        let other = db.int(
            "alk_enqueue",
            &[t(&r), j(r#"{"expires_in_s": 0.05}"#), j("3")],
        );
        let keeps = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"expires_in_s": 100}"#), j("4")],
        );
        sleep_ms(100);
        assert_eq!(db.int("alk_sweep", &[t(&q)]), 2, "[{}]", db.engine());
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(running)])["state"], "dead");
        assert_eq!(
            db.ok("alk_get_job", &[Arg::Int(expiring)])["last_error"],
            "expired"
        );
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(other)])["state"], "pending");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(keeps)])["state"], "pending");
        assert!(db.int("alk_sweep", &[Arg::Null]) >= 1);
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(other)])["state"], "dead");
    }
}

per_engine! {
    fn cancel_batches_and_stats(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("batch");
        let new_ids: Vec<i64> = db
            .ok(
                "alk_enqueue_batch",
                &[
                    t(&q),
                    j(r#"{"priority": 2}"#),
                    j(r#"[{"n":1}, "two", 3, null, [5]]"#),
                ],
            )
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(new_ids.len(), 5);
        assert!(
            new_ids.windows(2).all(|w| w[0] < w[1]),
            "ids in array order"
        );
        assert_eq!(
            db.ok("alk_enqueue_batch", &[t(&q), Arg::Null, j("[]")]),
            json!([])
        );
        let jobs = db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(3)]);
        assert_eq!(ids(&jobs), new_ids[..3]);
        assert_eq!(jobs[1]["payload"], "two");
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!(
            (stats["pending"].clone(), stats["running"].clone()),
            (json!(2), json!(3)),
            "[{}]",
            db.engine()
        );
        assert!(stats["oldest_runnable_age_s"].as_f64().unwrap() >= 0.0);
        assert_eq!(
            db.int(
                "alk_ack_batch",
                &[Arg::Ids(vec![new_ids[0], new_ids[1], new_ids[4]]), t("w")]
            ),
            2
        );
        assert!(
            db.yes("alk_cancel", &[Arg::Int(new_ids[2])]),
            "running jobs can be cancelled"
        );
        assert!(
            db.yes("alk_cancel", &[Arg::Int(new_ids[3])]),
            "pending jobs can be cancelled"
        );
        assert!(!db.yes("alk_cancel", &[Arg::Int(new_ids[3])]));
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!(
            stats,
            json!({"queue": q, "pending": 1, "scheduled": 0, "running": 0, "dead": 0, "completed": 0,
                   "paused": false, "oldest_runnable_age_s": stats["oldest_runnable_age_s"],
                   "running_limit": null, "next_slot_at": null,
                   // v1.3 §O: no maintenance worker serves the test targets.
                   "maintenance_worker": false,
                   // Issue 57: whatever other tests' sweeps left.
                   "last_sweep_age_s": stats["last_sweep_age_s"]})
        );
    }
}

per_engine! {
    fn configure_merges_over_defaults(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("conf");
        let defaults = json!({"visibility_timeout_s": 60, "max_attempts": 5, "backoff_base_s": 5, "backoff_max_s": 3600,
                              "retain_completed_s": 0, "retain_dead_s": null,
                              "max_running": null, "rate_max": null, "rate_per_s": null,
                              "key_max_running": null, "key_rate_max": null, "key_rate_per_s": null});
        assert_eq!(db.ok("alk_queue_opts", &[t(&q)]), defaults);
        db.ok("alk_queue_configure", &[t(&q), j(r#"{"max_attempts": 3}"#)]);
        let merged = db.ok(
            "alk_queue_configure",
            &[t(&q), j(r#"{"backoff_max_s": 10}"#)],
        );
        assert_eq!(
            merged,
            json!({"visibility_timeout_s": 60, "max_attempts": 3, "backoff_base_s": 5, "backoff_max_s": 10,
                   "retain_completed_s": 0, "retain_dead_s": null,
                              "max_running": null, "rate_max": null, "rate_per_s": null,
                              "key_max_running": null, "key_rate_max": null, "key_rate_per_s": null})
        );
        assert_eq!(db.ok("alk_queue_opts", &[t(&q)]), merged);
    }
}
