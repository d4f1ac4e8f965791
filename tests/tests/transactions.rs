//! Transactions (contract §4): every kind of write rolls back with the
//! caller's transaction and commits with it, on every engine.

use alkstore_tests::*;
use serde_json::{json, Value};

per_engine! {
    fn rollback_drops_every_kind_of_write_and_commit_keeps_them(target) {
        let mut db = target.connect();
        let db = &mut *db;
        let table = fresh("orders").replace('-', "_");
        db.exec(&format!(
            "CREATE TABLE {table} (id integer PRIMARY KEY, item text)"
        ));
        let (q, o, s) = (fresh("tx-q"), fresh("tx-o"), fresh("tx-s"));
        db.begin();
        db.exec(&format!("INSERT INTO {table} VALUES (1, 'ghost')"));
        let job = db.int("alk_enqueue", &[t(&q), Arg::Null, j("1")]);
        let out = db.int(
            "alk_outbox_enqueue",
            &[t(&o), Arg::Null, j(r#"{"to": "x"}"#)],
        );
        db.int("alk_publish", &[t(&s), j("1")]);
        assert!(db.yes("alk_save_offset", &[t(&s), t("c"), Arg::Int(1)]));
        db.ok("alk_notify", &[t("tx-channel"), j("\"hi\"")]);
        db.rollback();
        assert_eq!(
            db.query_i64(&format!("SELECT count(*) FROM {table}")),
            0,
            "[{}]",
            target.name()
        );
        assert_eq!(
            db.ok("alk_get_job", &[Arg::Int(job)]),
            Value::Null,
            "[{}]",
            target.name()
        );
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(out)]), Value::Null);
        assert_eq!(
            db.ok("alk_outbox_claim", &[t(&o), t("w"), Arg::Int(10)]),
            json!([])
        );
        assert_eq!(
            db.ok("alk_read", &[t(&s), Arg::Int(0), Arg::Int(10)]),
            json!([])
        );
        assert_eq!(db.int("alk_get_offset", &[t(&s), t("c")]), 0);
        // Commit: the order and the outbox message become visible together.
        db.begin();
        db.exec(&format!("INSERT INTO {table} VALUES (2, 'book')"));
        let out = db.int(
            "alk_outbox_enqueue",
            &[t(&o), j(r#"{"max_attempts": 2}"#), j(r#"{"to": "y"}"#)],
        );
        let mut other = target.connect();
        assert_eq!(
            other.ok("alk_get_job", &[Arg::Int(out)]),
            Value::Null,
            "not visible before commit"
        );
        db.commit();
        assert_eq!(other.query_i64(&format!("SELECT count(*) FROM {table}")), 1);
        let jobs = other.ok("alk_outbox_claim", &[t(&o), t("w"), Arg::Int(10)]);
        assert_eq!(ids(&jobs), vec![out]);
        assert_eq!(jobs[0]["queue"], format!("__alkstore_outbox:{o}"));
        assert_eq!(jobs[0]["max_attempts"], 2);
        let stamped = other.ok("alk_get_job", &[Arg::Int(out)]);
        assert_eq!(
            (
                stamped["visibility_timeout_s"].clone(),
                stamped["backoff_base_s"].clone()
            ),
            (json!(60), json!(5))
        );
        assert_eq!(other.ok("alk_outbox_stats", &[t(&o)])["running"], 1);
        assert!(other.yes("alk_ack", &[Arg::Int(out), t("w")]));
    }
}
