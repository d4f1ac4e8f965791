//! The engine-neutral traits (contract §11) and the handles they give out.

use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};
use crate::opts::{EnqueueOpts, QueueOpts, ScheduleSpec, StreamOpts};
use crate::sql::{boolean, int, payload, Arg};
use crate::types::{Event, Job, Notification, Retried, StreamInfo};
use alkstore_core::{names, NameKind};
use serde::Serialize;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A database that holds queues, outboxes, streams, notifications and leases.
///
/// Object-safe and free of driver types: `alkstore::open` gives a
/// `Box<dyn Store>` for either engine.
pub trait Store: Send + Sync {
    /// A queue handle (the name is checked now: `InvalidName`, `ReservedName`).
    fn queue(&self, name: &str) -> Result<Queue>;
    /// An outbox handle.
    fn outbox(&self, name: &str) -> Result<Outbox>;
    /// A stream handle.
    fn stream(&self, name: &str) -> Result<Stream>;
    /// Sends a notification in its own transaction.
    fn notify(&self, channel: &str, payload: &Value) -> Result<()>;
    /// Listens on a channel from now on.
    fn listen(&self, channel: &str) -> Result<Subscription>;
    /// Acquires a lease; `None` while another owner holds it.
    fn lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<Option<LockGuard>>;
    /// A job's document (`alk_get_job`), `None` when unknown or acked.
    fn get_job(&self, job_id: i64) -> Result<Option<Value>>;
    /// Opens a transaction for business rows and alkstore writes together.
    fn begin(&self) -> Result<Box<dyn TxHandle>>;
    /// Deletes up to `max_rows` rows that outlived their retention
    /// (completed and dead jobs, idempotency keys, old notifications);
    /// returns how many. [`Worker`](crate::Worker)s call it periodically.
    fn prune(&self, max_rows: i64) -> Result<i64>;
    /// Calls any `alk_*` function in its own transaction; the result as
    /// JSON, sets as arrays (the admin listings: `alk_queues`,
    /// `alk_streams`, `alk_locks`, `alk_list_jobs`).
    fn call(&self, function: &str, args: &[Arg]) -> Result<Value>;
    /// Creates or replaces the schedule `name`: each occurrence of `spec`
    /// enqueues `payload` into `queue` with `opts`, once, when something
    /// ticks ([`Worker`](crate::Worker)s do). Returns the next fire time
    /// (RFC 3339). Admin role on PostgreSQL.
    fn schedule(
        &self,
        name: &str,
        queue: &str,
        spec: &ScheduleSpec,
        payload: &Value,
        opts: &EnqueueOpts,
    ) -> Result<String> {
        let v = self.call(
            "alk_schedule",
            &[
                name.into(),
                queue.into(),
                Arg::json(&spec.to_json()),
                Arg::json(payload),
                Arg::json(&opts.to_json()),
            ],
        )?;
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::engine("alkstore", "", format!("expected a time, got {v}")))
    }
    /// Deletes a schedule; true if it existed.
    fn unschedule(&self, name: &str) -> Result<bool> {
        boolean(self.call("alk_unschedule", &[name.into()])?)
    }
    /// Every schedule: `name, queue, spec, payload, opts, next_run_at, last_run_at`.
    fn schedules(&self) -> Result<Vec<Value>> {
        Ok(self
            .call("alk_schedules", &[])?
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
    /// Enqueues every due occurrence once; returns how many jobs.
    fn schedule_tick(&self) -> Result<i64> {
        int(self.call("alk_schedule_tick", &[])?)
    }
}

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
        names::validate(NameKind::Queue, queue)?;
        let v = self.call(
            "alk_enqueue",
            &[queue.into(), Arg::json(&opts.to_json()), Arg::json(payload)],
        )?;
        int(v)
    }

    /// Enqueues into an outbox (ADR-014): the outbox name, not its backing queue.
    fn outbox_enqueue_tx(
        &mut self,
        outbox: &str,
        opts: &EnqueueOpts,
        payload: &Value,
    ) -> Result<i64> {
        names::validate(NameKind::Outbox, outbox)?;
        let v = self.call(
            "alk_outbox_enqueue",
            &[
                outbox.into(),
                Arg::json(&opts.to_json()),
                Arg::json(payload),
            ],
        )?;
        int(v)
    }

    /// Publishes an event; returns its id (its offset comes with reads,
    /// once this transaction has committed).
    fn publish_tx(&mut self, stream: &str, payload: &Value) -> Result<i64> {
        names::validate(NameKind::Stream, stream)?;
        int(self.call(
            "alk_publish",
            &[stream.into(), Arg::json(payload), Arg::Null],
        )?)
    }

    /// Sends a notification on commit.
    fn notify_tx(&mut self, channel: &str, payload: &Value) -> Result<()> {
        names::validate(NameKind::Channel, channel)?;
        self.call("alk_notify", &[channel.into(), Arg::json(payload)])
            .map(|_| ())
    }

    /// Saves a consumer's offset; true if it advanced.
    fn save_offset_tx(&mut self, stream: &str, consumer: &str, offset: i64) -> Result<bool> {
        names::validate(NameKind::Stream, stream)?;
        names::validate(NameKind::Consumer, consumer)?;
        boolean(self.call(
            "alk_save_offset",
            &[stream.into(), consumer.into(), offset.into()],
        )?)
    }
}

fn opt_json(v: Value) -> Option<Value> {
    (!v.is_null()).then_some(v)
}

/// The claimed jobs; one whose payload this crate cannot read (see
/// [`crate::sql::UNREADABLE`]) is failed — dead-lettered with the reason —
/// instead of being handed out or ending the worker.
fn jobs(queue: &Queue, worker: &str, v: Value) -> Result<Vec<Job>> {
    let mut out = Vec::new();
    for row in v.as_array().map(Vec::as_slice).unwrap_or_default() {
        if let Some(reason) = row.get(crate::sql::UNREADABLE) {
            let error = format!("alkstore: the payload cannot be read by this client ({reason})");
            let id = row["id"].as_i64().unwrap_or_default();
            queue.call(
                "alk_fail",
                &[id.into(), worker.into(), error.as_str().into()],
            )?;
            continue;
        }
        out.push(Job::from_json(row)?);
    }
    Ok(out)
}

/// A flag that asks workers and loops to stop.
#[derive(Clone, Debug, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A flag not yet raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises it.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether it was raised.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Waits for work on `(kind, name)`: register, look, wait, look again.
fn wait_for<T>(
    engine: &dyn Engine,
    kind: Kind,
    name: &str,
    timeout: Duration,
    mut look: impl FnMut() -> Result<Vec<T>>,
) -> Result<Vec<T>> {
    let deadline = Instant::now() + timeout;
    let key = kind.key(name);
    engine.watch(kind, name)?;
    loop {
        let seen = engine.waker().seen(&key);
        let found = look()?;
        let left = deadline.saturating_duration_since(Instant::now());
        if !found.is_empty() || left.is_zero() {
            return Ok(found);
        }
        engine
            .waker()
            .wait(&key, seen, left.min(engine.fallback_poll()));
    }
}

/// A queue.
#[derive(Clone)]
pub struct Queue {
    pub(crate) engine: Arc<dyn Engine>,
    name: String,
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

    fn call(&self, f: &str, args: &[Arg]) -> Result<Value> {
        self.engine.call(f, args)
    }

    /// Enqueues one job in its own transaction (use [`TxHandle::enqueue_tx`]
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
        Ok(serde_json::from_value(v)?)
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
                error.into(),
                Arg::opt_secs(delay),
            ],
        )?;
        Ok(Retried::from_state(&v))
    }

    /// Dead-letters a job this worker holds.
    pub fn fail(&self, job_id: i64, worker: &str, error: &str) -> Result<bool> {
        boolean(self.call("alk_fail", &[job_id.into(), worker.into(), error.into()])?)
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
    /// [`TxHandle::outbox_enqueue_tx`] to send it with your own rows).
    pub fn enqueue<T: Serialize + ?Sized>(&self, opts: &EnqueueOpts, message: &T) -> Result<i64> {
        let args = [
            self.name.as_str().into(),
            Arg::json(&opts.to_json()),
            payload(message)?,
        ];
        int(self.queue.call("alk_outbox_enqueue", &args)?)
    }

    /// Claims up to `max_jobs` messages now.
    pub fn claim(&self, worker: &str, max_jobs: i64) -> Result<Vec<Job>> {
        let claimed = self.queue.call(
            "alk_outbox_claim",
            &[self.name.as_str().into(), worker.into(), max_jobs.into()],
        )?;
        jobs(&self.queue, worker, claimed)
    }

    /// Claims, waiting up to `timeout` for a message.
    pub fn claim_wait(&self, worker: &str, max_jobs: i64, timeout: Duration) -> Result<Vec<Job>> {
        let q = &self.queue;
        wait_for(&*q.engine, Kind::Queue, &q.name, timeout, || {
            self.claim(worker, max_jobs)
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
        match crate::worker::guarded(|| deliver(job)) {
            Ok(()) => self.queue.ack(job.id, worker).map(|_| ()),
            Err(e) => self.queue.retry(job.id, worker, &e, None).map(|_| ()),
        }
    }

    /// Delivers until `stop` is raised, waiting for messages without
    /// polling; returns how many were processed.
    pub fn run(
        &self,
        worker: &str,
        deliver: &mut dyn FnMut(&Job) -> std::result::Result<(), String>,
        stop: &Stop,
    ) -> Result<u64> {
        let mut done = 0;
        while !stop.is_stopped() {
            for job in self.claim_wait(worker, 1, Duration::from_millis(200))? {
                self.finish(worker, &job, deliver)?;
                done += 1;
            }
        }
        Ok(done)
    }

    /// Pauses delivery: claims return nothing until [`resume`](Self::resume).
    /// True if it was running.
    pub fn pause(&self) -> Result<bool> {
        boolean(
            self.queue
                .call("alk_outbox_pause", &[self.name.as_str().into()])?,
        )
    }

    /// Resumes delivery; true if it was paused.
    pub fn resume(&self) -> Result<bool> {
        boolean(
            self.queue
                .call("alk_outbox_resume", &[self.name.as_str().into()])?,
        )
    }

    /// Counts per state of the backing queue.
    pub fn stats(&self) -> Result<Value> {
        self.queue
            .call("alk_outbox_stats", &[self.name.as_str().into()])
    }

    /// The job functions (ack, retry, fail, get_job…) of the backing queue.
    pub fn jobs(&self) -> &Queue {
        &self.queue
    }
}

/// A stream (contract §7).
#[derive(Clone)]
pub struct Stream {
    engine: Arc<dyn Engine>,
    name: String,
}

impl Stream {
    pub(crate) fn new(engine: Arc<dyn Engine>, name: &str) -> Result<Stream> {
        names::validate(NameKind::Stream, name)?;
        Ok(Stream {
            engine,
            name: name.to_string(),
        })
    }

    /// Sets the stream's retention (admin role on PostgreSQL) and returns
    /// it resolved; events past it go when `alk_prune` runs (workers call
    /// it every minute).
    pub fn configure(&self, opts: &StreamOpts) -> Result<Value> {
        self.engine.call(
            "alk_stream_configure",
            &[self.name.as_str().into(), Arg::json(&opts.to_json())],
        )
    }

    /// The stream's kept offsets and retention. On PostgreSQL this also
    /// gives offsets to events committed since the last read.
    pub fn info(&self) -> Result<StreamInfo> {
        StreamInfo::from_json(
            &self
                .engine
                .call("alk_stream_info", &[self.name.as_str().into()])?,
        )
    }

    /// Publishes an event in its own transaction; returns its id.
    pub fn publish<T: Serialize + ?Sized>(&self, event: &T, key: Option<&str>) -> Result<i64> {
        int(self.engine.call(
            "alk_publish",
            &[
                self.name.as_str().into(),
                payload(event)?,
                Arg::opt_text(key),
            ],
        )?)
    }

    /// Up to `max` events after `after`, ascending. An event whose payload
    /// this crate cannot read is skipped with a message on standard error.
    pub fn read(&self, after: i64, max: i64) -> Result<Vec<Event>> {
        Ok(self.read_page(after, max)?.0)
    }

    /// A page of events and the offset of the last row read, readable or not.
    fn read_page(&self, after: i64, max: i64) -> Result<(Vec<Event>, Option<i64>)> {
        let v = self.engine.call(
            "alk_read",
            &[self.name.as_str().into(), after.into(), max.into()],
        )?;
        let rows = v.as_array().map(Vec::as_slice).unwrap_or_default();
        let mut out = Vec::new();
        for row in rows {
            if let Some(reason) = row.get(crate::sql::UNREADABLE) {
                // Skipped, not fatal: a consumer must get past it.
                eprintln!(
                    "alkstore: skipping event {} of stream {:?}: its payload cannot be read ({reason})",
                    row["offset"], self.name
                );
                continue;
            }
            out.push(Event::from_json(row)?);
        }
        Ok((out, rows.last().and_then(|r| r["offset"].as_i64())))
    }

    /// Saves a consumer's offset; true if it advanced.
    pub fn save_offset(&self, consumer: &str, offset: i64) -> Result<bool> {
        boolean(self.engine.call(
            "alk_save_offset",
            &[self.name.as_str().into(), consumer.into(), offset.into()],
        )?)
    }

    /// A consumer's saved offset (0 if none).
    pub fn get_offset(&self, consumer: &str) -> Result<i64> {
        int(self.engine.call(
            "alk_get_offset",
            &[self.name.as_str().into(), consumer.into()],
        )?)
    }

    /// A consumer that resumes from its saved offset.
    pub fn subscribe(&self, consumer: &str) -> Result<StreamSubscription> {
        names::validate(NameKind::Consumer, consumer)?;
        let position = self.get_offset(consumer)?;
        Ok(StreamSubscription {
            stream: self.clone(),
            consumer: Some(consumer.to_string()),
            position,
        })
    }

    /// A reader of the events after `after`, waiting for new ones like a
    /// consumer, but with no saved offset (`commit` saves nothing).
    pub fn reader(&self, after: i64) -> StreamSubscription {
        StreamSubscription {
            stream: self.clone(),
            consumer: None,
            position: after,
        }
    }
}

/// A stream consumer: reads from its position, waits for new events, and
/// saves its offset when told (at-least-once: a crash resumes from the last save).
pub struct StreamSubscription {
    stream: Stream,
    consumer: Option<String>,
    position: i64,
}

impl StreamSubscription {
    /// The offset of the last event handed out.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// The next events, waiting up to `timeout` for one to arrive.
    pub fn next_batch(&mut self, max: i64, timeout: Duration) -> Result<Vec<Event>> {
        let s = &self.stream;
        let seen = std::cell::Cell::new(self.position);
        let events = wait_for(&*s.engine, Kind::Stream, &s.name, timeout, || loop {
            // Pages of nothing but unreadable events are read past at once.
            let (events, last) = s.read_page(seen.get(), max)?;
            if let Some(last) = last {
                seen.set(last);
            }
            if !events.is_empty() || last.is_none() {
                return Ok(events);
            }
        })?;
        self.position = seen.get();
        Ok(events)
    }

    /// Saves the position as the consumer's offset (a
    /// [`reader`](Stream::reader) has none: false).
    pub fn commit(&self) -> Result<bool> {
        match &self.consumer {
            Some(consumer) => self.stream.save_offset(consumer, self.position),
            None => Ok(false),
        }
    }
}

/// Notifications on one channel, from the moment of `listen` on.
pub struct Subscription {
    pub(crate) channel: String,
    pub(crate) source: Box<dyn NotificationSource>,
}

/// Where a subscription's notifications come from (engine-specific).
pub(crate) trait NotificationSource: Send {
    fn next(&mut self, timeout: Duration) -> Result<Option<Value>>;
}

impl Subscription {
    /// The next notification, waiting as long as it takes.
    pub fn recv(&mut self) -> Result<Notification> {
        loop {
            if let Some(n) = self.recv_timeout(Duration::from_secs(3600))? {
                return Ok(n);
            }
        }
    }

    /// The next notification, or `None` after `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Notification>> {
        let channel = self.channel.clone();
        Ok(self
            .source
            .next(timeout)?
            .map(|payload| Notification { channel, payload }))
    }

    /// Notifications as they come.
    pub fn iter(&mut self) -> impl Iterator<Item = Result<Notification>> + '_ {
        std::iter::from_fn(move || Some(self.recv()))
    }
}

/// A held lease; released when dropped.
pub struct LockGuard {
    engine: Arc<dyn Engine>,
    name: String,
    owner: String,
    token: i64,
    released: bool,
}

impl LockGuard {
    pub(crate) fn acquire(
        engine: Arc<dyn Engine>,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<LockGuard>> {
        names::validate(NameKind::Lock, name)?;
        let v = engine.call(
            "alk_lock_acquire",
            &[name.into(), owner.into(), Arg::Num(ttl.as_secs_f64())],
        )?;
        Ok(v.as_i64().map(|token| LockGuard {
            engine,
            name: name.into(),
            owner: owner.into(),
            token,
            released: false,
        }))
    }

    /// The fencing token: larger for every new acquisition of this name.
    pub fn token(&self) -> i64 {
        self.token
    }

    /// Extends the lease; false if it had expired (it is no longer held).
    pub fn renew(&self, ttl: Duration) -> Result<bool> {
        let args = [
            self.name.as_str().into(),
            self.owner.as_str().into(),
            Arg::Num(ttl.as_secs_f64()),
        ];
        boolean(self.engine.call("alk_lock_renew", &args)?)
    }

    /// Releases the lease; false if it had expired.
    pub fn release(mut self) -> Result<bool> {
        self.released = true;
        boolean(self.engine.call(
            "alk_lock_release",
            &[self.name.as_str().into(), self.owner.as_str().into()],
        )?)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.engine.call(
                "alk_lock_release",
                &[self.name.as_str().into(), self.owner.as_str().into()],
            );
        }
    }
}

/// The `Store` methods every engine shares.
pub(crate) struct Core {
    pub engine: Arc<dyn Engine>,
}

impl Core {
    pub fn queue(&self, name: &str) -> Result<Queue> {
        Queue::new(self.engine.clone(), name)
    }
    pub fn outbox(&self, name: &str) -> Result<Outbox> {
        Outbox::new(self.engine.clone(), name)
    }
    pub fn stream(&self, name: &str) -> Result<Stream> {
        Stream::new(self.engine.clone(), name)
    }
    pub fn notify(&self, channel: &str, payload: &Value) -> Result<()> {
        self.engine
            .call("alk_notify", &[channel.into(), Arg::json(payload)])
            .map(|_| ())
    }
    pub fn listen(&self, channel: &str) -> Result<Subscription> {
        names::validate(NameKind::Channel, channel)?;
        self.engine.listen(channel)
    }
    pub fn lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<Option<LockGuard>> {
        LockGuard::acquire(self.engine.clone(), name, owner, ttl)
    }
    pub fn get_job(&self, job_id: i64) -> Result<Option<Value>> {
        Ok(opt_json(self.engine.call("alk_get_job", &[job_id.into()])?))
    }
    pub fn begin(&self) -> Result<Box<dyn TxHandle>> {
        self.engine.begin()
    }
    pub fn prune(&self, max_rows: i64) -> Result<i64> {
        prune(&*self.engine, max_rows)
    }
    pub fn call(&self, function: &str, args: &[Arg]) -> Result<Value> {
        self.engine.call(function, args)
    }
}

/// `alk_prune` on an engine.
pub(crate) fn prune(engine: &dyn Engine, max_rows: i64) -> Result<i64> {
    int(engine.call("alk_prune", &[max_rows.into()])?)
}

/// Implements [`Store`] for a type with a `core: Core` field.
macro_rules! impl_store {
    ($t:ty) => {
        impl $crate::Store for $t {
            fn queue(&self, name: &str) -> $crate::Result<$crate::Queue> {
                self.core.queue(name)
            }
            fn outbox(&self, name: &str) -> $crate::Result<$crate::Outbox> {
                self.core.outbox(name)
            }
            fn stream(&self, name: &str) -> $crate::Result<$crate::Stream> {
                self.core.stream(name)
            }
            fn notify(&self, channel: &str, payload: &serde_json::Value) -> $crate::Result<()> {
                self.core.notify(channel, payload)
            }
            fn listen(&self, channel: &str) -> $crate::Result<$crate::Subscription> {
                self.core.listen(channel)
            }
            fn lock(
                &self,
                name: &str,
                owner: &str,
                ttl: std::time::Duration,
            ) -> $crate::Result<Option<$crate::LockGuard>> {
                self.core.lock(name, owner, ttl)
            }
            fn get_job(&self, job_id: i64) -> $crate::Result<Option<serde_json::Value>> {
                self.core.get_job(job_id)
            }
            fn begin(&self) -> $crate::Result<Box<dyn $crate::TxHandle>> {
                self.core.begin()
            }
            fn prune(&self, max_rows: i64) -> $crate::Result<i64> {
                self.core.prune(max_rows)
            }
            fn call(
                &self,
                function: &str,
                args: &[$crate::sql::Arg],
            ) -> $crate::Result<serde_json::Value> {
                self.core.call(function, args)
            }
        }
    };
}
pub(crate) use impl_store;
