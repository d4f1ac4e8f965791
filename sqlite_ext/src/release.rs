//! `alk_release` and `alk_release_batch` (contract v1.3 §Q): a claim given
//! back without spending an attempt — a worker that stops with prefetched
//! jobs, a relay whose sink is down, a handler that snoozes.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::limit;
use crate::out::Out;
use alkstore_core::NameKind;

/// `alk_release(job_id, worker[, delay_s])` → true if this worker held an
/// unexpired claim on the job, now given back.
pub fn alk_release(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let worker = args.name(1, NameKind::Worker)?;
    let delay = args.opt_seconds(2, "delay_s", false)?;
    let now = conn.now_locked()?;
    Ok(Out::Bool(release_one(conn, id, worker, delay, now)?))
}

/// `alk_release_batch(job_ids, worker[, delay_s])` → how many of the jobs
/// (each id once) this worker held unexpired claims on, now given back.
pub fn alk_release_batch(conn: &Conn, args: &Args) -> Result<Out> {
    let mut ids = args.job_ids(0)?;
    let worker = args.name(1, NameKind::Worker)?;
    let delay = args.opt_seconds(2, "delay_s", false)?;
    ids.sort_unstable();
    ids.dedup();
    let now = conn.now_locked()?;
    let mut released = 0;
    for id in ids {
        released += release_one(conn, id, worker, delay, now)? as i64;
    }
    Ok(Out::Int(released))
}

fn release_one(conn: &Conn, id: i64, worker: &str, delay: Option<i64>, now: i64) -> Result<bool> {
    let run_at = now + delay.unwrap_or(0);
    let (queue, key) = {
        let mut st = conn.stmt("release_claim")?;
        st.bind_i64(1, id);
        st.bind_text(2, worker);
        st.bind_i64(3, now);
        st.bind_i64(4, run_at);
        st.bind_text(5, if run_at > now { "scheduled" } else { "pending" });
        if !st.step_row()? {
            return Ok(false);
        }
        (st.text(0).to_owned(), st.opt_text(1).map(str::to_owned))
    };
    // Its place under the key's limit is free: the key's set-aside jobs
    // come back (the queue's own limit counts running jobs as it claims).
    limit::unpark(conn, &queue, key.as_deref(), now)?;
    Ok(true)
}
