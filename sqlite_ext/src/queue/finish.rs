//! How a claimed job ends or goes on: dead-lettering, acks (one or a
//! batch), retry, fail, heartbeat and cancel.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::json::{self};
use crate::out::Out;
use crate::{deps, group, limit};
use alkstore_core::opts::backoff_ms;
use alkstore_core::time::now_ms;
use alkstore_core::NameKind;

/// Moves a job to dead; its group (if any) passes to the next job.
pub(super) fn dead_letter(conn: &Conn, id: i64, error: Option<&str>) -> Result<()> {
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
pub fn alk_ack(conn: &Conn, args: &Args) -> Result<Out> {
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
pub fn alk_ack_batch(conn: &Conn, args: &Args) -> Result<Out> {
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
pub fn alk_retry(conn: &Conn, args: &Args) -> Result<Out> {
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
pub fn alk_fail(conn: &Conn, args: &Args) -> Result<Out> {
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
pub fn alk_heartbeat(conn: &Conn, args: &Args) -> Result<Out> {
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
pub fn alk_cancel(conn: &Conn, args: &Args) -> Result<Out> {
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
