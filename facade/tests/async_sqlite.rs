//! `AsyncTxHandle` on sqlx's SQLite driver (feature `sqlx-sqlite`), on a
//! real database file: a pool the application opened with nothing
//! alkstore-specific gets the functions on first use, jobs commit or roll
//! back with the business rows, plain SQL works on those connections after,
//! and the blocking store sees exactly what the async side committed.

use alkstore::sql::Arg;
use alkstore::{AsyncTxHandle, EnqueueOpts, SqliteStore};
use serde_json::json;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

async fn pool(path: &std::path::Path) -> sqlx::SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .busy_timeout(std::time::Duration::from_secs(5));
    SqlitePoolOptions::new()
        .max_connections(3)
        .connect_with(options)
        .await
        .unwrap()
}

async fn orders(pool: &sqlx::SqlitePool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn jobs_commit_and_roll_back_with_the_callers_rows_on_a_plain_sqlx_pool() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let pool = pool(&path).await;
    sqlx::query("CREATE TABLE orders (item TEXT)")
        .execute(&pool)
        .await
        .unwrap();

    for commit in [false, true] {
        let mut tx = pool.begin().await.unwrap();
        sqlx::query("INSERT INTO orders VALUES ('book')")
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.enqueue_tx("emails", &EnqueueOpts::new(), &json!({"to": "ada"}))
            .await
            .unwrap();
        tx.outbox_enqueue_tx("receipts", &EnqueueOpts::new(), &json!({"item": "book"}))
            .await
            .unwrap();
        tx.publish_tx("orders", &json!({"item": "book"}))
            .await
            .unwrap();
        tx.notify_tx("shop", &json!({"new": "book"})).await.unwrap();
        if commit {
            tx.commit().await.unwrap();
        } else {
            tx.rollback().await.unwrap();
        }
    }
    assert_eq!(orders(&pool).await, 1);

    // Another process (the blocking store) sees exactly the committed one.
    let store = SqliteStore::open(&path).unwrap();
    let jobs = store.queue("emails").unwrap().claim("w", 10).unwrap();
    assert_eq!(
        jobs.iter().map(|j| &j.payload).collect::<Vec<_>>(),
        [&json!({"to": "ada"})]
    );
    assert_eq!(
        store
            .outbox("receipts")
            .unwrap()
            .claim("w", 10)
            .unwrap()
            .len(),
        1
    );
    let events = store.stream("orders").unwrap().read(0, 10).unwrap();
    assert_eq!(events.iter().map(|e| e.offset).collect::<Vec<_>>(), [1]);
    let notes = store
        .call("alk_notifications", &["shop".into(), 0.into(), 10.into()])
        .unwrap();
    assert_eq!(notes.as_array().map(Vec::len), Some(1), "{notes}");
}

#[tokio::test]
async fn every_pooled_connection_gets_the_functions_and_plain_sql_works_after() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(&dir.path().join("app.db")).await;
    // Three connections held at once: three different SQLite handles.
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(pool.acquire().await.unwrap());
    }
    for (n, conn) in conns.iter_mut().enumerate() {
        conn.enqueue_tx("q", &EnqueueOpts::new(), &json!({ "n": n }))
            .await
            .unwrap();
        let id: i64 = sqlx::query_scalar("SELECT alk_enqueue('q', '{}', '{\"plain\": true}')")
            .fetch_one(&mut **conn)
            .await
            .unwrap();
        assert!(id > 0);
    }
    drop(conns);
    let mut conn = pool.acquire().await.unwrap();
    let jobs = conn.claim_tx("q", "w", 10).await.unwrap();
    assert_eq!(jobs.len(), 6);

    // A handler's write and its ack in one transaction: rolled back, the
    // job is still held; committed, it is done.
    let job = &jobs[0];
    let mut tx = pool.begin().await.unwrap();
    assert!(tx.ack_tx(job.id, "w").await.unwrap());
    tx.rollback().await.unwrap();
    let state = conn.call("alk_get_job", &[job.id.into()]).await.unwrap();
    assert_eq!(state["state"], "running", "{state}");
    let mut tx = pool.begin().await.unwrap();
    assert!(tx.ack_tx(job.id, "w").await.unwrap());
    tx.commit().await.unwrap();
    assert!(!conn.ack_tx(job.id, "w").await.unwrap(), "acked once");
}

#[tokio::test]
async fn bad_input_is_the_contract_error() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(&dir.path().join("app.db")).await;
    let mut conn = pool.acquire().await.unwrap();
    let err = conn
        .enqueue_tx("", &EnqueueOpts::new(), &json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ALK01"), "{err}");
    // Checked by the function in the database, not by the crate.
    let err = conn
        .call(
            "alk_enqueue",
            &[
                "q".into(),
                Arg::Json("{\"bogus\": 1}".into()),
                Arg::Json("{}".into()),
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ALK03"), "{err}");
    let err = conn
        .call(
            "alk_enqueue",
            &[
                "q".into(),
                Arg::Json("{}".into()),
                Arg::Json("not json".into()),
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ALK04"), "{err}");
}
