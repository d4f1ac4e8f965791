//! A job as a document: `alk_get_job` and `alk_job_errors`.

use crate::args::Args;
use crate::conn::Conn;
use crate::deps;
use crate::error::Result;
use crate::json::Obj;
use crate::out::Out;

/// `alk_job_errors(job_id)` → every error the job met, oldest first
/// (`[{attempt, error, at}]`, written by the `alk_jobs_errors` trigger), or
/// NULL when there is no such job.
pub fn alk_job_errors(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    let mut st = conn.stmt("job_errors")?;
    st.bind_i64(1, id);
    if !st.step_row()? {
        return Ok(Out::Null);
    }
    Ok(Out::Text(st.text(0).to_owned()))
}

/// `alk_get_job(job_id)` → the job document, or NULL when unknown or acked.
pub fn alk_get_job(conn: &Conn, args: &Args) -> Result<Out> {
    let id = args.job_id(0)?;
    Ok(job_doc(conn, id)?.map_or(Out::Null, Out::Text))
}

/// The job document of `alk_get_job` (and the listings).
pub fn job_doc(conn: &Conn, id: i64) -> Result<Option<String>> {
    let mut st = conn.stmt("get_job")?;
    st.bind_i64(1, id);
    if !st.step_row()? {
        return Ok(None);
    }
    let depends_on = st.opt_text(21).map(str::to_owned);
    let waiting_for = match (&depends_on, st.opt_i64(22)) {
        (Some(deps), Some(1)) => deps::waiting_for(conn, id, deps)?,
        _ => None,
    };
    Ok(Some(
        Obj::new()
            .int("id", Some(st.i64(0)))
            .str("queue", Some(st.text(1)))
            .str("state", Some(st.text(2)))
            .raw("payload", st.text(3))
            .int("priority", Some(st.i64(4)))
            .int("attempts", Some(st.i64(5)))
            .int("max_attempts", Some(st.i64(6)))
            .seconds("visibility_timeout_s", st.i64(7))
            .seconds("backoff_base_s", st.i64(8))
            .seconds("backoff_max_s", st.i64(9))
            .time("run_at", Some(st.i64(10)))
            .time("created_at", Some(st.i64(11)))
            .str("claimed_by", st.opt_text(12))
            .time("claim_expires_at", st.opt_i64(13))
            .time("expires_at", st.opt_i64(14))
            .str("last_error", st.opt_text(15))
            .str("idempotency_key", st.opt_text(16))
            .str("group_key", st.opt_text(17))
            .str("limit_key", st.opt_text(20))
            .time("completed_at", st.opt_i64(18))
            .raw("result", st.opt_text(19).unwrap_or("null"))
            .raw("depends_on", depends_on.as_deref().unwrap_or("null"))
            .raw("waiting_for", waiting_for.as_deref().unwrap_or("null"))
            .finish(),
    ))
}
