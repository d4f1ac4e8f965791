//! Notifications (contract §8) on SQLite: rows that listeners read after a
//! wake-up (a commit changes `PRAGMA data_version` for every other
//! connection). Rows older than [`RETENTION_MS`] are pruned as new ones come.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::json::Obj;
use crate::out::Out;
use alkstore_core::time::now_ms;
use alkstore_core::{err, Code, NameKind};

pub use alkstore_core::opts::MAX_NOTIFY_BYTES as MAX_PAYLOAD_BYTES;
/// How long notification rows are kept for listeners to read.
pub const RETENTION_MS: i64 = 5 * 60 * 1000;
/// Prune once every this many notifications (by id), to keep notify cheap.
const PRUNE_EVERY: i64 = 64;

/// `alk_notify(channel, payload)` → NULL; delivered to listeners on commit.
pub fn alk_notify(conn: &Conn, args: &Args) -> Result<Out> {
    let channel = args.name(0, NameKind::Channel)?;
    let payload = args.payload(1, "payload")?;
    let size = alkstore_core::opts::compact_json_len(&payload);
    if size >= MAX_PAYLOAD_BYTES {
        return err(
            Code::InvalidPayload,
            format!(
                "notification payload must be shorter than {MAX_PAYLOAD_BYTES} bytes of compact JSON, got {size}"
            ),
        )
        .map_err(Into::into);
    }
    let now = now_ms();
    let id = {
        let mut st = conn.stmt("notify")?;
        st.bind_text(1, channel);
        st.bind_text(2, &payload);
        st.bind_i64(3, now);
        st.step_row()?;
        st.i64(0)
    };
    if id % PRUNE_EVERY == 0 {
        let mut st = conn.stmt("notify_prune")?;
        st.bind_i64(1, now - RETENTION_MS);
        st.run()?;
    }
    Ok(Out::Null)
}

/// `alk_notifications(channel, after_id[, max])` (SQLite only) → JSON array of
/// `{id, payload, created_at}` newer than `after_id`: what a listener reads.
pub fn alk_notifications(conn: &Conn, args: &Args) -> Result<Out> {
    let channel = args.name(0, NameKind::Channel)?;
    let after = args.offset(1, "after_id")?;
    let max = args.batch_size(2, "max", crate::args::MAX_BATCH)?;
    let mut st = conn.stmt("notifications_since")?;
    st.bind_text(1, channel);
    st.bind_i64(2, after);
    st.bind_i64(3, max);
    let mut out = String::from("[");
    while st.step_row()? {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(
            &Obj::new()
                .int("id", Some(st.i64(0)))
                .raw("payload", st.text(1))
                .time("created_at", Some(st.i64(2)))
                .finish(),
        );
    }
    out.push(']');
    Ok(Out::Text(out))
}
