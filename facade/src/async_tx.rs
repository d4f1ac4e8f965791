//! [`AsyncTxHandle`]: the typed calls of [`TxHandle`](crate::TxHandle) on
//! the caller's own async transaction or connection (features
//! `sqlx-postgres`, `sqlx-sqlite`, `tokio-postgres`).
//!
//! The handle is the caller's: alkstore never begins, commits or rolls it
//! back, so a job, an outbox message or an event commits or rolls back with
//! the business rows written beside it.

use crate::call;
use crate::error::Result;
use crate::opts::EnqueueOpts;
use crate::sql::Arg;
use crate::types::{Job, Retried};
use serde::Serialize;
use serde_json::Value;
use std::future::Future;
use std::time::Duration;

#[cfg(feature = "sqlx-postgres")]
pub(crate) mod sqlx_postgres;
#[cfg(feature = "sqlx-sqlite")]
pub(crate) mod sqlx_sqlite;
#[cfg(feature = "tokio-postgres")]
mod tokio_postgres;

/// An async transaction (or connection) the `alk_*` functions can be called
/// in: `sqlx::PgConnection` and `sqlx::SqliteConnection` (so their
/// `sqlx::Transaction`s and pooled connections, which dereference to them),
/// `tokio_postgres::Transaction` and `tokio_postgres::Client`.
///
/// Names are checked before anything is sent, so a bad name leaves the
/// transaction usable. Any other failed call changed nothing, but on
/// PostgreSQL it aborts the transaction (PostgreSQL's rule for any failed
/// statement): roll back, or use a savepoint around the call.
///
/// ```no_run
/// # #[cfg(feature = "sqlx-postgres")]
/// # async fn signup(pool: &sqlx::PgPool) -> alkstore::Result<()> {
/// use alkstore::{AsyncTxHandle, EnqueueOpts};
/// let mut tx = pool.begin().await?;
/// sqlx::query("INSERT INTO users (email) VALUES ($1)")
///     .bind("ada@example.com")
///     .execute(&mut *tx)
///     .await?;
/// tx.enqueue_tx("emails", &EnqueueOpts::new(), &serde_json::json!({"to": "ada@example.com"}))
///     .await?;
/// tx.commit().await?; // the user and the job, or neither
/// # Ok(()) }
/// ```
pub trait AsyncTxHandle: Send {
    /// Calls any `alk_*` function in this transaction; the result as JSON
    /// (sets as arrays), as [`TxHandle::call`](crate::TxHandle::call).
    fn call(&mut self, function: &str, args: &[Arg]) -> impl Future<Output = Result<Value>> + Send;

    /// Enqueues a job that exists only if the transaction commits.
    fn enqueue_tx<T: Serialize + Sync + ?Sized>(
        &mut self,
        queue: &str,
        opts: &EnqueueOpts,
        job: &T,
    ) -> impl Future<Output = Result<i64>> + Send {
        let call = call::enqueue(queue, opts, job);
        async move { call?.run_async(self).await }
    }

    /// Enqueues into an outbox (ADR-014): the outbox name, not its backing queue.
    fn outbox_enqueue_tx<T: Serialize + Sync + ?Sized>(
        &mut self,
        outbox: &str,
        opts: &EnqueueOpts,
        message: &T,
    ) -> impl Future<Output = Result<i64>> + Send {
        let call = call::outbox_enqueue(outbox, opts, message);
        async move { call?.run_async(self).await }
    }

    /// Publishes an event; returns its id (its offset comes with reads, once
    /// this transaction has committed).
    fn publish_tx<T: Serialize + Sync + ?Sized>(
        &mut self,
        stream: &str,
        event: &T,
    ) -> impl Future<Output = Result<i64>> + Send {
        let call = call::publish(stream, event, None);
        async move { call?.run_async(self).await }
    }

    /// Sends a notification when the transaction commits.
    fn notify_tx<T: Serialize + Sync + ?Sized>(
        &mut self,
        channel: &str,
        message: &T,
    ) -> impl Future<Output = Result<()>> + Send {
        let call = call::notify(channel, message);
        async move { call?.run_async(self).await }
    }

    /// Saves a consumer's offset; true if it advanced.
    fn save_offset_tx(
        &mut self,
        stream: &str,
        consumer: &str,
        offset: i64,
    ) -> impl Future<Output = Result<bool>> + Send {
        let call = call::save_offset(stream, consumer, offset);
        async move { call?.run_async(self).await }
    }

    /// Claims up to `max_jobs` jobs of `queue` for `worker`, in this
    /// transaction: commit it before the jobs are handled, or the claim (and
    /// the rows it locks) lasts as long as the handling. A job whose payload
    /// this crate cannot read is failed (dead-lettered with the reason), not
    /// returned.
    fn claim_tx(
        &mut self,
        queue: &str,
        worker: &str,
        max_jobs: i64,
    ) -> impl Future<Output = Result<Vec<Job>>> + Send {
        let call = call::claim(queue, worker, max_jobs);
        let worker = worker.to_string();
        async move { claimed(self, call?, &worker).await }
    }

    /// Acks a job this worker holds, in this transaction: the job's ack and
    /// the handler's writes commit together or not at all. True if held.
    fn ack_tx(&mut self, job_id: i64, worker: &str) -> impl Future<Output = Result<bool>> + Send {
        let call = call::ack(job_id, worker);
        async move { call?.run_async(self).await }
    }

    /// Gives a job back after an error, in this transaction: pending after
    /// `delay` (`None`: the stamped backoff), or dead when its attempts are
    /// used up.
    fn retry_tx(
        &mut self,
        job_id: i64,
        worker: &str,
        error: &str,
        delay: Option<Duration>,
    ) -> impl Future<Output = Result<Retried>> + Send {
        let call = call::retry(job_id, worker, error, delay);
        async move { call?.run_async(self).await }
    }

    /// Dead-letters a job this worker holds, in this transaction.
    fn fail_tx(
        &mut self,
        job_id: i64,
        worker: &str,
        error: &str,
    ) -> impl Future<Output = Result<bool>> + Send {
        let call = call::fail(job_id, worker, error);
        async move { call?.run_async(self).await }
    }
}

/// Runs a claim, then fails the jobs whose payload this crate cannot read,
/// in the same transaction.
pub(crate) async fn claimed<H: AsyncTxHandle + ?Sized>(
    handle: &mut H,
    claim: call::Call<call::Claimed>,
    worker: &str,
) -> Result<Vec<Job>> {
    let mut claimed = claim.run_async(handle).await?;
    for fail in claimed.fail_unreadable(worker)? {
        fail.run_async(handle).await?;
    }
    Ok(claimed.jobs)
}

/// Where claims come from: a queue (`alk_claim`) or an outbox
/// (`alk_outbox_claim`, the outbox's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClaimFrom {
    Queue,
    Outbox,
}

/// Claims from `name` and fails the jobs whose payload this crate cannot
/// read.
pub(crate) async fn claim_with<H: AsyncTxHandle + ?Sized>(
    handle: &mut H,
    from: ClaimFrom,
    name: &str,
    worker: &str,
    max_jobs: i64,
) -> Result<Vec<Job>> {
    let call = match from {
        ClaimFrom::Outbox => call::outbox_claim(name, worker, max_jobs)?,
        ClaimFrom::Queue => call::claim(name, worker, max_jobs)?,
    };
    claimed(handle, call, worker).await
}

impl<T> crate::call::Call<T> {
    /// Runs it in an async transaction (or any [`AsyncTxHandle`]).
    pub async fn run_async<H: AsyncTxHandle + ?Sized>(self, tx: &mut H) -> Result<T>
    where
        T: Send,
    {
        let v = tx.call(self.function(), self.args()).await?;
        self.decode(v)
    }
}
