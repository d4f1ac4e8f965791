//! Dead jobs sent back to pending.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::out::Out;
use crate::{deps, group};
use alkstore_core::time::now_ms;

/// `alk_requeue_dead(job_id)` → true if a dead job went back to pending.
pub fn alk_requeue_dead(conn: &Conn, args: &Args) -> Result<Out> {
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
