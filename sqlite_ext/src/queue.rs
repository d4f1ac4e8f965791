//! Queues (contract §5): enqueue with stamping, claims in claim order,
//! the job-id functions, options, stats and sweeping.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::function::Out;
use crate::json::{self, Obj};
use crate::{deps, group, limit, pause};
use alkstore_core::opts::backoff_ms;
use alkstore_core::time::{self, now_ms};
use alkstore_core::{err, Code, EnqueueOpts, NameKind, QueueLimits, QueueOpts};
use serde_json::value::RawValue;

/// `alk_enqueue(queue, opts, payload)` → job id.
pub fn enqueue(conn: &Conn, args: &Args) -> Result<Out> {
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
pub fn enqueue_batch(conn: &Conn, args: &Args) -> Result<Out> {
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

/// `alk_claim(queue, worker[, max_jobs])` → JSON array of claimed jobs.
pub fn claim(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.name(0, NameKind::Queue)?;
    claim_from(conn, queue, args)
}

/// Claims from `queue` for the worker and count in `args` 1 and 2.
pub fn claim_from(conn: &Conn, queue: &str, args: &Args) -> Result<Out> {
    let worker = args.name(1, NameKind::Worker)?;
    let max_jobs = args.batch_size(2, "max_jobs", 1)?;
    Ok(Out::Text(claim_jobs(conn, queue, worker, max_jobs)?))
}

/// A job that may be claimed, in claim order.
struct Candidate {
    order: (std::cmp::Reverse<i64>, i64, i64),
    /// Must be dead-lettered instead (statement that does it, if so).
    dead_letter: Option<&'static str>,
    /// A running job whose claim expired (not one waiting to run).
    expired: bool,
    attempts: i64,
    max_attempts: i64,
    visibility_timeout_ms: i64,
    payload: String,
    /// Its per-key limits' partition (contract v1.2 §I).
    limit_key: Option<String>,
}

fn claim_jobs(conn: &Conn, queue: &str, worker: &str, max_jobs: i64) -> Result<String> {
    if pause::is_paused(conn, queue)? {
        return Ok("[]".into()); // contract v1.1 §C4
    }
    let now = conn.now_locked()?;
    let mut out = String::with_capacity(64 + 256 * max_jobs as usize);
    out.push('[');
    let mut claimed = 0;
    // A queue with limits (contract v1.2 §I): candidates whose key is at its
    // limit are stepped over, so each round reads that many more.
    let mut limiter = limit::Limiter::new(conn, queue, now)?;
    let mut extra = 0; // candidates to read past those a round stepped over
                       // Each round claims what it can from the first candidates; dead-lettered
                       // (and stepped-over) ones make room, so look again while a full page
                       // came back.
    loop {
        let want = max_jobs - claimed;
        if limiter.as_ref().is_some_and(|l| l.room() <= 0) {
            break;
        }
        let fetch = want + extra;
        let mut candidates = candidates(conn, queue, now, fetch)?;
        let page = candidates.len() as i64;
        let mut progress = false;
        let mut promoted = false;
        for c in candidates.iter().filter(|c| c.dead_letter.is_some()) {
            let (finished, dependents, key) = {
                let mut st = conn.stmt(c.dead_letter.expect("filtered"))?;
                st.bind_i64(1, c.order.2);
                st.bind_i64(2, now);
                match st.step_row()? {
                    true => (
                        group::of_row(&st),
                        st.opt_i64(2).is_some(),
                        st.opt_text(3).map(str::to_owned),
                    ),
                    false => (None, false, None),
                }
            };
            // A final claim gone dead frees its key's slot; a pending job
            // gone may be one its key's parked jobs were waiting for.
            limit::unpark(conn, queue, key.as_deref(), now)?;
            // Its group's next job becomes the head: a new candidate, so
            // look again even if this page was short.
            if let Some((q, g)) = finished {
                group::done(conn, &q, &g, true)?;
                promoted = true;
            }
            if dependents {
                deps::failed(conn, &[c.order.2], "dead", now)?;
            }
            progress = true;
        }
        candidates.retain(|c| c.dead_letter.is_none());
        if let Some(l) = limiter.as_mut() {
            let mut kept = Vec::with_capacity(candidates.len());
            let mut over = 0;
            for c in candidates {
                if kept.len() as i64 == want || l.room() <= 0 {
                    break;
                }
                if l.take(conn, c.order.2, c.limit_key.as_deref())? {
                    kept.push(c);
                } else {
                    over += 1;
                }
            }
            // Stepped over and short: read further, four times as far
            // (each round reads from the start of the claim order).
            if over > 0 && (kept.len() as i64) < want && page == fetch {
                extra = extra.max(over) * 4;
                progress = true;
            }
            candidates = kept;
        }
        // Each job's part of the result, built before claiming (contract v1.1
        // §A6): a claim whose result would exceed SQLite's length limit
        // claims fewer jobs, instead of committing a claim whose result is
        // then lost. A job too large to be returned at all is dead-lettered.
        let limit = conn.db.length_limit();
        let mut parts: Vec<(i64, String)> = Vec::with_capacity(candidates.len());
        let mut size = out.len() + 1; // and the closing ']'
        let mut full = false;
        for c in &candidates {
            let part = Obj::new()
                .int("id", Some(c.order.2))
                .str("queue", Some(queue))
                .raw("payload", &c.payload)
                .int("attempts", Some(c.attempts + 1))
                .int("max_attempts", Some(c.max_attempts))
                .time("claim_expires_at", Some(now + c.visibility_timeout_ms))
                .finish();
            if part.len() + 2 > limit {
                dead_letter(conn, c.order.2, Some(&format!(
                    "a claim of this job cannot be returned: its result would be {} bytes, over SQLite's length limit of {limit}",
                    part.len() + 2
                )))?;
                progress = true;
                continue;
            }
            if size + part.len() + 1 > limit {
                full = true;
                break;
            }
            size += part.len() + 1; // and a ','
            parts.push((c.order.2, part));
        }
        candidates.retain(|c| parts.iter().any(|(id, _)| *id == c.order.2));
        let won = claim_candidates(conn, &candidates, worker, now)?;
        if let Some(l) = limiter.as_mut() {
            for c in candidates.iter().filter(|c| won.contains(&c.order.2)) {
                l.count(conn, c.limit_key.as_deref())?;
            }
        }
        for (_, part) in parts.iter().filter(|(id, _)| won.contains(id)) {
            if claimed > 0 {
                out.push(',');
            }
            out.push_str(part);
            claimed += 1;
        }
        if claimed == max_jobs || !progress || (page < fetch && !promoted) || full {
            break;
        }
    }
    if let Some(l) = &limiter {
        l.finish(conn)?;
    }
    out.push(']');
    Ok(out)
}

/// Claims the candidates that are still claimable; returns their ids.
fn claim_candidates(
    conn: &Conn,
    candidates: &[Candidate],
    worker: &str,
    now: i64,
) -> Result<Vec<i64>> {
    let mut won = Vec::with_capacity(candidates.len());
    // An expired claim's attempt gets its error first, under the worker
    // that held it (its last_error trigger records it; issue 57).
    for c in candidates.iter().filter(|c| c.expired) {
        let mut st = conn.stmt("note_expired_claim")?;
        st.bind_i64(1, c.order.2);
        st.bind_i64(2, now);
        st.run()?;
    }
    match candidates {
        [] => {}
        [one] => {
            let mut st = conn.stmt("claim_one")?;
            st.bind_i64(1, one.order.2);
            st.bind_text(2, worker);
            st.bind_i64(3, now);
            st.run()?;
            if conn.db.changes() == 1 {
                won.push(one.order.2);
            }
        }
        many => {
            let ids: Vec<i64> = many.iter().map(|c| c.order.2).collect();
            let list = json::int_array(&ids);
            let mut st = conn.stmt("claim_many")?;
            st.bind_text(1, &list);
            st.bind_text(2, worker);
            st.bind_i64(3, now);
            st.run()?;
            if conn.db.changes() == ids.len() as i64 {
                won = ids;
            } else {
                let mut st = conn.stmt("claimed_many")?;
                st.bind_text(1, &list);
                st.bind_text(2, worker);
                st.bind_i64(3, now);
                while st.step_row()? {
                    won.push(st.i64(0));
                }
            }
        }
    }
    Ok(won)
}

fn any_expired(conn: &Conn, queue: &str, now: i64) -> Result<bool> {
    let mut st = conn.stmt("any_expired")?;
    st.bind_text(1, queue);
    st.bind_i64(2, now);
    Ok(st.step_row()?)
}

/// The first `want` candidates in claim order, merged from the sides:
/// pending jobs, expired claims (if any), and scheduled jobs that came due
/// but are not pending yet (if any: read a priority at a time, from the
/// highest, so the jobs of a priority still ahead are never stepped over —
/// contract v1.2 §H).
fn candidates(conn: &Conn, queue: &str, now: i64, want: i64) -> Result<Vec<Candidate>> {
    let mut all = Vec::with_capacity(want as usize);
    for side in ["claim_pending", "claim_expired"] {
        if side == "claim_expired" && !any_expired(conn, queue, now)? {
            continue;
        }
        let mut st = conn.stmt(side)?;
        st.bind_text(1, queue);
        st.bind_i64(2, now);
        st.bind_i64(3, want);
        read_candidates(&mut st, now, side == "claim_pending", &mut all)?;
    }
    if any_scheduled_due(conn, queue, now)? {
        let mut below = i64::MAX; // priorities read so far are at or above it
        let mut found = 0;
        while found < want {
            let priority = {
                let mut st = conn.stmt("scheduled_priority")?;
                st.bind_text(1, queue);
                st.bind_i64(2, below);
                st.step_row()?;
                match st.opt_i64(0) {
                    Some(p) => p,
                    None => break,
                }
            };
            let before = all.len();
            let mut st = conn.stmt("claim_scheduled")?;
            st.bind_text(1, queue);
            st.bind_i64(2, now);
            st.bind_i64(3, want - found);
            st.bind_i64(4, priority);
            read_candidates(&mut st, now, true, &mut all)?;
            found += (all.len() - before) as i64;
            below = priority;
        }
    }
    all.sort_unstable_by_key(|c| c.order); // every side is sorted: this is a merge
    all.truncate(want as usize);
    Ok(all)
}

/// Candidates from a statement of `candidates`' columns; `waiting` sides
/// hold jobs not yet claimed (an expired one is dead-lettered instead), the
/// other expired claims (a final one is dead-lettered instead).
fn read_candidates(
    st: &mut crate::ffi::Stmt,
    now: i64,
    waiting: bool,
    all: &mut Vec<Candidate>,
) -> Result<()> {
    while st.step_row()? {
        let (attempts, max_attempts) = (st.i64(4), st.i64(5));
        let dead_letter = if waiting {
            st.opt_i64(3)
                .is_some_and(|at| at <= now)
                .then_some("expire_one")
        } else {
            (attempts >= max_attempts).then_some("final_claim_one")
        };
        all.push(Candidate {
            order: (std::cmp::Reverse(st.i64(1)), st.i64(2), st.i64(0)),
            dead_letter,
            expired: !waiting,
            attempts,
            max_attempts,
            visibility_timeout_ms: st.i64(6),
            payload: st.text(7).to_owned(),
            limit_key: st.opt_text(8).map(str::to_owned),
        });
    }
    Ok(())
}

fn any_scheduled_due(conn: &Conn, queue: &str, now: i64) -> Result<bool> {
    let mut st = conn.stmt("any_scheduled_due")?;
    st.bind_text(1, queue);
    st.bind_i64(2, now);
    Ok(st.step_row()?)
}

/// Moves a job to dead; its group (if any) passes to the next job.
fn dead_letter(conn: &Conn, id: i64, error: Option<&str>) -> Result<()> {
    let now = now_ms();
    let mut st = conn.stmt("dead_letter")?;
    st.bind_i64(1, id);
    st.bind_opt_text(2, error);
    st.bind_i64(3, now);
    finish(conn, st, id, now)?;
    Ok(())
}

/// Runs a statement that moves job `id` to dead and returns its queue,
/// group, whether jobs depend on it and its limit_key; true if it hit the
/// job. A finished head hands its group on; jobs waiting for it die too
/// (deps.rs); its key's parked jobs that fit come back (limit.rs).
fn finish(conn: &Conn, mut st: crate::conn::Cached<'_, '_>, id: i64, now: i64) -> Result<bool> {
    if !st.step_row()? {
        return Ok(false);
    }
    let finished = group::of_row(&st);
    let dependents = st.opt_i64(2).is_some();
    let keyed = st
        .opt_text(3)
        .map(|k| (st.text(0).to_owned(), k.to_owned()));
    drop(st);
    if let Some((q, k)) = keyed {
        limit::unpark(conn, &q, Some(&k), now)?;
    }
    if let Some((q, g)) = finished {
        group::done(conn, &q, &g, true)?;
    }
    if dependents {
        deps::failed(conn, &[id], "dead", now)?;
    }
    Ok(true)
}

/// Runs a statement keyed by `(job_id, worker, …)` and tells whether it hit a row.
fn hit(
    conn: &Conn,
    name: &'static str,
    id: i64,
    worker: &str,
    bind: impl FnOnce(&mut crate::ffi::Stmt),
) -> Result<bool> {
    let mut st = conn.stmt(name)?;
    st.bind_i64(1, id);
    st.bind_text(2, worker);
    bind(&mut st);
    Ok(st.step_row()?)
}

/// `alk_ack(job_id, worker[, result])` → true if the job was running under
/// this worker. Without a retention the job is deleted; with one it is kept
/// as `completed` with its result (contract v1.1 §C3).
pub fn ack(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let worker = args.name(1, NameKind::Worker)?;
    let result = args.opt_json(2, "result")?;
    Ok(Out::Bool(ack_one(conn, id, worker, result.as_deref())?))
}

fn ack_one(conn: &Conn, id: i64, worker: &str, result: Option<&str>) -> Result<bool> {
    Ok(match ack_held(conn, id, worker, result)? {
        None => false,
        Some(None) => true,
        Some(Some((q, g))) => {
            group::done(conn, &q, &g, true)?;
            true
        }
    })
}

/// Acks one held job, leaving its group's hand-over to the caller: `None`
/// if not held, else the group it headed (if any). Jobs waiting for it
/// lose a dependency (deps.rs).
fn ack_held(
    conn: &Conn,
    id: i64,
    worker: &str,
    result: Option<&str>,
) -> Result<Option<Option<(String, String)>>> {
    // A read first, then a plain DELETE or UPDATE: cheaper than a write
    // with RETURNING (a temporary table each) and the same for both paths.
    let (grouped, keep_ms, dependents, key) = {
        let mut st = conn.stmt("ack_probe")?;
        st.bind_i64(1, id);
        st.bind_text(2, worker);
        if !st.step_row()? {
            return Ok(None);
        }
        let key = st
            .opt_text(4)
            .map(|k| (st.text(0).to_owned(), k.to_owned()));
        (group::of_row(&st), st.i64(2), st.opt_i64(3).is_some(), key)
    };
    if keep_ms > 0 {
        let mut st = conn.stmt("ack_keep")?;
        st.bind_i64(1, id);
        st.bind_i64(3, now_ms());
        st.bind_opt_text(4, result);
        st.bind_i64(5, keep_ms);
        st.run()?;
    } else {
        let mut st = conn.stmt("ack_delete")?;
        st.bind_i64(1, id);
        st.run()?;
    }
    if dependents {
        deps::acked(conn, &[id], now_ms())?;
    }
    if let Some((q, k)) = key {
        limit::unpark(conn, &q, Some(&k), now_ms())?;
    }
    Ok(Some(grouped))
}

/// `alk_ack_batch(job_ids, worker)` → number acked; `job_ids` is a JSON array of integers.
pub fn ack_batch(conn: &Conn, args: &Args) -> Result<Out> {
    let ids = args.job_ids(0)?;
    let worker = args.name(1, NameKind::Worker)?;
    let list = json::int_array(&ids);
    // Plain jobs (no group, not kept) in one DELETE; what is left of the
    // held jobs is read once and handled below.
    let plain = {
        let mut st = conn.stmt("ack_batch_plain")?;
        st.bind_text(1, &list);
        st.bind_text(2, worker);
        st.run()?;
        conn.db.changes()
    };
    if plain == ids.len() as i64 {
        return Ok(Out::Int(plain));
    }
    let (mut delete, mut keep, mut finished) = (Vec::new(), Vec::new(), Vec::new());
    let mut depended = Vec::new(); // acked jobs that jobs depend on (deps.rs)
    let mut keyed = Vec::new(); // (queue, limit_key) of the acked jobs that have one
    {
        let mut st = conn.stmt("ack_batch_probe")?;
        st.bind_text(1, &list);
        st.bind_text(2, worker);
        while st.step_row()? {
            let (id, keep_ms) = (st.i64(0), st.i64(3));
            if let Some(g) = st.opt_text(2) {
                finished.push((st.text(1).to_owned(), g.to_owned()));
            }
            if st.opt_i64(4).is_some() {
                depended.push(id);
            }
            if let Some(k) = st.opt_text(5) {
                keyed.push((st.text(1).to_owned(), k.to_owned()));
            }
            if keep_ms > 0 {
                keep.push((id, keep_ms));
            } else {
                delete.push(id);
            }
        }
    }
    if !delete.is_empty() {
        let mut st = conn.stmt("ack_batch_delete")?;
        st.bind_text(1, &json::int_array(&delete));
        st.run()?;
    }
    let now = now_ms();
    for (id, keep_ms) in &keep {
        let mut st = conn.stmt("ack_keep")?;
        st.bind_i64(1, *id);
        st.bind_i64(3, now);
        st.bind_null(4);
        st.bind_i64(5, *keep_ms);
        st.run()?;
    }
    let acked = plain + (delete.len() + keep.len()) as i64;
    group::done_many(conn, &finished)?;
    deps::acked(conn, &depended, now)?;
    keyed.sort_unstable();
    keyed.dedup();
    for (q, k) in &keyed {
        limit::unpark(conn, q, Some(k), now)?;
    }
    Ok(Out::Int(acked))
}

/// `alk_retry(job_id, worker, error[, delay_s])` → `'pending'`, `'dead'` or NULL.
pub fn retry(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let worker = args.name(1, NameKind::Worker)?;
    let error = args.opt_text(2, "error")?;
    let delay = args.opt_seconds(3, "delay_s", false)?;
    let (attempts, max_attempts, base, max, queue, key) = {
        let mut st = conn.stmt("held_job")?;
        st.bind_i64(1, id);
        st.bind_text(2, worker);
        if !st.step_row()? {
            return Ok(Out::Null);
        }
        (
            st.i64(0),
            st.i64(1),
            st.i64(2),
            st.i64(3),
            st.text(5).to_owned(),
            st.opt_text(7).map(str::to_owned),
        )
    };
    if attempts >= max_attempts {
        dead_letter(conn, id, error)?;
        return Ok(Out::Text("dead".into()));
    }
    let now = conn.now_locked()?;
    let run_at = now + delay.unwrap_or_else(|| backoff_ms(base, max, attempts));
    let mut st = conn.stmt("retry_pending")?;
    st.bind_i64(1, id);
    st.bind_i64(2, run_at);
    st.bind_opt_text(3, error);
    st.bind_text(4, if run_at > now { "scheduled" } else { "pending" });
    st.run()?;
    drop(st);
    limit::unpark(conn, &queue, key.as_deref(), now)?;
    Ok(Out::Text("pending".into()))
}

/// `alk_fail(job_id, worker, error)` → true if the job moved to dead.
pub fn fail(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let worker = args.name(1, NameKind::Worker)?;
    let error = args.opt_text(2, "error")?;
    let now = now_ms();
    let mut st = conn.stmt("fail")?;
    st.bind_i64(1, id);
    st.bind_text(2, worker);
    st.bind_opt_text(3, error);
    st.bind_i64(4, now);
    Ok(Out::Bool(finish(conn, st, id, now)?))
}

/// `alk_heartbeat(job_id, worker[, extend_s])` → true if the claim was extended.
pub fn heartbeat(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let worker = args.name(1, NameKind::Worker)?;
    let extend = args.opt_seconds(2, "extend_s", true)?;
    let now = conn.now_locked()?;
    Ok(Out::Bool(hit(conn, "heartbeat", id, worker, |st| {
        st.bind_i64(3, now);
        st.bind_opt_i64(4, extend);
    })?))
}

/// `alk_cancel(job_id)` → true if a pending or running job was removed.
pub fn cancel(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let (finished, dependents, freed) = {
        let mut st = conn.stmt("cancel")?;
        st.bind_i64(1, id);
        if !st.step_row()? {
            return Ok(Out::Bool(false));
        }
        (
            group::of_row(&st).map(|qg| (qg, st.text(2) != "waiting")),
            st.opt_i64(3).is_some(),
            // A running job of a key: its slot is free; a pending one may be
            // one its key's parked jobs were waiting for.
            st.opt_text(4)
                .filter(|_| matches!(st.text(2), "running" | "pending"))
                .map(|k| (st.text(0).to_owned(), k.to_owned())),
        )
    };
    if let Some((q, k)) = freed {
        limit::unpark(conn, &q, Some(&k), now_ms())?;
    }
    if let Some(((q, g), head)) = finished {
        group::done(conn, &q, &g, head)?;
    }
    // Gone without an ack: a later depends_on naming it must not take it
    // for acked; those waiting for it now go dead (deps.rs).
    let now = now_ms();
    deps::ended(conn, &[id], "cancelled", now)?;
    if dependents {
        deps::failed(conn, &[id], "cancelled", now)?;
    }
    Ok(Out::Bool(true))
}

/// `alk_job_errors(job_id)` → every error the job met, oldest first
/// (`[{attempt, error, at}]`, written by the `alk_jobs_errors` trigger), or
/// NULL when there is no such job.
pub fn job_errors(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let mut st = conn.stmt("job_errors")?;
    st.bind_i64(1, id);
    if !st.step_row()? {
        return Ok(Out::Null);
    }
    Ok(Out::Text(st.text(0).to_owned()))
}

/// `alk_get_job(job_id)` → the job document, or NULL when unknown or acked.
pub fn get_job(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    Ok(job_doc(conn, id)?.map_or(Out::Null, Out::Text))
}

/// The job document of `alk_get_job` (and the listings).
pub fn job_doc(conn: &Conn, id: i64) -> Result<Option<String>> {
    let mut st = conn.stmt("get_job")?;
    st.bind_i64(1, id);
    if !st.step_row()? {
        return Ok(None);
    }
    let depends_on = st.opt_text(21).map(str::to_owned);
    let waiting_for = match (&depends_on, st.opt_i64(22)) {
        (Some(deps), Some(1)) => deps::waiting_for(conn, id, deps)?,
        _ => None,
    };
    Ok(Some(
        Obj::new()
            .int("id", Some(st.i64(0)))
            .str("queue", Some(st.text(1)))
            .str("state", Some(st.text(2)))
            .raw("payload", st.text(3))
            .int("priority", Some(st.i64(4)))
            .int("attempts", Some(st.i64(5)))
            .int("max_attempts", Some(st.i64(6)))
            .seconds("visibility_timeout_s", st.i64(7))
            .seconds("backoff_base_s", st.i64(8))
            .seconds("backoff_max_s", st.i64(9))
            .time("run_at", Some(st.i64(10)))
            .time("created_at", Some(st.i64(11)))
            .str("claimed_by", st.opt_text(12))
            .time("claim_expires_at", st.opt_i64(13))
            .time("expires_at", st.opt_i64(14))
            .str("last_error", st.opt_text(15))
            .str("idempotency_key", st.opt_text(16))
            .str("group_key", st.opt_text(17))
            .str("limit_key", st.opt_text(20))
            .time("completed_at", st.opt_i64(18))
            .raw("result", st.opt_text(19).unwrap_or("null"))
            .raw("depends_on", depends_on.as_deref().unwrap_or("null"))
            .raw("waiting_for", waiting_for.as_deref().unwrap_or("null"))
            .finish(),
    ))
}

/// `alk_requeue_dead(job_id)` → true if a dead job went back to pending.
pub fn requeue_dead(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    Ok(Out::Bool(requeue_one(conn, id)?))
}

/// Puts a dead job back; false if it is not dead.
pub fn requeue_one(conn: &Conn, id: i64) -> Result<bool> {
    let (queue, group, depends_on) = {
        let mut st = conn.stmt("dead_job")?;
        st.bind_i64(1, id);
        if !st.step_row()? {
            return Ok(false);
        }
        (
            st.text(0).to_owned(),
            st.opt_text(1).map(str::to_owned),
            st.opt_text(2).map(str::to_owned),
        )
    };
    // A dependent waits again for the dependencies not acked (v1.2 §J).
    let held = match &depends_on {
        Some(deps) => deps::requeue(conn, id, deps)?,
        None => None,
    };
    if held == Some("dead") {
        return Ok(true); // a dependency is gone without an ack: dead again, its error says which
    }
    // A grouped job rejoins its group: it heads it if the group has no
    // other job, else it waits and runs next (lowest id).
    let state = match &group {
        Some(g) if !group::join(conn, &queue, g, 1)? => "waiting",
        _ => held.unwrap_or("pending"),
    };
    let mut st = conn.stmt("requeue_dead")?;
    st.bind_i64(1, id);
    st.bind_i64(2, now_ms());
    st.bind_text(3, state);
    st.run()?;
    Ok(true)
}

/// `alk_queue_configure(queue, opts)` → the queue's resolved options after the merge.
pub fn configure(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.name(0, NameKind::Queue)?;
    let given = args.opts(1)?;
    // Check the keys before reading anything, so bad options write nothing
    // (the rate pairs are checked on the merged limits).
    QueueOpts::default().merged(given.as_ref())?;
    QueueLimits::default().merged_values(given.as_ref())?;
    let merged = queue_opts(conn, queue)?.merged(given.as_ref())?;
    let limits = limit::of(conn, queue)?
        .unwrap_or_default()
        .merged(given.as_ref())?;
    limit::set(conn, queue, &limits)?;
    let mut st = conn.stmt("queue_configure")?;
    st.bind_text(1, queue);
    st.bind_i64(2, merged.visibility_timeout_ms);
    st.bind_i64(3, merged.max_attempts as i64);
    st.bind_i64(4, merged.backoff_base_ms);
    st.bind_i64(5, merged.backoff_max_ms);
    st.bind_i64(6, merged.retain_completed_ms);
    st.bind_opt_i64(7, merged.retain_dead_ms);
    st.run()?;
    Ok(Out::Text(opts_json(&merged, &limits)))
}

/// The options document: the queue's options and its limits.
fn opts_json(opts: &QueueOpts, limits: &QueueLimits) -> String {
    let mut json = opts.to_json();
    if let serde_json::Value::Object(map) = &mut json {
        limits.add_json(map);
    }
    json.to_string()
}

/// `alk_queue_opts(queue)` → the queue's resolved options.
pub fn opts(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.name(0, NameKind::Queue)?;
    let limits = limit::of(conn, queue)?.unwrap_or_default();
    Ok(Out::Text(opts_json(&queue_opts(conn, queue)?, &limits)))
}

/// `alk_queue_stats(queue)` → counts per state and the oldest runnable age.
pub fn stats(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.name(0, NameKind::Queue)?;
    Ok(Out::Text(stats_of(conn, queue, queue, true)?))
}

/// The stats document of the queue `backing`, reported under the name
/// `shown`; with `limits`, its `running_limit` and `next_slot_at` too (the
/// listing `alk_queues` has no columns for them).
pub fn stats_of(conn: &Conn, backing: &str, shown: &str, limits: bool) -> Result<String> {
    let now = now_ms();
    let mut st = conn.stmt("queue_stats")?;
    st.bind_text(1, backing);
    st.bind_i64(2, now);
    st.step_row()?;
    let oldest = st
        .opt_i64(4)
        .map(|run_at| time::ms_to_seconds_json((now - run_at).max(0)).to_string());
    let counts: [i64; 7] = std::array::from_fn(|i| st.i64(i as i32));
    drop(st);
    let obj = stats_obj(shown, &counts, oldest.as_deref());
    if !limits {
        return Ok(obj.finish());
    }
    let running_limit = limit::of(conn, backing)?.and_then(|l| l.max_running);
    Ok(obj
        .int("running_limit", running_limit)
        .time("next_slot_at", limit::next_slot_at(conn, backing, now)?)
        .finish())
}

/// A queue's stats document from the columns of `queue_stats` (and of
/// `queues`, after its name): pending, scheduled, running, dead, (the
/// oldest runnable `run_at`, read by the caller into `oldest`), completed,
/// paused.
pub fn stats_obj(shown: &str, counts: &[i64; 7], oldest: Option<&str>) -> Obj {
    Obj::new()
        .str("queue", Some(shown))
        .int("pending", Some(counts[0]))
        .int("scheduled", Some(counts[1]))
        .int("running", Some(counts[2]))
        .int("dead", Some(counts[3]))
        .int("completed", Some(counts[5]))
        .raw("paused", if counts[6] == 1 { "true" } else { "false" })
        .raw("oldest_runnable_age_s", oldest.unwrap_or("null"))
}

/// Scheduled jobs one `alk_sweep` makes pending, as on PostgreSQL.
const MAKE_DUE_BATCH: i64 = 2000;

/// `alk_sweep([queue])` → number of jobs dead-lettered; NULL or no argument = every queue.
pub fn sweep(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = match args.get(0) {
        Some(a) if a.kind() != crate::ffi::Kind::Null => Some(args.name(0, NameKind::Queue)?),
        _ => None,
    };
    let now = now_ms();
    let mut swept = 0;
    let mut finished = Vec::new();
    let mut depended = Vec::new(); // dead-lettered jobs that jobs depend on
    let mut freed = Vec::new(); // (queue, limit_key) of running and pending jobs dead-lettered
    for name in [
        "sweep_expired",
        "sweep_expired_waiting",
        "sweep_expired_blocked",
        "sweep_expired_parked",
        "sweep_expired_scheduled",
        "sweep_final_claims",
    ] {
        let mut st = conn.stmt(name)?;
        st.bind_opt_text(1, queue);
        st.bind_i64(2, now);
        while st.step_row()? {
            swept += 1;
            if let Some(qg) = group::of_row(&st) {
                finished.push((qg, st.text(2) != "waiting"));
            }
            if st.opt_i64(4).is_some() {
                depended.push(st.i64(3));
            }
            if let Some(k) = st
                .opt_text(5)
                .filter(|_| matches!(st.text(2), "running" | "pending"))
            {
                freed.push((st.text(0).to_owned(), k.to_owned()));
            }
        }
    }
    for (q, k) in &freed {
        limit::unpark(conn, q, Some(k), now)?;
    }
    // Expired waiting jobs leave their group too, without handing it on.
    for ((q, g), head) in finished {
        group::done(conn, &q, &g, head)?;
    }
    deps::failed(conn, &depended, "dead", now)?;
    // Scheduled jobs that came due become pending, a bounded batch a call
    // (claims take the others meanwhile: contract v1.2 §H).
    let mut st = conn.stmt("make_due")?;
    st.bind_opt_text(1, queue);
    st.bind_i64(2, now);
    st.bind_i64(3, MAKE_DUE_BATCH);
    st.run()?;
    Ok(Out::Int(swept))
}
