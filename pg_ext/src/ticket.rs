//! The commit ticket of contract v1.2 §L, drawn by the library: the
//! deferred trigger `published_ticket` (stream.sql) runs while a publishing
//! transaction commits and gives the transaction's first event in a stream
//! the next `alkstore.commit_ticket`. The plain install's trigger function
//! is PL/pgSQL (ticket_plain.sql); this one does the same work without a
//! PL/pgSQL call and without a `search_path` set per call — 111,000
//! instructions a publishing transaction in PL/pgSQL (docs/benchmarks.md,
//! "Strict commit order").
//!
//! It runs `SECURITY DEFINER` (as the extension's owner, whoever commits)
//! with the caller's `search_path`: its one statement names every table,
//! function and operator with its schema, so no path can redirect it.

use crate::settings;
use pgrx::prelude::*;
use pgrx::spi::OwnedPreparedStatement;
use std::cell::RefCell;

/// The event's row by its ctid: the row version the trigger was queued
/// for, which nothing else writes before the transaction commits.
const STAMP: &str = "UPDATE alkstore.published p \
     SET ticket = pg_catalog.nextval('alkstore.commit_ticket'::pg_catalog.regclass) \
     WHERE p.ctid OPERATOR(pg_catalog.=) $1";

thread_local! {
    /// STAMP, planned once per backend (the plan cache revalidates it).
    static PLAN: RefCell<Option<OwnedPreparedStatement>> = const { RefCell::new(None) };
}

/// `alkstore.ticket()`: the trigger function of `published_ticket`.
#[pg_trigger(sql = false)]
fn alkstore_ticket<'a>(
    trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, pgrx::PgTriggerError> {
    // SAFETY: an AFTER ROW INSERT trigger: PostgreSQL fetched the inserted
    // row version into tg_trigtuple before calling us.
    let ctid = unsafe { (*trigger.trigger_data().tg_trigtuple).t_self };
    Spi::connect_mut(|client| {
        PLAN.with_borrow_mut(|plan| {
            if plan.is_none() {
                *plan = Some(
                    client
                        .prepare_mut(STAMP, &[PgOid::from(pg_sys::TIDOID)])?
                        .keep(),
                );
            }
            let stamp = plan.as_ref().expect("prepared above");
            client.update(stamp, None, &[ctid.into()]).map(|_| ())
        })
    })
    .unwrap_or_else(|e| error!("alkstore.ticket: {e}"));
    // The transaction's next event in a stream is a first one again (see
    // alk_publish): local to the transaction, as set_config(…, true).
    // SAFETY: a GUC assignment in a transaction, as SET LOCAL makes it.
    unsafe {
        settings::set(
            c"alkstore.published_to",
            c"",
            pg_sys::GucAction::GUC_ACTION_LOCAL,
        );
    }
    Ok(None)
}
