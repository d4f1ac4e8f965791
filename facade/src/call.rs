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

    /// The same call with its result dropped (a settlement whose answer the
    /// caller does not use).
    pub(crate) fn discard(self) -> Call<()>
    where
        T: 'static,
    {
        let decode = self.decode;
        Call {
            function: self.function,
            args: self.args,
            decode: Box::new(move |v| decode(v).map(drop)),
        }
    }
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
    let args = vec![queue.into(), Arg::json(&opts.to_json()), payload(job)?];
    Ok(Call::new("alk_enqueue", args, int))
}

/// `alk_enqueue` with the options as JSON text, passed on as given: the
/// engine parses and checks them like any caller's (the CLI's `--opts`).
pub fn enqueue_doc<T: Serialize + ?Sized>(
    queue: &str,
    opts: &str,
    payload: &T,
) -> Result<Call<i64>> {
    check(NameKind::Queue, queue)?;
    let args = vec![
        queue.into(),
        Arg::Json(opts.to_string()),
        self::payload(payload)?,
    ];
    Ok(Call::new("alk_enqueue", args, int))
}

/// `alk_enqueue_batch`: the ids, in order.
pub fn enqueue_batch<T: Serialize>(
    queue: &str,
    opts: &EnqueueOpts,
    jobs: &[T],
) -> Result<Call<Vec<i64>>> {
    check(NameKind::Queue, queue)?;
    let args = vec![queue.into(), Arg::json(&opts.to_json()), payload(jobs)?];
    Ok(Call::new("alk_enqueue_batch", args, ids))
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
    Ok(Call::new(
        "alk_claim",
        vec![queue.into(), worker.into(), max_jobs.into()],
        claimed,
    ))
}

/// `alk_ack`: true if `worker` held the job.
pub fn ack(job_id: i64, worker: &str) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    Ok(Call::new(
        "alk_ack",
        vec![job_id.into(), worker.into()],
        boolean,
    ))
}

/// `alk_ack` with a result, kept while the queue retains completed jobs.
pub fn ack_with_result<T: Serialize + ?Sized>(
    job_id: i64,
    worker: &str,
    result: &T,
) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    let args = vec![job_id.into(), worker.into(), payload(result)?];
    Ok(Call::new("alk_ack", args, boolean))
}

/// `alk_ack_batch`: how many were acked.
pub fn ack_batch(job_ids: &[i64], worker: &str) -> Result<Call<i64>> {
    check(NameKind::Worker, worker)?;
    let args = vec![Arg::Ids(job_ids.to_vec()), worker.into()];
    Ok(Call::new("alk_ack_batch", args, int))
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
    let args = vec![
        job_id.into(),
        worker.into(),
        Arg::error_text(error),
        Arg::opt_secs(delay),
    ];
    Ok(Call::new("alk_retry", args, |v| {
        Ok(Retried::from_state(&v))
    }))
}

/// `alk_fail`: true if the job went dead.
pub fn fail(job_id: i64, worker: &str, error: &str) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    let args = vec![job_id.into(), worker.into(), Arg::error_text(error)];
    Ok(Call::new("alk_fail", args, boolean))
}

/// `alk_heartbeat`: true if the claim was extended.
pub fn heartbeat(job_id: i64, worker: &str, extend: Option<Duration>) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    let args = vec![job_id.into(), worker.into(), Arg::opt_secs(extend)];
    Ok(Call::new("alk_heartbeat", args, boolean))
}

/// `alk_release`: true if `worker` held an unexpired claim on the job, now
/// given back without spending an attempt; pending again after `delay`
/// (`None`: at once). Contract v1.3 §Q.
pub fn release(job_id: i64, worker: &str, delay: Option<Duration>) -> Result<Call<bool>> {
    check(NameKind::Worker, worker)?;
    let args = vec![job_id.into(), worker.into(), Arg::opt_secs(delay)];
    Ok(Call::new("alk_release", args, boolean))
}

/// `alk_release_batch`: how many of the jobs `worker` held unexpired claims
/// on, now given back as [`release`] gives one back.
pub fn release_batch(job_ids: &[i64], worker: &str, delay: Option<Duration>) -> Result<Call<i64>> {
    check(NameKind::Worker, worker)?;
    let args = vec![
        Arg::Ids(job_ids.to_vec()),
        worker.into(),
        Arg::opt_secs(delay),
    ];
    Ok(Call::new("alk_release_batch", args, int))
}

/// `alk_cancel`: true if a pending or running job was removed.
pub fn cancel(job_id: i64) -> Call<bool> {
    Call::new("alk_cancel", vec![job_id.into()], boolean)
}

/// `alk_get_job`: the job's document, `None` if there is no such job.
pub fn get_job(job_id: i64) -> Call<Option<Value>> {
    Call::new("alk_get_job", vec![job_id.into()], optional)
}

/// `alk_job_errors`: every error the job met, oldest first
/// (`[{attempt, error, at}]`), `None` if there is no such job.
pub fn job_errors(job_id: i64) -> Call<Option<Value>> {
    Call::new("alk_job_errors", vec![job_id.into()], optional)
}

/// `alk_delete_job`: true if a dead or completed job was deleted.
pub fn delete_job(job_id: i64) -> Call<bool> {
    Call::new("alk_delete_job", vec![job_id.into()], boolean)
}

/// `alk_requeue_dead`: true if a dead job went back to pending.
pub fn requeue_dead(job_id: i64) -> Call<bool> {
    Call::new("alk_requeue_dead", vec![job_id.into()], boolean)
}

/// `alk_queue_stats`: counts per state.
pub fn queue_stats(queue: &str) -> Result<Call<Value>> {
    check(NameKind::Queue, queue)?;
    Ok(Call::new("alk_queue_stats", vec![queue.into()], json))
}

/// `alk_queue_configure`: the queue's resolved options after the merge.
pub fn queue_configure(queue: &str, opts: &QueueOpts) -> Result<Call<Value>> {
    check(NameKind::Queue, queue)?;
    let args = vec![queue.into(), Arg::json(&opts.to_json())];
    Ok(Call::new("alk_queue_configure", args, json))
}

/// `alk_queue_configure` with the options as a JSON document, passed on as
/// given: the engine checks every key and value (contract v1.1 §B), so a
/// form's unknown key is the engine's `InvalidOptions`, not dropped here.
pub fn queue_configure_doc(queue: &str, opts: &Value) -> Result<Call<Value>> {
    check(NameKind::Queue, queue)?;
    let args = vec![queue.into(), Arg::json(opts)];
    Ok(Call::new("alk_queue_configure", args, json))
}

/// `alk_queue_opts`: the queue's resolved options.
pub fn queue_opts(queue: &str) -> Result<Call<Value>> {
    check(NameKind::Queue, queue)?;
    Ok(Call::new("alk_queue_opts", vec![queue.into()], json))
}

/// `alk_sweep`: jobs dead-lettered (expired, or final claim timed out);
/// `None`: every queue.
pub fn sweep(queue: Option<&str>) -> Result<Call<i64>> {
    if let Some(q) = queue {
        check(NameKind::Queue, q)?;
    }
    Ok(Call::new("alk_sweep", vec![Arg::opt_text(queue)], int))
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
    Ok(Call::new("alk_sequence", vec![Arg::opt_text(stream)], int))
}

/// `alk_queue_pause`: true if the queue was running.
pub fn queue_pause(queue: &str) -> Result<Call<bool>> {
    check(NameKind::Queue, queue)?;
    Ok(Call::new("alk_queue_pause", vec![queue.into()], boolean))
}

/// `alk_queue_resume`: true if the queue was paused.
pub fn queue_resume(queue: &str) -> Result<Call<bool>> {
    check(NameKind::Queue, queue)?;
    Ok(Call::new("alk_queue_resume", vec![queue.into()], boolean))
}

/// `alk_list_jobs`: job documents in ascending id after `after_id`.
pub fn list_jobs(
    queue: &str,
    state: Option<&str>,
    after_id: i64,
    max: i64,
) -> Result<Call<Vec<Value>>> {
    alkstore_core::names::validate_listed_queue(queue)?;
    let args = vec![
        queue.into(),
        Arg::opt_text(state),
        after_id.into(),
        max.into(),
    ];
    Ok(Call::new("alk_list_jobs", args, rows))
}

/// `alk_requeue_dead_all`: how many dead jobs went back to pending.
pub fn requeue_dead_all(queue: &str) -> Result<Call<i64>> {
    alkstore_core::names::validate_listed_queue(queue)?;
    Ok(Call::new("alk_requeue_dead_all", vec![queue.into()], int))
}

/// `alk_purge`: how many jobs in `state` were deleted.
pub fn purge(queue: &str, state: &str) -> Result<Call<i64>> {
    alkstore_core::names::validate_listed_queue(queue)?;
    Ok(Call::new(
        "alk_purge",
        vec![queue.into(), state.into()],
        int,
    ))
}

/// `alk_prune`: rows deleted that outlived their retention.
pub fn prune(max_rows: i64) -> Call<i64> {
    Call::new("alk_prune", vec![max_rows.into()], int)
}

// ---- outboxes (contract §6, ADR-014: the outbox's name) ----

/// `alk_outbox_enqueue`: a message id.
pub fn outbox_enqueue<T: Serialize + ?Sized>(
    outbox: &str,
    opts: &EnqueueOpts,
    message: &T,
) -> Result<Call<i64>> {
    check(NameKind::Outbox, outbox)?;
    let args = vec![outbox.into(), Arg::json(&opts.to_json()), payload(message)?];
    Ok(Call::new("alk_outbox_enqueue", args, int))
}

/// `alk_outbox_claim`: up to `max_jobs` messages of `outbox`.
pub fn outbox_claim(outbox: &str, worker: &str, max_jobs: i64) -> Result<Call<Claimed>> {
    check(NameKind::Outbox, outbox)?;
    check(NameKind::Worker, worker)?;
    Ok(Call::new(
        "alk_outbox_claim",
        vec![outbox.into(), worker.into(), max_jobs.into()],
        claimed,
    ))
}

/// `alk_outbox_pause`: true if the outbox was running.
pub fn outbox_pause(outbox: &str) -> Result<Call<bool>> {
    check(NameKind::Outbox, outbox)?;
    Ok(Call::new("alk_outbox_pause", vec![outbox.into()], boolean))
}

/// `alk_outbox_resume`: true if the outbox was paused.
pub fn outbox_resume(outbox: &str) -> Result<Call<bool>> {
    check(NameKind::Outbox, outbox)?;
    Ok(Call::new("alk_outbox_resume", vec![outbox.into()], boolean))
}

/// `alk_outbox_stats`: counts per state of the outbox's messages.
pub fn outbox_stats(outbox: &str) -> Result<Call<Value>> {
    check(NameKind::Outbox, outbox)?;
    Ok(Call::new("alk_outbox_stats", vec![outbox.into()], json))
}

// ---- streams (contract §7) ----

/// `alk_publish`: the event's id (its offset comes with reads).
pub fn publish<T: Serialize + ?Sized>(
    stream: &str,
    event: &T,
    key: Option<&str>,
) -> Result<Call<i64>> {
    check(NameKind::Stream, stream)?;
    let args = vec![stream.into(), payload(event)?, Arg::opt_text(key)];
    Ok(Call::new("alk_publish", args, int))
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
    Ok(Call::new(
        "alk_read",
        vec![stream.into(), after.into(), max.into()],
        move |v| {
            let rows = v.as_array().map_or(0, Vec::len);
            let (events, last) = Event::page(&v, &name)?;
            Ok(Page { events, last, rows })
        },
    ))
}

/// `alk_save_offset`: true if the consumer's offset advanced.
pub fn save_offset(stream: &str, consumer: &str, offset: i64) -> Result<Call<bool>> {
    check(NameKind::Stream, stream)?;
    check(NameKind::Consumer, consumer)?;
    let args = vec![stream.into(), consumer.into(), offset.into()];
    Ok(Call::new("alk_save_offset", args, boolean))
}

/// `alk_get_offset`: the consumer's saved offset (0 if none).
pub fn get_offset(stream: &str, consumer: &str) -> Result<Call<i64>> {
    check(NameKind::Stream, stream)?;
    check(NameKind::Consumer, consumer)?;
    Ok(Call::new(
        "alk_get_offset",
        vec![stream.into(), consumer.into()],
        int,
    ))
}

/// `alk_stream_configure`: the stream's retention after the merge.
pub fn stream_configure(stream: &str, opts: &StreamOpts) -> Result<Call<Value>> {
    check(NameKind::Stream, stream)?;
    let args = vec![stream.into(), Arg::json(&opts.to_json())];
    Ok(Call::new("alk_stream_configure", args, json))
}

/// `alk_stream_info`: offsets and retention.
pub fn stream_info(stream: &str) -> Result<Call<StreamInfo>> {
    check(NameKind::Stream, stream)?;
    Ok(Call::new("alk_stream_info", vec![stream.into()], |v| {
        StreamInfo::from_json(&v)
    }))
}

// ---- notifications (contract §8) ----

/// `alk_notify`: delivered when the transaction commits.
pub fn notify<T: Serialize + ?Sized>(channel: &str, message: &T) -> Result<Call<()>> {
    check(NameKind::Channel, channel)?;
    Ok(Call::new(
        "alk_notify",
        vec![channel.into(), payload(message)?],
        unit,
    ))
}

#[cfg_attr(
    not(any(feature = "blocking", feature = "sqlx-sqlite")),
    allow(dead_code)
)]
/// `alk_notifications` (SQLite only): up to `max` notifications of
/// `channel` after the id `after`, oldest first (`[{id, payload}]`).
pub(crate) fn notifications(channel: &str, after: i64, max: i64) -> Call<Vec<Value>> {
    Call::new(
        "alk_notifications",
        vec![channel.into(), after.into(), max.into()],
        rows,
    )
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
    Call::new("alk_channel", vec![name.into()], |v| {
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
    let function = match kind {
        Listen::Queue => "alk_listen_queue",
        Listen::Outbox => "alk_listen_outbox",
        Listen::Stream => "alk_listen_stream",
    };
    Call::new(function, vec![name.into(), Arg::Num(ttl_s)], json)
}

/// The calls a worker, producer or consumer makes per job or event, whose
/// work is bounded by their arguments (a few tens of microseconds): the
/// sqlx SQLite store runs them on the raw handle from the calling task,
/// never waiting there for a lock (docs/benchmarks.md, "Workers"); on
/// sqlx's connections through `lock_handle`, on the store `open_sqlite`
/// made also on connections of its own (async_store/direct.rs), without
/// sqlx's connection thread.
#[cfg_attr(not(feature = "sqlx-sqlite"), allow(dead_code))]
pub(crate) const ON_HANDLE: &[&str] = &[
    "alk_enqueue",
    "alk_enqueue_batch",
    "alk_claim",
    "alk_ack",
    "alk_ack_batch",
    "alk_retry",
    "alk_fail",
    "alk_heartbeat",
    "alk_publish",
    "alk_read",
    "alk_save_offset",
    "alk_outbox_enqueue",
    "alk_outbox_claim",
    "alk_notify",
    "alk_get_offset",
];

// ---- leases (contract §9) ----

/// `alk_lock_acquire`: the fencing token, `None` while another owner holds
/// the lease.
pub fn lock_acquire(name: &str, owner: &str, ttl: Duration) -> Result<Call<Option<i64>>> {
    check(NameKind::Lock, name)?;
    let args = vec![name.into(), owner.into(), Arg::Num(ttl.as_secs_f64())];
    Ok(Call::new("alk_lock_acquire", args, |v| match v {
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
    let args = vec![name.into(), owner.into(), Arg::Num(ttl.as_secs_f64())];
    Ok(Call::new("alk_lock_renew", args, boolean))
}

/// `alk_lock_release`: true if this owner held an unexpired lease.
pub fn lock_release(name: &str, owner: &str) -> Result<Call<bool>> {
    check(NameKind::Lock, name)?;
    Ok(Call::new(
        "alk_lock_release",
        vec![name.into(), owner.into()],
        boolean,
    ))
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
    let args = vec![
        name.into(),
        queue.into(),
        Arg::json(&spec.to_json()),
        payload(job)?,
        Arg::json(&opts.to_json()),
    ];
    Ok(Call::new("alk_schedule", args, |v| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::decode(format!("expected a time, got {v}")))
    }))
}

/// `alk_unschedule`: true if the schedule existed.
pub fn unschedule(name: &str) -> Call<bool> {
    Call::new("alk_unschedule", vec![name.into()], boolean)
}

/// `alk_schedules`: every schedule's document.
pub fn schedules() -> Call<Vec<Value>> {
    Call::new("alk_schedules", vec![], rows)
}

/// `alk_schedule_tick`: how many jobs the due occurrences enqueued.
pub fn schedule_tick() -> Call<i64> {
    Call::new("alk_schedule_tick", vec![], int)
}

// ---- the schema and the admin listings (contract v1.1 §D) ----

/// `alk_init`: creates or upgrades the schema (what opening a store does).
pub fn init() -> Call<()> {
    Call::new("alk_init", vec![], unit)
}

/// `alk_version`: the engine's and the schema's versions, as a document.
pub fn version() -> Call<Value> {
    Call::new("alk_version", vec![], json)
}

/// `alk_locks`: every lease with its owner and expiry.
pub fn locks() -> Call<Vec<Value>> {
    Call::new("alk_locks", vec![], rows)
}

/// `alk_queue_limits`: every queue's flow-control limits and what runs
/// under them now (contract v1.2 §I).
pub fn queue_limits() -> Call<Vec<Value>> {
    Call::new("alk_queue_limits", vec![], rows)
}

/// `alk_queues`: a summary of every queue.
pub fn queues() -> Call<Vec<QueueSummary>> {
    Call::new("alk_queues", vec![], |v| {
        rows(v)?.iter().map(QueueSummary::from_json).collect()
    })
}

/// `alk_streams`: every stream with its consumers.
pub fn streams() -> Call<Vec<StreamSummary>> {
    Call::new("alk_streams", vec![], |v| {
        rows(v)?.iter().map(StreamSummary::from_json).collect()
    })
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
