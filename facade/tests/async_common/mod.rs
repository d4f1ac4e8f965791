//! What the async facade tests share: the stores to run on (PostgreSQL
//! directly and through PgBouncer; a SQLite file), fresh queues, polling
//! for an outcome.
#![allow(dead_code)]

use super::common::{fresh, ms};
use alkstore::sql::Arg;
use alkstore::{AsyncEngine, AsyncStore, QueueOpts};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The stores to run each test on: direct, and through PgBouncer.
pub async fn stores() -> Vec<(&'static str, AsyncStore)> {
    let Ok(url) = std::env::var("ALKSTORE_PG_URL") else {
        assert!(
            std::env::var_os("ALKSTORE_REQUIRE_PG").is_none(),
            "ALKSTORE_PG_URL is not set"
        );
        eprintln!("note: ALKSTORE_PG_URL not set: PostgreSQL not tested");
        return vec![];
    };
    // sqlx needs a host in the URL; the test command's may use the socket.
    let url = url.replace("@/", "@localhost/");
    let mut out = vec![("postgres", AsyncStore::connect(&url).await.unwrap())];
    if let Ok(bouncer) = std::env::var("ALKSTORE_PG_BOUNCER_URL") {
        let bouncer = bouncer.replace("@/", "@localhost/");
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(20)
            .connect(&bouncer)
            .await
            .unwrap();
        let store = AsyncStore::from_pool_with_listener(pool, &url)
            .await
            .unwrap();
        out.push(("postgres via PgBouncer", store));
    }
    out
}

/// A fresh queue, retrying at once (10 ms backoff).
pub async fn queue<DB: AsyncEngine>(store: &AsyncStore<DB>, base: &str, opts: QueueOpts) -> String {
    let name = fresh(base);
    let opts = opts.backoff(ms(10), ms(10)).to_json();
    store
        .call(
            "alk_queue_configure",
            &[name.as_str().into(), Arg::json(&opts)],
        )
        .await
        .unwrap();
    name
}

pub async fn stats<DB: AsyncEngine>(store: &AsyncStore<DB>, queue: &str) -> Value {
    store
        .call("alk_queue_stats", &[queue.into()])
        .await
        .unwrap()
}

/// Waits (up to 30 s) until `done` holds, polling.
pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < until, "timed out waiting: {what}");
        tokio::time::sleep(ms(20)).await;
    }
}

/// A SQLite store on a fresh file (kept as long as the directory lives).
pub async fn sqlite_store() -> (AsyncStore<sqlx::Sqlite>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = AsyncStore::open_sqlite(dir.path().join("async.db"))
        .await
        .unwrap();
    (store, dir)
}
