//! The engine-neutral traits (contract §11) and the handles they give out.

use crate::call;
use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};
use crate::lock::LockGuard;
use crate::notify::Subscription;
use crate::opts::{EnqueueOpts, ScheduleSpec};
use crate::outbox::Outbox;
use crate::queue::Queue;
use crate::sql::Arg;
use crate::stream::Stream;
use crate::types::{Job, Retried};
use alkstore_core::{names, NameKind};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A database that holds queues, outboxes, streams, notifications and
/// leases, on either engine: what `alkstore::open` gives, and what a
/// [`SqliteStore`](crate::SqliteStore) or [`PgStore`](crate::PgStore)
/// dereferences to (they add the engine's own transaction type). Cheap to
/// clone: clones share the connections and the wake-ups.
#[derive(Clone)]
pub struct Store {
    engine: Arc<dyn Engine>,
}

impl Store {
    pub(crate) fn new(engine: Arc<dyn Engine>) -> Store {
        Store { engine }
    }

    /// A queue handle (the name is checked now: `InvalidName`, `ReservedName`).
    pub fn queue(&self, name: &str) -> Result<Queue> {
        Queue::new(self.engine.clone(), name)
    }

    /// An outbox handle.
    pub fn outbox(&self, name: &str) -> Result<Outbox> {
        Outbox::new(self.engine.clone(), name)
    }

    /// A stream handle.
    pub fn stream(&self, name: &str) -> Result<Stream> {
        Stream::new(self.engine.clone(), name)
    }

    /// Sends a notification in its own transaction.
    pub fn notify(&self, channel: &str, payload: &Value) -> Result<()> {
        call::notify(channel, payload)?.run_on(&*self.engine)
    }

    /// Listens on a channel from now on.
    pub fn listen(&self, channel: &str) -> Result<Subscription> {
        names::validate(NameKind::Channel, channel)?;
        self.engine.listen(channel)
    }

    /// Acquires a lease; `None` while another owner holds it.
    pub fn lock(&self, name: &str, owner: &str, ttl: Duration) -> Result<Option<LockGuard>> {
        LockGuard::acquire(self.engine.clone(), name, owner, ttl)
    }

    /// A job's document (`alk_get_job`), `None` when unknown or acked.
    pub fn get_job(&self, job_id: i64) -> Result<Option<Value>> {
        call::get_job(job_id).run_on(&*self.engine)
    }

    /// Every error a job met, oldest first (`alk_job_errors`): an array of
    /// `{attempt, error, at}`, the last 100; `None` when unknown or acked.
    pub fn job_errors(&self, job_id: i64) -> Result<Option<Value>> {
        call::job_errors(job_id).run_on(&*self.engine)
    }

    /// Opens a transaction for business rows and alkstore writes together
    /// (your own statements: [`TxHandle::sqlite`], [`TxHandle::postgres`]).
    pub fn begin(&self) -> Result<Box<dyn TxHandle>> {
        self.engine.begin()
    }

    /// Deletes up to `max_rows` rows that outlived their retention
    /// (completed and dead jobs, idempotency keys, old notifications);
    /// returns how many. [`Worker`](crate::Worker)s call it periodically.
    pub fn prune(&self, max_rows: i64) -> Result<i64> {
        prune(&*self.engine, max_rows)
    }

    /// Calls any `alk_*` function in its own transaction; the result as
    /// JSON, sets as arrays (the admin listings: `alk_queues`,
    /// `alk_streams`, `alk_locks`, `alk_list_jobs`). A function this engine
    /// does not have, or a number of arguments it does not take, is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), and nothing
    /// is sent.
    pub fn call(&self, function: &str, args: &[Arg]) -> Result<Value> {
        self.engine.call(function, args)
    }

    /// Runs a typed [`Call`](call::Call) in its own transaction: what the
    /// dashboard and the CLI do, so that each function is spelled once, in
    /// [`call`]. ([`Call::raw`](call::Call::raw) keeps its documents as
    /// JSON.)
    pub fn run<T>(&self, call: call::Call<T>) -> Result<T> {
        call.run_on(&*self.engine)
    }

    /// Creates or replaces the schedule `name`: each occurrence of `spec`
    /// enqueues `payload` into `queue` with `opts`, once, when something
    /// ticks ([`Worker`](crate::Worker)s do). Returns the next fire time
    /// (RFC 3339). Admin role on PostgreSQL.
    pub fn schedule(
        &self,
        name: &str,
        queue: &str,
        spec: &ScheduleSpec,
        payload: &Value,
        opts: &EnqueueOpts,
    ) -> Result<String> {
        call::schedule(name, queue, spec, payload, opts)?.run_on(&*self.engine)
    }

    /// Deletes a schedule; true if it existed.
    pub fn unschedule(&self, name: &str) -> Result<bool> {
        call::unschedule(name).run_on(&*self.engine)
    }

    /// Every schedule: `name, queue, spec, payload, opts, next_run_at, last_run_at`.
    pub fn schedules(&self) -> Result<Vec<Value>> {
        call::schedules().run_on(&*self.engine)
    }

    /// Enqueues every due occurrence once; returns how many jobs.
    pub fn schedule_tick(&self) -> Result<i64> {
        call::schedule_tick().run_on(&*self.engine)
    }

    /// A summary of every queue (`alk_queues`). Admin role on PostgreSQL.
    pub fn queues(&self) -> Result<Vec<call::QueueSummary>> {
        call::queues().run_on(&*self.engine)
    }

    /// Gives committed stream events their offsets (`alk_sequence`,
    /// contract v1.2 §K) in transactions of their own, on this store's own
    /// connection; `None`: every stream. Returns how many. Listings
    /// ([`Store::streams`]) count only events with offsets: call this first
    /// where no background worker sequences (SQLite: always 0).
    pub fn sequence(&self, stream: Option<&str>) -> Result<i64> {
        call::sequence(stream)?.run_on(&*self.engine)
    }

    /// Every stream with its consumers (`alk_streams`). Admin role on PostgreSQL.
    pub fn streams(&self) -> Result<Vec<call::StreamSummary>> {
        call::streams().run_on(&*self.engine)
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
pub(crate) fn wait_for<T>(
    engine: &dyn Engine,
    kind: Kind,
    name: &str,
    timeout: Duration,
    mut look: impl FnMut() -> Result<Vec<T>>,
) -> Result<Vec<T>> {
    // A look that will not wait registers nothing (a hot standby refuses
    // LISTEN: a one-off read there must not fail for it).
    if timeout.is_zero() {
        return look();
    }
    let deadline = Instant::now() + timeout;
    let key = kind.key(name);
    match engine.watch(kind, name) {
        // A hot standby: no LISTEN during recovery (SQLSTATE 25006), so the
        // wait polls every fallback interval instead.
        Err(Error::Engine { code, .. }) if code == "25006" => {}
        other => other?,
    }
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

/// Sleeps up to `timeout` unless a wake-up for `(kind, name)` comes first;
/// true if one came.
pub(crate) fn sleep_unless_woken(
    engine: &dyn Engine,
    kind: Kind,
    name: &str,
    timeout: Duration,
) -> Result<bool> {
    let key = kind.key(name);
    engine.watch(kind, name)?;
    let seen = engine.waker().seen(&key);
    Ok(engine.waker().wait(&key, seen, timeout))
}

/// `alk_prune` on an engine, once committed stream events have their
/// offsets (retention counts from then: `alk_sequence(NULL)` first).
pub(crate) fn prune(engine: &dyn Engine, max_rows: i64) -> Result<i64> {
    call::sequence(None)?.run_on(engine)?;
    call::prune(max_rows).run_on(engine)
}
