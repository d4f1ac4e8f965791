//! Operating it (contract v1.1 §D): listings and bulk actions for
//! operators. Every result that is a set is a JSON array, as the other
//! functions' sets are on SQLite.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::json::Obj;
use crate::out::Out;
use crate::{deps, group, queue};
use alkstore_core::time::now_ms;
use alkstore_core::{err, Code};

/// A state argument (contract v1.1 §G): one of `allowed`, or NULL when `null_ok`.
fn state<'a>(
    args: &Args<'a>,
    i: usize,
    allowed: &[&str],
    null_ok: bool,
) -> Result<Option<&'a str>> {
    let given = args.opt_text(i, "state")?;
    match given {
        Some(s) if allowed.contains(&s) => Ok(Some(s)),
        None if null_ok => Ok(None),
        _ => err(
            Code::InvalidArgument,
            format!(
                "state must be one of {}{}, got {}",
                allowed.join(", "),
                if null_ok { " or NULL" } else { "" },
                given.map_or("NULL".to_string(), alkstore_core::names::quote)
            ),
        )
        .map_err(Into::into),
    }
}

/// `alk_queues()` → the stats document of every queue with options, jobs or
/// a pause, counted in one statement (`queues`).
pub fn alk_queues(conn: &Conn, _args: &Args) -> Result<Out> {
    let now = now_ms();
    let mut st = conn.stmt("queues")?;
    st.bind_i64(1, now);
    let mut docs = Vec::new();
    while st.step_row()? {
        let oldest = st.opt_i64(5).map(|run_at| {
            alkstore_core::time::ms_to_seconds_json((now - run_at).max(0)).to_string()
        });
        let counts: [i64; 7] = std::array::from_fn(|i| st.i64(i as i32 + 1));
        docs.push(queue::stats_obj(st.text(0), &counts, oldest.as_deref()).finish());
    }
    Ok(Out::Text(format!("[{}]", docs.join(","))))
}

/// `alk_queue_limits()` → every queue with a limit set, its limits as
/// `alk_queue_opts` shows them, in name order.
pub fn alk_queue_limits(conn: &Conn, _args: &Args) -> Result<Out> {
    let mut st = conn.stmt("queue_limits_all")?;
    let mut docs = Vec::new();
    while st.step_row()? {
        let limits = alkstore_core::QueueLimits {
            max_running: st.opt_i64(1),
            rate_max: st.opt_i64(2),
            rate_per_ms: st.opt_i64(3),
            key_max_running: st.opt_i64(4),
            key_rate_max: st.opt_i64(5),
            key_rate_per_ms: st.opt_i64(6),
        };
        let mut doc = serde_json::Map::new();
        doc.insert("queue".into(), st.text(0).into());
        limits.add_json(&mut doc);
        docs.push(serde_json::Value::Object(doc).to_string());
    }
    Ok(Out::Text(format!("[{}]", docs.join(","))))
}

/// `alk_list_jobs(queue[, state[, after_id[, max_jobs]]])` → job documents in id order.
pub fn alk_list_jobs(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.listed_queue(0)?;
    let st = match args.get(1) {
        Some(_) => state(args, 1, &["pending", "running", "dead", "completed"], true)?,
        None => None,
    };
    let after = match args.get(2) {
        Some(a) if a.kind() != crate::ffi::Kind::Null => args.offset(2, "after_id")?,
        _ => 0,
    };
    let max = args.batch_size(3, "max_jobs", 100)?;
    let ids: Vec<i64> = {
        let name = match st {
            None => "list_jobs_any",
            Some("pending") => "list_jobs_pending",
            Some("running") => "list_jobs_running",
            Some("dead") => "list_jobs_dead",
            Some(_) => "list_jobs_completed",
        };
        let mut stmt = conn.stmt(name)?;
        stmt.bind_text(1, queue);
        stmt.bind_i64(2, after);
        stmt.bind_i64(3, max);
        let mut ids = Vec::new();
        while stmt.step_row()? {
            ids.push(stmt.i64(0));
        }
        ids
    };
    let mut docs = Vec::with_capacity(ids.len());
    for id in ids {
        docs.extend(queue::job_doc(conn, id)?);
    }
    Ok(Out::Text(format!("[{}]", docs.join(","))))
}

/// `alk_requeue_dead_all(queue)` → the number of dead jobs put back to pending.
pub fn alk_requeue_dead_all(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.listed_queue(0)?;
    let mut st = conn.stmt("requeue_dead_ungrouped")?;
    st.bind_text(1, queue);
    st.bind_i64(2, now_ms());
    st.run()?;
    drop(st);
    let mut n = conn.db.changes();
    // Grouped ones and ones with dependencies one by one, in id order: each
    // rejoins its group, or waits again for its dependencies not acked.
    let grouped: Vec<i64> = {
        let mut st = conn.stmt("dead_grouped")?;
        st.bind_text(1, queue);
        let mut ids = Vec::new();
        while st.step_row()? {
            ids.push(st.i64(0));
        }
        ids
    };
    for id in grouped {
        n += queue::requeue_one(conn, id)? as i64;
    }
    Ok(Out::Int(n))
}

/// `alk_purge(queue, state)` → the number of jobs deleted.
pub fn alk_purge(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = args.listed_queue(0)?;
    let st = state(args, 1, &["pending", "dead", "completed"], false)?;
    match st {
        Some("pending") => {
            let (mut left, mut ids, mut depended) = (Vec::new(), Vec::new(), Vec::new());
            {
                let mut stmt = conn.stmt("purge_pending")?;
                stmt.bind_text(1, queue);
                while stmt.step_row()? {
                    ids.push(stmt.i64(1));
                    if let Some(g) = stmt.opt_text(0) {
                        left.push(g.to_owned());
                    }
                    if stmt.opt_i64(2).is_some() {
                        depended.push(stmt.i64(1));
                    }
                }
            }
            // Their groups lose them; a running head keeps its group.
            for g in left {
                group::done(conn, queue, &g, false)?;
            }
            // Purged pending jobs count as cancelled for their dependents,
            // now and for a later depends_on (deps.rs).
            let now = now_ms();
            deps::ended(conn, &ids, "cancelled", now)?;
            deps::failed(conn, &depended, "cancelled", now)?;
            Ok(Out::Int(ids.len() as i64))
        }
        Some("dead") => {
            // Remembered as ended without an ack (deps.rs).
            let mut ids = Vec::new();
            {
                let mut stmt = conn.stmt("purge_dead")?;
                stmt.bind_text(1, queue);
                while stmt.step_row()? {
                    ids.push(stmt.i64(0));
                }
            }
            deps::ended(conn, &ids, "dead", now_ms())?;
            Ok(Out::Int(ids.len() as i64))
        }
        _ => {
            let mut stmt = conn.stmt("purge_completed")?;
            stmt.bind_text(1, queue);
            stmt.run()?;
            Ok(Out::Int(conn.db.changes()))
        }
    }
}

/// `alk_delete_job(job_id)` → true if a dead or completed job was deleted
/// (pending and running ones are `alk_cancel`'s). A dead one is remembered
/// as ended without an ack, as `alk_purge` does (deps.rs).
pub fn alk_delete_job(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let was = {
        let mut st = conn.stmt("delete_job")?;
        st.bind_i64(1, id);
        if !st.step_row()? {
            return Ok(Out::Bool(false));
        }
        let was = st.text(0).to_owned();
        // (the statement runs to its end: RETURNING deletes as it steps)
        while st.step_row()? {}
        was
    };
    if was == "dead" {
        deps::ended(conn, &[id], "dead", now_ms())?;
    }
    Ok(Out::Bool(true))
}

/// `alk_streams()` → every stream with its offsets and consumers' lag.
pub fn alk_streams(conn: &Conn, _args: &Args) -> Result<Out> {
    let spans: Vec<(String, i64, i64)> = {
        let mut st = conn.stmt("streams")?;
        let mut rows = Vec::new();
        while st.step_row()? {
            rows.push((st.text(0).to_owned(), st.i64(1), st.i64(2)));
        }
        rows
    };
    let mut docs = Vec::with_capacity(spans.len());
    for (stream, first, last) in spans {
        let mut consumers = Vec::new();
        let mut st = conn.stmt("stream_consumers")?;
        st.bind_text(1, &stream);
        while st.step_row()? {
            let offset = st.i64(1);
            consumers.push(
                Obj::new()
                    .str("consumer", Some(st.text(0)))
                    .int("offset", Some(offset))
                    .int("lag", Some((last - offset).max(0)))
                    .finish(),
            );
        }
        docs.push(
            Obj::new()
                .str("stream", Some(&stream))
                .int("first_offset", Some(first))
                .int("last_offset", Some(last))
                .raw("consumers", &format!("[{}]", consumers.join(",")))
                .finish(),
        );
    }
    Ok(Out::Text(format!("[{}]", docs.join(","))))
}

/// `alk_locks()` → every lease row; a released one has no owner and no expiry.
pub fn alk_locks(conn: &Conn, _args: &Args) -> Result<Out> {
    let now = now_ms();
    let mut st = conn.stmt("locks")?;
    let mut docs = Vec::new();
    while st.step_row()? {
        let owner = st.opt_text(1);
        let expires = st.i64(3);
        docs.push(
            Obj::new()
                .str("name", Some(st.text(0)))
                .str("owner", owner)
                .int("token", Some(st.i64(2)))
                .time("expires_at", owner.map(|_| expires))
                .raw(
                    "held",
                    if owner.is_some() && expires > now {
                        "true"
                    } else {
                        "false"
                    },
                )
                .finish(),
        );
    }
    Ok(Out::Text(format!("[{}]", docs.join(","))))
}
