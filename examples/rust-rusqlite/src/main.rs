//! A signup and its welcome job commit in one transaction; a worker claims
//! the job only after that commit.

use alkstore::{EnqueueOpts, Store, TxHandle};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = alkstore::SqliteStore::open(dir.path().join("app.db"))?;
    let tx = store.transaction()?;
    tx.conn()
        .execute_batch("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL)")?;
    tx.commit()?;

    let mut tx = store.transaction()?;
    tx.conn()
        .execute("INSERT INTO users (email) VALUES ('ada@example.com')", [])?;
    let job = tx.enqueue_tx("welcome", &EnqueueOpts::new(), &json!({"email": "ada@example.com"}))?;
    tx.commit()?;
    println!("enqueued job {job}");
    let queue = Store::queue(&store, "welcome")?;

    let claimed = queue.claim("worker-1", 10)?;
    for j in &claimed {
        println!("welcomed {} (acked: {})", j.payload["email"], queue.ack(j.id, "worker-1")?);
    }
    println!("pending after: {}", queue.stats()?["pending"]);
    Ok(())
}
