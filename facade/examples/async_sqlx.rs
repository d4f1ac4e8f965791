//! Async Rust on sqlx (feature `sqlx-postgres`): a signup and its welcome
//! job in the application's own sqlx transaction, then an `AsyncWorker`
//! whose handler's write and the job's ack commit together.
//!
//! `cargo run -p alkstore --features sqlx-postgres --example async_sqlx -- postgres://…`
//! (a database with `CREATE EXTENSION alkstore`, or the plain SQL install).

use alkstore::{AsyncStore, AsyncTxHandle, AsyncWorker, EnqueueOpts};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::Notify;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: async_sqlx <postgres URL>")?;
    let store = AsyncStore::connect(&url).await?;
    let pool = store.pool().clone();
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

    // A worker: the handler marks the signup welcomed in the transaction it
    // is given; the worker acks the job in it and commits — both or neither.
    // Here it stops once it has welcomed this signup (a service would pass
    // a CancellationToken or ctrl_c instead).
    let done = Arc::new(Notify::new());
    let stop = done.clone();
    let me = email.clone();
    AsyncWorker::new(store.queue("welcome")?, "mailer")
        .concurrency(4)
        .run_in_tx(async move { stop.notified().await }, move |job, mut tx| {
            let (done, me) = (done.clone(), me.clone());
            async move {
                let to = job.payload["to"].as_str().unwrap_or_default().to_string();
                sqlx::query("UPDATE signups SET welcomed = true WHERE email = $1")
                    .bind(&to)
                    .execute(&mut *tx)
                    .await?;
                println!("welcomed {to:?}");
                if to == me {
                    done.notify_one();
                }
                Ok::<_, sqlx::Error>(tx)
            }
        })
        .await?;

    let welcomed: bool = sqlx::query_scalar("SELECT welcomed FROM signups WHERE email = $1")
        .bind(&email)
        .fetch_one(&pool)
        .await?;
    println!("signup welcomed: {welcomed}");
    Ok(())
}
