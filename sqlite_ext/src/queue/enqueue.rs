//! Enqueue (contract §5, v1.1 §C1–§C2): one job or a batch, stamped with
//! the queue's options, into its group and behind its dependencies.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::json::{self};
use crate::out::Out;
use crate::{deps, group};
use alkstore_core::time::now_ms;
use alkstore_core::{err, Code, EnqueueOpts, NameKind, QueueOpts};
use serde_json::value::RawValue;

/// `alk_enqueue(queue, opts, payload)` → job id.
pub fn alk_enqueue(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.name(0, NameKind::Queue)?;
    let opts = EnqueueOpts::parse(args.opts(1)?.as_ref())?;
    let payload = args.payload(2, "payload")?;
    let stamped = queue_opts(conn, queue)?;
    Ok(Out::Int(enqueue_one(
        conn, queue, &stamped, &opts, &payload,
    )?))
}

/// Enqueues one job with its options (shared by queues and outboxes): an
/// idempotency key still held answers with its job's id and writes nothing
/// (contract v1.1 §C1); a `group_key` joins the job to its group (§C2).
pub fn enqueue_one(
    conn: &Conn,
    queue: &str,
    stamped: &QueueOpts,
    opts: &EnqueueOpts,
    payload: &str,
) -> Result<i64> {
    if opts.idempotency_key.is_none() && opts.group_key.is_none() && opts.depends_on.is_none() {
        return insert_job(
            conn,
            queue,
            stamped,
            opts,
            payload,
            now_ms(),
            "pending",
            None,
        );
    }
    // Under the write lock: a second enqueue of the key waits for the first
    // transaction to end, then sees its key.
    let now = conn.now_locked()?;
    let resolved = match &opts.depends_on {
        Some(ids) => Some(deps::resolve(conn, ids, false)?),
        None => None,
    };
    if let Some(key) = &opts.idempotency_key {
        let mut st = conn.stmt("idempotency_get")?;
        st.bind_text(1, queue);
        st.bind_text(2, key);
        st.bind_i64(3, now);
        if st.step_row()? {
            return Ok(st.i64(0));
        }
    }
    let state = dependent_state(resolved.as_ref());
    // (A job dead at once, its dependency dead or cancelled, joins no group.)
    let state = match &opts.group_key {
        Some(g) if state != "dead" && !group::join(conn, queue, g, 1)? => "waiting",
        _ => state,
    };
    let id = insert_job(
        conn,
        queue,
        stamped,
        opts,
        payload,
        now,
        state,
        resolved.as_ref(),
    )?;
    if let Some(r) = resolved.as_ref().filter(|r| r.failed.is_none()) {
        deps::link(conn, &[id], &r.waiting)?;
    }
    if let Some(key) = &opts.idempotency_key {
        let mut st = conn.stmt("idempotency_put")?;
        st.bind_text(1, queue);
        st.bind_text(2, key);
        st.bind_i64(3, id);
        st.bind_i64(4, now + opts.idempotency_ttl_ms());
        st.run()?;
    }
    Ok(id)
}

/// `alk_enqueue_batch(queue, opts, payloads)` → JSON array of ids, in order.
pub fn alk_enqueue_batch(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.name(0, NameKind::Queue)?;
    let opts = EnqueueOpts::parse_batch(args.opts(1)?.as_ref())?;
    let payloads = args.payload(2, "payloads")?;
    let items = payload_array(&payloads)?;
    let stamped = queue_opts(conn, queue)?;
    let now = now_ms();
    let resolved = match &opts.depends_on {
        Some(ids) if !items.is_empty() => Some(deps::resolve(conn, ids, false)?),
        _ => None,
    };
    let first = dependent_state(resolved.as_ref());
    // With a group, the jobs join it in payload order: the first heads it
    // if it was empty.
    let mut head = match &opts.group_key {
        Some(g) if !items.is_empty() && first != "dead" => {
            group::join(conn, queue, g, items.len() as i64)?
        }
        _ => true,
    };
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let state = if head || first == "dead" {
            first
        } else {
            "waiting"
        };
        ids.push(insert_job(
            conn,
            queue,
            &stamped,
            &opts,
            item.get(),
            now,
            state,
            resolved.as_ref(),
        )?);
        head = opts.group_key.is_none();
    }
    if let Some(r) = resolved.as_ref().filter(|r| r.failed.is_none()) {
        deps::link(conn, &ids, &r.waiting)?;
    }
    Ok(Out::Text(json::int_array(&ids)))
}

/// Splits a JSON array into its elements' text (already checked as JSON).
pub fn payload_array(payloads: &str) -> Result<Vec<&RawValue>> {
    serde_json::from_str::<Vec<&RawValue>>(payloads).or_else(|e| {
        err(
            Code::InvalidPayload,
            format!("payloads must be a JSON array: {e}"),
        )
        .map_err(Into::into)
    })
}

/// The options a job enqueued now into `queue` is stamped with.
pub fn queue_opts(conn: &Conn, queue: &str) -> Result<QueueOpts> {
    let mut st = conn.stmt("queue_opts")?;
    st.bind_text(1, queue);
    if !st.step_row()? {
        return Ok(QueueOpts::default());
    }
    Ok(QueueOpts {
        visibility_timeout_ms: st.i64(0),
        max_attempts: st.i64(1) as i32,
        backoff_base_ms: st.i64(2),
        backoff_max_ms: st.i64(3),
        retain_completed_ms: st.i64(4),
        retain_dead_ms: st.opt_i64(5),
    })
}

/// The state of a job written with dependencies resolved as `resolved`
/// (before its group): `dead` when one ended without an ack, `blocked`
/// while some are not acked, else `pending`.
fn dependent_state(resolved: Option<&deps::Resolved>) -> &'static str {
    match resolved {
        Some(r) if r.failed.is_some() => "dead",
        Some(r) if !r.waiting.is_empty() => "blocked",
        _ => "pending",
    }
}

/// Inserts one job in `state`, stamped with the resolved options and its
/// dependencies as `resolved`; returns its id.
#[allow(clippy::too_many_arguments)]
fn insert_job(
    conn: &Conn,
    queue: &str,
    stamped: &QueueOpts,
    opts: &EnqueueOpts,
    payload: &str,
    now: i64,
    state: &str,
    resolved: Option<&deps::Resolved>,
) -> Result<i64> {
    let run_at = opts.run_at(now);
    // A job that would be pending but is due later is scheduled: out of the
    // claim index (contract v1.2 §H; schema.sql).
    let state = if state == "pending" && run_at > now {
        "scheduled"
    } else {
        state
    };
    // The plain statement for plain jobs: fewer parameters on the hot path.
    let plain = state == "pending"
        && opts.group_key.is_none()
        && opts.idempotency_key.is_none()
        && opts.limit_key.is_none()
        && opts.depends_on.is_none();
    let mut st = conn.stmt(if plain { "enqueue" } else { "enqueue_keyed" })?;
    if !plain {
        st.bind_text(11, state);
        st.bind_opt_text(12, opts.group_key.as_deref());
        st.bind_opt_text(13, opts.idempotency_key.as_deref());
        st.bind_opt_text(14, opts.limit_key.as_deref());
        let depends_on = opts.depends_on.as_deref().map(json::int_array);
        st.bind_opt_text(15, depends_on.as_deref());
        let left = resolved.map_or(0, |r| r.waiting.len() as i64);
        st.bind_opt_i64(16, (left > 0).then_some(left));
        let failed = resolved.and_then(|r| r.failed.as_deref());
        st.bind_opt_text(17, failed);
        st.bind_opt_i64(18, failed.map(|_| now));
    }
    st.bind_text(1, queue);
    st.bind_text(2, payload);
    st.bind_i64(3, opts.priority as i64);
    st.bind_i64(4, opts.max_attempts.unwrap_or(stamped.max_attempts) as i64);
    st.bind_i64(5, stamped.visibility_timeout_ms);
    st.bind_i64(6, stamped.backoff_base_ms);
    st.bind_i64(7, stamped.backoff_max_ms);
    st.bind_i64(8, run_at);
    st.bind_i64(9, now);
    st.bind_opt_i64(10, opts.expires_at(now));
    st.run()?;
    Ok(conn.db.last_insert_rowid())
}
