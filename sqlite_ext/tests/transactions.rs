//! The reason alkstore exists: every write commits or rolls back with the
//! caller's own rows, in the caller's transaction.

mod common;
use common::*;
use serde_json::Value;

fn business(c: &rusqlite::Connection) {
    c.execute_batch("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)")
        .unwrap();
}

#[test]
fn rollback_drops_every_kind_of_write_with_the_business_rows() {
    let db = Db::new();
    let c = db.conn();
    business(&c);
    c.execute_batch("SELECT alk_init()").unwrap();
    let before = snapshot(&c);
    c.execute_batch("BEGIN IMMEDIATE").unwrap();
    c.execute("INSERT INTO orders (item) VALUES ('book')", [])
        .unwrap();
    let job = enqueue(&c, "q", None, "1");
    let outbox = int(
        &c,
        "SELECT alk_outbox_enqueue('mail', NULL, '{\"to\":\"x\"}')",
        &[],
    );
    assert_eq!(int(&c, "SELECT alk_publish('s', '1')", &[]), 1);
    assert_eq!(int(&c, "SELECT alk_save_offset('s', 'c', 1)", &[]), 1);
    val(&c, "SELECT alk_notify('ch', '\"hi\"')", &[]);
    val(
        &c,
        "SELECT alk_queue_configure('q', '{\"max_attempts\": 2}')",
        &[],
    );
    // Visible inside the transaction…
    assert_eq!(job_state(&c, job), "pending");
    assert_eq!(job_state(&c, outbox), "pending");
    c.execute_batch("ROLLBACK").unwrap();
    // …and gone with the order after rollback: no ghosts.
    let orders: i64 = c
        .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orders, 0);
    assert_eq!(val(&c, "SELECT alk_get_job(?1)", &[&job]), Value::Null);
    assert_eq!(
        val(&c, "SELECT alk_outbox_claim('mail', 'w', 10)", &[]),
        serde_json::json!([])
    );
    assert_eq!(
        val(&c, "SELECT alk_read('s', 0, 10)", &[]),
        serde_json::json!([])
    );
    assert_eq!(int(&c, "SELECT alk_get_offset('s', 'c')", &[]), 0);
    assert_eq!(
        val(&c, "SELECT alk_notifications('ch', 0)", &[]),
        serde_json::json!([])
    );
    assert_eq!(snapshot(&c), before);
}

fn job_state(c: &rusqlite::Connection, id: i64) -> String {
    job(c, id)["state"].as_str().unwrap().to_string()
}

#[test]
fn commit_makes_business_rows_and_jobs_visible_together() {
    let db = Db::new();
    let writer = db.conn();
    let reader = db.conn();
    business(&writer);
    writer
        .execute_batch("SELECT alk_init(); BEGIN IMMEDIATE")
        .unwrap();
    writer
        .execute("INSERT INTO orders (item) VALUES ('book')", [])
        .unwrap();
    let id = int(
        &writer,
        "SELECT alk_outbox_enqueue('mail', '{\"max_attempts\": 2}', '\"welcome\"')",
        &[],
    );
    // Another connection sees neither before commit (it may read, not write, meanwhile).
    assert_eq!(
        val(&reader, "SELECT alk_outbox_stats('mail')", &[])["pending"],
        0
    );
    assert_eq!(val(&reader, "SELECT alk_get_job(?1)", &[&id]), Value::Null);
    writer.execute_batch("COMMIT").unwrap();
    let jobs = val(&reader, "SELECT alk_outbox_claim('mail', 'w', 10)", &[]);
    assert_eq!(jobs[0]["id"], id);
    assert_eq!(jobs[0]["queue"], "__alkstore_outbox:mail");
    assert_eq!(jobs[0]["max_attempts"], 2);
    let orders: i64 = reader
        .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orders, 1);
    // The backing queue has the fixed outbox options, stamped.
    let j = job(&reader, id);
    assert_eq!(
        (
            j["visibility_timeout_s"].clone(),
            j["backoff_base_s"].clone()
        ),
        (60.into(), 5.into())
    );
    let stats = val(&reader, "SELECT alk_outbox_stats('mail')", &[]);
    assert_eq!(stats["running"], 1);
    // Delivery acks with the ordinary job functions.
    assert_eq!(int(&reader, "SELECT alk_ack(?1, 'w')", &[&id]), 1);
}

#[test]
fn a_failing_call_inside_a_transaction_leaves_the_transaction_usable_and_unchanged() {
    let db = Db::new();
    let c = db.conn();
    c.execute_batch("SELECT alk_init(); BEGIN IMMEDIATE")
        .unwrap();
    let id = enqueue(&c, "q", None, "1");
    let before = snapshot(&c);
    assert_eq!(
        code(
            &c,
            "SELECT alk_enqueue_batch('q', NULL, '[1, 2, {oops]')",
            &[]
        ),
        "ALK04"
    );
    assert_eq!(
        code(
            &c,
            "SELECT alk_enqueue('q', '{\"max_attempts\": 0}', '1')",
            &[]
        ),
        "ALK03"
    );
    assert_eq!(snapshot(&c), before);
    c.execute_batch("COMMIT").unwrap();
    assert_eq!(job_state(&c, id), "pending");
}

#[test]
fn schema_created_in_a_rolled_back_transaction_is_created_again() {
    let db = Db::new();
    let c = db.conn();
    c.execute_batch("BEGIN").unwrap();
    enqueue(&c, "q", None, "1");
    c.execute_batch("ROLLBACK").unwrap();
    let tables: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'alk_jobs'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0, "the schema went with the rollback");
    // The cached statements and the cached check must not be trusted now.
    let id = enqueue(&c, "q", None, "2");
    assert_eq!(job(&c, id)["payload"], 2);
}

#[test]
fn loading_alone_writes_nothing_and_the_version_is_recorded() {
    let db = Db::new();
    let c = db.conn();
    let n: i64 = c
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    let current = alkstore_core::SCHEMA_VERSION;
    assert_eq!(int(&c, "SELECT alk_init()", &[]), current);
    assert_eq!(int(&c, "SELECT alk_init()", &[]), current);
    let v: String = c
        .query_row(
            "SELECT value FROM alk_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(v, current.to_string());
    // A newer schema than this build understands is refused, not misused.
    c.execute(
        "UPDATE alk_meta SET value = '99' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    let fresh = db.conn();
    let (_, msg, _) = fails(&fresh, "SELECT alk_queue_stats('q')", &[]);
    assert!(msg.contains("schema version 99"), "{msg}");
}
