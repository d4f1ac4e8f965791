//! Schedules (contract v1.1 §F): a row per schedule; `alk_schedule_tick`
//! enqueues each due occurrence at most once per (schedule, fire time).
//! SQLite's one writer orders concurrent ticks: the tick takes the write
//! lock before it reads which schedules are due. Fire times come from
//! `alkstore_core::schedule`, the rules `sql/postgres/schedule.sql` has.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::json::Obj;
use crate::out::Out;
use crate::queue;
use alkstore_core::schedule::Spec;
use alkstore_core::{err, Code, EnqueueOpts, NameKind};

/// `alk_schedule(name, queue, spec, payload[, opts])` → the next fire time.
pub fn alk_schedule(conn: &Conn, args: &Args) -> Result<Out> {
    let name = args.name(0, NameKind::Schedule)?;
    let queue = args.name(1, NameKind::Queue)?;
    let spec_text = args.opt_text(2, "spec")?.unwrap_or("null");
    let spec_json = alkstore_core::opts::parse_text(Some(spec_text))?.unwrap_or_default();
    let spec = Spec::parse(&spec_json)?;
    let payload = args.payload(3, "payload")?;
    let opts = match args.get(4) {
        Some(_) => args.opts(4)?,
        None => None,
    };
    let parsed = EnqueueOpts::parse(opts.as_ref())?;
    if parsed.idempotency_key.is_some() || parsed.idempotency_ttl_ms.is_some() {
        return err(
            Code::InvalidOptions,
            "idempotency_key and idempotency_ttl_s cannot be given to a schedule: \
             each occurrence is a job of its own",
        )
        .map_err(Into::into);
    }
    if parsed.depends_on.is_some() {
        return err(
            Code::InvalidOptions,
            "depends_on cannot be given to a schedule: its jobs are enqueued at their times, \
             after any job it could name ended",
        )
        .map_err(Into::into);
    }
    let now = conn.now_locked()?;
    let next = spec.next_after(now);
    let mut st = conn.stmt("schedule_put")?;
    st.bind_text(1, name);
    st.bind_text(2, queue);
    st.bind_text(3, &spec_json.to_string());
    st.bind_text(4, &payload);
    st.bind_opt_text(5, opts.as_ref().map(|o| o.to_string()).as_deref());
    st.bind_i64(6, next);
    let next = if st.step_row()? { st.i64(0) } else { next };
    Ok(Out::Text(alkstore_core::time::format_ms(next)))
}

/// `alk_unschedule(name)` → true if it existed.
pub fn alk_unschedule(conn: &Conn, args: &Args) -> Result<Out> {
    let name = args.name(0, NameKind::Schedule)?;
    let mut st = conn.stmt("schedule_delete")?;
    st.bind_text(1, name);
    st.run()?;
    Ok(Out::Bool(conn.db.changes() == 1))
}

/// `alk_schedules()` → every schedule.
pub fn alk_schedules(conn: &Conn, _args: &Args) -> Result<Out> {
    let mut st = conn.stmt("schedules_all")?;
    let mut docs = Vec::new();
    while st.step_row()? {
        docs.push(
            Obj::new()
                .str("name", Some(st.text(0)))
                .str("queue", Some(st.text(1)))
                .raw("spec", st.text(2))
                .raw("payload", st.text(3))
                .raw("opts", st.opt_text(4).unwrap_or("null"))
                .time("next_run_at", Some(st.i64(5)))
                .time("last_run_at", st.opt_i64(6))
                .finish(),
        );
    }
    Ok(Out::Text(format!("[{}]", docs.join(","))))
}

/// A due schedule, as read.
struct Due {
    name: String,
    queue: String,
    spec: String,
    payload: String,
    opts: Option<String>,
    last_run_at: Option<i64>,
}

/// `alk_schedule_tick()` → the number of jobs enqueued.
pub fn alk_schedule_tick(conn: &Conn, _args: &Args) -> Result<Out> {
    let now = conn.now_locked()?;
    let due: Vec<Due> = {
        let mut st = conn.stmt("schedules_due")?;
        st.bind_i64(1, now);
        let mut rows = Vec::new();
        while st.step_row()? {
            rows.push(Due {
                name: st.text(0).to_owned(),
                queue: st.text(1).to_owned(),
                spec: st.text(2).to_owned(),
                payload: st.text(3).to_owned(),
                opts: st.opt_text(4).map(str::to_owned),
                last_run_at: st.opt_i64(5),
            });
        }
        rows
    };
    let mut enqueued = 0;
    for d in due {
        let spec = Spec::parse(&serde_json::from_str(&d.spec).unwrap_or_default())?;
        let mut ran = d.last_run_at;
        // Only the latest due occurrence, and only if it was not enqueued yet.
        if let Some(at) = spec.last_at_or_before(now) {
            if d.last_run_at.is_none_or(|last| at > last) {
                let opts = alkstore_core::opts::parse_text(d.opts.as_deref())?;
                let opts = EnqueueOpts::parse(opts.as_ref())?;
                let stamped = queue::queue_opts(conn, &d.queue)?;
                queue::enqueue_one(conn, &d.queue, &stamped, &opts, &d.payload)?;
                enqueued += 1;
                ran = Some(at);
            }
        }
        let mut st = conn.stmt("schedule_ran")?;
        st.bind_text(1, &d.name);
        st.bind_opt_i64(2, ran);
        st.bind_i64(3, spec.next_after(now));
        st.run()?;
    }
    Ok(Out::Int(enqueued))
}
