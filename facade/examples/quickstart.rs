//! The quick start: only `cargo` needed.
//!
//! `cargo run -p alkstore --example quickstart [PATH]`
//! (with a PATH the database stays there, to look at with `alkstore web`).
//!
//! On an embedded SQLite file: an order and its receipt (an outbox message)
//! commit in one transaction; a second order and its receipt roll back; a
//! worker delivers exactly the committed receipt.

use alkstore::{EnqueueOpts, Stop, TxHandle};
use serde_json::json;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = std::env::args_os()
        .nth(1)
        .map_or_else(|| dir.path().join("shop.db"), Into::into);
    let store = alkstore::SqliteStore::open(path)?;

    let tx = store.transaction()?;
    tx.conn().execute_batch(
        "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)",
    )?;
    tx.commit()?;

    // An order and its receipt commit together…
    let mut tx = store.transaction()?;
    tx.conn()
        .execute("INSERT INTO orders (item) VALUES ('book')", [])?;
    let order = tx.conn().last_insert_rowid();
    tx.outbox_enqueue_tx(
        "receipts",
        &EnqueueOpts::new(),
        &json!({"order": order, "item": "book"}),
    )?;
    tx.commit()?;
    println!("committed order {order} (book) with its receipt");

    // …or roll back together: no ghost receipt.
    let mut tx = store.transaction()?;
    tx.conn()
        .execute("INSERT INTO orders (item) VALUES ('ghost')", [])?;
    tx.outbox_enqueue_tx(
        "receipts",
        &EnqueueOpts::new(),
        &json!({"order": 0, "item": "ghost"}),
    )?;
    tx.rollback()?;
    println!("rolled back an order (ghost) with its receipt");

    // A delivery worker sends what was committed, waiting for messages
    // without polling, until stopped.
    let outbox = alkstore::Store::outbox(&store, "receipts")?;
    let stop = Stop::new();
    let sent = std::thread::scope(|s| {
        let worker = s.spawn(|| {
            outbox.run(
                "mailer",
                &mut |job| {
                    println!(
                        "worker: sent receipt for order {} ({})",
                        job.payload["order"],
                        job.payload["item"].as_str().unwrap_or("?")
                    );
                    Ok(())
                },
                &stop,
            )
        });
        std::thread::sleep(Duration::from_millis(500));
        stop.stop();
        worker.join().expect("worker")
    })?;
    let orders: i64 =
        store
            .transaction()?
            .conn()
            .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))?;
    println!("receipts sent: {sent}; orders in the table: {orders}");
    Ok(())
}
