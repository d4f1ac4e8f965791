//! [`AsyncStore`]: queues, outboxes, streams, notifications and leases on a
//! pool — sqlx's PostgreSQL (feature `sqlx-postgres`) or SQLite
//! (`sqlx-sqlite`), or tokio-postgres with deadpool-postgres
//! (`tokio-postgres`) — with waiting by wake-ups, on tokio.

#[cfg(feature = "sqlx-sqlite")]
mod direct;
mod engine;
mod notify;
mod queue;
mod stream;
#[cfg(feature = "tokio-postgres")]
mod tokio_pg;
mod wakeups;

#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
pub use engine::SqlxEngine;
#[cfg(feature = "tokio-postgres")]
pub use engine::TokioPostgres;
pub use engine::{AsyncConn, AsyncEngine, AsyncTransactionEnd};
pub use notify::{AsyncLockGuard, AsyncSubscription};
pub use queue::{AsyncOutbox, AsyncQueue};
pub use stream::{AsyncStream, AsyncStreamSubscription};
#[cfg(feature = "tokio-postgres")]
pub use tokio_pg::PgClientTx;

use crate::error::Result;
use crate::sql::Arg;
use alkstore_core::{names, NameKind};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use wakeups::Wakeups;

/// The engine `AsyncStore` means when none is named: PostgreSQL when its
/// feature is on.
#[cfg(feature = "sqlx-postgres")]
pub type DefaultEngine = sqlx::Postgres;
/// The engine `AsyncStore` means when none is named.
#[cfg(all(not(feature = "sqlx-postgres"), feature = "sqlx-sqlite"))]
pub type DefaultEngine = sqlx::Sqlite;
/// The engine `AsyncStore` means when none is named.
#[cfg(not(any(feature = "sqlx-postgres", feature = "sqlx-sqlite")))]
pub type DefaultEngine = TokioPostgres;

/// How long a waiter waits at most without a wake-up: jobs whose `run_at`
/// arrives or whose claim expires announce nothing.
pub(crate) const FALLBACK_POLL: Duration = Duration::from_secs(1);

/// A store for async code: a pool for calls and your own transactions
/// (sqlx's, or deadpool-postgres's on tokio-postgres), and one connection
/// for wake-ups (PostgreSQL: a listener; SQLite: a `data_version` watcher). Queue, outbox, stream, notification and lease handles as
/// the blocking [`Store`](crate::Store) has. Cheap to clone.
///
/// ```no_run
/// # async fn demo() -> alkstore::Result<()> {
/// use alkstore::{AsyncStore, AsyncTxHandle, EnqueueOpts};
/// let store = AsyncStore::connect("postgres://app@localhost/app").await?;
/// let mut tx = store.begin().await?;
/// tx.enqueue_tx("emails", &EnqueueOpts::new(), &serde_json::json!({"to": "ada@example.com"})).await?;
/// tx.commit().await?;
/// let jobs = store.queue("emails")?.claim("mailer", 10).await?;
/// # Ok(()) }
/// ```
pub struct AsyncStore<DB: AsyncEngine = DefaultEngine> {
    pool: DB::Pool,
    wakeups: Arc<Wakeups>,
    /// SQLite opened by `open_sqlite`: the hot calls' own connections.
    #[cfg(feature = "sqlx-sqlite")]
    direct: Option<Arc<direct::Direct>>,
}

impl<DB: AsyncEngine> Clone for AsyncStore<DB> {
    fn clone(&self) -> Self {
        AsyncStore {
            pool: self.pool.clone(),
            wakeups: self.wakeups.clone(),
            #[cfg(feature = "sqlx-sqlite")]
            direct: self.direct.clone(),
        }
    }
}

/// The busy timeout of `open_sqlite`'s connections.
#[cfg(feature = "sqlx-sqlite")]
const BUSY_TIMEOUT_MS: i32 = 5000;

#[cfg(feature = "sqlx-sqlite")]
impl AsyncStore<sqlx::Sqlite> {
    /// Opens (creating if needed) a SQLite database file in WAL mode, with a
    /// pool whose connections get the `alk_*` functions in-process, a 5 s
    /// busy timeout and [`SqliteStore`](crate::SqliteStore)'s `synchronous
    /// = NORMAL` (in WAL a commit survives a crash of the process; a power
    /// loss may take the last commits, never the file's consistency; sqlx's
    /// default is SQLite's `FULL`, a sync of the log at every commit: with
    /// your own pool, say which you want).
    ///
    /// The calls a worker, producer or consumer makes per job or event
    /// (claim, ack, enqueue, publish, read, …) run on SQLite connections of
    /// the store's own, on the calling task: each takes tens of
    /// microseconds, where a trip to the thread sqlx runs each connection
    /// on cost four to five times that. One that meets another
    /// connection's write lock goes to the pool instead, and waits there.
    pub async fn open_sqlite(
        path: impl AsRef<std::path::Path>,
    ) -> Result<AsyncStore<sqlx::Sqlite>> {
        use sqlx::sqlite::{
            SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
        };
        let path = path.as_ref();
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS as u64));
        let pool = SqlitePoolOptions::new()
            // A local file needs no ping before each checkout: one round
            // trip to the connection's thread less per call.
            .test_before_acquire(false)
            .after_connect(|conn, _| {
                Box::pin(async move {
                    crate::register_sqlx_sqlite(conn)
                        .await
                        .map_err(|e| sqlx::Error::Protocol(e.to_string()))
                })
            })
            .connect_with(options)
            .await?;
        let mut store = AsyncStore::from_pool(pool).await?;
        // The pool made the file and its schema; a path that is not UTF-8,
        // or an in-memory database (a new one per connection), keeps every
        // call on the pool.
        store.direct = path
            .to_str()
            .filter(|p| !p.is_empty() && *p != ":memory:")
            .map(|p| Arc::new(direct::Direct::new(p.to_string(), BUSY_TIMEOUT_MS)));
        Ok(store)
    }
}

#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
impl<DB: SqlxEngine> AsyncStore<DB> {
    /// Uses your pool. On PostgreSQL the listener takes one of its
    /// connections for as long as the store lives; behind a
    /// transaction-pooling PgBouncer use `from_pool_with_listener` (a
    /// `LISTEN` there holds for one transaction only). On SQLite a watcher
    /// takes one connection.
    pub async fn from_pool(pool: sqlx::Pool<DB>) -> Result<AsyncStore<DB>> {
        let wakeups = DB::wakeups(&pool).await?;
        Ok(AsyncStore {
            pool,
            wakeups,
            #[cfg(feature = "sqlx-sqlite")]
            direct: None,
        })
    }
}

/// The store as an [`AsyncTxHandle`](crate::AsyncTxHandle) whose every call
/// runs in its own transaction ([`AsyncStore::call`]): the typed calls of
/// the queue handles, where the hot ones may take the store's own path.
pub(crate) struct Autocommit<'a, DB: AsyncEngine>(pub(crate) &'a AsyncStore<DB>);

impl<DB: AsyncEngine> crate::AsyncTxHandle for Autocommit<'_, DB> {
    async fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        self.0.call(function, args).await
    }
}

impl<DB: AsyncEngine> AsyncStore<DB> {
    /// The pool: your own queries and transactions.
    pub fn pool(&self) -> &DB::Pool {
        &self.pool
    }

    /// Begins a transaction on the pool; use [`AsyncTxHandle`](crate::AsyncTxHandle)'s
    /// methods (or [`AsyncConn`]) and your own queries on it, then commit.
    /// On SQLite it is sqlx's deferred `BEGIN`: the write lock is taken at
    /// the first write, so other writers (heartbeats, claims) go on until
    /// then; but a transaction that has read before its first write fails
    /// at that write at once (`database is locked`, whatever the busy
    /// timeout) if another connection is writing — SQLite's rule. To wait
    /// for the lock up front instead, begin on the pool with
    /// `pool.begin_with("BEGIN IMMEDIATE")`.
    pub async fn begin(&self) -> Result<DB::Transaction> {
        DB::begin(&self.pool).await
    }

    /// Calls any `alk_*` function in its own transaction. A function this
    /// engine does not have, or a number of arguments it does not take, is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), and nothing
    /// is sent.
    pub async fn call(&self, function: &str, args: &[Arg]) -> Result<Value> {
        #[cfg(feature = "sqlx-sqlite")]
        if let Some(out) = self.direct.as_ref().and_then(|d| d.call(function, args)) {
            return out;
        }
        let mut conn = DB::acquire(&self.pool).await?;
        DB::call_on(&mut conn, function, args).await
    }

    /// The database's clock now, in epoch milliseconds.
    pub(crate) async fn clock_ms(&self) -> Result<i64> {
        let mut conn = DB::acquire(&self.pool).await?;
        DB::clock_ms(&mut conn).await
    }

    /// Runs a typed [`Call`](crate::call::Call) in its own transaction.
    pub async fn run<T: Send>(&self, call: crate::call::Call<T>) -> Result<T> {
        let v = self.call(call.function(), call.args()).await?;
        call.decode(v)
    }

    /// A queue handle (checks the name).
    pub fn queue(&self, name: &str) -> Result<AsyncQueue<DB>> {
        AsyncQueue::new(self.clone(), name)
    }

    /// An outbox handle (checks the name).
    pub fn outbox(&self, name: &str) -> Result<AsyncOutbox<DB>> {
        AsyncOutbox::new(self.clone(), name)
    }

    /// A stream handle (checks the name).
    pub fn stream(&self, name: &str) -> Result<AsyncStream<DB>> {
        AsyncStream::new(self.clone(), name)
    }

    /// Sends a notification in its own transaction (use
    /// [`AsyncTxHandle::notify_tx`](crate::AsyncTxHandle::notify_tx) to send
    /// it when your transaction commits).
    pub async fn notify<T: Serialize + Sync + ?Sized>(
        &self,
        channel: &str,
        payload: &T,
    ) -> Result<()> {
        use crate::AsyncTxHandle;
        Autocommit(self).notify_tx(channel, payload).await
    }

    /// Notifications on `channel` from now on.
    ///
    /// ```no_run
    /// # async fn demo(store: alkstore::AsyncStore) -> alkstore::Result<()> {
    /// let mut orders = store.listen("orders").await?;
    /// store.notify("orders", &serde_json::json!({"id": 7})).await?;
    /// assert_eq!(orders.recv().await?.payload["id"], 7);
    /// # Ok(()) }
    /// ```
    pub async fn listen(&self, channel: &str) -> Result<AsyncSubscription> {
        names::validate(NameKind::Channel, channel)?;
        DB::listen(self, channel).await
    }

    /// Acquires a lease on `name` for `owner`, or `None` while another
    /// owner holds it (contract §9).
    pub async fn lock(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<AsyncLockGuard<DB>>> {
        AsyncLockGuard::acquire(self, name, owner, ttl).await
    }

    /// A job's document (`alk_get_job`), or `None`.
    pub async fn get_job(&self, job_id: i64) -> Result<Option<Value>> {
        self.run(crate::call::get_job(job_id)).await
    }

    pub(crate) fn wakeups(&self) -> &Wakeups {
        &self.wakeups
    }
}

#[cfg(feature = "sqlx-postgres")]
impl AsyncStore<sqlx::Postgres> {
    /// Opens a pool on `url` and a listener connection beside it.
    pub async fn connect(url: &str) -> Result<AsyncStore<sqlx::Postgres>> {
        let pool = sqlx::PgPool::connect(url).await?;
        AsyncStore::from_pool_with_listener(pool, url).await
    }

    /// Uses your pool for calls and transactions, and a listener connection
    /// made to `listener_url` (the server itself, not a pooler).
    pub async fn from_pool_with_listener(
        pool: sqlx::PgPool,
        listener_url: &str,
    ) -> Result<AsyncStore<sqlx::Postgres>> {
        let listener = wakeups::SqlxListener::connect(listener_url).await?;
        Ok(AsyncStore {
            pool,
            wakeups: Wakeups::start(listener),
            #[cfg(feature = "sqlx-sqlite")]
            direct: None,
        })
    }
}

#[cfg(feature = "tokio-postgres")]
impl AsyncStore<TokioPostgres> {
    /// Uses your deadpool-postgres pool for calls and transactions, and one
    /// connection of its own for wake-ups, made to `listener_conninfo`
    /// (the server itself, not a transaction pooler; TLS by `sslmode` with
    /// the `tls` feature). `begin` gives a [`PgClientTx`], which
    /// dereferences to the `tokio_postgres::Client` for your own statements.
    ///
    /// ```no_run
    /// # async fn demo(pool: deadpool_postgres::Pool) -> alkstore::Result<()> {
    /// use alkstore::{AsyncStore, AsyncTxHandle, EnqueueOpts, TokioPostgres};
    /// let store: AsyncStore<TokioPostgres> =
    ///     AsyncStore::from_deadpool(pool, "postgres://app@db/app").await?;
    /// let mut tx = store.begin().await?;
    /// tx.execute("INSERT INTO signups (email) VALUES ($1)", &[&"ada@example.com"]).await?;
    /// tx.enqueue_tx("welcome", &EnqueueOpts::new(), &serde_json::json!({"to": "ada@example.com"})).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_deadpool(
        pool: deadpool_postgres::Pool,
        listener_conninfo: &str,
    ) -> Result<AsyncStore<TokioPostgres>> {
        let listener = tokio_pg::TokioListener::connect(listener_conninfo).await?;
        Ok(AsyncStore {
            pool,
            wakeups: Wakeups::start(listener),
            #[cfg(feature = "sqlx-sqlite")]
            direct: None,
        })
    }
}
