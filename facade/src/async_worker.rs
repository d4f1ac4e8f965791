//! [`AsyncWorker`]: queue and outbox workers on tokio — bounded concurrency,
//! heartbeats as a task while a handler runs, retry on `Err` or panic,
//! waiting by wake-ups, and a graceful shutdown with a deadline. A handler
//! may also take a transaction whose writes commit together with the ack.

use crate::async_heartbeat::AsyncHeartbeat;
use crate::async_store::{
    AsyncConn, AsyncEngine, AsyncOutbox, AsyncQueue, AsyncTransactionEnd, DefaultEngine,
};
use crate::async_tx::AsyncTxHandle;
use crate::claimant::{host_now_ms, panic_message, process_tag, Skew};
use crate::completer::{Completer, FlushWindow};
use crate::error::{Error, Result};
use crate::prefetch::{LocalQueue, Prefetch, Sizer};
use crate::types::Job;
use crate::worker_core::{
    lost_acks, Chore, Chores, FlushStep, FlushTries, Handled, Outage, Pacing, Settlement,
    KEEP_EVERY, MAX_CLAIM, MAX_PREFETCH, PRUNE_BATCH,
};
use serde_json::Value;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tracing::Instrument;

/// A transaction on the store's pool, handed to a transactional handler:
/// `sqlx::Transaction<'static, _>` on sqlx's drivers, [`PgClientTx`](crate::PgClientTx)
/// on tokio-postgres.
pub type AsyncTransaction<DB = DefaultEngine> = <DB as AsyncEngine>::Transaction;

/// A PostgreSQL transaction handed to a transactional handler.
#[cfg(feature = "sqlx-postgres")]
pub type PgTransaction = AsyncTransaction<sqlx::Postgres>;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a handler's future gives: `Err` is the retry's error text.
type Running<T> = BoxFuture<std::result::Result<T, String>>;

/// A handler as the worker runs it.
enum Handler<DB: AsyncEngine> {
    /// `Ok` says how to settle the job: ack (with a result), or release.
    Plain(Arc<dyn Fn(Job) -> Running<Settlement> + Send + Sync>),
    /// Gets a transaction and gives it back to be acked in and committed.
    InTx(Arc<TxHandler<DB>>),
}

/// A transactional handler: gets the job and a transaction, gives it back.
type TxHandler<DB> =
    dyn Fn(Job, AsyncTransaction<DB>) -> Running<AsyncTransaction<DB>> + Send + Sync;

/// A pool of async handlers for one queue or outbox.
///
/// ```no_run
/// # async fn demo() -> alkstore::Result<()> {
/// use alkstore::{AsyncStore, AsyncWorker};
/// let store = AsyncStore::connect("postgres://app@localhost/app").await?;
/// let handled = AsyncWorker::new(store.queue("emails")?, "mailer")
///     .concurrency(8)
///     .run(async { tokio::signal::ctrl_c().await.ok(); }, |job| async move {
///         println!("sending {}", job.payload);
///         Ok::<(), String>(())
///     })
///     .await?;
/// # Ok(()) }
/// ```
pub struct AsyncWorker<DB: AsyncEngine = DefaultEngine> {
    queue: AsyncQueue<DB>,
    name: String,
    concurrency: usize,
    prune_every: Option<Duration>,
    tick_every: Option<Duration>,
    sweep_every: Option<Duration>,
    shutdown_timeout: Duration,
    poll_every: Duration,
    prefetch: Prefetch,
    prefetch_ttl: Option<Duration>,
    flush_window: FlushWindow,
}

/// How long handlers may run on after shutdown was asked for, unless told
/// otherwise.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

impl<DB: AsyncEngine> AsyncWorker<DB> {
    /// A worker named `name` (claims as `name-<host>-<pid>-<random>`,
    /// unique per process, like the blocking [`Worker`](crate::Worker)).
    pub fn new(queue: AsyncQueue<DB>, name: &str) -> AsyncWorker<DB> {
        AsyncWorker {
            queue,
            name: format!("{name}-{}", process_tag()),
            concurrency: 1,
            prune_every: Some(Duration::from_secs(60)),
            tick_every: Some(Duration::from_secs(5)),
            sweep_every: Some(crate::DEFAULT_SWEEP_EVERY),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            poll_every: crate::async_store::FALLBACK_POLL,
            prefetch: Prefetch::Concurrency,
            prefetch_ttl: None,
            flush_window: FlushWindow::DEFAULT,
        }
    }

    /// A worker that delivers an outbox's messages.
    pub fn outbox(outbox: AsyncOutbox<DB>, name: &str) -> AsyncWorker<DB> {
        AsyncWorker::new(outbox.jobs().clone(), name)
    }

    /// The prefix of this worker's claim names.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many jobs run at once (default 1). A transactional handler holds
    /// two pool connections while it runs (its transaction and the
    /// heartbeats): size the pool for it.
    pub fn concurrency(mut self, n: usize) -> AsyncWorker<DB> {
        self.concurrency = n.max(1);
        self
    }

    /// How many jobs the worker claims ahead of its free handlers, into a
    /// local queue (contract v1.3 §P), as the blocking
    /// [`Worker::prefetch`](crate::Worker::prefetch): by default the
    /// concurrency; 0: claim only for free handlers; at most
    /// [`MAX_PREFETCH`](crate::MAX_PREFETCH); or by the handlers' pace
    /// ([`prefetch_by_pace`](Self::prefetch_by_pace)). Prefetched jobs are
    /// claimed, kept claimed by heartbeats while they wait, and given back
    /// at once (`alk_release_batch`) when the worker stops, or when the
    /// run's future is dropped (by a task of the runtime, while it runs).
    pub fn prefetch(mut self, n: usize) -> AsyncWorker<DB> {
        self.prefetch = Prefetch::Fixed(n.min(MAX_PREFETCH));
        self
    }

    /// As [`Worker::prefetch_by_pace`](crate::Worker::prefetch_by_pace): sizes the local queue by the handlers' pace instead: what they
    /// finish in about 100 ms, measured as they run — hundreds of fast
    /// jobs, no more than the concurrency of slow ones — at least the
    /// concurrency and at most [`MAX_PREFETCH`](crate::MAX_PREFETCH). For
    /// many short jobs it claims far fewer times than the default (the
    /// figures of `scripts/bench-workers.sh` are taken with it); the claims
    /// it holds count as running under the queue's limits.
    pub fn prefetch_by_pace(mut self) -> AsyncWorker<DB> {
        self.prefetch = Prefetch::Pace;
        self
    }

    /// How long a prefetched job may wait for a handler before it is given
    /// back (default: half its claim's time), as
    /// [`Worker::prefetch_ttl`](crate::Worker::prefetch_ttl).
    pub fn prefetch_ttl(mut self, ttl: Duration) -> AsyncWorker<DB> {
        self.prefetch_ttl = Some(ttl);
        self
    }

    /// How long and how many acks of jobs that succeeded wait to be sent
    /// together (`alk_ack_batch`), as
    /// [`Worker::flush_window`](crate::Worker::flush_window): default 10 ms
    /// or 100 jobs; a zero wait acks each job as its handler returns. A
    /// transactional handler's job is always acked in its transaction.
    pub fn flush_window(mut self, window: FlushWindow) -> AsyncWorker<DB> {
        self.flush_window = window;
        self
    }

    /// How often the worker prunes (`alk_prune`, batches of 1000); `None`:
    /// never. Default every minute, the first time at start.
    /// At least [`MIN_CHORE_EVERY`](crate::MIN_CHORE_EVERY): a shorter
    /// interval, zero included, is that.
    pub fn prune_every(mut self, every: Option<Duration>) -> AsyncWorker<DB> {
        self.prune_every = every;
        self
    }

    /// How often the worker ticks schedules; `None`: never. Default 5 s.
    /// At least [`MIN_CHORE_EVERY`](crate::MIN_CHORE_EVERY): a shorter
    /// interval, zero included, is that.
    pub fn tick_every(mut self, every: Option<Duration>) -> AsyncWorker<DB> {
        self.tick_every = every;
        self
    }

    /// How often the worker sweeps its queue (`alk_sweep`: expired jobs
    /// dead-lettered, jobs scheduled ahead that came due made pending);
    /// `None`: never. Default 1 s, as the blocking
    /// [`Worker::sweep_every`](crate::Worker::sweep_every).
    /// At least [`MIN_CHORE_EVERY`](crate::MIN_CHORE_EVERY): a shorter
    /// interval, zero included, is that.
    pub fn sweep_every(mut self, every: Option<Duration>) -> AsyncWorker<DB> {
        self.sweep_every = every;
        self
    }

    /// How long handlers in flight may run on once shutdown is asked for
    /// (default [`DEFAULT_SHUTDOWN_TIMEOUT`]). A handler still running then is
    /// cancelled (dropped at its next `.await`; a transactional handler's
    /// transaction rolls back) and its job is given back at once
    /// (`alk_release`), claimable again without waiting for its claim to
    /// expire and without spending an attempt: it did not finish.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> AsyncWorker<DB> {
        self.shutdown_timeout = timeout;
        self
    }

    /// How long an idle handler waits at most without a wake-up before it
    /// looks again (default 1 s): jobs whose `run_at` arrives or whose
    /// claim expires announce nothing.
    pub fn poll_every(mut self, every: Duration) -> AsyncWorker<DB> {
        self.poll_every = every.max(Duration::from_millis(10));
        self
    }

    /// Runs handlers until `shutdown` completes (e.g.
    /// `token.cancelled_owned()` of a `tokio_util` `CancellationToken`, or
    /// `tokio::signal::ctrl_c()`), then lets the jobs in hand finish within
    /// the [shutdown timeout](Self::shutdown_timeout). `Ok` acks the job;
    /// `Err` or a panic retries it with the stamped backoff, dead after its
    /// last attempt. Returns the number of jobs handled.
    ///
    /// Dropping the future instead (a `select!` branch that lost) cancels
    /// the handlers at once: the jobs they had started keep their claims
    /// and run again when those expire (an attempt spent, as after a
    /// crash); the prefetched ones go back at once and the acks waiting
    /// for a flush go out, by tasks of the runtime — if it keeps running
    /// (a runtime shut down at once gives nothing back), and but for the
    /// jobs of a claim in flight at that moment, which wait for their
    /// claims to expire too.
    pub async fn run<F, Fut, E>(&self, shutdown: impl Future + Send, handler: F) -> Result<u64>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Display + 'static,
    {
        self.run_handled(shutdown, move |job| {
            let fut = handler(job);
            async move { fut.await.map(|()| Handled::Ack) }
        })
        .await
    }

    /// As [`run`](Self::run), but `Ok(result)` acks the job with `result`.
    pub async fn run_with_result<F, Fut, E>(
        &self,
        shutdown: impl Future + Send,
        handler: F,
    ) -> Result<u64>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Value, E>> + Send + 'static,
        E: Display + 'static,
    {
        self.run_handled(shutdown, move |job| {
            let fut = handler(job);
            async move { fut.await.map(Handled::AckWith) }
        })
        .await
    }

    /// As [`run`](Self::run), but `Ok` says what to do with the job:
    /// [`Handled::Ack`], [`Handled::AckWith`] a result, or
    /// [`Handled::Snooze`] — give it back to run again later without
    /// spending an attempt (`alk_release`, contract v1.3 §Q).
    pub async fn run_handled<F, Fut, E>(
        &self,
        shutdown: impl Future + Send,
        handler: F,
    ) -> Result<u64>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<Handled, E>> + Send + 'static,
        E: Display + 'static,
    {
        let handler = Arc::new(handler);
        self.run_inner(
            shutdown,
            Handler::Plain(Arc::new(move |job| {
                let fut = handler(job);
                Box::pin(async move { fut.await.map(Settlement::from).map_err(|e| e.to_string()) })
            })),
        )
        .await
    }

    /// Transactional completion: each handler gets the job and a fresh
    /// transaction, writes its business rows in it and returns it; the
    /// worker acks the job in that transaction and commits — the writes and
    /// the ack commit together or not at all. If the job was no longer this
    /// worker's to ack (its claim expired and another took it, or it was
    /// cancelled), the transaction is rolled back. On `Err` or a panic the
    /// transaction rolls back and the job is retried.
    ///
    /// ```no_run
    /// # async fn demo(store: alkstore::AsyncStore) -> alkstore::Result<()> {
    /// use alkstore::AsyncWorker;
    /// AsyncWorker::new(store.queue("invoices")?, "biller")
    ///     .run_in_tx(std::future::pending::<()>(), |job, mut tx| async move {
    ///         sqlx::query("INSERT INTO invoices (order_id) VALUES ($1)")
    ///             .bind(job.payload["order"].as_i64())
    ///             .execute(&mut *tx)
    ///             .await?;
    ///         Ok::<_, sqlx::Error>(tx) // acked and committed with the invoice
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn run_in_tx<F, Fut, E>(
        &self,
        shutdown: impl Future + Send,
        handler: F,
    ) -> Result<u64>
    where
        F: Fn(Job, AsyncTransaction<DB>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<AsyncTransaction<DB>, E>> + Send + 'static,
        E: Display + 'static,
    {
        let handler = Arc::new(handler);
        self.run_inner(
            shutdown,
            Handler::InTx(Arc::new(move |job, tx| {
                let fut = handler(job, tx);
                Box::pin(async move { fut.await.map_err(|e| e.to_string()) })
            })),
        )
        .await
    }

    async fn run_inner(&self, shutdown: impl Future + Send, handler: Handler<DB>) -> Result<u64> {
        let (stop_tx, stop) = watch::channel(false);
        // Acks of plain handlers go out together; a transactional handler's
        // job is acked in its transaction.
        let completer = (matches!(handler, Handler::Plain(_)) && self.flush_window.batches())
            .then(|| Arc::new(Completer::default()));
        let ctx = Arc::new(Slots {
            queue: self.queue.clone(),
            handler,
            shutdown_timeout: self.shutdown_timeout,
            poll_every: self.poll_every,
            handled: AtomicU64::new(0),
            me: self.name.clone(),
            concurrency: self.concurrency,
            local: LocalQueue::default(),
            claiming: tokio::sync::Mutex::new((
                Sizer::new(self.prefetch, self.concurrency, MAX_PREFETCH),
                Skew::default(),
            )),
            fed: tokio::sync::Notify::new(),
            prefetch_ttl: self.prefetch_ttl,
            completer: completer.clone(),
        });
        let flusher = completer.map(|completer| {
            let (ctx, window, rt) = (
                ctx.clone(),
                self.flush_window,
                tokio::runtime::Handle::current(),
            );
            let thread = completer.clone();
            let task = tokio::task::spawn_blocking(move || {
                thread.run(window, |ids| rt.block_on(ctx.flush_acks(&ids)))
            });
            // Closed however the run ends, its future dropped too: the
            // completer's thread would otherwise keep the runtime from
            // shutting down.
            (CloseOnDrop(completer), task)
        });
        // Not aborted if the run's future is dropped (a `select!` branch
        // that lost): the stop sender goes with it, and the keeper gives
        // back what was prefetched, as at a shutdown (contract v1.3 §P).
        let mut keeper = tokio::spawn(ctx.clone().keep(stop.clone()));
        let mut slots = tokio::task::JoinSet::new();
        for n in 0..self.concurrency {
            // One handler per worker prunes and ticks.
            let chores = Chores::new(
                self.tick_every.filter(|_| n == 0),
                self.prune_every.filter(|_| n == 0),
                self.sweep_every
                    .filter(|_| n == 0)
                    .map(|every| (every, self.queue.name().to_string())),
            );
            slots.spawn(ctx.clone().slot(stop.clone(), chores));
        }
        let mut shutdown = std::pin::pin!(shutdown);
        let mut failed = None;
        loop {
            tokio::select! {
                _ = &mut shutdown, if !*stop.borrow() => {
                    let _ = stop_tx.send(true);
                }
                ended = slots.join_next() => match ended {
                    None => break,
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => {
                        failed.get_or_insert(e);
                        let _ = stop_tx.send(true);
                    }
                    Some(Err(e)) => {
                        failed.get_or_insert(Error::engine("worker", "", e.to_string()));
                        let _ = stop_tx.send(true);
                    }
                },
            }
        }
        // Every handler is done: what was prefetched goes back, the acks
        // still waiting go out.
        let _ = stop_tx.send(true);
        let _ = (&mut keeper).await;
        if let Some((completer, task)) = flusher {
            drop(completer);
            let _ = task.await;
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(ctx.handled.load(Ordering::Relaxed)),
        }
    }
}

/// Closes a completer when dropped: it flushes what waits and ends.
struct CloseOnDrop(Arc<Completer>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What every handler slot of one run shares.
struct Slots<DB: AsyncEngine> {
    queue: AsyncQueue<DB>,
    handler: Handler<DB>,
    shutdown_timeout: Duration,
    poll_every: Duration,
    handled: AtomicU64,
    /// The worker's claim name: every slot claims, acks and beats as it.
    me: String,
    concurrency: usize,
    /// Jobs claimed ahead of free handlers (contract v1.3 §P).
    local: LocalQueue,
    /// Held by the slot that claims for all of them, with the prefetch's
    /// size and the database's clock against the host's.
    claiming: tokio::sync::Mutex<(Sizer, Skew)>,
    /// Told when a claim filled the local queue, or it closed.
    fed: tokio::sync::Notify,
    prefetch_ttl: Option<Duration>,
    /// Where acks wait to be sent together, if they are.
    completer: Option<Arc<Completer>>,
}

/// How a handler's run ended.
enum Outcome<DB: AsyncEngine> {
    Done(Settlement),
    Committed(AsyncTransaction<DB>),
    Failed(String),
    /// Still running at the shutdown deadline: cancelled.
    Cancelled,
}

impl<DB: AsyncEngine> Slots<DB> {
    async fn slot(
        self: Arc<Self>,
        mut stop: watch::Receiver<bool>,
        mut chores: Chores,
    ) -> Result<()> {
        let me = self.me.clone();
        let mut outage = Outage::default();
        let mut pacing = Pacing::new(self.queue.name());
        let heartbeat = Arc::new(AsyncHeartbeat::default());
        let beats = {
            let (queue, me) = (self.queue.clone(), me.clone());
            tokio::spawn(heartbeat.clone().run(move |id| {
                let (queue, me) = (queue.clone(), me.clone());
                async move {
                    let _ = queue.heartbeat(id, &me, None).await;
                }
            }))
        };
        // Ends the heartbeat task however the slot ends.
        let _beats = AbortOnDrop(beats);
        while !*stop.borrow() {
            if let Err(e) = self.chores(&mut chores, &stop).await {
                wait_out(&mut outage, e, &mut stop).await?;
                continue;
            }
            let (job, every) = match self.next(&mut stop, &mut pacing).await {
                Ok(Some(next)) => next,
                Ok(None) => continue,
                Err(e) => {
                    wait_out(&mut outage, e, &mut stop).await?;
                    continue;
                }
            };
            outage.over();
            let id = job.id;
            let span = tracing::info_span!("alkstore.job", job.id = job.id, queue = %job.queue,
                                           attempt = job.attempts, worker = %me);
            // A job whose ack or retry is lost with the connection stays
            // claimed until its claim expires, then runs again: at least
            // once, never lost.
            let handled = self
                .handle(job, every, &stop, &heartbeat)
                .instrument(span)
                .await;
            self.local.done(id);
            self.handled.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = handled {
                wait_out(&mut outage, e, &mut stop).await?;
            }
        }
        Ok(())
    }

    /// The next job, with how often to extend its claim: from the local
    /// queue, else claimed by this slot for every free handler and the
    /// prefetch at once (one slot claims at a time; the others wait for
    /// its jobs). `None` after a wait: for a wake-up, the poll interval
    /// (on a queue whose limits hold claims back: its `next_slot_at`), jobs
    /// another slot claimed, or stop.
    async fn next(
        &self,
        stop: &mut watch::Receiver<bool>,
        pacing: &mut Pacing,
    ) -> Result<Option<(Job, Duration)>> {
        if let Some(next) = self.local.try_take() {
            return Ok(Some(next));
        }
        let fed = self.fed.notified();
        tokio::pin!(fed);
        fed.as_mut().enable();
        let Ok(mut claiming) = self.claiming.try_lock() else {
            tokio::select! {
                _ = fed => {}
                _ = tokio::time::sleep(self.poll_every) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            return Ok(None);
        };
        if let Some(next) = self.local.try_take() {
            return Ok(Some(next));
        }
        let mut woken = self.queue.watch().await?;
        let capacity = self
            .local
            .capacity(self.concurrency, claiming.0.prefetch(&self.local));
        let room = self
            .local
            .room(capacity, 1, Duration::ZERO)
            .clamp(1, MAX_CLAIM);
        // Before the claim, not between it and the push: the jobs it brings
        // are heartbeated only once pushed.
        let skew = &mut claiming.1;
        if skew.due() {
            let before = host_now_ms();
            let db = self.queue.store().clock_ms().await;
            if let Err(e) = &db {
                tracing::warn!(error = %e, "alkstore: the database's clock could not be read: claims' time left is read against the host's");
            }
            skew.record(before, db.ok(), host_now_ms());
        }
        // The claim itself is never cancelled: a claim dropped half-way
        // would leave jobs claimed by nobody until they expire.
        let jobs = self.queue.claim(&self.me, room as i64).await?;
        if jobs.is_empty() {
            let nap = self
                .nap(pacing, claiming.1.ms())
                .await?
                .unwrap_or(self.poll_every);
            drop(claiming);
            tokio::select! {
                _ = woken.changed() => {}
                _ = tokio::time::sleep(nap) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            return Ok(None);
        }
        // A claim in flight when the keeper closed the queue at stop: its
        // jobs go back at once.
        let refused = self.local.push(jobs, self.prefetch_ttl, claiming.1.ms());
        drop(claiming);
        self.give_back(&refused).await;
        self.fed.notify_waiters();
        Ok(self.local.try_take())
    }

    /// Until stop: gives back the prefetched jobs no handler took in time,
    /// and keeps claimed, by heartbeats, those allowed to wait longer; at
    /// stop, gives back every job still waiting, at once.
    async fn keep(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            let woken = tokio::select! {
                _ = tokio::time::sleep(KEEP_EVERY) => false,
                // Stopped, or the sender gone with the run: stop too.
                _ = stop.wait_for(|s| *s) => true,
            };
            if woken || *stop.borrow() {
                let left = self.local.close();
                self.fed.notify_waiters();
                self.give_back(&left).await;
                return;
            }
            self.give_back(&self.local.expired()).await;
            for id in self.local.due_beats() {
                // An error leaves it as it is: the next beat tries again.
                if let Ok(held) = self.queue.heartbeat(id, &self.me, None).await {
                    self.local.beat(id, held);
                }
            }
        }
    }

    /// Gives claims back without spending an attempt (`alk_release_batch`).
    /// If that fails their claims expire and they run again anyway.
    async fn give_back(&self, ids: &[i64]) {
        if ids.is_empty() {
            return;
        }
        if let Err(e) = self.queue.release_batch(ids, &self.me, None).await {
            tracing::warn!(error = %e, jobs = ids.len(),
                           "alkstore: could not give prefetched jobs back; they run again when their claims expire");
        }
    }

    /// Acks a batch of jobs that succeeded (`alk_ack_batch`), riding out an
    /// outage a few times, then one by one; an ack that is lost leaves its
    /// job to run again when its claim expires.
    async fn flush_acks(&self, ids: &[i64]) {
        let store = self.queue.store();
        let mut tries = FlushTries::default();
        loop {
            let acked = match crate::call::ack_batch(ids, &self.me) {
                Ok(call) => store.run(call).await,
                Err(e) => Err(e),
            };
            match acked {
                Ok(acked) => return FlushTries::acked(acked, ids.len()),
                // (Only a stopping worker's last flush waits on its way out:
                // bounded by the tries.)
                Err(e) => match tries.failed(e, false) {
                    FlushStep::Pause(pause) => tokio::time::sleep(pause).await,
                    FlushStep::Lost => return lost_acks(ids.len()),
                    FlushStep::OneByOne => break,
                },
            }
        }
        let mut lost = 0;
        for &id in ids {
            if self.queue.ack(id, &self.me).await.is_err() {
                lost += 1;
            }
        }
        lost_acks(lost);
    }

    /// How long until the queue's limits leave room, if they hold claims back.
    async fn nap(&self, pacing: &mut Pacing, skew_ms: i64) -> Result<Option<Duration>> {
        let store = self.queue.store();
        if let Some(call) = pacing.opts_call()? {
            pacing.saw_opts(&store.run(call).await?);
        }
        Ok(match pacing.stats_call()? {
            Some(call) => Pacing::nap(&store.run(call).await?, skew_ms),
            None => None,
        })
    }

    /// Runs the handler with heartbeats, then settles the job.
    async fn handle(
        &self,
        job: Job,
        every: Duration,
        stop: &watch::Receiver<bool>,
        heartbeat: &AsyncHeartbeat,
    ) -> Result<()> {
        let me = self.me.as_str();
        heartbeat.start(job.id, every);
        let outcome = self.run_handler(job.clone(), stop).await;
        heartbeat.end();
        let settlement = match outcome? {
            Outcome::Done(settlement) => settlement,
            Outcome::Committed(mut tx) => {
                match AsyncConn::<DB>(&mut *tx).ack_tx(job.id, me).await {
                    Ok(true) => match AsyncTransactionEnd::commit(tx).await {
                        Ok(()) => return Ok(()),
                        // Not committed (or not known to be): give the job back;
                        // if the commit did land, the retry finds it acked.
                        Err(e) => Settlement::Retry(format!("commit failed: {e}")),
                    },
                    Ok(false) => {
                        tracing::warn!("alkstore: the job was no longer this worker's to ack (claim expired or cancelled); its transaction was rolled back");
                        return AsyncTransactionEnd::rollback(tx).await;
                    }
                    // The handler left its transaction unusable (a failed
                    // statement): nothing of it commits; the job is retried.
                    Err(e) => {
                        drop(tx);
                        Settlement::Retry(e.to_string())
                    }
                }
            }
            Outcome::Failed(e) => {
                tracing::warn!(error = %e, "alkstore: handler failed; the job will be retried");
                Settlement::Retry(e)
            }
            Outcome::Cancelled => {
                tracing::warn!("alkstore: handler still running at the shutdown deadline: cancelled, job given back");
                Settlement::Release(None)
            }
        };
        if let (Settlement::Ack(None), Some(completer)) = (&settlement, &self.completer) {
            completer.add(job.id); // acked with the next flush
            return Ok(());
        }
        let store = self.queue.store();
        let outcome = settlement.outcome();
        let settled = match settlement.call(job.id, me) {
            Ok(call) => store.run(call).await,
            Err(e) => Err(e),
        };
        match settled
            .as_ref()
            .err()
            .and_then(|e| Settlement::instead(outcome, e))
        {
            Some(retry) => store.run(retry.call(job.id, me)?).await,
            None => settled,
        }
    }

    /// The handler as its own task (a panic ends only that task), cancelled
    /// if still running `shutdown_timeout` after stop.
    async fn run_handler(&self, job: Job, stop: &watch::Receiver<bool>) -> Result<Outcome<DB>> {
        let mut task: tokio::task::JoinHandle<Outcome<DB>> = match &self.handler {
            Handler::Plain(h) => {
                let fut = h(job);
                tokio::spawn(async move {
                    match fut.await {
                        Ok(settlement) => Outcome::Done(settlement),
                        Err(e) => Outcome::Failed(e),
                    }
                })
            }
            Handler::InTx(h) => {
                let tx = self.queue.store().begin().await?;
                let fut = h(job, tx);
                tokio::spawn(async move {
                    match fut.await {
                        Ok(tx) => Outcome::Committed(tx),
                        Err(e) => Outcome::Failed(e),
                    }
                })
            }
        };
        let mut stop = stop.clone();
        let deadline = async {
            let _ = stop.wait_for(|s| *s).await;
            tokio::time::sleep(self.shutdown_timeout).await;
        };
        tokio::select! {
            ended = &mut task => Ok(match ended {
                Ok(outcome) => outcome,
                Err(e) if e.is_panic() => Outcome::Failed(panic_message(&*e.into_panic())),
                Err(e) => Outcome::Failed(e.to_string()),
            }),
            _ = deadline => {
                task.abort();
                let _ = task.await;
                Ok(Outcome::Cancelled)
            }
        }
    }

    /// Ticks schedules and prunes when each is due.
    async fn chores(&self, chores: &mut Chores, stop: &watch::Receiver<bool>) -> Result<()> {
        let store = self.queue.store();
        for chore in chores.due() {
            match chore {
                Chore::Tick(tick) | Chore::Sweep(tick) => {
                    store.run(tick).await?;
                }
                Chore::Prune => {
                    store.run(Chores::sequence_call()?).await?;
                    while !*stop.borrow() && store.run(Chores::prune_call()).await? == PRUNE_BATCH {
                    }
                }
            }
        }
        Ok(())
    }
}

/// Waits out a database outage ([`Outage::pause_after`]), or until stopped;
/// errors a wait cannot cure end the run.
async fn wait_out(outage: &mut Outage, e: Error, stop: &mut watch::Receiver<bool>) -> Result<()> {
    let pause = outage.pause_after(e)?;
    tokio::select! {
        _ = tokio::time::sleep(pause) => {}
        _ = stop.wait_for(|s| *s) => {}
    }
    Ok(())
}
