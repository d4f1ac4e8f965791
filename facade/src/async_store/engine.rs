//! The engines an [`AsyncStore`](super::AsyncStore) runs on: what differs
//! between sqlx's PostgreSQL and SQLite drivers and tokio-postgres with
//! deadpool — how connections and transactions are had, how a call is
//! sent, how notifications arrive.

use super::notify::AsyncSubscription;
#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
use super::wakeups::Wakeups;
use super::AsyncStore;
use crate::async_tx::AsyncTxHandle;
use crate::error::Result;
use crate::sql::Arg;
use serde_json::Value;
use std::future::Future;
use std::ops::DerefMut;
#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
}

/// A database driver alkstore's async store runs on: `sqlx::Postgres`
/// (feature `sqlx-postgres`), `sqlx::Sqlite` (feature `sqlx-sqlite`) or
/// [`TokioPostgres`] (feature `tokio-postgres`, pooled by deadpool-postgres).
pub trait AsyncEngine: sealed::Sealed + Sized + Send + Sync + 'static {
    /// The connection pool (`sqlx::Pool`, `deadpool_postgres::Pool`).
    type Pool: Clone + Send + Sync + 'static;
    /// One connection: what your own statements and [`AsyncConn`] run on.
    type Connection: Send;
    /// A connection checked out of the pool.
    #[doc(hidden)]
    type Pooled: DerefMut<Target = Self::Connection> + Send;
    /// An open transaction that owns its connection; dropping it rolls it
    /// back.
    type Transaction: DerefMut<Target = Self::Connection> + AsyncTransactionEnd + Send + 'static;

    /// Calls an `alk_*` function on one connection.
    #[doc(hidden)]
    fn call_on(
        conn: &mut Self::Connection,
        function: &str,
        args: &[Arg],
    ) -> impl Future<Output = Result<Value>> + Send;

    /// A connection from the pool.
    #[doc(hidden)]
    fn acquire(pool: &Self::Pool) -> impl Future<Output = Result<Self::Pooled>> + Send;

    /// Begins a transaction on a connection from the pool.
    #[doc(hidden)]
    fn begin(pool: &Self::Pool) -> impl Future<Output = Result<Self::Transaction>> + Send;

    /// The database's clock now, in epoch milliseconds (SQLite's is the
    /// host's): what a claim's expiry is read against.
    #[doc(hidden)]
    fn clock_ms(conn: &mut Self::Connection) -> impl Future<Output = Result<i64>> + Send;

    /// Notifications on `channel` from now on.
    #[doc(hidden)]
    fn listen(
        store: &AsyncStore<Self>,
        channel: &str,
    ) -> impl Future<Output = Result<AsyncSubscription>> + Send;
}

#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
/// An [`AsyncEngine`] whose store can start from a sqlx pool alone
/// ([`AsyncStore::from_pool`](super::AsyncStore::from_pool)).
pub trait SqlxEngine: AsyncEngine<Pool = sqlx::Pool<Self>> + sqlx::Database {
    /// Starts the store's wake-ups on its pool.
    #[doc(hidden)]
    fn wakeups(pool: &sqlx::Pool<Self>) -> impl Future<Output = Result<Arc<Wakeups>>> + Send;
}

/// How a transaction of any engine ends, for code generic over the engine:
/// with `use alkstore::AsyncTransactionEnd`, `tx.commit().await` on an
/// [`AsyncTransaction<DB>`](crate::AsyncTransaction) (sqlx's `Transaction`,
/// or [`PgClientTx`](crate::PgClientTx) on tokio-postgres). Code for one
/// driver needs nothing: those types have the same methods of their own.
pub trait AsyncTransactionEnd: Sized {
    /// Commits.
    fn commit(self) -> impl Future<Output = Result<()>> + Send;
    /// Rolls back.
    fn rollback(self) -> impl Future<Output = Result<()>> + Send;
}

#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
impl<DB: sqlx::Database> AsyncTransactionEnd for sqlx::Transaction<'static, DB> {
    async fn commit(self) -> Result<()> {
        Ok(sqlx::Transaction::commit(self).await?)
    }

    async fn rollback(self) -> Result<()> {
        Ok(sqlx::Transaction::rollback(self).await?)
    }
}

#[cfg(feature = "tokio-postgres")]
impl AsyncTransactionEnd for super::tokio_pg::PgClientTx {
    async fn commit(self) -> Result<()> {
        super::tokio_pg::PgClientTx::commit(self).await
    }

    async fn rollback(self) -> Result<()> {
        super::tokio_pg::PgClientTx::rollback(self).await
    }
}

/// One connection (or transaction) of any engine, with the typed calls of
/// [`AsyncTxHandle`]: for code generic over [`AsyncEngine`], where the
/// connection type is not known (`AsyncConn::<DB>(&mut *tx).enqueue_tx(…)`).
/// Code for one engine calls the methods on its connection directly.
pub struct AsyncConn<'a, DB: AsyncEngine>(pub &'a mut DB::Connection);

impl<DB: AsyncEngine> AsyncTxHandle for AsyncConn<'_, DB> {
    async fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        DB::call_on(self.0, function, args).await
    }
}

/// What every sqlx driver shares: its pool, pooled connections and
/// transactions.
#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
macro_rules! sqlx_engine {
    ($db:ty, $conn:ty, $listen:path, $clock:path) => {
        impl sealed::Sealed for $db {}

        impl AsyncEngine for $db {
            type Pool = sqlx::Pool<$db>;
            type Connection = $conn;
            type Pooled = sqlx::pool::PoolConnection<$db>;
            type Transaction = sqlx::Transaction<'static, $db>;

            async fn call_on(conn: &mut $conn, function: &str, args: &[Arg]) -> Result<Value> {
                conn.call(function, args).await
            }

            async fn acquire(pool: &sqlx::Pool<$db>) -> Result<Self::Pooled> {
                Ok(pool.acquire().await?)
            }

            async fn begin(pool: &sqlx::Pool<$db>) -> Result<Self::Transaction> {
                Ok(pool.begin().await?)
            }

            async fn clock_ms(conn: &mut $conn) -> Result<i64> {
                $clock(conn).await
            }

            async fn listen(store: &AsyncStore<Self>, channel: &str) -> Result<AsyncSubscription> {
                $listen(store, channel).await
            }
        }
    };
}

#[cfg(feature = "sqlx-postgres")]
sqlx_engine!(sqlx::Postgres, sqlx::PgConnection, pg_listen, sqlx_pg_clock);

/// The server's clock, sent as a simple query (as calls are: see
/// `SqlxCall`).
#[cfg(feature = "sqlx-postgres")]
async fn sqlx_pg_clock(conn: &mut sqlx::PgConnection) -> Result<i64> {
    let row = sqlx::Executor::fetch_one(conn, crate::sql::PG_CLOCK_MS).await?;
    Ok(sqlx::Row::try_get(&row, 0)?)
}

/// SQLite's functions read this process's clock.
#[cfg(feature = "sqlx-sqlite")]
async fn sqlite_clock(_conn: &mut sqlx::SqliteConnection) -> Result<i64> {
    Ok(alkstore_core::time::now_ms())
}

#[cfg(feature = "sqlx-postgres")]
impl SqlxEngine for sqlx::Postgres {
    async fn wakeups(pool: &sqlx::PgPool) -> Result<Arc<Wakeups>> {
        Ok(Wakeups::start(
            super::wakeups::SqlxListener::connect_with(pool).await?,
        ))
    }
}

/// PostgreSQL: the channel's notifications come through the listener.
/// (SQLite reads them from `alk_notifications` on wake-ups.)
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
async fn pg_listen<DB: AsyncEngine>(
    store: &AsyncStore<DB>,
    channel: &str,
) -> Result<AsyncSubscription> {
    let pg_channel = store.run(crate::call::channel(channel)).await?;
    let rx = store.wakeups().listen(&pg_channel).await?;
    Ok(AsyncSubscription::new(channel, rx))
}

#[cfg(feature = "sqlx-sqlite")]
sqlx_engine!(
    sqlx::Sqlite,
    sqlx::SqliteConnection,
    super::notify::sqlite_subscription,
    sqlite_clock
);

#[cfg(feature = "sqlx-sqlite")]
impl SqlxEngine for sqlx::Sqlite {
    async fn wakeups(pool: &sqlx::SqlitePool) -> Result<Arc<Wakeups>> {
        Wakeups::start_sqlite(pool).await
    }
}

/// tokio-postgres, pooled by deadpool-postgres (feature `tokio-postgres`):
/// `AsyncStore<TokioPostgres>`, made by
/// [`AsyncStore::from_deadpool`](super::AsyncStore::from_deadpool).
#[cfg(feature = "tokio-postgres")]
pub enum TokioPostgres {}

#[cfg(feature = "tokio-postgres")]
impl sealed::Sealed for TokioPostgres {}

#[cfg(feature = "tokio-postgres")]
impl AsyncEngine for TokioPostgres {
    type Pool = deadpool_postgres::Pool;
    type Connection = tokio_postgres::Client;
    type Pooled = super::tokio_pg::Pooled;
    type Transaction = super::tokio_pg::PgClientTx;

    async fn call_on(
        conn: &mut tokio_postgres::Client,
        function: &str,
        args: &[Arg],
    ) -> Result<Value> {
        conn.call(function, args).await
    }

    async fn acquire(pool: &deadpool_postgres::Pool) -> Result<Self::Pooled> {
        super::tokio_pg::Pooled::get(pool).await
    }

    async fn begin(pool: &deadpool_postgres::Pool) -> Result<Self::Transaction> {
        super::tokio_pg::PgClientTx::begin(pool).await
    }

    async fn clock_ms(conn: &mut tokio_postgres::Client) -> Result<i64> {
        let row = conn.query_typed_one(crate::sql::PG_CLOCK_MS, &[]).await?;
        Ok(row.try_get(0)?)
    }

    async fn listen(store: &AsyncStore<Self>, channel: &str) -> Result<AsyncSubscription> {
        pg_listen(store, channel).await
    }
}
