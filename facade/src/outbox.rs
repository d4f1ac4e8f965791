//! An outbox handle (contract §6, ADR-014): enqueue by outbox name, deliver.

use crate::call;
use crate::engine::{Engine, Kind};
use crate::error::Result;
use crate::opts::EnqueueOpts;
use crate::queue::{jobs, Queue};
use crate::types::Job;
use crate::waiting::wait_for;
use alkstore_core::{names, NameKind};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// An outbox (contract §6, ADR-014).
#[derive(Clone)]
pub struct Outbox {
    queue: Queue,
    name: String,
}

impl Outbox {
    pub(crate) fn new(engine: Arc<dyn Engine>, name: &str) -> Result<Outbox> {
        names::validate(NameKind::Outbox, name)?;
        // The backing queue is reserved: reached here only through the outbox functions.
        let queue = Queue {
            engine,
            name: names::outbox_queue(name),
        };
        Ok(Outbox {
            queue,
            name: name.to_string(),
        })
    }

    /// Enqueues a message in its own transaction (use
    /// [`TxHandle::outbox_enqueue_tx`](crate::TxHandle::outbox_enqueue_tx) to send it with your own rows).
    pub fn enqueue<T: Serialize + ?Sized>(&self, opts: &EnqueueOpts, message: &T) -> Result<i64> {
        call::outbox_enqueue(&self.name, opts, message)?.run_on(&*self.queue.engine)
    }

    /// Claims up to `max_jobs` messages now.
    pub fn claim(&self, worker: &str, max_jobs: i64) -> Result<Vec<Job>> {
        let claimed =
            call::outbox_claim(&self.name, worker, max_jobs)?.run_on(&*self.queue.engine)?;
        jobs(&self.queue, worker, claimed)
    }

    /// Claims, waiting up to `timeout` for a message.
    pub fn claim_wait(&self, worker: &str, max_jobs: i64, timeout: Duration) -> Result<Vec<Job>> {
        let q = &self.queue;
        wait_for(&*q.engine, Kind::Queue, &q.name, timeout, || {
            self.claim(worker, max_jobs)
        })
    }

    /// Claims like [`claim`](Self::claim), each message with its payload's
    /// JSON text as the database wrote it: on SQLite the text as enqueued,
    /// on PostgreSQL jsonb's rendering (contract v1.3 §N2, the relay's
    /// body). A payload this crate's JSON cannot hold (`1e400`) is not
    /// failed here: its [`Job::payload`] is null and its text is whole.
    pub fn claim_verbatim(&self, worker: &str, max_jobs: i64) -> Result<Vec<(Job, String)>> {
        let text =
            call::outbox_claim(&self.name, worker, max_jobs)?.run_text_on(&*self.queue.engine)?;
        crate::types::verbatim(text.as_deref(), Job::from_json)
    }

    /// [`claim_verbatim`](Self::claim_verbatim), waiting up to `timeout`
    /// for a message.
    pub fn claim_verbatim_wait(
        &self,
        worker: &str,
        max_jobs: i64,
        timeout: Duration,
    ) -> Result<Vec<(Job, String)>> {
        let q = &self.queue;
        wait_for(&*q.engine, Kind::Queue, &q.name, timeout, || {
            self.claim_verbatim(worker, max_jobs)
        })
    }

    /// Delivers one message if there is one: claims it, calls `deliver`,
    /// acks on `Ok`, retries with the stamped backoff on `Err` (dead after
    /// the last attempt). Returns whether a message was processed.
    pub fn run_once(
        &self,
        worker: &str,
        deliver: &mut dyn FnMut(&Job) -> std::result::Result<(), String>,
    ) -> Result<bool> {
        let Some(job) = self.claim(worker, 1)?.into_iter().next() else {
            return Ok(false);
        };
        self.finish(worker, &job, deliver)?;
        Ok(true)
    }

    fn finish(
        &self,
        worker: &str,
        job: &Job,
        deliver: &mut dyn FnMut(&Job) -> std::result::Result<(), String>,
    ) -> Result<()> {
        match crate::claimant::guarded(|| deliver(job)) {
            Ok(()) => self.queue.ack(job.id, worker).map(|_| ()),
            Err(e) => self.queue.retry(job.id, worker, &e, None).map(|_| ()),
        }
    }

    /// Pauses delivery: claims return nothing until [`resume`](Self::resume)
    /// (messages a worker already claimed, prefetched ones included, are
    /// still delivered). True if it was running.
    pub fn pause(&self) -> Result<bool> {
        call::outbox_pause(&self.name)?.run_on(&*self.queue.engine)
    }

    /// Resumes delivery; true if it was paused.
    pub fn resume(&self) -> Result<bool> {
        call::outbox_resume(&self.name)?.run_on(&*self.queue.engine)
    }

    /// Counts per state of the backing queue.
    pub fn stats(&self) -> Result<Value> {
        call::outbox_stats(&self.name)?.run_on(&*self.queue.engine)
    }

    /// The job functions (ack, retry, fail, get_job…) of the backing queue.
    pub fn jobs(&self) -> &Queue {
        &self.queue
    }
}
