//! `alk_claim` on the extension: its common case below PL/pgSQL.
//!
//! Most claims name a valid queue that is neither paused nor limited and
//! find no deadline passed and no scheduled job come due. For those, this
//! function runs the two statements the PL/pgSQL claim runs — the probe
//! (`templates/claim_probe.sql`) and the claim `UPDATE`
//! (`templates/claim_update.sql`) — through [`crate::statements`], without
//! the PL/pgSQL call around them, its settings or its expressions between
//! statements. Every other case (a bad argument, a paused queue's empty
//! answer aside: a limited queue, expired claims or jobs, due scheduled
//! jobs) goes to `alkstore.claim_full`, the plain install's `alk_claim`
//! under another name, which also words every error.

use crate::boundary;
use crate::statements::{arg_nulls, bind, Session};
use alkstore_core::{names, opts::MAX_BATCH, NameKind};
use pgrx::fcinfo::{pg_getarg, pg_getarg_datum_raw};
use pgrx::pg_sys;
use std::cell::Cell;
use std::panic::AssertUnwindSafe;

const WHO: &str = "alk_claim";
const PROBE: &str = include_str!("../../sql/postgres/templates/claim_probe.sql");
const UPDATE: &str = include_str!("../../sql/postgres/templates/claim_update.sql");

/// What `alk_claim` returns, from the claimed row (as in `templates/claim.sql`).
const RETURNING: &str =
    "    RETURNING j.id, j.queue, j.payload, j.attempts, j.max_attempts, j.claim_expires_at";

/// The backend's plans (the plan cache revalidates them).
#[derive(Clone, Copy)]
struct Plans {
    probe: pg_sys::SPIPlanPtr,
    one: pg_sys::SPIPlanPtr,
    many: pg_sys::SPIPlanPtr,
    full: pg_sys::SPIPlanPtr,
}

thread_local! {
    static PLANS: Cell<Option<Plans>> = const { Cell::new(None) };
}

/// The statements: the probe ($1 queue, $2 now), the claim of one job and
/// of more ($1 queue, $2 worker, $3 max_jobs, $4 now), and the hand-over.
fn statements() -> [String; 4] {
    let claim = [
        ("q", "$1"),
        ("w", "$2"),
        ("n", "$3"),
        ("now", "$4"),
        ("chosen", "NULL::bigint[]"), // chosen only when expired claims compete
    ];
    let update = bind(UPDATE, &claim);
    [
        bind(PROBE, &[("q", "$1"), ("now", "$2")]),
        format!("{update}{RETURNING}"),
        // More than one job: returned in claim order (templates/claim.sql).
        format!(
            "WITH claimed AS (\n{update}{RETURNING}, j.priority, j.run_at\n)\n\
             SELECT c.id, c.queue, c.payload, c.attempts, c.max_attempts, c.claim_expires_at\n  \
             FROM claimed c ORDER BY c.priority DESC, c.run_at, c.id"
        ),
        "SELECT * FROM alkstore.claim_full($1, $2, $3)".to_string(),
    ]
}

/// # Safety
/// Inside the session.
unsafe fn plans(s: &Session) -> Plans {
    if let Some(p) = PLANS.get() {
        return p;
    }
    let (text, int4, tstz) = (pg_sys::TEXTOID, pg_sys::INT4OID, pg_sys::TIMESTAMPTZOID);
    let [probe, one, many, full] = statements();
    // SAFETY: inside the session, as this function requires.
    let p = unsafe {
        Plans {
            probe: s.prepare(WHO, &probe, &[text, tstz]),
            one: s.prepare(WHO, &one, &[text, text, int4, tstz]),
            many: s.prepare(WHO, &many, &[text, text, int4, tstz]),
            full: s.prepare(WHO, &full, &[text, text, int4]),
        }
    };
    PLANS.set(Some(p));
    p
}

/// Whether the arguments pass the checks `alk_claim` makes (core's, which
/// the SQLite engine makes too); when they do not, `claim_full` says why.
///
/// # Safety
/// `fcinfo` is alk_claim's.
unsafe fn valid_args(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // SAFETY: fcinfo is alk_claim's.
    unsafe {
        let (Some(q), Some(w), Some(n)) = (
            pg_getarg::<&str>(fcinfo, 0),
            pg_getarg::<&str>(fcinfo, 1),
            pg_getarg::<i32>(fcinfo, 2),
        ) else {
            return false;
        };
        names::validate(NameKind::Queue, q).is_ok()
            && names::validate(NameKind::Worker, w).is_ok()
            && (1..=MAX_BATCH).contains(&i64::from(n))
    }
}

#[doc(hidden)]
#[unsafe(no_mangle)]
pub extern "C" fn pg_finfo_alkstore_claim() -> &'static pg_sys::Pg_finfo_record {
    static V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `alk_claim(queue_name, worker, max_jobs)` (claim_library.sql): a
/// set-returning function in materialize mode, as a PL/pgSQL `RETURN QUERY`
/// (its rows go into the result's tuplestore as SPI returned them: the
/// statements return alk_claim's columns).
///
/// # Safety
/// Called by PostgreSQL's function manager with alk_claim's arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn alkstore_claim(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is alk_claim's, from PostgreSQL's function manager.
    boundary::guard(AssertUnwindSafe(|| unsafe { claim(fcinfo) }))
}

/// # Safety
/// As [`alkstore_claim`].
unsafe fn claim(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: fcinfo is alk_claim's, called in materialize mode (InitMaterializedSRF checks); the
    // datums passed to each plan match its parameters' types, and the rows are copied into the
    // result's tuplestore before finish.
    unsafe {
        let rsinfo = (*fcinfo).resultinfo.cast::<pg_sys::ReturnSetInfo>();
        let expected = !rsinfo.is_null() && !(*rsinfo).expectedDesc.is_null();
        pg_sys::InitMaterializedSRF(
            fcinfo,
            if expected {
                pg_sys::MAT_SRF_USE_EXPECTED_DESC
            } else {
                0
            },
        );
        let store = (*rsinfo).setResult;
        let valid = valid_args(fcinfo);
        let arg = |i: usize| pg_getarg_datum_raw(fcinfo, i);
        let s = Session::start(WHO);
        // A database no maintenance worker serves gets one (issue 57): under
        // the session's pg_catalog search path, never the caller's.
        crate::maintenance::start_on_use();
        let p = plans(&s);
        let mut common = false;
        if valid {
            // clock_timestamp(), as the PL/pgSQL's now.
            let now = pg_sys::Datum::from(pg_sys::GetCurrentTimestamp());
            // Paused, limited, a deadline passed, a scheduled job come due.
            let probe = s.run(WHO, p.probe, &mut [arg(0), now], None);
            let paused = probe.flag(0, 1);
            common = !(probe.flag(0, 2) || probe.flag(0, 3) || probe.flag(0, 4));
            if paused {
                common = true; // nothing to return (contract v1.1 §C4)
            } else if common {
                let plan = if pg_getarg::<i32>(fcinfo, 2) == Some(1) {
                    p.one
                } else {
                    p.many
                };
                let claimed = s.run(WHO, plan, &mut [arg(0), arg(1), arg(2), now], None);
                for &row in claimed.rows {
                    pg_sys::tuplestore_puttuple(store, row);
                }
            }
        }
        if !common {
            // NULL or invalid arguments (claim_full raises the error the
            // plain install raises), or a case only the PL/pgSQL handles.
            let nulls = arg_nulls(fcinfo, 3);
            let claimed = s.run(WHO, p.full, &mut [arg(0), arg(1), arg(2)], Some(&nulls));
            for &row in claimed.rows {
                pg_sys::tuplestore_puttuple(store, row);
            }
        }
        s.finish();
        pg_sys::Datum::from(0)
    }
}
