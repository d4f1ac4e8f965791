//! One typed call layer: each `alk_*` call as a value — the function, its
//! checked arguments and how its result is read — that any transport runs:
//! a store's own connection, a [`TxHandle`](crate::TxHandle) (rusqlite,
//! postgres) or an [`AsyncTxHandle`](crate::AsyncTxHandle) (sqlx,
//! tokio-postgres). The blocking and async handles are thin wrappers over
//! these, so a function is spelled once here: its catalogue row
//! (`alkstore_core::catalogue`), its [`Call`], and its SQL.
//!
//! ```
//! # #[cfg(feature = "blocking")] {
//! use alkstore::{call, EnqueueOpts, TxHandle};
//! # let dir = tempfile::tempdir().unwrap();
//! let store = alkstore::SqliteStore::open(dir.path().join("app.db"))?;
//! let mut tx = store.transaction()?;
//! let id = call::enqueue("emails", &EnqueueOpts::new(), &serde_json::json!({"to": "a@b.c"}))?
//!     .run(&mut tx)?;
//! tx.commit()?;
//! assert_eq!(store.queue("emails")?.claim("w", 1)?[0].id, id);
//! # }
//! # Ok::<(), alkstore::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::opts::{EnqueueOpts, QueueOpts, ScheduleSpec, StreamOpts};
use crate::sql::{boolean, int, payload, Arg};
use crate::types::{Event, Job, Retried, StreamInfo, Unreadable};
use alkstore_core::{names, NameKind};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

#[rustfmt::skip]
#[path = "generated/functions.rs"]
pub mod functions;

/// One `alk_*` call, ready to run: arguments checked (a bad name fails
/// here, before anything is sent), result decoded into `T`.
#[must_use = "a call does nothing until it is run"]
pub struct Call<T> {
    function: &'static str,
    args: Vec<Arg>,
    decode: Box<dyn Fn(Value) -> Result<T> + Send + Sync>,
}

impl<T> std::fmt::Debug for Call<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("function", &self.function)
            .field("args", &self.args)
            .finish()
    }
}

impl<T> Call<T> {
    fn new(
        function: &'static str,
        args: Vec<Arg>,
        decode: impl Fn(Value) -> Result<T> + Send + Sync + 'static,
    ) -> Call<T> {
        Call {
            function,
            args,
            decode: Box::new(decode),
        }
    }

    /// The SQL function it calls.
    pub fn function(&self) -> &'static str {
        self.function
    }

    /// Its arguments, in order.
    pub fn args(&self) -> &[Arg] {
        &self.args
    }

    /// Reads the function's result (as JSON, sets as arrays).
    pub fn decode(&self, result: Value) -> Result<T> {
        (self.decode)(result)
    }

    /// The same call with its result as the database gave it (JSON, sets
    /// as arrays), not decoded: for passing a function's documents on as
    /// they are (the dashboard's API, the CLI's `--json`).
    pub fn raw(self) -> Call<Value> {
        Call {
            function: self.function,
            args: self.args,
            decode: Box::new(json),
        }
    }

    /// The same call with its result read on by `f`: how the typed
    /// constructors here turn a [`functions`] call's JSON into their types.
    pub fn map<U>(self, f: impl Fn(T) -> Result<U> + Send + Sync + 'static) -> Call<U>
    where
        T: 'static,
    {
        let decode = self.decode;
        Call {
            function: self.function,
            args: self.args,
            decode: Box::new(move |v| f(decode(v)?)),
        }
    }

    /// The same call with its result dropped (a settlement whose answer the
    /// caller does not use).
    pub(crate) fn discard(self) -> Call<()>
    where
        T: 'static,
    {
        self.map(|_| Ok(()))
    }
}

impl Call<Value> {
    /// A call of `function` (which requires `required` arguments) with
    /// `args`, its result as JSON: what [`functions`] makes. Trailing
    /// optional arguments left NULL are not sent, so the function's own
    /// defaults apply.
    fn of(function: &'static str, required: usize, mut args: Vec<Arg>) -> Call<Value> {
        while args.len() > required && matches!(args.last(), Some(Arg::Null)) {
            args.pop();
        }
        Call::new(function, args, json)
    }
}

/// An error message for `alk_retry` / `alk_fail`: a NUL character, which
/// PostgreSQL text cannot hold, is kept as U+FFFD on both engines, so no
/// handler's error text can stop a job from being given back.
fn error_text(error: &str) -> std::borrow::Cow<'_, str> {
    if error.contains('\0') {
        error.replace('\0', "\u{FFFD}").into()
    } else {
        error.into()
    }
}

/// Optional seconds.
fn secs(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}

fn unit(_: Value) -> Result<()> {
    Ok(())
}

fn json(v: Value) -> Result<Value> {
    Ok(v)
}

/// NULL (no such row) as `None`.
fn optional(v: Value) -> Result<Option<Value>> {
    Ok((!v.is_null()).then_some(v))
}

fn ids(v: Value) -> Result<Vec<i64>> {
    serde_json::from_value(v).map_err(Error::decode)
}

fn rows(v: Value) -> Result<Vec<Value>> {
    match v {
        Value::Array(rows) => Ok(rows),
        Value::Null => Ok(Vec::new()),
        other => Err(Error::decode(format!("expected rows, got {other}"))),
    }
}

fn check(kind: NameKind, name: &str) -> Result<()> {
    Ok(names::validate(kind, name)?)
}

// ---- queues (contract §5) ----

/// `alk_enqueue`: a job id.
pub fn enqueue<T: Serialize + ?Sized>(
    queue: &str,
    opts: &EnqueueOpts,
    job: &T,
) -> Result<Call<i64>> {
    check(NameKind::Queue, queue)?;
    let call = functions::alk_enqueue(queue, Arg::json(&opts.to_json()), payload(job)?);
    Ok(call.map(int))
}

/// `alk_enqueue` with the options as JSON text, passed on as given: the
/// engine parses and checks them like any caller's (the CLI's `--opts`).
pub fn enqueue_doc<T: Serialize + ?Sized>(
    queue: &str,
    opts: &str,
    payload: &T,
) -> Result<Call<i64>> {
    check(NameKind::Queue, queue)?;
    let call = functions::alk_enqueue(queue, Arg::Json(opts.to_string()), self::payload(payload)?);
    Ok(call.map(int))
}

/// `alk_enqueue_batch`: the ids, in order.
pub fn enqueue_batch<T: Serialize>(
    queue: &str,
    opts: &EnqueueOpts,
    jobs: &[T],
) -> Result<Call<Vec<i64>>> {
    check(NameKind::Queue, queue)?;
    let call = functions::alk_enqueue_batch(queue, Arg::json(&opts.to_json()), payload(jobs)?);
    Ok(call.map(ids))
}

/// What a claim returned: the jobs, and those whose payload this crate
/// cannot read (to be failed: [`Claimed::fail_unreadable`]).
#[derive(Debug)]
pub struct Claimed {
    /// The jobs to handle, in claim order.
    pub jobs: Vec<Job>,
    unreadable: Vec<Unreadable>,
}

impl Claimed {
    /// The `alk_fail` calls that dead-letter the unreadable jobs with the
    /// reason: run them in the claim's transaction, so no worker is handed
    /// (or stopped by) a job it cannot read.
    pub fn fail_unreadable(&mut self, worker: &str) -> Result<Vec<Call<bool>>> {
        std::mem::take(&mut self.unreadable)
            .into_iter()
            .map(|(id, error)| fail(id, worker, &error))
            .collect()
    }
}

fn claimed(v: Value) -> Result<Claimed> {
    let (jobs, unreadable) = Job::from_claim(&v)?;
    Ok(Claimed { jobs, unreadable })
}

/// `alk_claim`: up to `max_jobs` jobs of `queue`.
pub fn claim(queue: &str, worker: &str, max_jobs: i64) -> Result<Call<Claimed>> {
    check(NameKind::Queue, queue)?;
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_claim(queue, worker, Some(max_jobs)).map(claimed))
}

/// `alk_ack`: true if `worker` held the job.
pub fn ack(job_id: i64, worker: &str) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_ack(job_id, worker, None).map(boolean))
}

/// `alk_ack` with a result, kept while the queue retains completed jobs.
pub fn ack_with_result<T: Serialize + ?Sized>(
    job_id: i64,
    worker: &str,
    result: &T,
) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_ack(job_id, worker, Some(payload(result)?)).map(boolean))
}

/// `alk_ack_batch`: how many were acked.
pub fn ack_batch(job_ids: &[i64], worker: &str) -> Result<Call<i64>> {
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_ack_batch(job_ids, worker).map(int))
}

/// `alk_retry`: pending after `delay` (`None`: the stamped backoff), or
/// dead when the attempts are used up.
pub fn retry(
    job_id: i64,
    worker: &str,
    error: &str,
    delay: Option<Duration>,
) -> Result<Call<Retried>> {
    check(NameKind::Worker, worker)?;
    let call = functions::alk_retry(job_id, worker, &error_text(error), secs(delay));
    Ok(call.map(|v| Ok(Retried::from_state(&v))))
}

/// `alk_fail`: true if the job went dead.
pub fn fail(job_id: i64, worker: &str, error: &str) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_fail(job_id, worker, &error_text(error)).map(boolean))
}

/// `alk_heartbeat`: true if the claim was extended.
pub fn heartbeat(job_id: i64, worker: &str, extend: Option<Duration>) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_heartbeat(job_id, worker, secs(extend)).map(boolean))
}

/// `alk_release`: true if `worker` held an unexpired claim on the job, now
/// given back without spending an attempt; pending again after `delay`
/// (`None`: at once). Contract v1.3 §Q.
pub fn release(job_id: i64, worker: &str, delay: Option<Duration>) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_release(job_id, worker, secs(delay)).map(boolean))
}

/// `alk_release_batch`: how many of the jobs `worker` held unexpired claims
/// on, now given back as [`release`] gives one back.
pub fn release_batch(job_ids: &[i64], worker: &str, delay: Option<Duration>) -> Result<Call<i64>> {
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_release_batch(job_ids, worker, secs(delay)).map(int))
}

/// `alk_cancel`: true if a pending or running job was removed.
pub fn cancel(job_id: i64) -> Call<bool> {
    functions::alk_cancel(job_id).map(boolean)
}

/// `alk_get_job`: the job's document, `None` if there is no such job.
pub fn get_job(job_id: i64) -> Call<Option<Value>> {
    functions::alk_get_job(job_id).map(optional)
}

/// `alk_job_errors`: every error the job met, oldest first
/// (`[{attempt, error, at}]`), `None` if there is no such job.
pub fn job_errors(job_id: i64) -> Call<Option<Value>> {
    functions::alk_job_errors(job_id).map(optional)
}

/// `alk_delete_job`: true if a dead or completed job was deleted.
pub fn delete_job(job_id: i64) -> Call<bool> {
    functions::alk_delete_job(job_id).map(boolean)
}

/// `alk_requeue_dead`: true if a dead job went back to pending.
pub fn requeue_dead(job_id: i64) -> Call<bool> {
    functions::alk_requeue_dead(job_id).map(boolean)
}

/// `alk_queue_stats`: counts per state.
pub fn queue_stats(queue: &str) -> Result<Call<Value>> {
    check(NameKind::Queue, queue)?;
    Ok(functions::alk_queue_stats(queue))
}

/// `alk_queue_configure`: the queue's resolved options after the merge.
pub fn queue_configure(queue: &str, opts: &QueueOpts) -> Result<Call<Value>> {
    check(NameKind::Queue, queue)?;
    Ok(functions::alk_queue_configure(
        queue,
        Arg::json(&opts.to_json()),
    ))
}

/// `alk_queue_configure` with the options as a JSON document, passed on as
/// given: the engine checks every key and value (contract v1.1 §B), so a
/// form's unknown key is the engine's `InvalidOptions`, not dropped here.
pub fn queue_configure_doc(queue: &str, opts: &Value) -> Result<Call<Value>> {
    check(NameKind::Queue, queue)?;
    Ok(functions::alk_queue_configure(queue, Arg::json(opts)))
}

/// `alk_queue_opts`: the queue's resolved options.
pub fn queue_opts(queue: &str) -> Result<Call<Value>> {
    check(NameKind::Queue, queue)?;
    Ok(functions::alk_queue_opts(queue))
}

/// `alk_sweep`: jobs dead-lettered (expired, or final claim timed out);
/// `None`: every queue.
pub fn sweep(queue: Option<&str>) -> Result<Call<i64>> {
    if let Some(q) = queue {
        check(NameKind::Queue, q)?;
    }
    Ok(functions::alk_sweep(queue).map(int))
}

/// `alk_sequence` (contract v1.2 §K): how many committed events it gave
/// their offsets; `None`: every stream. On PostgreSQL a procedure that
/// commits transactions of its own: run it on a connection outside any
/// transaction (a store runs it so); in a transaction it fails with
/// `InvalidArgument`. On SQLite it returns 0 (a publish gives the offset).
pub fn sequence(stream: Option<&str>) -> Result<Call<i64>> {
    if let Some(s) = stream {
        check(NameKind::Stream, s)?;
    }
    Ok(functions::alk_sequence(stream).map(int))
}

/// `alk_queue_pause`: true if the queue was running.
pub fn queue_pause(queue: &str) -> Result<Call<bool>> {
    check(NameKind::Queue, queue)?;
    Ok(functions::alk_queue_pause(queue).map(boolean))
}

/// `alk_queue_resume`: true if the queue was paused.
pub fn queue_resume(queue: &str) -> Result<Call<bool>> {
    check(NameKind::Queue, queue)?;
    Ok(functions::alk_queue_resume(queue).map(boolean))
}

/// `alk_list_jobs`: job documents in ascending id after `after_id`.
pub fn list_jobs(
    queue: &str,
    state: Option<&str>,
    after_id: i64,
    max: i64,
) -> Result<Call<Vec<Value>>> {
    alkstore_core::names::validate_listed_queue(queue)?;
    Ok(functions::alk_list_jobs(queue, state, Some(after_id), Some(max)).map(rows))
}

/// `alk_requeue_dead_all`: how many dead jobs went back to pending.
pub fn requeue_dead_all(queue: &str) -> Result<Call<i64>> {
    alkstore_core::names::validate_listed_queue(queue)?;
    Ok(functions::alk_requeue_dead_all(queue).map(int))
}

/// `alk_purge`: how many jobs in `state` were deleted.
pub fn purge(queue: &str, state: &str) -> Result<Call<i64>> {
    alkstore_core::names::validate_listed_queue(queue)?;
    Ok(functions::alk_purge(queue, state).map(int))
}

/// `alk_prune`: rows deleted that outlived their retention.
pub fn prune(max_rows: i64) -> Call<i64> {
    functions::alk_prune(max_rows).map(int)
}

// ---- outboxes (contract §6, ADR-014: the outbox's name) ----

/// `alk_outbox_enqueue`: a message id.
pub fn outbox_enqueue<T: Serialize + ?Sized>(
    outbox: &str,
    opts: &EnqueueOpts,
    message: &T,
) -> Result<Call<i64>> {
    check(NameKind::Outbox, outbox)?;
    let call = functions::alk_outbox_enqueue(outbox, Arg::json(&opts.to_json()), payload(message)?);
    Ok(call.map(int))
}

/// `alk_outbox_claim`: up to `max_jobs` messages of `outbox`.
pub fn outbox_claim(outbox: &str, worker: &str, max_jobs: i64) -> Result<Call<Claimed>> {
    check(NameKind::Outbox, outbox)?;
    check(NameKind::Worker, worker)?;
    Ok(functions::alk_outbox_claim(outbox, worker, Some(max_jobs)).map(claimed))
}

/// `alk_outbox_pause`: true if the outbox was running.
pub fn outbox_pause(outbox: &str) -> Result<Call<bool>> {
    check(NameKind::Outbox, outbox)?;
    Ok(functions::alk_outbox_pause(outbox).map(boolean))
}

/// `alk_outbox_resume`: true if the outbox was paused.
pub fn outbox_resume(outbox: &str) -> Result<Call<bool>> {
    check(NameKind::Outbox, outbox)?;
    Ok(functions::alk_outbox_resume(outbox).map(boolean))
}

/// `alk_outbox_stats`: counts per state of the outbox's messages.
pub fn outbox_stats(outbox: &str) -> Result<Call<Value>> {
    check(NameKind::Outbox, outbox)?;
    Ok(functions::alk_outbox_stats(outbox))
}

// ---- streams (contract §7) ----

/// `alk_publish`: the event's id (its offset comes with reads).
pub fn publish<T: Serialize + ?Sized>(
    stream: &str,
    event: &T,
    key: Option<&str>,
) -> Result<Call<i64>> {
    check(NameKind::Stream, stream)?;
    Ok(functions::alk_publish(stream, payload(event)?, key).map(int))
}

/// A page of `alk_read`: the readable events and the offset of its last
/// row, readable or not (`None`: an empty page).
pub struct Page {
    /// The events this crate can read; the others are skipped with a warning.
    pub events: Vec<Event>,
    /// Where the next page starts.
    pub last: Option<i64>,
    /// How many rows the page had, readable or not.
    pub rows: usize,
}

impl Page {
    /// Whether the page holds as many rows as asked for (more may follow).
    pub fn full(&self, max: i64) -> bool {
        i64::try_from(self.rows).is_ok_and(|n| n >= max)
    }
}

/// `alk_read`: up to `max` events after `after`.
pub fn read(stream: &str, after: i64, max: i64) -> Result<Call<Page>> {
    check(NameKind::Stream, stream)?;
    let name = stream.to_string();
    Ok(functions::alk_read(stream, after, max).map(move |v| {
        let rows = v.as_array().map_or(0, Vec::len);
        let (events, last) = Event::page(&v, &name)?;
        Ok(Page { events, last, rows })
    }))
}

/// `alk_save_offset`: true if the consumer's offset advanced.
pub fn save_offset(stream: &str, consumer: &str, offset: i64) -> Result<Call<bool>> {
    check(NameKind::Stream, stream)?;
    check(NameKind::Consumer, consumer)?;
    Ok(functions::alk_save_offset(stream, consumer, offset).map(boolean))
}

/// `alk_get_offset`: the consumer's saved offset (0 if none).
pub fn get_offset(stream: &str, consumer: &str) -> Result<Call<i64>> {
    check(NameKind::Stream, stream)?;
    check(NameKind::Consumer, consumer)?;
    Ok(functions::alk_get_offset(stream, consumer).map(int))
}

/// `alk_stream_configure`: the stream's retention after the merge.
pub fn stream_configure(stream: &str, opts: &StreamOpts) -> Result<Call<Value>> {
    check(NameKind::Stream, stream)?;
    Ok(functions::alk_stream_configure(
        stream,
        Arg::json(&opts.to_json()),
    ))
}

/// `alk_stream_info`: offsets and retention.
pub fn stream_info(stream: &str) -> Result<Call<StreamInfo>> {
    check(NameKind::Stream, stream)?;
    Ok(functions::alk_stream_info(stream).map(|v| StreamInfo::from_json(&v)))
}

// ---- notifications (contract §8) ----

/// `alk_notify`: delivered when the transaction commits.
pub fn notify<T: Serialize + ?Sized>(channel: &str, message: &T) -> Result<Call<()>> {
    check(NameKind::Channel, channel)?;
    Ok(functions::alk_notify(channel, payload(message)?).map(unit))
}

#[cfg_attr(
    not(any(feature = "blocking", feature = "sqlx-sqlite")),
    allow(dead_code)
)]
/// `alk_notifications` (SQLite only): up to `max` notifications of
/// `channel` after the id `after`, oldest first (`[{id, payload}]`).
pub(crate) fn notifications(channel: &str, after: i64, max: i64) -> Call<Vec<Value>> {
    functions::alk_notifications(channel, after, Some(max)).map(rows)
}

#[cfg_attr(
    not(any(
        feature = "blocking",
        feature = "sqlx-postgres",
        feature = "tokio-postgres"
    )),
    allow(dead_code)
)]
/// `alk_channel` (PostgreSQL only): the server channel a notification
/// channel's name maps to.
pub(crate) fn channel(name: &str) -> Call<String> {
    functions::alk_channel(name).map(|v| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::decode(format!("expected a channel, got {v}")))
    })
}

// ---- wake-ups (contract §10, PostgreSQL only) ----

/// What a PostgreSQL session registers for wake-ups of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Listen {
    /// A queue's jobs (`alk_listen_queue`).
    Queue,
    /// An outbox's messages (`alk_listen_outbox`, the outbox's name).
    Outbox,
    /// A stream's events (`alk_listen_stream`).
    Stream,
}

#[cfg_attr(
    not(any(
        feature = "blocking",
        feature = "sqlx-postgres",
        feature = "tokio-postgres"
    )),
    allow(dead_code)
)]
/// `alk_listen_*`: registers the session for wake-ups of `name` for
/// `ttl_s` seconds; the server channel to LISTEN on.
pub(crate) fn listen(kind: Listen, name: &str, ttl_s: f64) -> Call<Value> {
    match kind {
        Listen::Queue => functions::alk_listen_queue(name, Some(ttl_s)),
        Listen::Outbox => functions::alk_listen_outbox(name, Some(ttl_s)),
        Listen::Stream => functions::alk_listen_stream(name, Some(ttl_s)),
    }
}

/// Whether `function` is a call a worker, producer or consumer makes per
/// job or event, whose work its arguments bound (a few tens of
/// microseconds; the catalogue's `bounded`): the sqlx SQLite store runs
/// these on the raw handle from the calling task, never waiting there for a
/// lock (docs/benchmarks.md, "Workers"); on sqlx's connections through
/// `lock_handle`, on the store `open_sqlite` made also on connections of
/// its own (async_store/direct.rs), without sqlx's connection thread.
#[cfg_attr(not(feature = "sqlx-sqlite"), allow(dead_code))]
pub(crate) fn on_handle(function: &str) -> bool {
    alkstore_core::catalogue::get(function).is_some_and(|f| f.bounded)
}

// ---- leases (contract §9) ----

/// `alk_lock_acquire`: the fencing token, `None` while another owner holds
/// the lease.
pub fn lock_acquire(name: &str, owner: &str, ttl: Duration) -> Result<Call<Option<i64>>> {
    check(NameKind::Lock, name)?;
    let call = functions::alk_lock_acquire(name, owner, ttl.as_secs_f64());
    Ok(call.map(|v| match v {
        Value::Null => Ok(None),
        v => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| Error::decode(format!("expected a token, got {v}"))),
    }))
}

/// `alk_lock_renew`: true if this owner held an unexpired lease.
pub fn lock_renew(name: &str, owner: &str, ttl: Duration) -> Result<Call<bool>> {
    check(NameKind::Lock, name)?;
    Ok(functions::alk_lock_renew(name, owner, ttl.as_secs_f64()).map(boolean))
}

/// `alk_lock_release`: true if this owner held an unexpired lease.
pub fn lock_release(name: &str, owner: &str) -> Result<Call<bool>> {
    check(NameKind::Lock, name)?;
    Ok(functions::alk_lock_release(name, owner).map(boolean))
}

// ---- schedules (contract v1.1 §F) ----

/// `alk_schedule`: the next fire time (RFC 3339).
pub fn schedule<T: Serialize + ?Sized>(
    name: &str,
    queue: &str,
    spec: &ScheduleSpec,
    job: &T,
    opts: &EnqueueOpts,
) -> Result<Call<String>> {
    check(NameKind::Queue, queue)?;
    let call = functions::alk_schedule(
        name,
        queue,
        Arg::json(&spec.to_json()),
        payload(job)?,
        Some(Arg::json(&opts.to_json())),
    );
    Ok(call.map(|v| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::decode(format!("expected a time, got {v}")))
    }))
}

/// `alk_unschedule`: true if the schedule existed.
pub fn unschedule(name: &str) -> Call<bool> {
    functions::alk_unschedule(name).map(boolean)
}

/// `alk_schedules`: every schedule's document.
pub fn schedules() -> Call<Vec<Value>> {
    functions::alk_schedules().map(rows)
}

/// `alk_schedule_tick`: how many jobs the due occurrences enqueued.
pub fn schedule_tick() -> Call<i64> {
    functions::alk_schedule_tick().map(int)
}

// ---- the schema and the admin listings (contract v1.1 §D) ----

/// `alk_init`: creates or upgrades the schema (what opening a store does).
pub fn init() -> Call<()> {
    functions::alk_init().map(unit)
}

/// `alk_version`: the engine's and the schema's versions, as a document.
pub fn version() -> Call<Value> {
    functions::alk_version()
}

/// `alk_locks`: every lease with its owner and expiry.
pub fn locks() -> Call<Vec<Value>> {
    functions::alk_locks().map(rows)
}

/// `alk_queue_limits`: every queue's flow-control limits and what runs
/// under them now (contract v1.2 §I).
pub fn queue_limits() -> Call<Vec<Value>> {
    functions::alk_queue_limits().map(rows)
}

/// `alk_queues`: a summary of every queue.
pub fn queues() -> Call<Vec<QueueSummary>> {
    functions::alk_queues().map(|v| rows(v)?.iter().map(QueueSummary::from_json).collect())
}

/// `alk_streams`: every stream with its consumers.
pub fn streams() -> Call<Vec<StreamSummary>> {
    functions::alk_streams().map(|v| rows(v)?.iter().map(StreamSummary::from_json).collect())
}

/// One row of `alk_queues`.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSummary {
    /// The queue's name.
    pub queue: String,
    /// Jobs runnable now.
    pub pending: i64,
    /// Jobs waiting for their run time.
    pub scheduled: i64,
    /// Jobs claimed.
    pub running: i64,
    /// Dead-lettered jobs.
    pub dead: i64,
    /// Completed jobs kept by retention.
    pub completed: i64,
    /// Whether claims are paused.
    pub paused: bool,
    /// Seconds the oldest runnable job has waited (`None`: none waits).
    pub oldest_runnable_age_s: Option<f64>,
}

impl QueueSummary {
    fn from_json(v: &Value) -> Result<QueueSummary> {
        let n = |k: &str| field_i64(v, k);
        Ok(QueueSummary {
            queue: field_str(v, "queue")?,
            pending: n("pending")?,
            scheduled: n("scheduled")?,
            running: n("running")?,
            dead: n("dead")?,
            completed: n("completed")?,
            paused: v["paused"]
                .as_bool()
                .ok_or_else(|| Error::decode(format!("no paused in {v}")))?,
            oldest_runnable_age_s: v["oldest_runnable_age_s"].as_f64(),
        })
    }
}

/// One row of `alk_streams`.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamSummary {
    /// The stream's name.
    pub stream: String,
    /// The first kept offset (0 when none is kept).
    pub first_offset: i64,
    /// The last offset given (0 when none).
    pub last_offset: i64,
    /// Its consumers with their saved offsets.
    pub consumers: Vec<ConsumerOffset>,
}

/// A consumer's saved offset and how far it is behind.
#[derive(Clone, Debug, PartialEq)]
pub struct ConsumerOffset {
    /// The consumer's name.
    pub consumer: String,
    /// Its saved offset.
    pub offset: i64,
    /// Events after it.
    pub lag: i64,
}

impl StreamSummary {
    fn from_json(v: &Value) -> Result<StreamSummary> {
        let consumers = match &v["consumers"] {
            Value::Array(cs) => cs
                .iter()
                .map(|c| {
                    Ok(ConsumerOffset {
                        consumer: field_str(c, "consumer")?,
                        offset: field_i64(c, "offset")?,
                        lag: field_i64(c, "lag")?,
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            Value::Null => Vec::new(),
            other => return Err(Error::decode(format!("unexpected consumers {other}"))),
        };
        Ok(StreamSummary {
            stream: field_str(v, "stream")?,
            first_offset: field_i64(v, "first_offset")?,
            last_offset: field_i64(v, "last_offset")?,
            consumers,
        })
    }
}

fn field_i64(v: &Value, key: &str) -> Result<i64> {
    v[key]
        .as_i64()
        .ok_or_else(|| Error::decode(format!("no integer {key} in {v}")))
}

fn field_str(v: &Value, key: &str) -> Result<String> {
    v[key]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::decode(format!("no text {key} in {v}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated constructors send what the typed ones sent: a
    /// trailing optional argument given as `None` is left out (its default
    /// applies), one in the middle is NULL, and a required argument for
    /// which NULL has a meaning (`alk_sequence`'s stream) is sent as NULL.
    #[test]
    fn optional_arguments_left_out_take_their_defaults() {
        let ack = ack(7, "w").unwrap();
        assert!(matches!(ack.args(), [Arg::Int(7), Arg::Text(w)] if w == "w"));
        let with = ack_with_result(7, "w", &serde_json::json!({"ok": 1})).unwrap();
        assert!(matches!(with.args(), [_, _, Arg::Json(r)] if r == r#"{"ok":1}"#));
        let retry = retry(7, "w", "a\0b", None).unwrap();
        assert!(matches!(retry.args(), [_, _, Arg::Text(e)] if e == "a\u{FFFD}b"));
        let listed = list_jobs("q", None, 0, 5).unwrap();
        assert!(matches!(
            listed.args(),
            [_, Arg::Null, Arg::Int(0), Arg::Int(5)]
        ));
        assert!(matches!(sweep(None).unwrap().args(), []));
        assert!(matches!(sequence(None).unwrap().args(), [Arg::Null]));
        assert_eq!(functions::alk_read("s", 3, 10).args().len(), 3);
    }
}
