//! Streams (contract §7, v1.1 §E): an append-only log per name with dense
//! offsets, per-consumer saved offsets, and retention.

use crate::args::{Args, MAX_BATCH};
use crate::conn::Conn;
use crate::error::Result;
use crate::json::Obj;
use crate::out::Out;
use alkstore_core::opts::StreamOpts;
use alkstore_core::time::now_ms;
use alkstore_core::NameKind;

/// `alk_publish(stream, payload[, key])` → the event's id.
pub fn alk_publish(conn: &Conn, args: &Args) -> Result<Out> {
    let stream = args.name(0, NameKind::Stream)?;
    let payload = args.payload(1, "payload")?;
    let key = args.opt_text(2, "key")?;
    let bumped = {
        let mut st = conn.stmt("bump_offset")?;
        st.bind_text(1, stream);
        st.run()?;
        conn.db.changes() == 1
    };
    if !bumped {
        let mut st = conn.stmt("first_offset")?;
        st.bind_text(1, stream);
        st.run()?;
    }
    let mut st = conn.stmt("publish")?;
    st.bind_text(1, stream);
    st.bind_opt_text(2, key);
    st.bind_text(3, &payload);
    st.bind_i64(4, now_ms());
    st.run()?;
    Ok(Out::Int(conn.db.last_insert_rowid()))
}

/// `alk_read(stream, after_offset, max_events)` → JSON array of events, ascending.
pub fn alk_read(conn: &Conn, args: &Args) -> Result<Out> {
    let stream = args.name(0, NameKind::Stream)?;
    let after = args.offset(1, "after_offset")?;
    let max = args.batch_size(2, "max_events", MAX_BATCH)?;
    let mut st = conn.stmt("read")?;
    st.bind_text(1, stream);
    st.bind_i64(2, after);
    st.bind_i64(3, max);
    let mut out = String::with_capacity(4096);
    out.push('[');
    while st.step_row()? {
        if out.len() > 1 {
            out.push(',');
        }
        out = Obj::within(&mut out)
            .int("offset", Some(st.i64(0)))
            .str("key", st.opt_text(1))
            .raw("payload", st.text(2))
            .time("created_at", Some(st.i64(3)))
            .int("id", Some(st.i64(4)))
            .finish();
    }
    out.push(']');
    Ok(Out::Text(out))
}

/// `alk_save_offset(stream, consumer, offset)` → true if the saved offset advanced.
pub fn alk_save_offset(conn: &Conn, args: &Args) -> Result<Out> {
    let stream = args.name(0, NameKind::Stream)?;
    let consumer = args.name(1, NameKind::Consumer)?;
    let offset = args.offset(2, "offset")?;
    if offset == 0 {
        return Ok(Out::Bool(false)); // every consumer starts at 0: nothing to advance
    }
    let mut st = conn.stmt("save_offset")?;
    st.bind_text(1, stream);
    st.bind_text(2, consumer);
    st.bind_i64(3, offset);
    st.bind_i64(4, now_ms());
    Ok(Out::Bool(st.step_row()?))
}

/// `alk_reset_offset(stream, consumer, offset)` → true: sets the offset,
/// backwards too (contract v1.1 §D).
pub fn alk_reset_offset(conn: &Conn, args: &Args) -> Result<Out> {
    let stream = args.name(0, NameKind::Stream)?;
    let consumer = args.name(1, NameKind::Consumer)?;
    let offset = args.offset(2, "offset")?;
    let mut st = conn.stmt("reset_offset")?;
    st.bind_text(1, stream);
    st.bind_text(2, consumer);
    st.bind_i64(3, offset);
    st.bind_i64(4, now_ms());
    st.run()?;
    Ok(Out::Bool(true))
}

/// `alk_get_offset(stream, consumer)` → the saved offset, 0 if none.
pub fn alk_get_offset(conn: &Conn, args: &Args) -> Result<Out> {
    let stream = args.name(0, NameKind::Stream)?;
    let consumer = args.name(1, NameKind::Consumer)?;
    let mut st = conn.stmt("get_offset")?;
    st.bind_text(1, stream);
    st.bind_text(2, consumer);
    Ok(Out::Int(if st.step_row()? { st.i64(0) } else { 0 }))
}

/// The stream's retention as stored (keep everything when it has no row).
fn stream_opts(conn: &Conn, stream: &str) -> Result<StreamOpts> {
    let mut st = conn.stmt("stream_opts")?;
    st.bind_text(1, stream);
    Ok(if st.step_row()? {
        StreamOpts {
            retain_ms: st.opt_i64(0),
            retain_events: st.opt_i64(1),
        }
    } else {
        StreamOpts::default()
    })
}

/// `alk_stream_configure(stream, opts)` → the stream's options after the
/// given keys were merged over them.
pub fn alk_stream_configure(conn: &Conn, args: &Args) -> Result<Out> {
    let stream = args.name(0, NameKind::Stream)?;
    let given = args.opts(1)?;
    // Check the keys before reading anything, so bad options write nothing.
    StreamOpts::default().merged(given.as_ref())?;
    let merged = stream_opts(conn, stream)?.merged(given.as_ref())?;
    let mut st = conn.stmt("stream_configure")?;
    st.bind_text(1, stream);
    st.bind_opt_i64(2, merged.retain_ms);
    st.bind_opt_i64(3, merged.retain_events);
    st.run()?;
    Ok(Out::Text(merged.to_json().to_string()))
}

/// `alk_sequence(stream)` → 0 (contract v1.2 §K): SQLite has one writer at
/// a time, so a publish gives its event its offset at once and nothing ever
/// waits for a sequencer. It exists so that portable code can call it; the
/// stream name (NULL: every stream) is checked as on PostgreSQL.
pub fn alk_sequence(_conn: &Conn, args: &Args) -> Result<Out> {
    if args
        .get(0)
        .is_some_and(|a| a.kind() != crate::ffi::Kind::Null)
    {
        args.name(0, NameKind::Stream)?;
    }
    Ok(Out::Int(0))
}

/// `alk_stream_info(stream)` → its kept offsets (0 and 0 with none) and options.
pub fn alk_stream_info(conn: &Conn, args: &Args) -> Result<Out> {
    let stream = args.name(0, NameKind::Stream)?;
    let opts = stream_opts(conn, stream)?.to_json();
    let mut st = conn.stmt("stream_span")?;
    st.bind_text(1, stream);
    st.step_row()?;
    Ok(Out::Text(
        Obj::new()
            .str("stream", Some(stream))
            .int("first_offset", Some(st.i64(0)))
            .int("last_offset", Some(st.i64(1)))
            .raw("retain_s", &opts["retain_s"].to_string())
            .raw("retain_events", &opts["retain_events"].to_string())
            .finish(),
    ))
}
