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

/// A call that meets another connection's write lock waits for it without
/// holding up the runtime: on a current-thread runtime the holder is a task
/// of the same thread, and its commit must get to run while the call waits
/// (the hot calls run on the connection's handle from the calling task; one
/// that would wait goes to the connection's own thread instead).
#[tokio::test(flavor = "current_thread")]
async fn a_call_waiting_for_the_write_lock_does_not_stall_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let pool = pool(&dir.path().join("app.db")).await;
    sqlx::query("CREATE TABLE orders (item TEXT)")
        .execute(&pool)
        .await
        .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    conn.enqueue_tx("q", &EnqueueOpts::new(), &json!("first"))
        .await
        .unwrap();
    // In the caller's transaction, the call waits in `BEGIN IMMEDIATE`; a
    // deferred `BEGIN` that has read fails at its first write whatever the
    // timeout (SQLite's rule; `AsyncStore::begin` says so).
    for in_tx in [false, true] {
        let mut holder = pool.begin().await.unwrap();
        sqlx::query("INSERT INTO orders VALUES ('held')")
            .execute(&mut *holder)
            .await
            .unwrap();
        let release = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            holder.commit().await.unwrap();
        });
        let started = std::time::Instant::now();
        let id = if in_tx {
            let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
            let id = tx
                .enqueue_tx("q", &EnqueueOpts::new(), &json!("in tx"))
                .await
                .unwrap();
            tx.commit().await.unwrap();
            id
        } else {
            conn.enqueue_tx("q", &EnqueueOpts::new(), &json!("alone"))
                .await
                .unwrap()
        };
        let waited = started.elapsed();
        release.await.unwrap();
        assert!(id > 0);
        assert!(
            waited >= std::time::Duration::from_millis(250)
                && waited < std::time::Duration::from_millis(4500),
            "in_tx {in_tx}: waited {waited:?} (the busy timeout is 5 s)"
        );
    }
    let stats = conn.call("alk_queue_stats", &["q".into()]).await.unwrap();
    assert_eq!(stats["pending"], 3, "{stats}");
    assert_eq!(orders(&pool).await, 2);
}

/// The same for the store's own calls (`AsyncStore::open_sqlite` runs the
/// hot ones on connections of its own, on the calling task): one that
/// meets the write lock of a transaction held by a task of the same
/// current-thread runtime waits for its commit instead of stalling the
/// runtime until the busy timeout.
#[tokio::test(flavor = "current_thread")]
async fn a_store_call_waiting_for_the_write_lock_does_not_stall_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let store = alkstore::AsyncStore::open_sqlite(dir.path().join("app.db"))
        .await
        .unwrap();
    let queue = store.queue("q").unwrap();
    queue.enqueue(&EnqueueOpts::new(), &json!(0)).await.unwrap();
    let mut holder = store.begin().await.unwrap();
    holder
        .enqueue_tx("q", &EnqueueOpts::new(), &json!("held"))
        .await
        .unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        holder.commit().await.unwrap();
    });
    let started = std::time::Instant::now();
    queue
        .enqueue(&EnqueueOpts::new(), &json!("after"))
        .await
        .unwrap();
    let waited = started.elapsed();
    release.await.unwrap();
    assert!(
        waited >= std::time::Duration::from_millis(250)
            && waited < std::time::Duration::from_millis(4500),
        "waited {waited:?} (the busy timeout is 5 s)"
    );
    let jobs = queue.claim("w", 10).await.unwrap();
    assert_eq!(jobs.len(), 3);
    assert!(queue.ack(jobs[0].id, "w").await.unwrap());
    assert!(!queue.ack(jobs[0].id, "w").await.unwrap(), "acked once");
}
