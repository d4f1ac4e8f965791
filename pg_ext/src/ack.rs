//! `alk_ack` on the extension: its common case below PL/pgSQL.
//!
//! Most acks name a job running under the worker, in a queue that keeps no
//! acked jobs: the PL/pgSQL ack's `DELETE` (`templates/ack_delete.sql`)
//! removes it and returns what follows from it — its group's next job, the
//! jobs that depend on it, a running limit it freed — and this function
//! runs the same follow-ups through [`crate::statements`], without the
//! PL/pgSQL call around them. Every other case (a bad argument, a job not
//! running under this worker, a queue that keeps acked jobs: nothing
//! deleted) goes to `alkstore.ack_full`, the plain install's `alk_ack`
//! under another name, which also words every error.
//!
//! `alk_ack_batch` sends its PL/pgSQL's one statement
//! (`templates/ack_batch_delete.sql`: the deletes, the completions of
//! queues that keep acked jobs, and what follows from them, in one row),
//! then `alkstore.batch_acked` when anything does follow. Only a call with
//! invalid arguments goes to `alkstore.ack_batch_full`, which words the
//! error.

use crate::boundary;
use crate::statements::{arg_nulls, bind, params, Session};
use alkstore_core::{names, NameKind};
use pgrx::fcinfo::{pg_arg_is_null, pg_getarg, pg_getarg_datum_raw};
use pgrx::pg_sys;
use std::cell::Cell;
use std::panic::AssertUnwindSafe;

const WHO: &str = "alk_ack";
const DELETE: &str = include_str!("../../sql/postgres/templates/ack_delete.sql");
const WHO_BATCH: &str = "alk_ack_batch";
const BATCH: &str = include_str!("../../sql/postgres/templates/ack_batch_delete.sql");

/// The backend's plans (the plan cache revalidates them).
#[derive(Clone, Copy)]
struct Plans {
    delete: pg_sys::SPIPlanPtr,
    group_done: pg_sys::SPIPlanPtr,
    deps_acked: pg_sys::SPIPlanPtr,
    limit_freed: pg_sys::SPIPlanPtr,
    full: pg_sys::SPIPlanPtr,
}

/// alk_ack_batch's plans.
#[derive(Clone, Copy)]
struct BatchPlans {
    statement: pg_sys::SPIPlanPtr,
    acked: pg_sys::SPIPlanPtr,
    full: pg_sys::SPIPlanPtr,
}

thread_local! {
    static PLANS: Cell<Option<Plans>> = const { Cell::new(None) };
    static BATCH_PLANS: Cell<Option<BatchPlans>> = const { Cell::new(None) };
}

/// # Safety
/// Inside the session.
unsafe fn plans(s: &Session) -> Plans {
    if let Some(p) = PLANS.get() {
        return p;
    }
    let (int8, text, jsonb) = (pg_sys::INT8OID, pg_sys::TEXTOID, pg_sys::JSONBOID);
    let delete = bind(DELETE, &[("jid", "$1"), ("w", "$2")]);
    // The follow-ups, as templates/ack.sql performs them.
    // SAFETY: inside the session, as this function requires.
    let p = unsafe {
        Plans {
            delete: s.prepare(WHO, &delete, &[int8, text]),
            group_done: s.prepare(
                WHO,
                "SELECT alkstore.group_done($1, $2, true)",
                &[text, text],
            ),
            deps_acked: s.prepare(WHO, "SELECT alkstore.deps_acked(ARRAY[$1])", &[int8]),
            limit_freed: s.prepare(WHO, "SELECT alkstore.limit_freed($1, $2)", &[text, text]),
            full: s.prepare(
                WHO,
                "SELECT alkstore.ack_full($1, $2, $3)",
                &[int8, text, jsonb],
            ),
        }
    };
    PLANS.set(Some(p));
    p
}

#[doc(hidden)]
#[unsafe(no_mangle)]
pub extern "C" fn pg_finfo_alkstore_ack() -> &'static pg_sys::Pg_finfo_record {
    static V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `alk_ack(job_id, worker, result)` (ack_library.sql).
///
/// # Safety
/// Called by PostgreSQL's function manager with alk_ack's arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn alkstore_ack(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is alk_ack's, from PostgreSQL's function manager.
    boundary::guard(AssertUnwindSafe(|| unsafe { ack(fcinfo) }))
}

/// # Safety
/// As [`alkstore_ack`].
unsafe fn ack(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is alk_ack's; the datums passed to each plan match its parameters' types, and
    // nothing from SPI is used after finish.
    unsafe {
        let arg = |i: usize| pg_getarg_datum_raw(fcinfo, i);
        // The checks alk_ack makes (core's, as on SQLite); when they fail,
        // ack_full says why.
        let valid = !pg_arg_is_null(fcinfo, 0)
            && pg_getarg::<&str>(fcinfo, 1)
                .is_some_and(|w| names::validate(NameKind::Worker, w).is_ok());
        let s = Session::start(WHO);
        let p = plans(&s);
        let mut acked = None;
        if valid {
            let gone = s.run(WHO, p.delete, &mut [arg(0), arg(1)], None);
            if let [_] = gone.rows {
                // queue, group_key, limited, dependents, limit_key
                let q = gone.get(0, 1).expect("a job has a queue");
                if let Some(g) = gone.get(0, 2) {
                    s.run(WHO, p.group_done, &mut [q, g], None);
                }
                if gone.flag(0, 4) {
                    s.run(WHO, p.deps_acked, &mut [arg(0)], None);
                }
                if gone.flag(0, 3) {
                    let (mut args, nulls) = params(&[Some(q), gone.get(0, 5)]);
                    s.run(WHO, p.limit_freed, &mut args, Some(&nulls));
                }
                acked = Some(true);
            }
        }
        let acked = match acked {
            Some(a) => a,
            None => {
                // Nothing deleted, or bad arguments: the PL/pgSQL decides.
                let nulls = arg_nulls(fcinfo, 3);
                let r = s.run(WHO, p.full, &mut [arg(0), arg(1), arg(2)], Some(&nulls));
                let answer = r.get(0, 1).map(|d| d.value() != 0);
                if answer.is_none() {
                    (*fcinfo).isnull = true;
                }
                answer.unwrap_or(false)
            }
        };
        s.finish();
        pg_sys::Datum::from(acked)
    }
}

/// # Safety
/// Inside the session.
unsafe fn batch_plans(s: &Session) -> BatchPlans {
    if let Some(p) = BATCH_PLANS.get() {
        return p;
    }
    let (int8s, text, texts) = (pg_sys::INT8ARRAYOID, pg_sys::TEXTOID, pg_sys::TEXTARRAYOID);
    let statement = bind(BATCH, &[("job_ids", "$1"), ("w", "$2"), ("now", "$3")]);
    // SAFETY: inside the session, as this function requires.
    let p = unsafe {
        BatchPlans {
            statement: s.prepare(
                WHO_BATCH,
                &statement,
                &[int8s, text, pg_sys::TIMESTAMPTZOID],
            ),
            acked: s.prepare(
                WHO_BATCH,
                "SELECT alkstore.batch_acked($1, $2, $3, $4, $5, $6)",
                &[texts, texts, texts, int8s, texts, texts],
            ),
            full: s.prepare(
                WHO_BATCH,
                "SELECT alkstore.ack_batch_full($1, $2)",
                &[int8s, text],
            ),
        }
    };
    BATCH_PLANS.set(Some(p));
    p
}

#[doc(hidden)]
#[unsafe(no_mangle)]
pub extern "C" fn pg_finfo_alkstore_ack_batch() -> &'static pg_sys::Pg_finfo_record {
    static V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `alk_ack_batch(job_ids, worker)` (ack_library.sql).
///
/// # Safety
/// Called by PostgreSQL's function manager with alk_ack_batch's arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn alkstore_ack_batch(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fcinfo is alk_ack_batch's, from PostgreSQL's function manager.
    boundary::guard(AssertUnwindSafe(|| unsafe { ack_batch(fcinfo) }))
}

/// # Safety
/// As [`alkstore_ack_batch`].
unsafe fn ack_batch(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is alk_ack_batch's; the datums passed to each plan match its parameters'
    // types (the arrays the statement returned stay in SPI's memory until finish), and nothing
    // from SPI is used after finish.
    unsafe {
        let arg = |i: usize| pg_getarg_datum_raw(fcinfo, i);
        // The checks alk_ack_batch makes: a one-dimensional list of ids
        // without NULLs (as alkstore.job_ids_ok) and a worker name (core's,
        // as on SQLite); when they fail, ack_batch_full says why.
        let ids_ok = !pg_arg_is_null(fcinfo, 0) && {
            let ids = pg_sys::pg_detoast_datum(arg(0).cast_mut_ptr()) as *mut pg_sys::ArrayType;
            (*ids).ndim <= 1 && !pg_sys::array_contains_nulls(ids)
        };
        let valid = ids_ok
            && pg_getarg::<&str>(fcinfo, 1)
                .is_some_and(|w| names::validate(NameKind::Worker, w).is_ok());
        let s = Session::start(WHO_BATCH);
        let p = batch_plans(&s);
        let acked = if valid {
            let now = pg_sys::Datum::from(pg_sys::GetCurrentTimestamp());
            let r = s.run(WHO_BATCH, p.statement, &mut [arg(0), arg(1), now], None);
            // count, then batch_acked's arguments: qs, gs, fq, dj, kq, kk
            let n = r.get(0, 1).expect("a count").value() as i32;
            let follow: Vec<_> = (2..=7).map(|c| r.get(0, c)).collect();
            // gs, fq or dj: something follows (as the PL/pgSQL asks).
            if follow[1].is_some() || follow[2].is_some() || follow[3].is_some() {
                let (mut args, nulls) = params(&follow);
                s.run(WHO_BATCH, p.acked, &mut args, Some(&nulls));
            }
            Some(n)
        } else {
            let nulls = arg_nulls(fcinfo, 2);
            let r = s.run(WHO_BATCH, p.full, &mut [arg(0), arg(1)], Some(&nulls));
            r.get(0, 1).map(|d| d.value() as i32)
        };
        s.finish();
        match acked {
            Some(n) => pg_sys::Datum::from(n),
            None => {
                (*fcinfo).isnull = true;
                pg_sys::Datum::from(0)
            }
        }
    }
}
