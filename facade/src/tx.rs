//! The blocking transaction trait: what an open transaction offers, on
//! either engine, over the typed calls of [`call`].

use crate::call::{self, Call};
use crate::error::Result;
use crate::opts::EnqueueOpts;
use crate::sql::Arg;
use crate::types::{Job, Retried};
use serde_json::Value;
use std::time::Duration;

/// An open transaction. Dropping it without `commit` rolls it back.
///
/// Names are checked before anything is sent, so a bad name leaves the
/// transaction usable on both engines. Any other failed call changed
/// nothing, but on PostgreSQL it aborts the transaction (PostgreSQL's rule
/// for every error): roll it back.
pub trait TxHandle {
    /// Calls any `alk_*` function inside this transaction.
    fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value>;
    /// Commits: everything written in the transaction becomes visible.
    fn commit(self: Box<Self>) -> Result<()>;
    /// Rolls back: nothing written in the transaction remains.
    fn rollback(self: Box<Self>) -> Result<()>;

    /// Enqueues a job that exists only if the transaction commits.
    fn enqueue_tx(&mut self, queue: &str, opts: &EnqueueOpts, payload: &Value) -> Result<i64> {
        call::enqueue(queue, opts, payload)?.run(self)
    }

    /// Enqueues into an outbox (ADR-014): the outbox name, not its backing queue.
    fn outbox_enqueue_tx(
        &mut self,
        outbox: &str,
        opts: &EnqueueOpts,
        payload: &Value,
    ) -> Result<i64> {
        call::outbox_enqueue(outbox, opts, payload)?.run(self)
    }

    /// Publishes an event; returns its id (its offset comes with reads,
    /// once this transaction has committed).
    fn publish_tx(&mut self, stream: &str, payload: &Value) -> Result<i64> {
        call::publish(stream, payload, None)?.run(self)
    }

    /// Sends a notification on commit.
    fn notify_tx(&mut self, channel: &str, payload: &Value) -> Result<()> {
        call::notify(channel, payload)?.run(self)
    }

    /// Saves a consumer's offset; true if it advanced.
    fn save_offset_tx(&mut self, stream: &str, consumer: &str, offset: i64) -> Result<bool> {
        call::save_offset(stream, consumer, offset)?.run(self)
    }

    /// Claims up to `max_jobs` jobs of `queue` for `worker`, in this
    /// transaction: commit it before the jobs are handled, or the claim (and
    /// the rows it locks) lasts as long as the handling. A job whose payload
    /// this crate cannot read is failed (dead-lettered with the reason), not
    /// returned.
    fn claim_tx(&mut self, queue: &str, worker: &str, max_jobs: i64) -> Result<Vec<Job>> {
        let mut claimed = call::claim(queue, worker, max_jobs)?.run(self)?;
        for fail in claimed.fail_unreadable(worker)? {
            fail.run(self)?;
        }
        Ok(claimed.jobs)
    }

    /// Acks a job `worker` holds, in this transaction: the job completes
    /// only if the transaction commits. False when the job is no longer
    /// this worker's (its claim expired and someone else holds it, or it
    /// was cancelled): then roll back, or your writes commit without it.
    fn ack_tx(&mut self, job_id: i64, worker: &str) -> Result<bool> {
        call::ack(job_id, worker)?.run(self)
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
    ) -> Result<Retried> {
        call::retry(job_id, worker, error, delay)?.run(self)
    }

    /// Dead-letters a job this worker holds, in this transaction.
    fn fail_tx(&mut self, job_id: i64, worker: &str, error: &str) -> Result<bool> {
        call::fail(job_id, worker, error)?.run(self)
    }

    /// The SQLite connection this transaction runs on, for your own
    /// statements, when it is a [`SqliteTx`](crate::SqliteTx) or your own
    /// `rusqlite::Transaction`; `None` on PostgreSQL.
    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        None
    }

    /// The PostgreSQL client this transaction runs on, for your own
    /// statements, when it is a [`PgTx`](crate::PgTx) (what stores and
    /// workers open); `None` on SQLite and on your own `postgres::Transaction`.
    fn postgres(&mut self) -> Option<&mut postgres::Client> {
        None
    }
}

impl<T> Call<T> {
    /// Runs it in a blocking transaction (or any [`TxHandle`]).
    pub fn run<H: TxHandle + ?Sized>(self, tx: &mut H) -> Result<T> {
        let v = tx.call(self.function(), self.args())?;
        self.decode(v)
    }
}
