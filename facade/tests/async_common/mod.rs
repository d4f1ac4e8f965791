//! What the async facade tests share: the stores to run on (PostgreSQL
//! directly and through PgBouncer; a SQLite file), fresh queues, polling
//! for an outcome.
#![allow(dead_code)]

use super::common::{fresh, ms};
use alkstore::sql::Arg;
use alkstore::{AsyncEngine, AsyncStore, QueueOpts, TokioPostgres};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The PostgreSQL stores to run each test on (the shared test kit's
/// installs but the plain SQL one): direct, and through PgBouncer with the
/// listener connected directly.
pub async fn stores() -> Vec<(&'static str, AsyncStore)> {
    let mut out = vec![];
    for install in alkstore_testkit::pg_installs() {
        // sqlx needs a host in the URL; the test command's may use the socket.
        let (url, direct) = (
            install.url.replace("@/", "@localhost/"),
            install.direct_url.replace("@/", "@localhost/"),
        );
        match install.label {
            alkstore_testkit::EXTENSION => {
                out.push(("postgres", AsyncStore::connect(&url).await.unwrap()))
            }
            alkstore_testkit::BOUNCER => {
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(20)
                    .connect(&url)
                    .await
                    .unwrap();
                let store = AsyncStore::from_pool_with_listener(pool, &direct)
                    .await
                    .unwrap();
                out.push(("postgres via PgBouncer", store));
            }
            _ => {}
        }
    }
    out
}

/// The same PostgreSQL installs on tokio-postgres pooled by deadpool-postgres
/// (`AsyncStore<TokioPostgres>`): direct, and through PgBouncer with the
/// listener connected directly.
pub async fn tokio_stores() -> Vec<(&'static str, AsyncStore<TokioPostgres>)> {
    let mut out = vec![];
    for install in alkstore_testkit::pg_installs() {
        let label = match install.label {
            alkstore_testkit::EXTENSION => "tokio-postgres",
            alkstore_testkit::BOUNCER => "tokio-postgres via PgBouncer",
            _ => continue,
        };
        let mut config = deadpool_postgres::Config::new();
        config.url = Some(install.url.clone());
        let pool = config
            .create_pool(
                Some(deadpool_postgres::Runtime::Tokio1),
                tokio_postgres::NoTls,
            )
            .unwrap();
        let store = AsyncStore::from_deadpool(pool, &install.direct_url)
            .await
            .unwrap();
        out.push((label, store));
    }
    out
}

/// Runs one test body, `async fn body<DB: AsyncEngine>(target: &str,
/// store: AsyncStore<DB>)`, on every async store: sqlx's PostgreSQL and
/// tokio-postgres (each directly and through PgBouncer), and SQLite.
#[allow(unused_macros)]
macro_rules! on_every_store {
    ($body:ident) => {{
        for (target, store) in async_common::stores().await {
            $body(target, store).await;
        }
        for (target, store) in async_common::tokio_stores().await {
            $body(target, store).await;
        }
        let (store, _dir) = async_common::sqlite_store().await;
        $body("sqlite", store).await;
    }};
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

/// The async store of a child process, on whichever engine its parent test
/// runs (`Target::child_env`).
pub enum ChildStore {
    Postgres(AsyncStore<sqlx::Postgres>),
    Sqlite(AsyncStore<sqlx::Sqlite>),
}

/// Opens the async store a parent test handed to this child process: a
/// SQLite file, or PostgreSQL (maybe through PgBouncer) with its listener
/// connected directly.
pub async fn open_child() -> ChildStore {
    let url = std::env::var("ALK_CHILD_URL").expect("started by the parent test");
    if let Some(path) = url.strip_prefix("sqlite:") {
        return ChildStore::Sqlite(AsyncStore::open_sqlite(path).await.unwrap());
    }
    let direct = std::env::var("ALK_CHILD_LISTEN_URL").unwrap_or_else(|_| url.clone());
    // sqlx needs a host in the URL; the test command's may use the socket.
    let (url, direct) = (
        url.replace("@/", "@localhost/"),
        direct.replace("@/", "@localhost/"),
    );
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .connect(&url)
        .await
        .unwrap();
    ChildStore::Postgres(
        AsyncStore::from_pool_with_listener(pool, &direct)
            .await
            .unwrap(),
    )
}
