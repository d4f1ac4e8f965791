//! Job dependencies (contract v1.2 §J), as on PostgreSQL
//! (`sql/postgres/deps.sql`). A job enqueued with `depends_on` is
//! `blocked` (pending to every function, outside the claim index) until
//! each job it names was acked; a grouped one behind its group's head is
//! `waiting` as before, and becomes `blocked` instead of pending when it
//! heads the group with dependencies left.
//!
//! `alk_job_deps` holds one row per job and dependency not acked yet;
//! `deps_left` counts them; `dependents` marks a job some job named, so an
//! ack, a death or a cancel looks for dependents only then. SQLite's one
//! writer orders an enqueue against the ack of a job it names.
//!
//! A job whose row is gone counts as acked (retention 0 deletes at ack)
//! unless `alk_job_ends` says it ended otherwise: every removal of a job
//! that was not acked records it there for [`DEPENDENCY_MEMORY_MS`];
//! `alk_prune` forgets older records and raises
//! `dependencies_forgotten_through` to the highest id forgotten, and an
//! enqueue naming a gone id at or below it is refused.

use crate::conn::Conn;
use crate::error::Result;
use crate::group;
use alkstore_core::opts::DEPENDENCY_MEMORY_MS;
use alkstore_core::{err, Code};

/// What the jobs a `depends_on` names say about the job that names them.
#[derive(Default)]
pub struct Resolved {
    /// Those not acked yet, in the order given.
    pub waiting: Vec<i64>,
    /// The error of the first that ended without an ack, if any: the job
    /// is dead at once.
    pub failed: Option<String>,
}

/// Marks the jobs in `deps` as having dependents and sorts them. An id
/// that names no job is `InvalidOptions`; on requeue (`requeue`) a dead
/// dependency is waited for (it may be requeued too) and a forgotten one
/// fails the job.
pub fn resolve(conn: &Conn, deps: &[i64], requeue: bool) -> Result<Resolved> {
    let mut out = Resolved::default();
    let mut bounds: Option<(i64, i64)> = None;
    let fail = |out: &mut Resolved, msg: String| {
        out.failed.get_or_insert(msg);
    };
    for &d in deps {
        let state = {
            let mut st = conn.stmt("deps_state")?;
            st.bind_i64(1, d);
            st.step_row()?.then(|| st.text(0).to_owned())
        };
        if let Some(state) = state {
            let mut st = conn.stmt("deps_mark")?;
            st.bind_i64(1, d);
            st.run()?;
            match state.as_str() {
                "completed" => {}
                "dead" if !requeue => fail(&mut out, format!("dependency {d} dead")),
                _ => out.waiting.push(d),
            }
            continue;
        }
        let ending = {
            let mut st = conn.stmt("deps_ending")?;
            st.bind_i64(1, d);
            st.step_row()?.then(|| st.text(0).to_owned())
        };
        if let Some(ending) = ending {
            fail(&mut out, format!("dependency {d} {ending}"));
            continue;
        }
        let (last_id, forgotten) = match bounds {
            Some(b) => b,
            None => {
                let mut st = conn.stmt("deps_bounds")?;
                st.step_row()?;
                *bounds.insert((st.i64(0), st.i64(1)))
            }
        };
        if d > last_id {
            return err(
                Code::InvalidOptions,
                format!("depends_on names job {d}, which does not exist"),
            )
            .map_err(Into::into);
        }
        if d <= forgotten {
            if requeue {
                fail(&mut out, format!("dependency {d} forgotten"));
            } else {
                return err(
                    Code::InvalidOptions,
                    format!(
                        "depends_on names job {d}, which is gone and may have ended without an ack \
                         more than {} days ago: alkstore no longer remembers how it ended",
                        DEPENDENCY_MEMORY_MS / 86_400_000
                    ),
                )
                .map_err(Into::into);
            }
        }
        // Otherwise it was acked and deleted.
    }
    Ok(out)
}

/// Each job in `jobs` waits for each dependency in `waiting`.
pub fn link(conn: &Conn, jobs: &[i64], waiting: &[i64]) -> Result<()> {
    for &d in waiting {
        for &j in jobs {
            let mut st = conn.stmt("deps_link")?;
            st.bind_i64(1, d);
            st.bind_i64(2, j);
            st.run()?;
        }
    }
    Ok(())
}

/// The jobs in `ids` were acked: their dependents lose one dependency
/// each; a blocked one left with none becomes pending (or scheduled), its
/// `run_at` no earlier than now.
pub fn acked(conn: &Conn, ids: &[i64], now: i64) -> Result<()> {
    for &d in ids {
        for j in dependents(conn, d)? {
            let mut st = conn.stmt("deps_release")?;
            st.bind_i64(1, j);
            st.bind_i64(2, now);
            st.run()?;
        }
        let mut st = conn.stmt("deps_drop")?;
        st.bind_i64(1, d);
        st.run()?;
    }
    Ok(())
}

/// The jobs waiting for job `d`, in id order.
fn dependents(conn: &Conn, d: i64) -> Result<Vec<i64>> {
    let mut st = conn.stmt("deps_dependents")?;
    st.bind_i64(1, d);
    let mut v = Vec::new();
    while st.step_row()? {
        v.push(st.i64(0));
    }
    Ok(v)
}

/// The jobs in `ids` went dead or were cancelled (`ending`): each job
/// waiting for one goes dead at once with `dependency <id> <ending>`,
/// naming its direct dependency, and so on down; their groups pass on.
pub fn failed(conn: &Conn, ids: &[i64], ending: &str, now: i64) -> Result<()> {
    let mut ids = ids.to_vec();
    ids.sort_unstable(); // a job with two of them names the lowest, as on PostgreSQL
    let mut ending = ending;
    while !ids.is_empty() {
        let mut next = Vec::new();
        for d in std::mem::take(&mut ids) {
            let dependents = dependents(conn, d)?;
            let mut st = conn.stmt("deps_drop")?;
            st.bind_i64(1, d);
            st.run()?;
            drop(st);
            for j in dependents {
                let was = {
                    let mut st = conn.stmt("deps_waiting_state")?;
                    st.bind_i64(1, j);
                    match st.step_row()? {
                        true => st.text(0).to_owned(),
                        false => continue, // dead already, or gone
                    }
                };
                let (grouped, has_dependents) = {
                    let mut st = conn.stmt("deps_kill")?;
                    st.bind_i64(1, j);
                    st.bind_text(2, &format!("dependency {d} {ending}"));
                    st.bind_i64(3, now);
                    st.step_row()?;
                    (group::of_row(&st), st.opt_i64(2).is_some())
                };
                if let Some((q, g)) = grouped {
                    group::done(conn, &q, &g, was != "waiting")?;
                }
                if has_dependents {
                    next.push(j);
                }
            }
        }
        next.sort_unstable();
        ids = next;
        ending = "dead";
    }
    Ok(())
}

/// Jobs removed without an ack (`ending`: `dead` or `cancelled`),
/// remembered so that a later `depends_on` naming one does not take it
/// for acked.
pub fn ended(conn: &Conn, ids: &[i64], ending: &str, now: i64) -> Result<()> {
    for &id in ids {
        let mut st = conn.stmt("deps_ended")?;
        st.bind_i64(1, id);
        st.bind_text(2, ending);
        st.bind_i64(3, now);
        st.run()?;
    }
    Ok(())
}

/// `alk_prune`'s part: forgets up to `max` records older than
/// [`DEPENDENCY_MEMORY_MS`].
pub fn forget(conn: &Conn, now: i64, max: i64) -> Result<()> {
    let top = {
        let mut st = conn.stmt("deps_forget")?;
        st.bind_i64(1, now - DEPENDENCY_MEMORY_MS);
        st.bind_i64(2, max);
        let mut top = None::<i64>;
        while st.step_row()? {
            top = top.max(Some(st.i64(0)));
        }
        top
    };
    if let Some(top) = top {
        let mut st = conn.stmt("deps_forgotten_through")?;
        st.bind_text(1, &top.to_string());
        st.run()?;
    }
    Ok(())
}

/// `waiting_for` of `alk_get_job`: the ids in `depends_on` not acked yet,
/// in the order given, while the job waits for them; else `None`.
pub fn waiting_for(conn: &Conn, id: i64, depends_on: &str) -> Result<Option<String>> {
    let deps: Vec<i64> = serde_json::from_str(depends_on).unwrap_or_default();
    let mut waiting = Vec::new();
    for d in deps {
        let mut st = conn.stmt("deps_waits_for")?;
        st.bind_i64(1, d);
        st.bind_i64(2, id);
        if st.step_row()? {
            waiting.push(d);
        }
    }
    Ok((!waiting.is_empty()).then(|| crate::json::int_array(&waiting)))
}

/// Puts a dead job with dependencies back: it waits again for those not
/// acked. Returns its state: `Some("blocked")`, `Some("dead")` (one is
/// gone without an ack: the error says which) or `None` (none left).
pub fn requeue(conn: &Conn, id: i64, depends_on: &str) -> Result<Option<&'static str>> {
    let deps: Vec<i64> = serde_json::from_str(depends_on).unwrap_or_default();
    let mut st = conn.stmt("deps_unlink")?;
    st.bind_i64(1, id);
    st.bind_text(2, depends_on);
    st.run()?;
    drop(st);
    let resolved = resolve(conn, &deps, true)?;
    if let Some(error) = resolved.failed {
        let mut st = conn.stmt("deps_requeue_failed")?;
        st.bind_i64(1, id);
        st.bind_text(2, &error);
        st.run()?;
        return Ok(Some("dead"));
    }
    let mut st = conn.stmt("deps_set_left")?;
    st.bind_i64(1, id);
    if resolved.waiting.is_empty() {
        st.bind_null(2);
    } else {
        st.bind_i64(2, resolved.waiting.len() as i64);
    }
    st.run()?;
    drop(st);
    if resolved.waiting.is_empty() {
        return Ok(None);
    }
    link(conn, &[id], &resolved.waiting)?;
    Ok(Some("blocked"))
}
