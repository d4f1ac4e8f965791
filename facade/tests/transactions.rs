//! The transactional seam through the facade (contract §11, ADR-014), one
//! body per behaviour on every engine.

mod common;
use alkstore::sql::Arg;
use alkstore::{EnqueueOpts, Error, TxHandle};
use common::*;
use serde_json::{json, Value};

#[test]
fn rollback_drops_every_tx_write_and_commit_makes_them_visible() {
    for target in targets() {
        let store = target.open();
        let (q, o, s, ch) = (fresh("q"), fresh("o"), fresh("s"), fresh("ch"));
        let mut listener = store.listen(&ch).unwrap();
        let mut tx = store.begin().unwrap();
        let job = tx.enqueue_tx(&q, &EnqueueOpts::new(), &json!(1)).unwrap();
        let msg = tx
            .outbox_enqueue_tx(&o, &EnqueueOpts::new(), &json!({"to": "x"}))
            .unwrap();
        assert!(tx.publish_tx(&s, &json!("e")).unwrap() > 0);
        assert!(tx.save_offset_tx(&s, "c", 1).unwrap());
        tx.notify_tx(&ch, &json!("rolled back")).unwrap();
        tx.rollback().unwrap();
        assert_eq!(store.get_job(job).unwrap(), None, "[{}]", target.name());
        assert_eq!(store.get_job(msg).unwrap(), None);
        assert!(store.outbox(&o).unwrap().claim("w", 10).unwrap().is_empty());
        assert!(store.stream(&s).unwrap().read(0, 10).unwrap().is_empty());
        assert_eq!(store.stream(&s).unwrap().get_offset("c").unwrap(), 0);
        assert_eq!(
            listener.recv_timeout(ms(300)).unwrap(),
            None,
            "[{}] no notification after rollback",
            target.name()
        );

        let mut tx = store.begin().unwrap();
        let msg = tx
            .outbox_enqueue_tx(&o, &EnqueueOpts::new().max_attempts(2), &json!({"to": "y"}))
            .unwrap();
        tx.notify_tx(&ch, &json!({"n": 1})).unwrap();
        assert_eq!(store.get_job(msg).unwrap(), None, "invisible before commit");
        tx.commit().unwrap();
        let n = listener
            .recv_timeout(ms(5000))
            .unwrap()
            .expect("notified after commit");
        assert_eq!(
            (n.channel.as_str(), n.payload),
            (ch.as_str(), json!({"n": 1}))
        );
        let outbox = store.outbox(&o).unwrap();
        let mut seen = Vec::new();
        assert!(outbox
            .run_once("deliverer", &mut |job| {
                seen.push(job.payload.clone());
                Ok(())
            })
            .unwrap());
        assert_eq!(seen, vec![json!({"to": "y"})]);
        assert!(
            !outbox.run_once("deliverer", &mut |_| Ok(())).unwrap(),
            "exactly the committed one"
        );
    }
}

#[test]
fn dropping_an_uncommitted_transaction_rolls_it_back() {
    for target in targets() {
        let store = target.open();
        let q = fresh("drop");
        let id = {
            let mut tx = store.begin().unwrap();
            tx.enqueue_tx(&q, &EnqueueOpts::new(), &json!(1)).unwrap()
        };
        assert_eq!(store.get_job(id).unwrap(), None, "[{}]", target.name());
        assert!(store.queue(&q).unwrap().claim("w", 1).unwrap().is_empty());
    }
}

#[test]
fn outbox_names_on_the_tx_path_are_checked_like_everywhere_else() {
    for target in targets() {
        let store = target.open();
        let mut tx = store.begin().unwrap();
        let reserved = tx
            .outbox_enqueue_tx("__alkstore_x", &EnqueueOpts::new(), &json!(1))
            .unwrap_err();
        assert!(
            matches!(reserved, Error::ReservedName(_)),
            "[{}] {reserved:?}",
            target.name()
        );
        let empty = tx
            .outbox_enqueue_tx("", &EnqueueOpts::new(), &json!(1))
            .unwrap_err();
        assert!(matches!(empty, Error::InvalidName(_)), "{empty:?}");
        // The backing queue is not reachable as a queue, on the tx path either.
        let backing = tx
            .enqueue_tx("__alkstore_outbox:mail", &EnqueueOpts::new(), &json!(1))
            .unwrap_err();
        assert!(matches!(backing, Error::ReservedName(_)), "{backing:?}");
        tx.commit().unwrap();
        // Handles check their name when created.
        assert!(matches!(
            store.queue("__alkstore_outbox:mail"),
            Err(Error::ReservedName(_))
        ));
        assert!(matches!(store.outbox(""), Err(Error::InvalidName(_))));
        assert!(matches!(
            store.stream("__alkstore_s"),
            Err(Error::ReservedName(_))
        ));
        assert!(matches!(store.listen(""), Err(Error::InvalidName(_))));
        let bad = store.queue("q").unwrap().enqueue(
            &EnqueueOpts::new()
                .delay(ms(1))
                .run_at(std::time::SystemTime::now()),
            &json!(1),
        );
        assert!(matches!(bad, Err(Error::InvalidOptions(_))), "{bad:?}");
    }
}

#[test]
fn stamped_options_are_identical_across_engines() {
    let mut docs: Vec<Value> = Vec::new();
    for target in targets() {
        let store = target.open();
        let o = fresh("stamp");
        let mut tx = store.begin().unwrap();
        let opts = EnqueueOpts::new()
            .priority(3)
            .max_attempts(2)
            .expires_in(ms(100_000));
        let id = tx
            .outbox_enqueue_tx(&o, &opts, &json!({"k": [1, 2.5, null]}))
            .unwrap();
        tx.commit().unwrap();
        let mut doc = store.get_job(id).unwrap().unwrap();
        for k in ["id", "queue", "run_at", "created_at", "expires_at"] {
            doc.as_object_mut().unwrap().remove(k);
        }
        docs.push(doc);
    }
    assert_eq!(docs[0]["visibility_timeout_s"], 60);
    assert_eq!(docs[0]["max_attempts"], 2);
    assert!(docs.windows(2).all(|w| w[0] == w[1]), "{docs:#?}");
}

#[test]
fn business_rows_go_through_the_engine_transaction() {
    for target in targets() {
        let q = fresh("business");
        let table = fresh("orders").replace('-', "_");
        match &target {
            common::Target::Sqlite(_) => {
                let store = target.sqlite();
                let mut tx = store.transaction().unwrap();
                tx.conn()
                    .execute_batch(&format!(
                        "CREATE TABLE {table} (item TEXT); INSERT INTO {table} VALUES ('book')"
                    ))
                    .unwrap();
                tx.enqueue_tx(&q, &EnqueueOpts::new(), &json!({"item": "book"}))
                    .unwrap();
                tx.rollback().unwrap();
                let mut tx = store.transaction().unwrap();
                let gone: i64 = tx
                    .conn()
                    .query_row(
                        "SELECT count(*) FROM sqlite_schema WHERE name = ?1",
                        [&table],
                        |r| r.get(0),
                    )
                    .unwrap();
                assert_eq!(gone, 0);
                tx.conn()
                    .execute_batch(&format!(
                        "CREATE TABLE {table} (item TEXT); INSERT INTO {table} VALUES ('pen')"
                    ))
                    .unwrap();
                tx.enqueue_tx(&q, &EnqueueOpts::new(), &json!({"item": "pen"}))
                    .unwrap();
                tx.commit().unwrap();
                let jobs = store.queue(&q).unwrap().claim("w", 10).unwrap();
                assert_eq!(jobs.len(), 1);
                assert_eq!(jobs[0].payload, json!({"item": "pen"}));
            }
            common::Target::Postgres(_) => {
                let store = target.postgres();
                let mut tx = store.transaction().unwrap();
                tx.client()
                    .batch_execute(&format!(
                        "CREATE TABLE {table} (item text); INSERT INTO {table} VALUES ('book')"
                    ))
                    .unwrap();
                tx.enqueue_tx(&q, &EnqueueOpts::new(), &json!({"item": "book"}))
                    .unwrap();
                tx.rollback().unwrap();
                let mut tx = store.transaction().unwrap();
                let n: i64 = tx
                    .client()
                    // Unnamed (PgBouncer: common::Target::query_i64).
                    .query_typed(
                        "SELECT count(*) FROM pg_tables WHERE tablename = $1",
                        &[(&table, postgres::types::Type::TEXT)],
                    )
                    .unwrap()
                    .first()
                    .expect("one row")
                    .get(0);
                assert_eq!(n, 0);
                tx.client()
                    .batch_execute(&format!(
                        "CREATE TABLE {table} (item text); INSERT INTO {table} VALUES ('pen')"
                    ))
                    .unwrap();
                tx.enqueue_tx(&q, &EnqueueOpts::new(), &json!({"item": "pen"}))
                    .unwrap();
                tx.commit().unwrap();
                let jobs = store.queue(&q).unwrap().claim("w", 10).unwrap();
                assert_eq!(
                    jobs.iter().map(|j| j.payload.clone()).collect::<Vec<_>>(),
                    vec![json!({"item": "pen"})]
                );
            }
        }
    }
}

/// Issue 15 item 9: a COMMIT that fails (here a deferred foreign key) must
/// not send the connection back to the pool inside its transaction, where
/// later writes on it would never commit and other connections get BUSY.
#[test]
fn a_failed_commit_does_not_poison_the_pooled_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fk.db");
    let store = alkstore::SqliteStore::open_with_init(&path, |c| {
        c.execute_batch("PRAGMA foreign_keys = ON")
    })
    .unwrap();
    let tx = store.transaction().unwrap();
    tx.conn()
        .execute_batch(
            "CREATE TABLE parent (id INTEGER PRIMARY KEY);
             CREATE TABLE child (pid INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);",
        )
        .unwrap();
    tx.commit().unwrap();
    for _ in 0..3 {
        let mut tx = store.transaction().unwrap();
        tx.conn()
            .execute_batch("INSERT INTO child VALUES (42)")
            .unwrap();
        tx.enqueue_tx("fk", &EnqueueOpts::new(), &json!("orphan"))
            .unwrap();
        assert!(
            tx.commit().is_err(),
            "the deferred foreign key fails the commit"
        );
    }
    // Every pooled connection is usable, and nothing of the failed ones stayed.
    let mut tx = store.transaction().unwrap();
    tx.conn()
        .execute_batch("INSERT INTO parent VALUES (1)")
        .unwrap();
    tx.enqueue_tx("fk", &EnqueueOpts::new(), &json!("kept"))
        .unwrap();
    tx.commit().unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .busy_timeout(std::time::Duration::from_millis(500))
        .unwrap();
    other
        .execute_batch("BEGIN IMMEDIATE; ROLLBACK")
        .expect("the write lock is free");
    let jobs = store.queue("fk").unwrap().claim("w", 10).unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].payload, json!("kept"));
    let parents: i64 = other
        .query_row("SELECT count(*) FROM parent", [], |r| r.get(0))
        .unwrap();
    assert_eq!(parents, 1);
}

#[test]
fn a_nul_character_is_refused_alike_on_every_engine_and_changes_nothing() {
    for target in targets() {
        let who = target.name();
        let store = target.open();
        let queue = store.queue(&fresh("nul")).unwrap();
        // PostgreSQL's jsonb and text cannot hold a NUL; SQLite refuses it too.
        let err = queue
            .enqueue(&EnqueueOpts::new(), &json!({ "text": "a\u{0}b" }))
            .unwrap_err();
        assert_eq!(err.code(), Some("ALK04"), "[{who}] {err}");
        // A key option with a NUL: the options' error on both (issue 57).
        for opts in [
            EnqueueOpts::new().limit_key("k\u{0}"),
            EnqueueOpts::new().group_key("\u{0}"),
            EnqueueOpts::new().idempotency_key("a\u{0}"),
        ] {
            let err = queue.enqueue(&opts, &json!(1)).unwrap_err();
            assert_eq!(err.code(), Some("ALK03"), "[{who}] {err}");
            assert!(
                err.to_string().contains("must not contain NUL"),
                "[{who}] {err}"
            );
        }
        let stream = store.stream(&fresh("nul")).unwrap();
        let err = stream.publish(&json!(1), Some("k\u{0}")).unwrap_err();
        assert_eq!(err.code(), Some("ALK05"), "[{who}] {err}");
        assert!(stream.read(0, 10).unwrap().is_empty(), "[{who}]");
        assert!(queue.claim("w", 10).unwrap().is_empty(), "[{who}]");
        // Through the untyped call, a NUL in a name is a bad name on both.
        for (f, args) in [
            (
                "alk_enqueue",
                vec![Arg::from("q\u{0}"), Arg::Null, Arg::json(&json!(1))],
            ),
            (
                "alk_claim",
                vec![Arg::from("q"), Arg::from("w\u{0}"), Arg::Int(1)],
            ),
        ] {
            let err = store.call(f, &args).unwrap_err();
            assert_eq!(err.code(), Some("ALK01"), "[{who}] {f}: {err}");
            assert!(
                err.to_string().contains("must not contain a NUL"),
                "[{who}] {err}"
            );
        }
        // A handler's error text with a NUL still gives its job back.
        let id = queue.enqueue(&EnqueueOpts::new(), &json!(1)).unwrap();
        assert_eq!(queue.claim("w", 1).unwrap().len(), 1);
        queue
            .retry(id, "w", "bad\u{0}byte", Some(std::time::Duration::ZERO))
            .unwrap();
        let job = store.get_job(id).unwrap().unwrap();
        assert_eq!(job["last_error"], "bad\u{FFFD}byte", "[{who}] {job}");
        assert_eq!(job["state"], "pending", "[{who}] {job}");
    }
}

/// The untyped `call`, in and out of a transaction: a function that is not
/// alkstore's, not on this engine, or given a wrong number of arguments is
/// `InvalidArgument` everywhere, sent nowhere, and leaves the transaction
/// usable (it used to be a panic on PostgreSQL and a server error on
/// SQLite).
#[test]
fn an_unknown_function_or_arity_is_invalid_argument_on_every_engine() {
    for target in targets() {
        let who = target.name();
        let store = target.open();
        let other_engine = if matches!(target, Target::Sqlite(_)) {
            "alk_channel"
        } else {
            "alk_notifications"
        };
        let bad: [(&str, Vec<Arg>); 4] = [
            ("alk_nope", vec![]),
            ("pg_sleep", vec![Arg::Int(1)]),
            (other_engine, vec![Arg::from("c")]),
            ("alk_enqueue", vec![Arg::from("q")]),
        ];
        let mut tx = store.begin().unwrap();
        for (f, args) in &bad {
            for err in [
                store.call(f, args).unwrap_err(),
                tx.call(f, args).unwrap_err(),
            ] {
                assert_eq!(err.code(), Some("ALK05"), "[{who}] {f}: {err}");
                assert!(err.to_string().contains(f), "[{who}] {err}");
            }
        }
        let queue = fresh("arity");
        let id = tx
            .call(
                "alk_enqueue",
                &[queue.as_str().into(), Arg::Null, Arg::json(&json!(1))],
            )
            .unwrap();
        tx.commit().unwrap();
        assert!(
            store.get_job(id.as_i64().unwrap()).unwrap().is_some(),
            "[{who}]"
        );
    }
}

#[test]
fn a_payload_that_does_not_fit_the_type_is_a_decode_error_never_transient() {
    for target in targets() {
        let who = target.name();
        let store = target.open();
        let queue = store.queue(&fresh("decode")).unwrap();
        queue
            .enqueue(&EnqueueOpts::new(), &json!({ "n": "not a number" }))
            .unwrap();
        let job = queue.claim("w", 1).unwrap().pop().unwrap();
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Wants {
            n: i64,
        }
        let err = job.payload_as::<Wants>().unwrap_err();
        // Not the contract's ALK04 (the payload was valid JSON when it was
        // enqueued) and not the database: retrying would read the same.
        assert!(matches!(err, Error::Decode(_)), "[{who}] {err:?}");
        assert_eq!(err.code(), None, "[{who}] {err}");
        assert!(!err.is_transient(), "[{who}] {err}");
        assert!(
            err.to_string().starts_with("decode error: "),
            "[{who}] {err}"
        );
        assert_eq!(job.payload_as::<Value>().unwrap()["n"], "not a number");
        // A contract error is not transient either; only the database's are.
        let Err(bad) = store.queue("") else {
            panic!("[{who}] an empty queue name was accepted")
        };
        assert!(!bad.is_transient(), "[{who}] {bad}");
    }
}

#[test]
fn a_transaction_claims_retries_fails_and_acks_like_the_async_handles() {
    use alkstore::{call, Retried};
    for target in targets() {
        let who = target.name();
        let store = target.open();
        let q = fresh("tx-claim");
        let queue = store.queue(&q).unwrap();
        let ids = queue
            .enqueue_batch(&EnqueueOpts::new(), &[json!(1), json!(2), json!(3)])
            .unwrap();
        // Claimed, retried, failed and acked in one transaction that rolls
        // back: nothing of it stays.
        let mut tx = store.begin().unwrap();
        let jobs = tx.claim_tx(&q, "w", 3).unwrap();
        assert_eq!(
            jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
            ids,
            "[{who}]"
        );
        assert_eq!(
            tx.retry_tx(ids[0], "w", "later", None).unwrap(),
            Retried::Pending,
            "[{who}]"
        );
        assert!(tx.fail_tx(ids[1], "w", "broken").unwrap(), "[{who}]");
        assert!(tx.ack_tx(ids[2], "w").unwrap(), "[{who}]");
        assert!(!tx.ack_tx(ids[2], "w").unwrap(), "[{who}] acked twice");
        tx.rollback().unwrap();
        let stats = queue.stats().unwrap();
        assert_eq!(stats["pending"], 3, "[{who}] {stats}");
        // The same calls as values, run on a transaction that commits.
        let mut tx = store.begin().unwrap();
        let claimed = call::claim(&q, "w", 1).unwrap().run(&mut *tx).unwrap();
        assert_eq!(claimed.jobs.len(), 1, "[{who}]");
        let id = claimed.jobs[0].id;
        assert!(
            call::ack(id, "w").unwrap().run(&mut *tx).unwrap(),
            "[{who}]"
        );
        tx.commit().unwrap();
        assert_eq!(queue.stats().unwrap()["pending"], 2, "[{who}]");
        // A bad name fails before anything is sent, and leaves the
        // transaction usable on every engine.
        let mut tx = store.begin().unwrap();
        let err = tx.claim_tx("", "w", 1).unwrap_err();
        assert_eq!(err.code(), Some("ALK01"), "[{who}] {err}");
        assert_eq!(tx.claim_tx(&q, "w", 5).unwrap().len(), 2, "[{who}]");
        tx.rollback().unwrap();
    }
}
