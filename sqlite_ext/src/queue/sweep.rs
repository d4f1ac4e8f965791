//! `alk_sweep`: expired claims and jobs dead-lettered, scheduled jobs
//! come due made pending.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::out::Out;
use crate::{deps, group, limit};
use alkstore_core::time::now_ms;
use alkstore_core::NameKind;

/// Scheduled jobs one `alk_sweep` makes pending, as on PostgreSQL.
const MAKE_DUE_BATCH: i64 = 2000;

/// `alk_sweep([queue])` → number of jobs dead-lettered; NULL or no argument = every queue.
pub fn alk_sweep(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = match args.get(0) {
        Some(a) if a.kind() != crate::ffi::Kind::Null => Some(args.name(0, NameKind::Queue)?),
        _ => None,
    };
    let now = now_ms();
    let mut swept = 0;
    let mut finished = Vec::new();
    let mut depended = Vec::new(); // dead-lettered jobs that jobs depend on
    let mut freed = Vec::new(); // (queue, limit_key) of running and pending jobs dead-lettered
    for name in [
        "sweep_expired",
        "sweep_expired_waiting",
        "sweep_expired_blocked",
        "sweep_expired_parked",
        "sweep_expired_scheduled",
        "sweep_final_claims",
    ] {
        let mut st = conn.stmt(name)?;
        st.bind_opt_text(1, queue);
        st.bind_i64(2, now);
        while st.step_row()? {
            swept += 1;
            if let Some(qg) = group::of_row(&st) {
                finished.push((qg, st.text(2) != "waiting"));
            }
            if st.opt_i64(4).is_some() {
                depended.push(st.i64(3));
            }
            if let Some(k) = st
                .opt_text(5)
                .filter(|_| matches!(st.text(2), "running" | "pending"))
            {
                freed.push((st.text(0).to_owned(), k.to_owned()));
            }
        }
    }
    for (q, k) in &freed {
        limit::unpark(conn, q, Some(k), now)?;
    }
    // Expired waiting jobs leave their group too, without handing it on.
    for ((q, g), head) in finished {
        group::done(conn, &q, &g, head)?;
    }
    deps::failed(conn, &depended, "dead", now)?;
    // Scheduled jobs that came due become pending, a bounded batch a call
    // (claims take the others meanwhile: contract v1.2 §H).
    let mut st = conn.stmt("make_due")?;
    st.bind_opt_text(1, queue);
    st.bind_i64(2, now);
    st.bind_i64(3, MAKE_DUE_BATCH);
    st.run()?;
    drop(st);
    let mut st = conn.stmt("swept")?;
    st.bind_i64(1, now);
    st.run()?;
    Ok(Out::Int(swept))
}
