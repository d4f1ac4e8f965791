//! Queue workers: N concurrent handlers fed by one claimer that claims for
//! all of them at once (plus a local queue of prefetched jobs, contract
//! v1.3 §P), acks batched within a flush window, heartbeats while a handler
//! runs, retry with the stamped backoff on error, panics counted as errors,
//! and a graceful stop that finishes the jobs in hand and gives back the
//! prefetched ones.

use crate::claimant::{guarded, host_now_ms, process_tag, Skew};
use crate::completer::{Completer, FlushWindow};
use crate::error::Result;
use crate::heartbeat::Heartbeat;
use crate::outbox::Outbox;
use crate::prefetch::{LocalQueue, Prefetch, Sizer};
use crate::queue::Queue;
use crate::tx::TxHandle;
use crate::types::Job;
use crate::waiting::Stop;
use crate::worker_core::{
    Chore, Chores, Handled, Outage, Pacing, Settlement, DEFAULT_SWEEP_EVERY, PRUNE_BATCH,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A pool of handlers for one queue.
///
/// ```no_run
/// # fn main() -> alkstore::Result<()> {
/// let store = alkstore::open("sqlite:app.db")?;
/// let stop = alkstore::Stop::new();
/// alkstore::Worker::new(store.queue("emails")?, "mailer")
///     .concurrency(4)
///     .run(&stop, |job| {
///         println!("sending {}", job.payload);
///         Ok(())
///     })?;
/// # Ok(()) }
/// ```
pub struct Worker {
    /// The queue the jobs are acked, retried and kept alive on.
    queue: Queue,
    /// Claims go through the outbox when the worker delivers one.
    outbox: Option<Outbox>,
    name: String,
    concurrency: usize,
    /// How the local queue is sized (by default: the concurrency).
    prefetch: Prefetch,
    prefetch_ttl: Option<Duration>,
    flush: FlushWindow,
    prune_every: Option<Duration>,
    tick_every: Option<Duration>,
    sweep_every: Option<Duration>,
}

pub use crate::worker_core::MAX_PREFETCH;
use crate::worker_core::{lost_acks, FlushStep, FlushTries, KEEP_EVERY, MAX_CLAIM};

/// How often a worker ticks schedules (`alk_schedule_tick`) unless told otherwise.
pub const DEFAULT_TICK_EVERY: Duration = Duration::from_secs(5);

/// How often a worker prunes (`alk_prune`) unless told otherwise.
pub const DEFAULT_PRUNE_EVERY: Duration = Duration::from_secs(60);

impl Worker {
    /// A worker named `name`. It claims as `name-<host>-<pid>-<random>`:
    /// unique per process, so that a stalled handler's late ack can never
    /// land on another replica's re-claim of the same job (replicas all run
    /// "mailer").
    pub fn new(queue: Queue, name: &str) -> Worker {
        Worker {
            queue,
            outbox: None,
            name: format!("{name}-{}", process_tag()),
            concurrency: 1,
            prefetch: Prefetch::Concurrency,
            prefetch_ttl: None,
            flush: FlushWindow::DEFAULT,
            prune_every: Some(DEFAULT_PRUNE_EVERY),
            tick_every: Some(DEFAULT_TICK_EVERY),
            sweep_every: Some(DEFAULT_SWEEP_EVERY),
        }
    }

    /// A worker that delivers an outbox's messages, with everything a queue
    /// worker does: concurrent handlers, heartbeats, retries, a graceful stop.
    ///
    /// ```no_run
    /// # fn main() -> alkstore::Result<()> {
    /// let store = alkstore::open("sqlite:app.db")?;
    /// let stop = alkstore::Stop::new();
    /// alkstore::Worker::outbox(store.outbox("webhooks")?, "deliverer")
    ///     .concurrency(8)
    ///     .run(&stop, |message| {
    ///         println!("posting {}", message.payload);
    ///         Ok(())
    ///     })?;
    /// # Ok(()) }
    /// ```
    pub fn outbox(outbox: Outbox, name: &str) -> Worker {
        let mut worker = Worker::new(outbox.jobs().clone(), name);
        worker.outbox = Some(outbox);
        worker
    }

    /// The name this worker claims under (`name-<host>-<pid>-<random>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many jobs run at once (default 1).
    pub fn concurrency(mut self, n: usize) -> Worker {
        self.concurrency = n.max(1);
        self
    }

    /// How many jobs the worker claims ahead of its free handlers, into a
    /// local queue (contract v1.3 §P): each claim asks for what the
    /// handlers and the local queue have room for, in one call. Default:
    /// the concurrency; 0: claim only for free handlers; at most
    /// [`MAX_PREFETCH`]; or by the handlers' pace
    /// ([`prefetch_by_pace`](Self::prefetch_by_pace)). Prefetched jobs are
    /// claimed (they count as running under the queue's limits) and a
    /// stopping worker gives them back at once (`alk_release_batch`),
    /// without spending an attempt.
    pub fn prefetch(mut self, n: usize) -> Worker {
        self.prefetch = Prefetch::Fixed(n.min(MAX_PREFETCH));
        self
    }

    /// Sizes the local queue by the handlers' pace instead: what they
    /// finish in about 100 ms, measured as they run — hundreds of fast
    /// jobs, no more than the concurrency of slow ones — at least the
    /// concurrency and at most [`MAX_PREFETCH`](crate::MAX_PREFETCH). For
    /// many short jobs it claims far fewer times than the default (the
    /// figures of `scripts/bench-workers.sh` are taken with it); the claims
    /// it holds count as running under the queue's limits.
    pub fn prefetch_by_pace(mut self) -> Worker {
        self.prefetch = Prefetch::Pace;
        self
    }

    /// How long a prefetched job may wait for a handler before the worker
    /// gives it back for an idle worker elsewhere to take. Default: half
    /// the time its claim had left (half the queue's visibility timeout);
    /// a longer wait keeps it claimed with heartbeats.
    pub fn prefetch_ttl(mut self, ttl: Duration) -> Worker {
        self.prefetch_ttl = Some(ttl);
        self
    }

    /// How long the acks of finished jobs wait to be sent together, one
    /// `alk_ack_batch` in one transaction (contract v1.3 §P): at most
    /// `window.wait`, or as soon as `window.max_jobs` wait. Default
    /// [`FlushWindow::DEFAULT`] (10 ms or 100 jobs); a zero `wait` acks
    /// each job on its own as its handler returns. Only plain acks wait:
    /// results, retries and snoozes are sent at once. A worker killed
    /// meanwhile loses those acks, and the jobs run again.
    pub fn flush_window(mut self, window: FlushWindow) -> Worker {
        self.flush = window;
        self
    }

    /// How often the worker deletes what outlived its retention
    /// (contract v1.1 §C5: completed and dead jobs, idempotency keys, old
    /// notifications), in batches of 1000 rows, on the worker's chores
    /// thread. Default [`DEFAULT_PRUNE_EVERY`], the first time at start;
    /// `None`: never (prune
    /// elsewhere, e.g. from pg_cron).
    /// At least [`MIN_CHORE_EVERY`](crate::MIN_CHORE_EVERY): a shorter
    /// interval, zero included, is that.
    pub fn prune_every(mut self, every: Option<Duration>) -> Worker {
        self.prune_every = every;
        self
    }

    /// How often the worker ticks schedules (contract v1.1 §F:
    /// each due occurrence enqueued once, however many workers tick).
    /// Default [`DEFAULT_TICK_EVERY`]; `None`: never.
    /// At least [`MIN_CHORE_EVERY`](crate::MIN_CHORE_EVERY): a shorter
    /// interval, zero included, is that.
    pub fn tick_every(mut self, every: Option<Duration>) -> Worker {
        self.tick_every = every;
        self
    }

    /// How often the worker sweeps its queue
    /// (`alk_sweep`): expired jobs are dead-lettered, and jobs scheduled
    /// ahead that came due are made pending (contract v1.2 §H; claims take
    /// them either way, faster once pending). Default
    /// [`DEFAULT_SWEEP_EVERY`]; `None`: never (the extension's background
    /// worker sweeps every queue). An outbox's worker never sweeps.
    /// At least [`MIN_CHORE_EVERY`](crate::MIN_CHORE_EVERY): a shorter
    /// interval, zero included, is that.
    pub fn sweep_every(mut self, every: Option<Duration>) -> Worker {
        self.sweep_every = every;
        self
    }

    /// Runs handlers until `stop` is raised; each finishes the job in hand
    /// first. `Ok` acks the job; `Err` (or a panic) retries it with the
    /// stamped backoff, dead after its last attempt. Returns the number of
    /// jobs handled.
    pub fn run<F>(&self, stop: &Stop, handler: F) -> Result<u64>
    where
        F: Fn(&Job) -> std::result::Result<(), String> + Sync,
    {
        self.run_inner(stop, &|job: &Job, _: &str| {
            handler(job).map(|()| Settle::Settle(Settlement::Ack(None)))
        })
    }

    /// As [`run`](Self::run), but `Ok(result)` acks the job with `result`,
    /// kept with the completed job while the queue retains completed jobs
    /// ([`QueueOpts::retain_completed`](crate::QueueOpts::retain_completed)).
    pub fn run_with_result<F>(&self, stop: &Stop, handler: F) -> Result<u64>
    where
        F: Fn(&Job) -> std::result::Result<serde_json::Value, String> + Sync,
    {
        self.run_inner(stop, &|job: &Job, _: &str| {
            handler(job).map(|result| Settle::Settle(Settlement::Ack(Some(result))))
        })
    }

    /// As [`run`](Self::run), but `Ok` says what to do with the job:
    /// [`Handled::Ack`], [`Handled::AckWith`] a result, or
    /// [`Handled::Snooze`] — give it back to run again later without
    /// spending an attempt (`alk_release`, contract v1.3 §Q).
    ///
    /// ```no_run
    /// # fn main() -> alkstore::Result<()> {
    /// # let store = alkstore::open("sqlite:app.db")?;
    /// # let stop = alkstore::Stop::new();
    /// use alkstore::Handled;
    /// use std::time::Duration;
    /// alkstore::Worker::new(store.queue("exports")?, "exporter")
    ///     .run_handled(&stop, |job| {
    ///         if job.payload["after"].as_i64() > Some(0) {
    ///             return Ok(Handled::Snooze(Duration::from_secs(30))); // not yet
    ///         }
    ///         Ok(Handled::Ack)
    ///     })?;
    /// # Ok(()) }
    /// ```
    pub fn run_handled<F>(&self, stop: &Stop, handler: F) -> Result<u64>
    where
        F: Fn(&Job) -> std::result::Result<Handled, String> + Sync,
    {
        self.run_inner(stop, &|job: &Job, _: &str| {
            handler(job).map(|handled| Settle::Settle(handled.into()))
        })
    }

    /// As [`run`](Self::run), but each job comes with a transaction of its
    /// own, and the job's ack commits in it: the handler's writes (on
    /// [`TxHandle::sqlite`] or [`TxHandle::postgres`], and alkstore's own
    /// `*_tx` calls) and the job's completion commit together or not at
    /// all. When `Ok` comes back the worker acks in the transaction and
    /// commits; if the job is no longer this worker's (its claim expired
    /// and someone else holds it, or it was cancelled) it rolls back
    /// instead. `Err`, a panic, a transaction the handler left unusable or
    /// a failed commit roll back and retry the job.
    ///
    /// On SQLite the transaction holds the database's write lock while the
    /// handler runs: other writers (heartbeats included) wait for it, so
    /// keep such handlers short.
    ///
    /// ```no_run
    /// # fn main() -> alkstore::Result<()> {
    /// let store = alkstore::open("sqlite:app.db")?;
    /// let stop = alkstore::Stop::new();
    /// alkstore::Worker::new(store.queue("invoices")?, "biller")
    ///     .run_in_tx(&stop, |job, tx| {
    ///         let conn = tx.sqlite().expect("a SQLite store");
    ///         conn.execute("INSERT INTO invoices (order_id) VALUES (?1)",
    ///                      [job.payload["order"].as_i64()])
    ///             .map_err(|e| e.to_string())?;
    ///         Ok(()) // acked and committed with the invoice
    ///     })?;
    /// # Ok(()) }
    /// ```
    pub fn run_in_tx<F>(&self, stop: &Stop, handler: F) -> Result<u64>
    where
        F: Fn(&Job, &mut dyn TxHandle) -> std::result::Result<(), String> + Sync,
    {
        self.run_inner(stop, &|job: &Job, worker: &str| {
            // Dropped on every early return: rolled back before the retry.
            let mut tx = self.queue.engine.begin().map_err(|e| e.to_string())?;
            handler(job, &mut *tx)?;
            if tx.ack_tx(job.id, worker).map_err(|e| e.to_string())? {
                tx.commit().map_err(|e| format!("commit failed: {e}"))?;
            } else {
                tracing::warn!(
                    job.id,
                    "alkstore: the job is no longer this worker's; its transaction is rolled back"
                );
                tx.rollback().map_err(|e| e.to_string())?;
            }
            Ok(Settle::Done)
        })
    }

    fn run_inner(&self, stop: &Stop, handler: &Handler<'_>) -> Result<u64> {
        let handled = AtomicU64::new(0);
        let local = LocalQueue::default();
        let completer = Completer::default();
        // Raised when a handler meets an error a wait cannot cure: the
        // claimer stops, and the handlers after the job in hand.
        let failed = Stop::new();
        let worker = self.name.as_str();
        std::thread::scope(|s| -> Result<()> {
            let flusher = self.flush.batches().then(|| {
                s.spawn(|| {
                    completer.run(self.flush, |ids| self.flush_acks(&ids, worker, stop));
                })
            });
            s.spawn(|| self.keep(worker, &local));
            let handlers: Vec<_> = (0..self.concurrency)
                .map(|_| {
                    let (local, completer, handled, failed) =
                        (&local, &completer, &handled, &failed);
                    s.spawn(move || {
                        let run = Run {
                            worker,
                            stop,
                            failed,
                            local,
                            completer,
                            handled,
                        };
                        let result = self.handle(&run, handler);
                        if result.is_err() {
                            failed.stop();
                        }
                        result
                    })
                })
                .collect();
            let chores = s.spawn(|| {
                // A panic here ends the rest too, as one on the claimer's.
                let _on_panic = OnPanic(&local, &completer, &failed);
                let done = self.chore_loop(stop, &failed);
                if done.is_err() {
                    failed.stop();
                }
                done
            });
            let claimed = self.claim_for(worker, stop, &failed, &local, &completer);
            if claimed.is_err() {
                failed.stop();
            }
            let mut result = claimed.and(chores.join().expect("chores thread"));
            for h in handlers {
                let handled = h.join().expect("worker thread");
                result = result.and(handled);
            }
            completer.close();
            if let Some(flusher) = flusher {
                flusher.join().expect("completer thread");
            }
            result
        })?;
        Ok(handled.into_inner())
    }

    /// The claimer: keeps the handlers and the local
    /// queue filled, with one claim at a time; on stop, gives back what no
    /// handler took.
    fn claim_for(
        &self,
        worker: &str,
        stop: &Stop,
        failed: &Stop,
        local: &LocalQueue,
        completer: &Completer,
    ) -> Result<()> {
        let _on_panic = OnPanic(local, completer, failed);
        let result = self.claim_loop(worker, stop, failed, local);
        self.give_back(&local.close(), worker);
        result
    }

    /// The keeper, until the local queue closes: gives back the prefetched
    /// jobs whose time to live is up and keeps the others claimed.
    fn keep(&self, worker: &str, local: &LocalQueue) {
        while !local.is_closed() {
            self.give_back(&local.expired(), worker);
            for id in local.due_beats() {
                // An error leaves it as it is: the next beat tries again.
                if let Ok(held) = self.queue.heartbeat(id, worker, None) {
                    local.beat(id, held);
                }
            }
            local.nap(KEEP_EVERY);
        }
    }

    fn claim_loop(
        &self,
        worker: &str,
        stop: &Stop,
        failed: &Stop,
        local: &LocalQueue,
    ) -> Result<()> {
        let mut sizer = Sizer::new(self.prefetch, self.concurrency, MAX_PREFETCH);
        let mut outage = Outage::default();
        let mut pacing = Pacing::new(self.queue.name());
        let mut skew = Skew::default();
        while !stop.is_stopped() && !failed.is_stopped() {
            let capacity = local.capacity(self.concurrency, sizer.prefetch(local));
            // Refilled half a prefetch at a time while jobs wait (while the
            // prefetch is paused, a job at a time); alk_claim takes at most
            // MAX_BATCH jobs a call.
            let batch = (capacity.saturating_sub(self.concurrency) / 2).max(1);
            let room = local
                .room(capacity, batch, Duration::from_millis(200))
                .min(MAX_CLAIM);
            if room == 0 {
                continue;
            }
            // Before the claim, not between it and the push: the jobs it
            // brings are heartbeated only once pushed.
            if skew.due() {
                let before = host_now_ms();
                let db = self.queue.engine.clock_ms();
                if let Err(e) = &db {
                    tracing::warn!(error = %e, "alkstore: the database's clock could not be read: claims' time left is read against the host's");
                }
                skew.record(before, db.ok(), host_now_ms());
            }
            let claimed = {
                // Debug level: an idle worker claims (and waits) every 200 ms.
                let span = tracing::debug_span!("alkstore.claim", queue = %self.queue.name(), worker,
                                                claimed = tracing::field::Empty);
                let _in = span.enter();
                let wait = Duration::from_millis(200);
                let claimed = match &self.outbox {
                    Some(outbox) => outbox.claim_wait(worker, room as i64, wait),
                    None => self.queue.claim_wait(worker, room as i64, wait),
                };
                if let Ok(jobs) = &claimed {
                    span.record("claimed", jobs.len());
                }
                claimed
            };
            let jobs = match claimed {
                Ok(jobs) => jobs,
                Err(e) => {
                    wait_out(&mut outage, e, stop)?;
                    continue;
                }
            };
            outage.over();
            if jobs.is_empty() && self.outbox.is_none() {
                if let Err(e) = self.pace(&mut pacing, skew.ms(), stop) {
                    wait_out(&mut outage, e, stop)?;
                }
            }
            // (Closed only after this loop: nothing comes back here.)
            let refused = local.push(jobs, self.prefetch_ttl, skew.ms());
            self.give_back(&refused, worker);
        }
        Ok(())
    }

    /// Gives claims back without spending an attempt (`alk_release_batch`):
    /// prefetched jobs no handler took. If that fails their claims expire
    /// and they run again anyway, an attempt spent.
    fn give_back(&self, ids: &[i64], worker: &str) {
        if ids.is_empty() {
            return;
        }
        if let Err(e) = self.queue.release_batch(ids, worker, None) {
            tracing::warn!(error = %e, jobs = ids.len(),
                           "alkstore: could not give prefetched jobs back; they run again when their claims expire");
        }
    }

    /// Acks a batch of finished jobs in one call, riding out an outage
    /// for a while (about 5 s); then each job on its own, once. Acks lost
    /// leave their jobs to run again when their claims expire.
    fn flush_acks(&self, ids: &[i64], worker: &str, stop: &Stop) {
        let _span = tracing::debug_span!("alkstore.ack_batch", jobs = ids.len()).entered();
        let mut tries = FlushTries::default();
        loop {
            match self.queue.ack_batch(ids, worker) {
                Ok(acked) => return FlushTries::acked(acked, ids.len()),
                Err(e) => match tries.failed(e, stop.is_stopped()) {
                    FlushStep::Pause(pause) => std::thread::sleep(pause),
                    FlushStep::Lost => return lost_acks(ids.len()),
                    FlushStep::OneByOne => break,
                },
            }
        }
        let lost = ids
            .iter()
            .filter(|&&id| self.queue.ack(id, worker).is_err())
            .count();
        lost_acks(lost);
    }

    /// One handler thread, with its heartbeat thread beside it.
    fn handle(&self, run: &Run<'_>, handler: &Handler<'_>) -> Result<()> {
        let heartbeat = Heartbeat::default();
        std::thread::scope(|s| {
            s.spawn(|| {
                heartbeat.run(|id| {
                    let _ = self.queue.heartbeat(id, run.worker, None);
                })
            });
            // Stopped however the loop ends (a panic too: the scope would
            // wait for the heartbeat thread for ever).
            let _stop = heartbeat.stopper();
            self.handle_jobs(run, handler, &heartbeat)
        })
    }

    fn handle_jobs(
        &self,
        run: &Run<'_>,
        handler: &Handler<'_>,
        heartbeat: &Heartbeat,
    ) -> Result<()> {
        let mut outage = Outage::default();
        while let Some((job, beat_every)) = run
            .local
            .take(|| run.stop.is_stopped() || run.failed.is_stopped())
        {
            let settled = self.handle_job(&job, beat_every, run, handler, heartbeat);
            run.local.done(job.id);
            if let Err(e) = settled {
                wait_out(&mut outage, e, run.stop)?;
            } else {
                outage.over();
            }
            run.handled.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Runs one job's handler and settles the job: a plain ack waits for
    /// the completer's next flush when acks are batched.
    fn handle_job(
        &self,
        job: &Job,
        beat_every: Duration,
        run: &Run<'_>,
        handler: &Handler<'_>,
        heartbeat: &Heartbeat,
    ) -> Result<()> {
        let worker = run.worker;
        // One span per job, with the handler's run and the ack (or
        // retry) inside it, for the user's subscriber or OpenTelemetry.
        let span = tracing::info_span!("alkstore.job", job.id = job.id, queue = %job.queue,
                                       attempt = job.attempts, worker);
        let _in = span.enter();
        let outcome = {
            let _run = tracing::info_span!("alkstore.handler").entered();
            let outcome = heartbeat.during(job.id, beat_every, || guarded(|| handler(job, worker)));
            if let Err(e) = &outcome {
                tracing::warn!(error = %e, "alkstore: handler failed; the job will be retried");
            }
            outcome
        };
        let _settle = tracing::info_span!(
            "alkstore.ack",
            outcome = match &outcome {
                Ok(Settle::Settle(Settlement::Release(_))) => "release",
                Ok(_) => "ack",
                Err(_) => "retry",
            }
        )
        .entered();
        // A job whose ack or retry is lost with the connection stays
        // claimed until its visibility timeout, then runs again:
        // at least once, never lost.
        let settlement = match outcome {
            Ok(Settle::Done) => return Ok(()),
            Ok(Settle::Settle(Settlement::Ack(None))) if self.flush.batches() => {
                run.completer.add(job.id);
                return Ok(());
            }
            Ok(Settle::Settle(settlement)) => settlement,
            Err(e) => Settlement::Retry(e),
        };
        let engine = &*self.queue.engine;
        let outcome = settlement.outcome();
        match settlement
            .call(job.id, worker)
            .and_then(|c| c.run_on(engine))
        {
            Err(e) => match Settlement::instead(outcome, &e) {
                Some(retry) => retry.call(job.id, worker)?.run_on(engine),
                None => Err(e),
            },
            settled => settled,
        }
    }

    /// After a claim that got nothing: on a queue whose limits hold claims
    /// back, sleeps until its `next_slot_at`, a wake-up or stop.
    fn pace(&self, pacing: &mut Pacing, skew_ms: i64, stop: &Stop) -> Result<()> {
        let engine = &*self.queue.engine;
        if let Some(call) = pacing.opts_call()? {
            pacing.saw_opts(&call.run_on(engine)?);
        }
        let Some(call) = pacing.stats_call()? else {
            return Ok(());
        };
        let Some(nap) = Pacing::nap(&call.run_on(engine)?, skew_ms) else {
            return Ok(());
        };
        tracing::debug!(queue = %self.queue.name(), ?nap, "alkstore: limits hold claims back; napping");
        let until = std::time::Instant::now() + nap;
        while !stop.is_stopped() {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero()
                || crate::waiting::sleep_unless_woken(
                    engine,
                    crate::engine::Kind::Queue,
                    self.queue.name(),
                    left.min(Duration::from_millis(200)),
                )?
            {
                break;
            }
        }
        Ok(())
    }

    /// The chores, each when due, on a thread of their own until stop (or
    /// a failure): on the claimer's thread, a sweep or a prune held up the
    /// claims behind it (at 500 jobs a second with commits not waiting,
    /// the pickup latency's p99 was 3.1–3.2 ms there, 2.8–3.0 here, and
    /// 2.3–2.7 with no chores at all).
    fn chore_loop(&self, stop: &Stop, failed: &Stop) -> Result<()> {
        let mut chores = Chores::new(
            self.tick_every,
            self.prune_every,
            self.sweep_every
                .map(|every| (every, self.queue.name().to_string())),
        );
        if chores.none() {
            return Ok(()); // an outbox's delivery loop, say
        }
        let mut outage = Outage::default();
        while !stop.is_stopped() && !failed.is_stopped() {
            match self.chores(&mut chores, stop) {
                Ok(()) => outage.over(),
                Err(e) => wait_out(&mut outage, e, stop)?,
            }
            std::thread::sleep(CHORE_NAP);
        }
        Ok(())
    }

    /// Ticks schedules, sweeps and prunes when each is due; prunes in
    /// bounded batches until nothing is left or stop is raised.
    fn chores(&self, chores: &mut Chores, stop: &Stop) -> Result<()> {
        let engine = &*self.queue.engine;
        for chore in chores.due() {
            match chore {
                Chore::Tick(tick) | Chore::Sweep(tick) => {
                    tick.run_on(engine)?;
                }
                Chore::Prune => {
                    Chores::sequence_call()?.run_on(engine)?;
                    while !stop.is_stopped() && Chores::prune_call().run_on(engine)? == PRUNE_BATCH
                    {
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a handler thread shares with the rest of its worker.
#[derive(Clone, Copy)]
struct Run<'a> {
    /// The claim name every job of this worker is claimed under.
    worker: &'a str,
    stop: &'a Stop,
    failed: &'a Stop,
    local: &'a LocalQueue,
    completer: &'a Completer,
    handled: &'a AtomicU64,
}

/// A handler as the workers run it, given the job and the claim name it
/// runs under.
type Handler<'a> = dyn Fn(&Job, &str) -> std::result::Result<Settle, String> + Sync + 'a;

/// What is left to do once a handler succeeded.
enum Settle {
    /// Ack the job (with a result to keep if any), or give it back.
    Settle(Settlement),
    /// Nothing: the handler's transaction acked it.
    Done,
}

/// How often the chores thread looks at what is due (and at stop).
const CHORE_NAP: Duration = Duration::from_millis(20);

/// If the claimer or the chores thread panics, the handlers, the keeper and
/// the completer end too (the scope would wait for them for ever).
struct OnPanic<'a>(&'a LocalQueue, &'a Completer, &'a Stop);

impl Drop for OnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.2.stop();
            let _ = self.0.close();
            self.1.close();
        }
    }
}

/// Waits out a database outage ([`Outage::pause_after`]) in steps of 10 ms,
/// so that a stop is seen at once; errors a wait cannot cure end the run.
fn wait_out(outage: &mut Outage, e: crate::Error, stop: &Stop) -> Result<()> {
    let until = std::time::Instant::now() + outage.pause_after(e)?;
    while std::time::Instant::now() < until && !stop.is_stopped() {
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// An outbox's own delivery loop is a worker with one handler, so it is
/// written here, beside the worker it builds (the outbox handle does not
/// depend on the worker).
impl Outbox {
    /// Delivers until `stop` is raised, waiting for messages without
    /// polling; returns how many were processed. One message at a time, as
    /// a [`Worker::outbox`](crate::Worker::outbox) with one handler and no
    /// prefetch (so with heartbeats and a claim name unique to this
    /// process); no schedule ticks or pruning. For more handlers, use that
    /// worker.
    pub fn run(
        &self,
        worker: &str,
        deliver: &mut (dyn FnMut(&Job) -> std::result::Result<(), String> + Send),
        stop: &Stop,
    ) -> Result<u64> {
        let deliver = std::sync::Mutex::new(deliver);
        Worker::outbox(self.clone(), worker)
            .prefetch(0)
            .prune_every(None)
            .tick_every(None)
            .run(stop, |job| {
                let mut deliver = deliver.lock().unwrap_or_else(|e| e.into_inner());
                (*deliver)(job)
            })
    }
}
