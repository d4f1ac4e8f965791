//! The engine-neutral store (contract §11) and the handles it gives out.

use crate::call;
use crate::engine::Engine;
use crate::error::Result;
use crate::lock::LockGuard;
use crate::notify::Subscription;
use crate::opts::{EnqueueOpts, ScheduleSpec};
use crate::outbox::Outbox;
use crate::queue::Queue;
use crate::sql::Arg;
use crate::stream::Stream;
use crate::tx::TxHandle;
use alkstore_core::{names, NameKind};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

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

/// `alk_prune` on an engine, once committed stream events have their
/// offsets (retention counts from then: `alk_sequence(NULL)` first).
pub(crate) fn prune(engine: &dyn Engine, max_rows: i64) -> Result<i64> {
    call::sequence(None)?.run_on(engine)?;
    call::prune(max_rows).run_on(engine)
}
