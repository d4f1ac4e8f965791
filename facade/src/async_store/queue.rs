//! Async queue and outbox handles: enqueue, claim (now or by waiting for a
//! wake-up), ack, retry, fail, heartbeat.

use super::wakeups::Watched;
use super::{AsyncEngine, AsyncStore, Autocommit, DefaultEngine, FALLBACK_POLL};
use crate::async_tx::{claim_with, AsyncTxHandle, ClaimFrom};
use crate::call;
use crate::error::Result;
use crate::opts::EnqueueOpts;
use crate::types::{Job, Retried};
use alkstore_core::{names, NameKind};
use serde::Serialize;
use std::time::{Duration, Instant};

/// A queue on an [`AsyncStore`]. Each call runs in its own transaction; to
/// write with your own rows use [`AsyncTxHandle`] on a transaction.
pub struct AsyncQueue<DB: AsyncEngine = DefaultEngine> {
    store: AsyncStore<DB>,
    name: String,
    /// How claims reach it: `alk_claim` with the queue's name, or
    /// `alk_outbox_claim` with the outbox's.
    claim_from: ClaimFrom,
    claim_name: String,
    watched: Watched,
}

impl<DB: AsyncEngine> Clone for AsyncQueue<DB> {
    fn clone(&self) -> Self {
        AsyncQueue {
            store: self.store.clone(),
            name: self.name.clone(),
            claim_from: self.claim_from,
            claim_name: self.claim_name.clone(),
            watched: self.watched.clone(),
        }
    }
}

impl<DB: AsyncEngine> AsyncQueue<DB> {
    pub(crate) fn new(store: AsyncStore<DB>, name: &str) -> Result<AsyncQueue<DB>> {
        names::validate(NameKind::Queue, name)?;
        Ok(AsyncQueue {
            store,
            name: name.into(),
            claim_from: ClaimFrom::Queue,
            claim_name: name.into(),
            watched: Watched::queue(name),
        })
    }

    /// The queue's name (an outbox's: its backing queue).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store it belongs to.
    pub fn store(&self) -> &AsyncStore<DB> {
        &self.store
    }

    /// Enqueues a job in its own transaction.
    pub async fn enqueue<T: Serialize + Sync + ?Sized>(
        &self,
        opts: &EnqueueOpts,
        job: &T,
    ) -> Result<i64> {
        Autocommit(&self.store)
            .enqueue_tx(&self.name, opts, job)
            .await
    }

    /// Claims up to `max_jobs` jobs now (possibly none).
    pub async fn claim(&self, worker: &str, max_jobs: i64) -> Result<Vec<Job>> {
        claim_with(
            &mut Autocommit(&self.store),
            self.claim_from,
            &self.claim_name,
            worker,
            max_jobs,
        )
        .await
    }

    /// Claims, waiting up to `timeout` for a job: woken by the enqueue's
    /// commit, with a poll every second for jobs that announce nothing
    /// (a `run_at` arriving, an expired claim). Dropping the future while it
    /// waits loses nothing; while it claims, a claim may be left to expire.
    pub async fn claim_wait(
        &self,
        worker: &str,
        max_jobs: i64,
        timeout: Duration,
    ) -> Result<Vec<Job>> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut woken = self.store.wakeups().watch(&self.watched).await?;
            let jobs = self.claim(worker, max_jobs).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !jobs.is_empty() || left.is_zero() {
                return Ok(jobs);
            }
            let _ = tokio::time::timeout(left.min(FALLBACK_POLL), woken.changed()).await;
        }
    }

    /// Its wake-ups from now on (registering the store's listener for them).
    pub(crate) async fn watch(&self) -> Result<tokio::sync::watch::Receiver<u64>> {
        self.store.wakeups().watch(&self.watched).await
    }

    /// Acks a job this worker holds; true if it did.
    pub async fn ack(&self, job_id: i64, worker: &str) -> Result<bool> {
        Autocommit(&self.store).ack_tx(job_id, worker).await
    }

    /// Acks with a result, kept with the completed job while the queue
    /// retains completed jobs.
    pub async fn ack_with_result<T: Serialize + Sync + ?Sized>(
        &self,
        job_id: i64,
        worker: &str,
        result: &T,
    ) -> Result<bool> {
        self.store
            .run(call::ack_with_result(job_id, worker, result)?)
            .await
    }

    /// Gives a job back after an error: pending after `delay` (`None`: the
    /// stamped backoff), or dead when its attempts are used up.
    pub async fn retry(
        &self,
        job_id: i64,
        worker: &str,
        error: &str,
        delay: Option<Duration>,
    ) -> Result<Retried> {
        Autocommit(&self.store)
            .retry_tx(job_id, worker, error, delay)
            .await
    }

    /// Dead-letters a job this worker holds.
    pub async fn fail(&self, job_id: i64, worker: &str, error: &str) -> Result<bool> {
        Autocommit(&self.store).fail_tx(job_id, worker, error).await
    }

    /// Gives a job back without spending an attempt (`alk_release`,
    /// contract v1.3 §Q): pending again after `delay` (`None`: at once),
    /// its attempts as before the claim, no error recorded. True if this
    /// worker held an unexpired claim on it.
    pub async fn release(
        &self,
        job_id: i64,
        worker: &str,
        delay: Option<Duration>,
    ) -> Result<bool> {
        self.store.run(call::release(job_id, worker, delay)?).await
    }

    /// Gives many jobs back as [`AsyncQueue::release`] does; returns how
    /// many this worker held.
    pub async fn release_batch(
        &self,
        job_ids: &[i64],
        worker: &str,
        delay: Option<Duration>,
    ) -> Result<i64> {
        self.store
            .run(call::release_batch(job_ids, worker, delay)?)
            .await
    }

    /// Extends the claim by `extend` (`None`: the stamped visibility
    /// timeout); true if this worker held it.
    pub async fn heartbeat(
        &self,
        job_id: i64,
        worker: &str,
        extend: Option<Duration>,
    ) -> Result<bool> {
        self.store
            .run(call::heartbeat(job_id, worker, extend)?)
            .await
    }
}

/// An outbox on an [`AsyncStore`] (ADR-014: enqueued by its name; claimed
/// from its reserved backing queue).
pub struct AsyncOutbox<DB: AsyncEngine = DefaultEngine> {
    jobs: AsyncQueue<DB>,
    name: String,
}

impl<DB: AsyncEngine> Clone for AsyncOutbox<DB> {
    fn clone(&self) -> Self {
        AsyncOutbox {
            jobs: self.jobs.clone(),
            name: self.name.clone(),
        }
    }
}

impl<DB: AsyncEngine> AsyncOutbox<DB> {
    pub(crate) fn new(store: AsyncStore<DB>, name: &str) -> Result<AsyncOutbox<DB>> {
        names::validate(NameKind::Outbox, name)?;
        Ok(AsyncOutbox {
            jobs: AsyncQueue {
                store,
                name: names::outbox_queue(name),
                claim_from: ClaimFrom::Outbox,
                claim_name: name.into(),
                watched: Watched::outbox(name),
            },
            name: name.into(),
        })
    }

    /// The outbox's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its backing queue, for acks, retries and heartbeats of its messages.
    pub fn jobs(&self) -> &AsyncQueue<DB> {
        &self.jobs
    }

    /// Enqueues a message in its own transaction (use
    /// [`AsyncTxHandle::outbox_enqueue_tx`] to send it with your own rows).
    pub async fn enqueue<T: Serialize + Sync + ?Sized>(
        &self,
        opts: &EnqueueOpts,
        message: &T,
    ) -> Result<i64> {
        Autocommit(&self.jobs.store)
            .outbox_enqueue_tx(&self.name, opts, message)
            .await
    }

    /// Claims up to `max_jobs` messages now.
    pub async fn claim(&self, worker: &str, max_jobs: i64) -> Result<Vec<Job>> {
        self.jobs.claim(worker, max_jobs).await
    }

    /// Claims, waiting up to `timeout` for a message.
    pub async fn claim_wait(
        &self,
        worker: &str,
        max_jobs: i64,
        timeout: Duration,
    ) -> Result<Vec<Job>> {
        self.jobs.claim_wait(worker, max_jobs, timeout).await
    }
}
