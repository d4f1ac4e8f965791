//! Pause (contract v1.1 §C4): while a queue (an outbox: its backing queue)
//! is paused its claims return nothing; everything else keeps working.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::out::Out;
use alkstore_core::time::now_ms;
use alkstore_core::{names, NameKind};

fn set(conn: &Conn, queue: &str, paused: bool) -> Result<Out> {
    let mut st = conn.stmt(if paused { "pause" } else { "resume" })?;
    st.bind_text(1, queue);
    if paused {
        st.bind_i64(2, now_ms());
    }
    st.run()?;
    Ok(Out::Bool(conn.db.changes() == 1))
}

/// `alk_queue_pause(queue)` → true if it was running.
pub fn alk_queue_pause(conn: &Conn, args: &Args) -> Result<Out> {
    set(conn, args.name(0, NameKind::Queue)?, true)
}

/// `alk_queue_resume(queue)` → true if it was paused.
pub fn alk_queue_resume(conn: &Conn, args: &Args) -> Result<Out> {
    set(conn, args.name(0, NameKind::Queue)?, false)
}

/// `alk_outbox_pause(outbox)` → true if it was running.
pub fn alk_outbox_pause(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = names::outbox_queue(args.name(0, NameKind::Outbox)?);
    set(conn, &queue, true)
}

/// `alk_outbox_resume(outbox)` → true if it was paused.
pub fn alk_outbox_resume(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = names::outbox_queue(args.name(0, NameKind::Outbox)?);
    set(conn, &queue, false)
}

/// Whether claims on `queue` return nothing now.
pub fn is_paused(conn: &Conn, queue: &str) -> Result<bool> {
    let mut st = conn.stmt("paused")?;
    st.bind_text(1, queue);
    Ok(st.step_row()?)
}
