//! A signup and its welcome job in one sqlx SQLite transaction, then a
//! handler's write and the job's ack in another, on the application's own
//! sqlx pool: the `alk_*` functions run in-process, no extension to load.

use alkstore::{AsyncTxHandle, EnqueueOpts};
use serde_json::json;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join(format!("alkstore-sqlx-{}.db", std::process::id()));
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let pool = SqlitePoolOptions::new()
        // Optional: alkstore's calls register the functions on a connection
        // that lacks them; this makes plain `SELECT alk_…` safe on every
        // connection from the start.
        .after_connect(|conn, _| {
            Box::pin(async move {
                alkstore::register_sqlx_sqlite(conn)
                    .await
                    .map_err(|e| sqlx::Error::Protocol(e.to_string()))
            })
        })
        .connect_with(options)
        .await?;
    sqlx::query(
        "CREATE TABLE signups (email TEXT PRIMARY KEY, welcomed INTEGER NOT NULL DEFAULT 0)",
    )
    .execute(&pool)
    .await?;

    let mut tx = pool.begin().await?;
    sqlx::query("INSERT INTO signups (email) VALUES ('ada@example.com')")
        .execute(&mut *tx)
        .await?;
    let job = tx
        .enqueue_tx(
            "welcome",
            &EnqueueOpts::new(),
            &json!({"to": "ada@example.com"}),
        )
        .await?;
    tx.commit().await?;
    println!("enqueued job {job}");

    let jobs = pool
        .acquire()
        .await?
        .claim_tx("welcome", "mailer", 10)
        .await?;
    for job in jobs {
        let mut tx = pool.begin().await?;
        sqlx::query("UPDATE signups SET welcomed = 1 WHERE email = ?")
            .bind(job.payload["to"].as_str())
            .execute(&mut *tx)
            .await?;
        let acked = tx.ack_tx(job.id, "mailer").await?;
        tx.commit().await?;
        println!("welcomed {} (acked: {acked})", job.payload["to"]);
    }

    // Plain SQL on the pool works too.
    let stats: String = sqlx::query_scalar("SELECT alk_queue_stats('welcome')")
        .fetch_one(&pool)
        .await?;
    let stats: serde_json::Value = serde_json::from_str(&stats)?;
    println!("pending after: {}", stats["pending"]);
    pool.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Ok(())
}
