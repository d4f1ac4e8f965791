//! Pruning (contract v1.1 §C5): deletes what outlived its retention, at
//! most `max_rows` rows per call, oldest first; callers loop until it
//! returns 0. Each statement is one short write under SQLite's one writer.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::out::Out;
use alkstore_core::opts::MAX_PRUNE_ROWS;
use alkstore_core::time::now_ms;

/// `alk_prune(max_rows)` → the number of rows deleted.
pub fn alk_prune(conn: &Conn, args: &Args) -> Result<Out> {
    let max = args.count(0, "max_rows", MAX_PRUNE_ROWS)?;
    let now = now_ms();
    let mut done = 0;
    // Completed jobs, queue by queue (their index is per queue).
    let mut after = String::new();
    while done < max {
        let queue = {
            let mut st = conn.stmt("prune_next_queue")?;
            st.bind_text(1, &after);
            if !st.step_row()? {
                break;
            }
            st.text(0).to_owned()
        };
        let mut st = conn.stmt("prune_completed")?;
        st.bind_i64(1, now);
        st.bind_i64(2, max - done);
        st.bind_text(3, &queue);
        st.run()?;
        done += conn.db.changes();
        after = queue;
    }
    // Dead jobs, remembered as ended without an ack (deps.rs).
    if done < max {
        let mut ids = Vec::new();
        {
            let mut st = conn.stmt("prune_dead")?;
            st.bind_i64(1, now);
            st.bind_i64(2, max - done);
            while st.step_row()? {
                ids.push(st.i64(0));
            }
        }
        crate::deps::ended(conn, &ids, "dead", now)?;
        done += ids.len() as i64;
    }
    for (name, cutoff) in [
        ("prune_idempotency", now),
        // Old notification rows: listeners have read them long ago.
        ("prune_notifications", now - crate::notify::RETENTION_MS),
    ] {
        if done >= max {
            break;
        }
        let mut st = conn.stmt(name)?;
        st.bind_i64(1, cutoff);
        st.bind_i64(2, max - done);
        st.run()?;
        done += conn.db.changes();
    }
    // Stream events past their stream's retention (v1.1 §E), stream by stream.
    let mut after = String::new();
    while done < max {
        let (stream, last, retain_ms, retain_events, stamped) = {
            let mut st = conn.stmt("prune_next_stream")?;
            st.bind_text(1, &after);
            if !st.step_row()? {
                break;
            }
            (
                st.text(0).to_owned(),
                st.i64(1),
                st.opt_i64(2),
                st.opt_i64(3),
                st.i64(4),
            )
        };
        // retain_s counts from when an event became readable: events this
        // prune sees first are stamped now (at most a budget's worth), and
        // are kept at least retain_s from here.
        let (stamped_before, budget) = (stamped, max - done);
        if retain_ms.is_some() && last > stamped {
            let upto = last.min(stamped.saturating_add(budget));
            let mut st = conn.stmt("prune_stamp_events")?;
            st.bind_i64(1, now);
            st.bind_text(2, &stream);
            st.bind_i64(3, stamped);
            st.bind_i64(4, upto);
            st.run()?;
            let mut st = conn.stmt("prune_stamped")?;
            st.bind_text(1, &stream);
            st.bind_i64(2, upto);
            st.run()?;
        }
        let mut st = conn.stmt("prune_events")?;
        st.bind_i64(1, retain_ms.map_or(i64::MIN, |ms| now - ms));
        st.bind_i64(2, budget);
        st.bind_text(3, &stream);
        st.bind_i64(4, retain_events.map_or(0, |n| last - n));
        st.bind_i64(5, stamped_before);
        st.run()?;
        done += conn.db.changes();
        after = stream;
    }
    // Claim times that left their rate window: not counted (limit.rs).
    crate::limit::prune(conn, now, max)?;
    // Records of jobs gone without an ack, past their memory: not counted
    // either (deps.rs).
    crate::deps::forget(conn, now, max)?;
    Ok(Out::Int(done))
}
