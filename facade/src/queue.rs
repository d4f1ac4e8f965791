//! A queue handle: enqueue, claim, ack, retry, fail and the admin calls (contract §5).

use crate::engine::{Engine, Kind};
use crate::error::Result;
use crate::opts::{EnqueueOpts, QueueOpts};
use crate::sql::{boolean, int, payload, Arg};
use crate::store::{opt_json, wait_for};
use crate::types::{Job, Retried};
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

    pub(crate) fn call(&self, f: &str, args: &[Arg]) -> Result<Value> {
        self.engine.call(f, args)
    }

    /// Enqueues one job in its own transaction (use [`TxHandle::enqueue_tx`](crate::TxHandle::enqueue_tx)
    /// to enqueue with your own rows).
    pub fn enqueue<T: Serialize + ?Sized>(&self, opts: &EnqueueOpts, job: &T) -> Result<i64> {
        int(self.call(
            "alk_enqueue",
            &[
                self.name.as_str().into(),
                Arg::json(&opts.to_json()),
                payload(job)?,
            ],
        )?)
    }

    /// Enqueues many jobs with the same options; ids in order.
    pub fn enqueue_batch<T: Serialize>(&self, opts: &EnqueueOpts, jobs: &[T]) -> Result<Vec<i64>> {
        let v = self.call(
            "alk_enqueue_batch",
            &[
                self.name.as_str().into(),
                Arg::json(&opts.to_json()),
                payload(jobs)?,
            ],
        )?;
        serde_json::from_value(v).map_err(crate::Error::decode)
    }

    /// Claims up to `max_jobs` jobs now, in claim order.
    pub fn claim(&self, worker: &str, max_jobs: i64) -> Result<Vec<Job>> {
        let claimed = self.call(
            "alk_claim",
            &[self.name.as_str().into(), worker.into(), max_jobs.into()],
        )?;
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
        boolean(self.call("alk_ack", &[job_id.into(), worker.into()])?)
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
        boolean(self.call("alk_ack", &[job_id.into(), worker.into(), payload(result)?])?)
    }

    /// Acks many; returns how many.
    pub fn ack_batch(&self, job_ids: &[i64], worker: &str) -> Result<i64> {
        int(self.call(
            "alk_ack_batch",
            &[Arg::Ids(job_ids.to_vec()), worker.into()],
        )?)
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
        let v = self.call(
            "alk_retry",
            &[
                job_id.into(),
                worker.into(),
                Arg::error_text(error),
                Arg::opt_secs(delay),
            ],
        )?;
        Ok(Retried::from_state(&v))
    }

    /// Dead-letters a job this worker holds.
    pub fn fail(&self, job_id: i64, worker: &str, error: &str) -> Result<bool> {
        boolean(self.call(
            "alk_fail",
            &[job_id.into(), worker.into(), Arg::error_text(error)],
        )?)
    }

    /// Extends a claim (`None`: by the stamped visibility timeout).
    pub fn heartbeat(&self, job_id: i64, worker: &str, extend: Option<Duration>) -> Result<bool> {
        boolean(self.call(
            "alk_heartbeat",
            &[job_id.into(), worker.into(), Arg::opt_secs(extend)],
        )?)
    }

    /// Removes a pending or running job.
    pub fn cancel(&self, job_id: i64) -> Result<bool> {
        boolean(self.call("alk_cancel", &[job_id.into()])?)
    }

    /// A job's document.
    pub fn get_job(&self, job_id: i64) -> Result<Option<Value>> {
        Ok(opt_json(self.call("alk_get_job", &[job_id.into()])?))
    }

    /// Puts a dead job back to pending.
    pub fn requeue_dead(&self, job_id: i64) -> Result<bool> {
        boolean(self.call("alk_requeue_dead", &[job_id.into()])?)
    }

    /// Counts per state.
    pub fn stats(&self) -> Result<Value> {
        self.call("alk_queue_stats", &[self.name.as_str().into()])
    }

    /// Merges options over the queue's; returns the result.
    pub fn configure(&self, opts: &QueueOpts) -> Result<Value> {
        self.call(
            "alk_queue_configure",
            &[self.name.as_str().into(), Arg::json(&opts.to_json())],
        )
    }

    /// The queue's resolved options.
    pub fn opts(&self) -> Result<Value> {
        self.call("alk_queue_opts", &[self.name.as_str().into()])
    }

    /// Dead-letters expired jobs and timed-out final claims now.
    pub fn sweep(&self) -> Result<i64> {
        int(self.call("alk_sweep", &[self.name.as_str().into()])?)
    }

    /// Pauses the queue: claims return nothing until [`resume`](Self::resume);
    /// everything else keeps working. True if it was running.
    pub fn pause(&self) -> Result<bool> {
        boolean(self.call("alk_queue_pause", &[self.name.as_str().into()])?)
    }

    /// Resumes a paused queue; true if it was paused.
    pub fn resume(&self) -> Result<bool> {
        boolean(self.call("alk_queue_resume", &[self.name.as_str().into()])?)
    }

    /// Job documents (as [`get_job`](Self::get_job)) in ascending id after
    /// `after_id`: every state (`None`) or one of `pending`, `running`,
    /// `dead`, `completed`. Admin role on PostgreSQL.
    pub fn list_jobs(&self, state: Option<&str>, after_id: i64, max: i64) -> Result<Vec<Value>> {
        let v = self.call(
            "alk_list_jobs",
            &[
                self.name.as_str().into(),
                Arg::opt_text(state),
                after_id.into(),
                max.into(),
            ],
        )?;
        Ok(v.as_array().cloned().unwrap_or_default())
    }

    /// Puts every dead job back to pending; returns how many. Admin role on PostgreSQL.
    pub fn requeue_dead_all(&self) -> Result<i64> {
        int(self.call("alk_requeue_dead_all", &[self.name.as_str().into()])?)
    }

    /// Deletes every job in `state` (`pending`, `dead` or `completed`);
    /// returns how many. Admin role on PostgreSQL.
    pub fn purge(&self, state: &str) -> Result<i64> {
        int(self.call("alk_purge", &[self.name.as_str().into(), state.into()])?)
    }
}

/// The claimed jobs; one whose payload this crate cannot read (see
/// [`crate::sql::UNREADABLE`]) is failed — dead-lettered with the reason —
/// instead of being handed out or ending the worker.
pub(crate) fn jobs(queue: &Queue, worker: &str, v: Value) -> Result<Vec<Job>> {
    let (jobs, unreadable) = Job::from_claim(&v)?;
    for (id, error) in unreadable {
        queue.call(
            "alk_fail",
            &[id.into(), worker.into(), Arg::error_text(&error)],
        )?;
    }
    Ok(jobs)
}
