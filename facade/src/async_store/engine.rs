//! The engines an [`AsyncStore`](super::AsyncStore) runs on: what differs
//! between sqlx's PostgreSQL and SQLite drivers — how a call is sent, how
//! waiters are woken, how notifications arrive.

use super::notify::AsyncSubscription;
use super::wakeups::Wakeups;
use super::AsyncStore;
use crate::async_tx::AsyncTxHandle;
use crate::error::Result;
use crate::sql::Arg;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
}

/// A sqlx database alkstore's async store runs on: `sqlx::Postgres`
/// (feature `sqlx-postgres`) or `sqlx::Sqlite` (feature `sqlx-sqlite`).
pub trait AsyncEngine: sqlx::Database + sealed::Sealed {
    /// Calls an `alk_*` function on one connection.
    #[doc(hidden)]
    fn call_on(
        conn: &mut Self::Connection,
        function: &str,
        args: &[Arg],
    ) -> impl Future<Output = Result<Value>> + Send;

    /// Starts the store's wake-ups on its pool.
    #[doc(hidden)]
    fn wakeups(pool: &sqlx::Pool<Self>) -> impl Future<Output = Result<Arc<Wakeups>>> + Send;

    /// Notifications on `channel` from now on.
    #[doc(hidden)]
    fn listen(
        store: &AsyncStore<Self>,
        channel: &str,
    ) -> impl Future<Output = Result<AsyncSubscription>> + Send;
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

#[cfg(feature = "sqlx-postgres")]
impl sealed::Sealed for sqlx::Postgres {}

#[cfg(feature = "sqlx-postgres")]
impl AsyncEngine for sqlx::Postgres {
    async fn call_on(conn: &mut sqlx::PgConnection, function: &str, args: &[Arg]) -> Result<Value> {
        crate::async_tx::sqlx_postgres::call(conn, function, args).await
    }

    async fn wakeups(pool: &sqlx::PgPool) -> Result<Arc<Wakeups>> {
        Ok(Wakeups::start(
            sqlx::postgres::PgListener::connect_with(pool).await?,
        ))
    }

    async fn listen(store: &AsyncStore<Self>, channel: &str) -> Result<AsyncSubscription> {
        let pg_channel = store.call("alk_channel", &[channel.into()]).await?;
        let rx = store
            .wakeups()
            .listen(pg_channel.as_str().unwrap_or_default())
            .await?;
        Ok(AsyncSubscription::new(channel, rx))
    }
}

#[cfg(feature = "sqlx-sqlite")]
impl sealed::Sealed for sqlx::Sqlite {}

#[cfg(feature = "sqlx-sqlite")]
impl AsyncEngine for sqlx::Sqlite {
    async fn call_on(
        conn: &mut sqlx::SqliteConnection,
        function: &str,
        args: &[Arg],
    ) -> Result<Value> {
        conn.call(function, args).await
    }

    async fn wakeups(pool: &sqlx::SqlitePool) -> Result<Arc<Wakeups>> {
        Wakeups::start_sqlite(pool).await
    }

    async fn listen(store: &AsyncStore<Self>, channel: &str) -> Result<AsyncSubscription> {
        super::notify::sqlite_subscription(store, channel).await
    }
}
