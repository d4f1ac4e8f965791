//! A queue's counts per state: `alk_queue_stats`.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::json::Obj;
use crate::limit;
use crate::out::Out;
use alkstore_core::time::{self, now_ms};
use alkstore_core::NameKind;

/// `alk_queue_stats(queue)` → counts per state and the oldest runnable age.
pub fn alk_queue_stats(conn: &Conn, args: &Args) -> Result<Out> {
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
    let mut st = conn.stmt("last_sweep_at")?;
    let swept = if st.step_row()? { st.opt_i64(0) } else { None };
    drop(st);
    let last_sweep_age_s = swept.map(|at| time::ms_to_seconds_json((now - at).max(0)).to_string());
    Ok(obj
        .int("running_limit", running_limit)
        .time("next_slot_at", limit::next_slot_at(conn, backing, now)?)
        // Contract v1.3 §O: SQLite has no maintenance worker.
        .raw("maintenance_worker", "false")
        // Issue 57: how long ago a sweep last ran in this file.
        .raw(
            "last_sweep_age_s",
            last_sweep_age_s.as_deref().unwrap_or("null"),
        )
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
