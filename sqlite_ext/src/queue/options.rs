//! A queue's options: `alk_queue_configure` and `alk_queue_opts`.

use super::enqueue::queue_opts;
use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::limit;
use crate::out::Out;
use alkstore_core::{NameKind, QueueLimits, QueueOpts};

/// `alk_queue_configure(queue, opts)` → the queue's resolved options after the merge.
pub fn alk_queue_configure(conn: &Conn, args: &Args) -> Result<Out> {
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
pub fn alk_queue_opts(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.name(0, NameKind::Queue)?;
    let limits = limit::of(conn, queue)?.unwrap_or_default();
    Ok(Out::Text(opts_json(&queue_opts(conn, queue)?, &limits)))
}
