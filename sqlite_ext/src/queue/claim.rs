//! Claims (contract §5, v1.2 §H): the candidates in claim order —
//! pending jobs, expired claims, scheduled jobs come due — taken at once.

use super::finish::dead_letter;
use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::json::{self, Obj};
use crate::out::Out;
use crate::{deps, group, limit, pause};
use alkstore_core::NameKind;

/// `alk_claim(queue, worker[, max_jobs])` → JSON array of claimed jobs.
pub fn alk_claim(conn: &Conn, args: &Args) -> Result<Out> {
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
