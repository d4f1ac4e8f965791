//! # alkstore
//!
//! Durable queues, a transactional outbox, streams with consumer offsets,
//! notifications and leases inside your application's own database —
//! SQLite (embedded, the default) or PostgreSQL. A job, an outbox message,
//! an event or a notification is written in the same transaction as your
//! business rows: commit makes both visible, rollback drops both.
//!
//! Every mechanism is an `alk_*` SQL function in the database; this crate
//! calls them inside your transaction and gives typed results.
//!
//! ```
//! use alkstore::{EnqueueOpts, Store, TxHandle};
//! # fn main() -> alkstore::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("app.db");
//! let store = alkstore::SqliteStore::open(&path)?;
//!
//! // A business row and its outbox message, in one transaction.
//! let mut tx = store.transaction()?;
//! tx.conn().execute_batch("CREATE TABLE IF NOT EXISTS orders (item TEXT); INSERT INTO orders VALUES ('book')")?;
//! tx.outbox_enqueue_tx("receipts", &EnqueueOpts::new(), &serde_json::json!({"item": "book"}))?;
//! tx.commit()?;
//!
//! // Delivery: exactly the committed message.
//! let outbox = store.outbox("receipts")?;
//! let delivered = outbox.run_once("mailer", &mut |job| {
//!     println!("sending receipt for {}", job.payload["item"]);
//!     Ok(())
//! })?;
//! assert!(delivered);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
mod async_heartbeat;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
mod async_store;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
mod async_tx;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
mod async_worker;
pub mod call;
#[cfg(any(
    feature = "blocking",
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
mod claimant;
#[cfg(any(
    feature = "blocking",
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
mod completer;
#[cfg(feature = "blocking")]
mod engine;
mod error;
#[cfg(feature = "blocking")]
mod heartbeat;
#[cfg(feature = "blocking")]
mod horizon;
#[cfg(feature = "blocking")]
mod lock;
#[cfg(feature = "blocking")]
mod notify;
mod opts;
#[cfg(feature = "blocking")]
mod outbox;
#[cfg(feature = "blocking")]
pub mod postgres;
#[cfg(any(
    feature = "blocking",
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
mod prefetch;
#[cfg(feature = "blocking")]
mod queue;
pub mod sql;
#[cfg(feature = "blocking")]
pub mod sqlite;
#[cfg(feature = "blocking")]
mod store;
#[cfg(feature = "blocking")]
mod stream;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tls")]
mod tls;
#[cfg(feature = "blocking")]
mod tx;
mod types;
pub mod url;
#[cfg(feature = "blocking")]
mod waiting;
#[cfg(feature = "blocking")]
mod wake;
#[cfg(feature = "blocking")]
mod worker;
#[cfg(any(
    feature = "blocking",
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
mod worker_core;
mod workflow;

/// The queue options of flow control (contract v1.2 §I), as
/// `alk_queue_opts` names them: what [`QueueOpts`]'s limit setters write.
pub use alkstore_core::limits::LIMIT_KEYS;
/// The outbox a backing queue name stands for (`__alkstore_outbox:{name}`,
/// as `alk_queues` lists an outbox), or `None` for a queue's own name.
pub use alkstore_core::names::outbox_of;
#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
pub use async_store::SqlxEngine;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
pub use async_store::{
    AsyncConn, AsyncEngine, AsyncLockGuard, AsyncOutbox, AsyncQueue, AsyncStore, AsyncStream,
    AsyncStreamSubscription, AsyncSubscription, AsyncTransactionEnd, DefaultEngine,
};
#[cfg(feature = "tokio-postgres")]
pub use async_store::{PgClientTx, TokioPostgres};
#[cfg(feature = "sqlx-sqlite")]
pub use async_tx::sqlx_sqlite::register as register_sqlx_sqlite;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
pub use async_tx::AsyncTxHandle;
#[cfg(feature = "sqlx-postgres")]
pub use async_worker::PgTransaction;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
pub use async_worker::{AsyncTransaction, AsyncWorker, DEFAULT_SHUTDOWN_TIMEOUT};
#[cfg(any(
    feature = "blocking",
    feature = "sqlx-postgres",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres"
))]
pub use completer::FlushWindow;
pub use error::{Error, Result};
#[cfg(feature = "blocking")]
pub use horizon::{Horizon, HorizonHolder};
#[cfg(feature = "blocking")]
pub use lock::LockGuard;
#[cfg(feature = "blocking")]
pub use notify::Subscription;
pub use opts::{EnqueueOpts, QueueOpts, ScheduleSpec, StreamOpts};
#[cfg(feature = "blocking")]
pub use outbox::Outbox;
#[cfg(feature = "blocking")]
pub use postgres::{PgStore, PgStoreBuilder, PgTx, DEFAULT_POOL_SIZE};
#[cfg(feature = "blocking")]
pub use queue::Queue;
#[cfg(feature = "blocking")]
pub use sqlite::{SqliteStore, SqliteTx};
#[cfg(feature = "blocking")]
pub use store::Store;
#[cfg(feature = "blocking")]
pub use stream::{Stream, StreamSubscription};
#[cfg(feature = "blocking")]
pub use tx::TxHandle;
pub use types::{Event, Job, Notification, Retried, StreamInfo};
#[cfg(feature = "blocking")]
pub use waiting::Stop;
#[cfg(feature = "blocking")]
pub use worker::{Worker, DEFAULT_PRUNE_EVERY, DEFAULT_TICK_EVERY};
pub use worker_core::{Handled, DEFAULT_SWEEP_EVERY, MAX_PREFETCH, MIN_CHORE_EVERY};
pub use workflow::Workflow;

/// Opens a store from a URL: `sqlite:path/to/app.db` (or `sqlite://…`)
/// or `postgres://…` / `postgresql://…`, the scheme in any case. Anything
/// else is refused at once with `ALK05` (see [`url::DbUrl`]).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let url = format!("sqlite:{}", dir.path().join("app.db").display());
/// let store = alkstore::open(&url)?;
/// let queue = store.queue("emails")?;
/// queue.enqueue(&alkstore::EnqueueOpts::new(), &serde_json::json!({"to": "ada@example.com"}))?;
/// assert_eq!(queue.claim("worker-1", 10)?.len(), 1);
/// # Ok::<(), alkstore::Error>(())
/// ```
#[cfg(feature = "blocking")]
pub fn open(url: &str) -> Result<Store> {
    match url::DbUrl::parse(url)? {
        url::DbUrl::Postgres(url) => Ok(PgStore::connect(&url)?.into()),
        url::DbUrl::Sqlite(path) => Ok(SqliteStore::open(&path)?.into()),
    }
}

/// Opens a database to look at it: on SQLite read-only, never creating,
/// migrating or switching the file ([`SqliteStore::open_read_only`]: a
/// missing file or one that is not a database is refused at once); on
/// PostgreSQL as [`open`] does (the role decides what it may do).
#[cfg(feature = "blocking")]
pub fn open_to_inspect(url: &str) -> Result<Store> {
    match url::DbUrl::parse(url)? {
        url::DbUrl::Postgres(url) => Ok(PgStore::connect(&url)?.into()),
        url::DbUrl::Sqlite(path) => Ok(SqliteStore::open_read_only(&path)?.into()),
    }
}
