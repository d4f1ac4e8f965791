//! The quick start: only `cargo` needed.
//!
//! `cargo run -p alkstore-sqlite --example quickstart`
//!
//! On an embedded SQLite file, writes an order and its confirmation-mail job
//! in one transaction, rolls a second such transaction back, and has a worker
//! claim and ack exactly the committed job — printing what happened.

use rusqlite::{params, Connection};
use serde_json::Value;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shop.db");
    let mut app = Connection::open(&path)?;
    app.pragma_update(None, "journal_mode", "WAL")?;
    alkstore_sqlite::register(&app)?; // the alk_* functions, in-process
    app.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")?;

    // An order and its job commit together…
    let tx = app.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute("INSERT INTO orders (item) VALUES ('book')", [])?;
    let order = tx.last_insert_rowid();
    let job: i64 = tx.query_row(
        "SELECT alk_enqueue('confirmations', NULL, json_object('order', ?1))",
        params![order],
        |r| r.get(0),
    )?;
    tx.commit()?;
    println!("committed order {order} with confirmation job {job}");

    // …or roll back together: no ghost job.
    let tx = app.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute("INSERT INTO orders (item) VALUES ('ghost')", [])?;
    tx.query_row(
        "SELECT alk_enqueue('confirmations', NULL, '{\"order\": 0}')",
        [],
        |r| r.get::<_, i64>(0),
    )?;
    tx.rollback()?;
    println!("rolled back an order and its job");

    // A worker on its own connection claims what was committed and acks it.
    let worker = Connection::open(&path)?;
    alkstore_sqlite::register(&worker)?;
    let claimed: String = worker.query_row(
        "SELECT alk_claim('confirmations', 'worker-1', 10)",
        [],
        |r| r.get(0),
    )?;
    let jobs: Vec<Value> = serde_json::from_str(&claimed)?;
    for j in &jobs {
        println!(
            "worker-1 confirms order {} (job {}, attempt {})",
            j["payload"]["order"], j["id"], j["attempts"]
        );
        let acked: bool = worker.query_row(
            "SELECT alk_ack(?1, 'worker-1')",
            params![j["id"].as_i64()],
            |r| r.get(0),
        )?;
        assert!(acked);
    }
    let stats: String =
        worker.query_row("SELECT alk_queue_stats('confirmations')", [], |r| r.get(0))?;
    println!("jobs processed: {}; queue now: {stats}", jobs.len());
    Ok(())
}
