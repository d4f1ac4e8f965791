//! Ordered groups (contract v1.1 §C2). Jobs of one `(queue, group_key)`
//! run one at a time in id order. Only the group's head is `pending` (or
//! `running`); the others are `waiting`, outside the claim index, so a claim
//! reads heads only. `alk_groups` counts each group's live jobs; SQLite's
//! single writer orders a group's enqueues against its hand-over.

use crate::conn::Conn;
use crate::error::Result;
use alkstore_core::time::now_ms;

/// Adds `n` jobs to the group; true if it had none (the first of them heads it).
pub fn join(conn: &Conn, queue: &str, group: &str, n: i64) -> Result<bool> {
    let mut st = conn.stmt("group_join")?;
    st.bind_text(1, queue);
    st.bind_text(2, group);
    st.bind_i64(3, n);
    st.step_row()?;
    Ok(st.i64(0) == n)
}

/// One job of the group finished (acked, cancelled, dead-lettered). When it
/// was the head, the next waiting job (lowest id) becomes the head.
pub fn done(conn: &Conn, queue: &str, group: &str, head: bool) -> Result<()> {
    let remaining = {
        let mut st = conn.stmt("group_leave")?;
        st.bind_text(1, queue);
        st.bind_text(2, group);
        if !st.step_row()? {
            return Ok(());
        }
        st.i64(0)
    };
    let next = if remaining <= 0 {
        "group_drop"
    } else if head {
        "group_promote"
    } else {
        return Ok(());
    };
    let mut st = conn.stmt(next)?;
    st.bind_text(1, queue);
    st.bind_text(2, group);
    if head {
        st.bind_i64(3, now_ms()); // a head due later is scheduled (schema.sql)
    }
    st.run().map_err(Into::into)
}

/// [`done`] for many finished heads (`(queue, group_key)`, one per job) in
/// three statements. (A batch has each group once, but count anyway.)
pub fn done_many(conn: &Conn, finished: &[(String, String)]) -> Result<()> {
    match finished {
        [] => return Ok(()),
        [(q, g)] => return done(conn, q, g, true),
        _ => {}
    }
    let mut counted: Vec<(&str, &str, i64)> = Vec::with_capacity(finished.len());
    for (q, g) in finished {
        match counted.iter_mut().find(|(cq, cg, _)| cq == q && cg == g) {
            Some(c) => c.2 += 1,
            None => counted.push((q, g, 1)),
        }
    }
    let pairs = serde_json::to_string(&counted).expect("strings serialize");
    for name in ["groups_leave", "groups_drop", "groups_promote"] {
        let mut st = conn.stmt(name)?;
        st.bind_text(1, &pairs);
        if name == "groups_promote" {
            st.bind_i64(2, now_ms()); // a head due later is scheduled (schema.sql)
        }
        st.run()?;
    }
    Ok(())
}

/// A finished job's queue and group, as the statements that finish jobs
/// return them (columns 0 and 1); `None` when it had no group.
pub fn of_row(st: &crate::ffi::Stmt) -> Option<(String, String)> {
    st.opt_text(1)
        .map(|g| (st.text(0).to_owned(), g.to_owned()))
}
