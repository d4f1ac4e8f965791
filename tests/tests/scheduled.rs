//! Jobs scheduled ahead (contract v1.2 §H): a job written with a run_at
//! ahead is kept out of the claim index until it comes due. Every reader
//! still sees it as pending; claims take due ones in claim order whether or
//! not `alk_sweep` has made them pending yet; expiry, groups, limits,
//! cancel and purge treat them as pending jobs. One body per behaviour, on
//! SQLite and on PostgreSQL (extension, plain install, PgBouncer); the cost
//! of a claim behind 20,000 jobs scheduled ahead is checked on PostgreSQL.

use alkstore_tests::*;
use postgres::{Client, NoTls};
use serde_json::json;

per_engine! {
    fn due_jobs_are_claimed_in_claim_order_before_and_after_a_sweep(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("ahead-order");
        let enq = |db: &mut dyn Db, opts: &str, p: i64| {
            db.int("alk_enqueue", &[t(&q), j(opts), Arg::Int(p)])
        };
        // Delays of a second or more: every step before the sleep must run
        // before they pass, also on a loaded machine.
        let a = enq(db, r#"{"priority": 10, "delay_s": 1.5}"#, 1);
        for _ in 0..3 {
            enq(db, r#"{"priority": 10, "run_at": 4102444800}"#, 2);
        }
        let c = enq(db, r#"{"priority": 5}"#, 3);
        let d = enq(db, r#"{"priority": 1, "delay_s": 1.2}"#, 4);
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!(
            (stats["pending"].clone(), stats["scheduled"].clone()),
            (json!(1), json!(5)),
            "[{}]",
            db.engine()
        );
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])), vec![c]);
        sleep_ms(1600);
        // a and d came due; nothing swept them: claims take them directly,
        // in claim order with the pending job enqueued now.
        let e = enq(db, r#"{"priority": 5}"#, 5);
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!(
            (stats["pending"].clone(), stats["scheduled"].clone()),
            (json!(3), json!(3)),
            "[{}]",
            db.engine()
        );
        assert_eq!(
            ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])),
            vec![a, e, d],
            "[{}]",
            db.engine()
        );
        // The same after a sweep made them pending.
        let f = enq(db, r#"{"priority": 3, "delay_s": 0.1}"#, 6);
        let g = enq(db, r#"{"priority": 7, "delay_s": 0.1}"#, 7);
        let h = enq(db, r#"{"priority": 4}"#, 8);
        sleep_ms(150);
        assert_eq!(db.int("alk_sweep", &[t(&q)]), 0, "nothing dead-lettered");
        assert_eq!(
            ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])),
            vec![g, h, f],
            "[{}]",
            db.engine()
        );
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)]), json!([]));
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!(
            (stats["pending"].clone(), stats["scheduled"].clone()),
            (json!(0), json!(3))
        );
    }

    fn scheduled_jobs_are_pending_to_every_reader(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("ahead-read");
        let later = db.int("alk_enqueue", &[t(&q), j(r#"{"delay_s": 3600}"#), j("1")]);
        let job = db.ok("alk_get_job", &[Arg::Int(later)]);
        assert_eq!(job["state"], "pending", "[{}]", db.engine());
        let listed = db.ok("alk_list_jobs", &[t(&q), t("pending"), Arg::Int(0), Arg::Int(10)]);
        assert_eq!(ids(&listed), vec![later]);
        // A queue that has only jobs scheduled ahead is listed.
        let queues = db.ok("alk_queues", &[]);
        let row = queues
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["queue"] == q.as_str())
            .unwrap_or_else(|| panic!("[{}] {q} not listed: {queues}", db.engine()));
        assert_eq!((row["pending"].clone(), row["scheduled"].clone()), (json!(0), json!(1)));
        assert!(db.yes("alk_cancel", &[Arg::Int(later)]));
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(later)]), json!(null));
        db.ok("alk_enqueue_batch", &[t(&q), j(r#"{"delay_s": 3600}"#), j("[1, 2, 3]")]);
        db.int("alk_enqueue", &[t(&q), Arg::Null, j("4")]);
        assert_eq!(db.int("alk_purge", &[t(&q), t("pending")]), 4, "[{}]", db.engine());
        // A retry with a delay: pending, not claimable before its run_at.
        let r = db.int("alk_enqueue", &[t(&q), Arg::Null, j("5")]);
        db.ok("alk_claim", &[t(&q), t("w")]);
        assert_eq!(
            db.ok("alk_retry", &[Arg::Int(r), t("w"), t("later"), Arg::Num(1.0)]),
            json!("pending")
        );
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(r)])["state"], "pending");
        assert_eq!(db.ok("alk_claim", &[t(&q), t("w")]), json!([]));
        sleep_ms(1100);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w")])), vec![r]);
    }

    fn expired_scheduled_jobs_are_dead_lettered_never_run(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("ahead-expiry");
        let gone = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"delay_s": 0.2, "expires_in_s": 0.1}"#), j("1")],
        );
        // Due first, then expired: never claimed either.
        let late = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"delay_s": 0.05, "expires_in_s": 0.15}"#), j("3")],
        );
        let kept = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"delay_s": 0.1, "expires_in_s": 100}"#), j("2")],
        );
        sleep_ms(250);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])), vec![kept]);
        assert_eq!(db.int("alk_sweep", &[t(&q)]), 2, "[{}]", db.engine());
        for id in [gone, late] {
            let dead = db.ok("alk_get_job", &[Arg::Int(id)]);
            assert_eq!(
                (dead["state"].clone(), dead["last_error"].clone()),
                (json!("dead"), json!("expired")),
                "[{}]",
                db.engine()
            );
        }
    }

    fn a_group_head_due_later_waits_for_its_time(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("ahead-group");
        let first = db.int("alk_enqueue", &[t(&q), j(r#"{"group_key": "g"}"#), j("1")]);
        let next = db.int(
            "alk_enqueue",
            &[t(&q), j(r#"{"group_key": "g", "delay_s": 1.5}"#), j("2")],
        );
        let other = db.int("alk_enqueue", &[t(&q), j(r#"{"priority": -1}"#), j("3")]);
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w")])), vec![first]);
        assert!(db.yes("alk_ack", &[Arg::Int(first), t("w")]));
        // next heads the group now, but is not due: the other job comes first.
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])), vec![other]);
        sleep_ms(1600);
        assert_eq!(
            ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])),
            vec![next],
            "[{}]",
            db.engine()
        );
    }

    fn an_outbox_message_due_later_is_delivered_when_due_with_no_sweep(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let o = fresh("ahead-outbox");
        let later = db.int("alk_outbox_enqueue", &[t(&o), j(r#"{"delay_s": 1.0}"#), j("1")]);
        let now = db.int("alk_outbox_enqueue", &[t(&o), Arg::Null, j("2")]);
        assert_eq!(ids(&db.ok("alk_outbox_claim", &[t(&o), t("w"), Arg::Int(5)])), vec![now]);
        sleep_ms(1100);
        assert_eq!(
            ids(&db.ok("alk_outbox_claim", &[t(&o), t("w"), Arg::Int(5)])),
            vec![later],
            "[{}]",
            db.engine()
        );
    }

    fn a_limited_queue_claims_due_scheduled_jobs_within_its_limits(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("ahead-limit");
        db.ok("alk_queue_configure", &[t(&q), j(r#"{"max_running": 2}"#)]);
        let a = db.int("alk_enqueue", &[t(&q), j(r#"{"priority": 9, "delay_s": 0.2}"#), j("1")]);
        db.int("alk_enqueue", &[t(&q), j(r#"{"priority": 9, "delay_s": 3600}"#), j("2")]);
        let b = db.int("alk_enqueue", &[t(&q), j(r#"{"priority": 1}"#), j("3")]);
        db.int("alk_enqueue", &[t(&q), j(r#"{"priority": 0}"#), j("4")]);
        sleep_ms(250);
        assert_eq!(
            ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])),
            vec![a, b],
            "[{}]",
            db.engine()
        );
    }
}

/// A claim reads the due jobs only, however many lie ahead at a higher
/// priority: before the change (every pending job in the claim index) this
/// claim stepped over 20,000 index entries.
#[test]
fn a_claim_does_not_read_the_jobs_scheduled_ahead() {
    // Databases of its own: the statistics are this test's alone.
    for target in isolated_targets("alk_ahead_cost")
        .into_iter()
        .filter(|t| t.is_postgres())
    {
        let mut c = Client::connect(target.pg_url(), NoTls).expect("connect");
        let q = fresh("ahead-cost");
        for _ in 0..20 {
            c.query_one(
                "SELECT alk_enqueue_batch($1, '{\"priority\": 10, \"delay_s\": 86400}',
                                          (SELECT jsonb_agg(i) FROM generate_series(1, 1000) i))",
                &[&q],
            )
            .unwrap();
        }
        // Seven due: the first six claims plan the session's statements
        // (each plan reads every partition's index metapages), the seventh
        // runs them as planned.
        let due: Vec<i64> = (0..7)
            .map(|_| {
                c.query_one("SELECT alk_enqueue($1, NULL, '1')", &[&q])
                    .unwrap()
                    .get(0)
            })
            .collect();
        // Statistics that show the jobs scheduled ahead, and a new session
        // whose plans are made from them (an EXISTS probe was planned as a
        // scan of the table from such statistics).
        c.batch_execute("ANALYZE alkstore.jobs").unwrap();
        let mut c = Client::connect(target.pg_url(), NoTls).expect("connect");
        // Blocks of jobs and its indexes the claim read.
        for want in &due[..6] {
            assert_eq!(
                pg_claim_blocks(&mut c, &q).0,
                vec![*want],
                "[{}]",
                target.name()
            );
        }
        let (got, read) = pg_claim_blocks(&mut c, &q);
        assert_eq!(got, vec![due[6]], "[{}]", target.name());
        // About 25 here (probes of each index, the claimed job's row and its
        // new entries); 161 when every pending job was in the claim index,
        // hundreds when a probe was planned as a scan of the table.
        assert!(
            read < 60,
            "[{}] a claim read {} blocks behind 20,000 jobs scheduled ahead",
            target.name(),
            read
        );
    }
}
