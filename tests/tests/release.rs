//! Giving a claim back without spending an attempt: `alk_release` and
//! `alk_release_batch` (contract v1.3 §Q), one body per rule, on every
//! engine and install (`per_engine!`).

use alkstore_tests::*;
use serde_json::{json, Value};

/// Enqueues one job into a fresh queue (options `opts`) and claims it as
/// `w`; returns (queue, job id).
fn claimed(db: &mut dyn Db, prefix: &str, opts: &str) -> (String, i64) {
    let q = fresh(prefix);
    if opts != "null" {
        db.ok("alk_queue_configure", &[t(&q), j(opts)]);
    }
    let id = db.int("alk_enqueue", &[t(&q), Arg::Null, j(r#"{"n": 1}"#)]);
    assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w")])), [id]);
    (q, id)
}

fn job(db: &mut dyn Db, id: i64) -> Value {
    db.ok("alk_get_job", &[Arg::Int(id)])
}

/// The fields a release must not touch, or must leave as they were.
fn settled(job: &Value) -> Value {
    json!([
        job["state"],
        job["attempts"],
        job["claimed_by"],
        job["last_error"],
        job["expires_at"]
    ])
}

per_engine! {
    /// Pending again at once; the claim does not count; no error recorded.
    fn a_release_ends_the_claim_without_an_attempt_or_an_error(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let (q, id) = claimed(db, "rel", r#"{"max_attempts": 3}"#);
        // A first attempt that failed, so that there is an error to keep.
        assert_eq!(
            db.ok("alk_retry", &[Arg::Int(id), t("w"), t("boom"), Arg::Num(0.0)]),
            "pending"
        );
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w")])), [id]);
        assert_eq!(job(db, id)["attempts"], 2);
        let errors = db.ok("alk_job_errors", &[Arg::Int(id)]);

        assert!(db.yes("alk_release", &[Arg::Int(id), t("w")]));
        let after = job(db, id);
        assert_eq!(
            (
                &after["state"],
                &after["attempts"],
                &after["claimed_by"],
                &after["claim_expires_at"],
                &after["last_error"]
            ),
            (&json!("pending"), &json!(1), &Value::Null, &Value::Null, &json!("boom")),
            "[{}] {after}",
            db.engine()
        );
        assert_eq!(db.ok("alk_job_errors", &[Arg::Int(id)]), errors);
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!((&stats["pending"], &stats["running"]), (&json!(1), &json!(0)));
        // Claimable at once, by anyone, as its second attempt again.
        let again = db.ok("alk_claim", &[t(&q), t("w2")]);
        assert_eq!((ids(&again), &again[0]["attempts"]), (vec![id], &json!(2)));
        // A NULL or zero delay is "at once" too.
        assert!(db.yes("alk_release", &[Arg::Int(id), t("w2"), Arg::Null]));
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w")])), [id]);
        assert!(db.yes("alk_release", &[Arg::Int(id), t("w"), Arg::Num(0.0)]));
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w")])), [id]);
        assert!(db.yes("alk_ack", &[Arg::Int(id), t("w")]));
    }
}

per_engine! {
    /// A job released three times on a queue with max_attempts 1 still runs.
    fn releases_never_use_up_the_attempts(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let (q, id) = claimed(db, "rel-max1", r#"{"max_attempts": 1}"#);
        for _ in 0..3 {
            assert!(db.yes("alk_release", &[Arg::Int(id), t("w")]));
            let again = db.ok("alk_claim", &[t(&q), t("w")]);
            assert_eq!((ids(&again), &again[0]["attempts"]), (vec![id], &json!(1)));
        }
        assert!(db.yes("alk_ack", &[Arg::Int(id), t("w")]));
        assert_eq!(db.ok("alk_queue_stats", &[t(&q)])["dead"], 0);
    }
}

per_engine! {
    /// With a delay: pending again at now + delay_s, not claimable before.
    fn a_delayed_release_waits_its_delay(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let (q, id) = claimed(db, "rel-later", "null");
        let before = alkstore_core::time::now_ms();
        assert!(db.yes("alk_release", &[Arg::Int(id), t("w"), Arg::Num(60.0)]));
        let after = job(db, id);
        assert_eq!((&after["state"], &after["attempts"]), (&json!("pending"), &json!(0)));
        let run_at = instant(&after["run_at"]);
        assert!(
            (before + 59_000..before + 62_000).contains(&run_at),
            "[{}] run_at {run_at} for a release of 60 s at {before}",
            db.engine()
        );
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w")]), json!([]));
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!((&stats["pending"], &stats["scheduled"]), (&json!(0), &json!(1)));
    }
}

per_engine! {
    /// False (not counted) and nothing changes unless this worker holds an
    /// unexpired claim: another worker's claim, an expired one, a pending,
    /// dead, acked or unknown job.
    fn a_release_of_a_claim_not_held_is_false_and_changes_nothing(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let (q, id) = claimed(db, "rel-not", r#"{"max_attempts": 2}"#);
        let held = settled(&job(db, id));
        assert!(!db.yes("alk_release", &[Arg::Int(id), t("other")]));
        assert_eq!(db.int("alk_release_batch", &[Arg::Ids(vec![id]), t("other")]), 0);
        assert_eq!(settled(&job(db, id)), held);

        // Expired: the claim counts, as after a crash.
        assert!(db.yes("alk_heartbeat", &[Arg::Int(id), t("w"), Arg::Num(0.001)]));
        sleep_ms(30);
        let expired = job(db, id);
        assert!(!db.yes("alk_release", &[Arg::Int(id), t("w")]));
        assert_eq!(db.int("alk_release_batch", &[Arg::Ids(vec![id]), t("w")]), 0);
        assert_eq!(job(db, id), expired, "[{}]", db.engine());

        // Pending, unknown.
        let pending = db.int("alk_enqueue", &[t(&q), Arg::Null, j("2")]);
        assert!(!db.yes("alk_release", &[Arg::Int(pending), t("w")]));
        assert!(!db.yes("alk_release", &[Arg::Int(i64::MAX - 7), t("w")]));
        assert_eq!(job(db, pending)["attempts"], 0);

        // Dead, acked.
        let (q2, dead) = claimed(db, "rel-dead", "null");
        assert!(db.yes("alk_fail", &[Arg::Int(dead), t("w"), t("no")]));
        let was = job(db, dead);
        assert!(!db.yes("alk_release", &[Arg::Int(dead), t("w")]));
        assert_eq!(job(db, dead), was);
        let acked = db.int("alk_enqueue", &[t(&q2), Arg::Null, j("3")]);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q2), t("w")])), [acked]);
        assert!(db.yes("alk_ack", &[Arg::Int(acked), t("w")]));
        assert!(!db.yes("alk_release", &[Arg::Int(acked), t("w")]));
        assert_eq!(job(db, acked), Value::Null);
    }
}

per_engine! {
    /// The batch counts each held job once, and only those.
    fn a_release_batch_counts_what_this_worker_held(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("rel-batch");
        let ids_in = db.ok("alk_enqueue_batch", &[t(&q), Arg::Null, j("[1, 2, 3, 4]")]);
        let all: Vec<i64> = ids_in.as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(3)])), all[..3]);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("other"), Arg::Int(1)])), all[3..]);
        let asked = vec![all[0], all[1], all[1], all[3], i64::MAX - 3];
        assert_eq!(
            db.int("alk_release_batch", &[Arg::Ids(asked), t("w"), Arg::Num(0.0)]),
            2
        );
        for (id, state) in [(all[0], "pending"), (all[1], "pending"), (all[2], "running"), (all[3], "running")] {
            assert_eq!(job(db, id)["state"], state, "[{}] job {id}", db.engine());
        }
        assert_eq!(db.int("alk_release_batch", &[Arg::Ids(vec![]), t("w")]), 0);
        assert_eq!(db.int("alk_release_batch", &[Arg::Ids(vec![all[2]]), t("w"), Arg::Num(30.0)]), 1);
        assert_eq!(db.ok("alk_queue_stats", &[t(&q)])["scheduled"], 1);
    }
}

per_engine! {
    /// Bad input: the contract's code, and the claim still held.
    fn bad_input_is_refused_and_changes_nothing(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let (_q, id) = claimed(db, "rel-bad", "null");
        let held = job(db, id);
        for (f, args, want) in [
            ("alk_release", vec![Arg::Int(id), t("")], "ALK01"),
            ("alk_release", vec![Arg::Null, t("w")], "ALK05"),
            ("alk_release", vec![Arg::Int(id), t("w"), Arg::Num(-1.0)], "ALK05"),
            ("alk_release", vec![Arg::Int(id), t("w"), Arg::Num(f64::INFINITY)], "ALK05"),
            ("alk_release", vec![Arg::Int(id), t("w"), Arg::Num(f64::NEG_INFINITY)], "ALK05"),
            ("alk_release_batch", vec![Arg::Ids(vec![id]), t("")], "ALK01"),
            ("alk_release_batch", vec![Arg::Null, t("w")], "ALK05"),
            ("alk_release_batch", vec![Arg::Null, t("")], "ALK05"),
            ("alk_release_batch", vec![Arg::Ids(vec![id]), t("w"), Arg::Num(-0.5)], "ALK05"),
        ] {
            assert_eq!(db.code(f, &args), want, "[{}] {f} {args:?}", db.engine());
            assert_eq!(job(db, id), held, "[{}] {f} {args:?} changed the job", db.engine());
        }
        // SQLite has no NaN: a NaN bound as a parameter arrives as NULL
        // ("at once"). PostgreSQL's float8 has one, refused as not finite.
        if db.engine().starts_with("postgres") {
            let nan = vec![Arg::Int(id), t("w"), Arg::Num(f64::NAN)];
            assert_eq!(db.code("alk_release", &nan), "ALK05");
            assert_eq!(job(db, id), held);
        }
        assert!(db.yes("alk_ack", &[Arg::Int(id), t("w")]));
    }
}

per_engine! {
    /// A released group head stays its group's head.
    fn a_released_group_head_stays_its_groups_head(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("rel-group");
        let first = db.int("alk_enqueue", &[t(&q), j(r#"{"group_key": "g"}"#), j("1")]);
        let second = db.int("alk_enqueue", &[t(&q), j(r#"{"group_key": "g"}"#), j("2")]);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)])), [first]);
        assert!(db.yes("alk_release", &[Arg::Int(first), t("w")]));
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)])), [first]);
        assert!(db.yes("alk_ack", &[Arg::Int(first), t("w")]));
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)])), [second]);
        // Released for later, the head still holds its group back.
        let third = db.int("alk_enqueue", &[t(&q), j(r#"{"group_key": "g"}"#), j("3")]);
        assert!(db.yes("alk_release", &[Arg::Int(second), t("w"), Arg::Num(60.0)]));
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)]), json!([]), "[{}]", db.engine());
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(third)])["state"], "pending");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(second)])["state"], "pending");
    }
}

per_engine! {
    /// A released job frees its place under the queue's and its key's
    /// running limits at once, even when it is to run later itself.
    fn a_released_job_frees_its_place_under_the_limits(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        for opts in [r#"{"max_running": 1}"#, r#"{"key_max_running": 1}"#] {
            let q = fresh("rel-limit");
            db.ok("alk_queue_configure", &[t(&q), j(opts)]);
            let a = db.int("alk_enqueue", &[t(&q), j(r#"{"limit_key": "k"}"#), j("1")]);
            let b = db.int("alk_enqueue", &[t(&q), j(r#"{"limit_key": "k"}"#), j("2")]);
            assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)])), [a]);
            assert_eq!(db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)]), json!([]), "{opts}");
            assert!(db.yes("alk_release", &[Arg::Int(a), t("w"), Arg::Num(60.0)]));
            assert_eq!(
                ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)])),
                [b],
                "[{}] {opts}",
                db.engine()
            );
        }
    }
}

per_engine! {
    /// Its dependents keep waiting; a paused queue keeps it pending.
    fn dependents_wait_on_and_a_paused_queue_keeps_it(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let (q, id) = claimed(db, "rel-deps", "null");
        let after = db.int(
            "alk_enqueue",
            &[t(&q), j(&format!(r#"{{"depends_on": [{id}]}}"#)), j("2")],
        );
        assert!(db.yes("alk_queue_pause", &[t(&q)]));
        assert!(db.yes("alk_release", &[Arg::Int(id), t("w")]));
        assert_eq!(job(db, after)["waiting_for"], json!([id]));
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)]), json!([]));
        assert_eq!(db.ok("alk_queue_stats", &[t(&q)])["pending"], 2);
        assert!(db.yes("alk_queue_resume", &[t(&q)]));
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)])), [id]);
        assert!(db.yes("alk_ack", &[Arg::Int(id), t("w")]));
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)])), [after]);
    }
}

per_engine! {
    /// An outbox message is released like a job.
    fn an_outbox_message_is_released_like_a_job(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let o = fresh("rel-outbox");
        let id = db.int("alk_outbox_enqueue", &[t(&o), Arg::Null, j(r#"{"mail": 1}"#)]);
        assert_eq!(ids(&db.ok("alk_outbox_claim", &[t(&o), t("relay")])), [id]);
        assert!(db.yes("alk_release", &[Arg::Int(id), t("relay")]));
        let again = db.ok("alk_outbox_claim", &[t(&o), t("relay")]);
        assert_eq!((ids(&again), &again[0]["attempts"]), (vec![id], &json!(1)));
    }
}

per_engine! {
    /// A successful release leaves `expires_in_s` running from enqueue: the
    /// job keeps its `expires_at` and, once that passed, is never run again
    /// but dead-lettered with `expired`.
    fn a_released_job_still_expires_from_its_enqueue(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("rel-exp");
        let id = db.int("alk_enqueue", &[t(&q), j(r#"{"expires_in_s": 2}"#), j("1")]);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w")])), [id]);
        let before = job(db, id)["expires_at"].clone();
        assert!(before.is_string(), "[{}] {before}", db.engine());
        // Past the expiry while claimed (a 30 s claim), then given back.
        sleep_ms(2_300);
        assert!(db.yes("alk_release", &[Arg::Int(id), t("w")]));
        let released = job(db, id);
        assert_eq!(released["expires_at"], before, "[{}] {released}", db.engine());
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w2")]), json!([]), "[{}]", db.engine());
        db.ok("alk_sweep", &[t(&q)]);
        let after = job(db, id);
        assert_eq!(
            (&after["state"], &after["last_error"]),
            (&json!("dead"), &json!("expired")),
            "[{}] {after}",
            db.engine()
        );
    }
}
