//! Async Rust on sqlx (feature `sqlx-postgres`): a signup and its welcome
//! job in the application's own sqlx transaction, then a handler whose
//! write and ack commit together.
//!
//! `cargo run -p alkstore --features sqlx-postgres --example async_sqlx -- postgres://…`
//! (a database with `CREATE EXTENSION alkstore`, or the plain SQL install).

use alkstore::{AsyncTxHandle, EnqueueOpts};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: async_sqlx <postgres URL>")?;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS signups (email text PRIMARY KEY, welcomed boolean NOT NULL DEFAULT false)",
    )
    .execute(&pool)
    .await?;
    let email = format!("ada-{}@example.com", std::process::id());

    // A request handler: the signup and its job commit together, or neither.
    let mut tx = pool.begin().await?;
    sqlx::query("INSERT INTO signups (email) VALUES ($1)")
        .bind(&email)
        .execute(&mut *tx)
        .await?;
    let job = tx
        .enqueue_tx("welcome", &EnqueueOpts::new(), &json!({ "to": email }))
        .await?;
    tx.commit().await?;
    println!("signed up with welcome job {job}");

    // A handler: claim (its own short transaction), then mark the signup
    // welcomed and ack in one transaction — a crash before that commit
    // leaves the job to run again.
    let jobs = pool
        .acquire()
        .await?
        .claim_tx("welcome", "mailer", 10)
        .await?;
    for job in jobs {
        let mut tx = pool.begin().await?;
        sqlx::query("UPDATE signups SET welcomed = true WHERE email = $1")
            .bind(job.payload["to"].as_str())
            .execute(&mut *tx)
            .await?;
        let acked = tx.ack_tx(job.id, "mailer").await?;
        tx.commit().await?;
        println!("welcomed {} (acked: {acked})", job.payload["to"]);
    }
    let welcomed: bool = sqlx::query_scalar("SELECT welcomed FROM signups WHERE email = $1")
        .bind(&email)
        .fetch_one(&pool)
        .await?;
    println!("signup welcomed: {welcomed}");
    Ok(())
}
