//! A queue handle: enqueue, claim, ack, retry, fail and the admin calls (contract §5).

use crate::call;
use crate::engine::{Engine, Kind};
use crate::error::Result;
use crate::opts::{EnqueueOpts, QueueOpts};
use crate::types::{Job, Retried};
use crate::waiting::wait_for;
use alkstore_core::{names, NameKind};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A queue.
#[derive(Clone)]
pub struct Queue {
    pub(crate) engine: Arc<dyn Engine>,
    pub(crate) name: String,
}

impl Queue {
    pub(crate) fn new(engine: Arc<dyn Engine>, name: &str) -> Result<Queue> {
        names::validate(NameKind::Queue, name)?;
        Ok(Queue {
            engine,
            name: name.to_string(),
        })
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Enqueues one job in its own transaction (use [`TxHandle::enqueue_tx`](crate::TxHandle::enqueue_tx)
    /// to enqueue with your own rows).
    pub fn enqueue<T: Serialize + ?Sized>(&self, opts: &EnqueueOpts, job: &T) -> Result<i64> {
        call::enqueue(&self.name, opts, job)?.run_on(&*self.engine)
    }

    /// Enqueues many jobs with the same options; ids in order.
    pub fn enqueue_batch<T: Serialize>(&self, opts: &EnqueueOpts, jobs: &[T]) -> Result<Vec<i64>> {
        call::enqueue_batch(&self.name, opts, jobs)?.run_on(&*self.engine)
    }

    /// Claims up to `max_jobs` jobs now, in claim order.
    pub fn claim(&self, worker: &str, max_jobs: i64) -> Result<Vec<Job>> {
        let claimed = call::claim(&self.name, worker, max_jobs)?.run_on(&*self.engine)?;
        jobs(self, worker, claimed)
    }

    /// Claims, waiting up to `timeout` for work to arrive (woken by commits,
    /// not by polling). Empty when the time ran out.
    pub fn claim_wait(&self, worker: &str, max_jobs: i64, timeout: Duration) -> Result<Vec<Job>> {
        wait_for(&*self.engine, Kind::Queue, &self.name, timeout, || {
            self.claim(worker, max_jobs)
        })
    }

    /// Acks a job this worker holds; true if it did.
    pub fn ack(&self, job_id: i64, worker: &str) -> Result<bool> {
        call::ack(job_id, worker)?.run_on(&*self.engine)
    }

    /// Acks with a result, kept with the completed job while the queue
    /// retains completed jobs ([`QueueOpts::retain_completed`]); dropped
    /// when it does not.
    pub fn ack_with_result<T: Serialize + ?Sized>(
        &self,
        job_id: i64,
        worker: &str,
        result: &T,
    ) -> Result<bool> {
        call::ack_with_result(job_id, worker, result)?.run_on(&*self.engine)
    }

    /// Acks many; returns how many.
    pub fn ack_batch(&self, job_ids: &[i64], worker: &str) -> Result<i64> {
        call::ack_batch(job_ids, worker)?.run_on(&*self.engine)
    }

    /// Gives a job back after an error: pending after `delay` (`None`: the
    /// stamped backoff), or dead when its attempts are used up.
    pub fn retry(
        &self,
        job_id: i64,
        worker: &str,
        error: &str,
        delay: Option<Duration>,
    ) -> Result<Retried> {
        call::retry(job_id, worker, error, delay)?.run_on(&*self.engine)
    }

    /// Dead-letters a job this worker holds.
    pub fn fail(&self, job_id: i64, worker: &str, error: &str) -> Result<bool> {
        call::fail(job_id, worker, error)?.run_on(&*self.engine)
    }

    /// Extends a claim (`None`: by the stamped visibility timeout).
    pub fn heartbeat(&self, job_id: i64, worker: &str, extend: Option<Duration>) -> Result<bool> {
        call::heartbeat(job_id, worker, extend)?.run_on(&*self.engine)
    }

    /// Gives a job back without spending an attempt (`alk_release`,
    /// contract v1.3 §Q): pending again after `delay` (`None`: at once),
    /// its attempts as before the claim, no error recorded. True if this
    /// worker held an unexpired claim on it.
    pub fn release(&self, job_id: i64, worker: &str, delay: Option<Duration>) -> Result<bool> {
        call::release(job_id, worker, delay)?.run_on(&*self.engine)
    }

    /// Gives many jobs back as [`Queue::release`] does; returns how many
    /// this worker held.
    pub fn release_batch(
        &self,
        job_ids: &[i64],
        worker: &str,
        delay: Option<Duration>,
    ) -> Result<i64> {
        call::release_batch(job_ids, worker, delay)?.run_on(&*self.engine)
    }

    /// Removes a pending or running job.
    pub fn cancel(&self, job_id: i64) -> Result<bool> {
        call::cancel(job_id).run_on(&*self.engine)
    }

    /// A job's document.
    pub fn get_job(&self, job_id: i64) -> Result<Option<Value>> {
        call::get_job(job_id).run_on(&*self.engine)
    }

    /// Deletes a dead or completed job (`alk_delete_job`); false for a
    /// pending or running one ([`Queue::cancel`] removes those). Admin role
    /// on PostgreSQL.
    pub fn delete_job(&self, job_id: i64) -> Result<bool> {
        call::delete_job(job_id).run_on(&*self.engine)
    }

    /// Puts a dead job back to pending.
    pub fn requeue_dead(&self, job_id: i64) -> Result<bool> {
        call::requeue_dead(job_id).run_on(&*self.engine)
    }

    /// Counts per state.
    pub fn stats(&self) -> Result<Value> {
        call::queue_stats(&self.name)?.run_on(&*self.engine)
    }

    /// Merges options over the queue's; returns the result.
    pub fn configure(&self, opts: &QueueOpts) -> Result<Value> {
        call::queue_configure(&self.name, opts)?.run_on(&*self.engine)
    }

    /// The queue's resolved options.
    pub fn opts(&self) -> Result<Value> {
        call::queue_opts(&self.name)?.run_on(&*self.engine)
    }

    /// Dead-letters expired jobs and timed-out final claims now.
    pub fn sweep(&self) -> Result<i64> {
        call::sweep(Some(&self.name))?.run_on(&*self.engine)
    }

    /// Pauses the queue: claims return nothing until [`resume`](Self::resume);
    /// everything else keeps working (jobs already claimed, a worker's
    /// prefetched ones included, still run). True if it was running.
    pub fn pause(&self) -> Result<bool> {
        call::queue_pause(&self.name)?.run_on(&*self.engine)
    }

    /// Resumes a paused queue; true if it was paused.
    pub fn resume(&self) -> Result<bool> {
        call::queue_resume(&self.name)?.run_on(&*self.engine)
    }

    /// Job documents (as [`get_job`](Self::get_job)) in ascending id after
    /// `after_id`: every state (`None`) or one of `pending`, `running`,
    /// `dead`, `completed`. Admin role on PostgreSQL.
    pub fn list_jobs(&self, state: Option<&str>, after_id: i64, max: i64) -> Result<Vec<Value>> {
        call::list_jobs(&self.name, state, after_id, max)?.run_on(&*self.engine)
    }

    /// Puts every dead job back to pending; returns how many. Admin role on PostgreSQL.
    pub fn requeue_dead_all(&self) -> Result<i64> {
        call::requeue_dead_all(&self.name)?.run_on(&*self.engine)
    }

    /// Deletes every job in `state` (`pending`, `dead` or `completed`);
    /// returns how many. Admin role on PostgreSQL.
    pub fn purge(&self, state: &str) -> Result<i64> {
        call::purge(&self.name, state)?.run_on(&*self.engine)
    }
}

/// The claimed jobs; one whose payload this crate cannot read (see
/// [`crate::sql::UNREADABLE`]) is failed — dead-lettered with the reason —
/// instead of being handed out or ending the worker.
pub(crate) fn jobs(queue: &Queue, worker: &str, mut claimed: call::Claimed) -> Result<Vec<Job>> {
    for fail in claimed.fail_unreadable(worker)? {
        fail.run_on(&*queue.engine)?;
    }
    Ok(claimed.jobs)
}
