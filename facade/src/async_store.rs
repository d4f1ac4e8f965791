//! [`AsyncStore`]: queues, outboxes, streams, notifications and leases on a
//! sqlx PostgreSQL pool, with waiting by wake-ups (feature `sqlx-postgres`,
//! on tokio).

mod notify;
mod queue;
mod stream;
mod wakeups;

pub use notify::{AsyncLockGuard, AsyncSubscription};
pub use queue::{AsyncOutbox, AsyncQueue};
pub use stream::{AsyncStream, AsyncStreamSubscription};

use crate::async_tx::sqlx_postgres::call;
use crate::error::Result;
use crate::sql::Arg;
use alkstore_core::{names, NameKind};
use serde::Serialize;
use serde_json::Value;
use sqlx::postgres::{PgListener, PgPool};
use std::sync::Arc;
use std::time::Duration;
use wakeups::Wakeups;

/// How long a waiter waits at most without a wake-up: jobs whose `run_at`
/// arrives or whose claim expires announce nothing.
pub(crate) const FALLBACK_POLL: Duration = Duration::from_secs(1);

/// A PostgreSQL store for async code: a sqlx pool for calls and your own
/// transactions, and one listener connection for wake-ups and
/// notifications. Queue, outbox, stream, notification and lease handles as
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
#[derive(Clone)]
pub struct AsyncStore {
    pool: PgPool,
    wakeups: Arc<Wakeups>,
}

impl AsyncStore {
    /// Opens a pool on `url` and a listener connection beside it.
    pub async fn connect(url: &str) -> Result<AsyncStore> {
        let pool = PgPool::connect(url).await?;
        AsyncStore::from_pool_with_listener(pool, url).await
    }

    /// Uses your pool; the listener takes one of its connections for as
    /// long as the store lives. Behind a transaction-pooling PgBouncer use
    /// [`from_pool_with_listener`](Self::from_pool_with_listener): a
    /// `LISTEN` there holds for one transaction only.
    pub async fn from_pool(pool: PgPool) -> Result<AsyncStore> {
        let listener = PgListener::connect_with(&pool).await?;
        Ok(AsyncStore::with_listener(pool, listener))
    }

    /// Uses your pool for calls and transactions, and a listener connection
    /// made to `listener_url` (the server itself, not a pooler).
    pub async fn from_pool_with_listener(pool: PgPool, listener_url: &str) -> Result<AsyncStore> {
        let listener = PgListener::connect(listener_url).await?;
        Ok(AsyncStore::with_listener(pool, listener))
    }

    fn with_listener(pool: PgPool, listener: PgListener) -> AsyncStore {
        AsyncStore {
            pool,
            wakeups: Wakeups::start(listener),
        }
    }

    /// The pool: your own queries and transactions.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Begins a transaction on the pool; use [`AsyncTxHandle`](crate::AsyncTxHandle)'s
    /// methods and your own queries on it, then commit.
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        Ok(self.pool.begin().await?)
    }

    /// Calls any `alk_*` function in its own transaction.
    pub async fn call(&self, function: &str, args: &[Arg]) -> Result<Value> {
        call(&mut *self.pool.acquire().await?, function, args).await
    }

    /// A queue handle (checks the name).
    pub fn queue(&self, name: &str) -> Result<AsyncQueue> {
        AsyncQueue::new(self.clone(), name)
    }

    /// An outbox handle (checks the name).
    pub fn outbox(&self, name: &str) -> Result<AsyncOutbox> {
        AsyncOutbox::new(self.clone(), name)
    }

    /// A stream handle (checks the name).
    pub fn stream(&self, name: &str) -> Result<AsyncStream> {
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
        let mut conn = self.pool.acquire().await?;
        crate::AsyncTxHandle::notify_tx(&mut *conn, channel, payload).await
    }

    /// Notifications on `channel` from now on, through the store's listener.
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
        let pg_channel = self.call("alk_channel", &[channel.into()]).await?;
        let rx = self
            .wakeups
            .listen(pg_channel.as_str().unwrap_or_default())
            .await?;
        Ok(AsyncSubscription {
            channel: channel.into(),
            rx,
        })
    }

    /// Acquires a lease on `name` for `owner`, or `None` while another
    /// owner holds it (contract §9).
    pub async fn lock(
        &self,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<AsyncLockGuard>> {
        AsyncLockGuard::acquire(self, name, owner, ttl).await
    }

    /// A job's document (`alk_get_job`), or `None`.
    pub async fn get_job(&self, job_id: i64) -> Result<Option<Value>> {
        let v = self.call("alk_get_job", &[job_id.into()]).await?;
        Ok((!v.is_null()).then_some(v))
    }

    pub(crate) fn wakeups(&self) -> &Wakeups {
        &self.wakeups
    }
}
