//! The maintenance worker: one background worker per database named in
//! `alkstore.maintenance_databases`, running the chores that otherwise need
//! a caller — dead-lettering expired claims and jobs (`alk_sweep`), ticking
//! schedules (`alk_schedule_tick`) and pruning what outlived its retention
//! (`alk_prune`) — every `alkstore.maintenance_interval_ms`, each in a short
//! transaction of its own.
//!
//! Background workers are registered by the postmaster while it loads
//! `shared_preload_libraries`; loaded any other way the library starts none
//! and, if databases are configured, says why (as pg_cron does). A worker
//! starts once recovery is over (never on a standby), shows in
//! `pg_stat_activity` as `backend_type = 'alkstore maintenance'`, idles in a
//! database without the extension, and is restarted by the postmaster 5 s
//! after it ends for any reason other than the server's shutdown — an error
//! in a chore, `pg_terminate_backend`, its database dropped and made again.

use crate::settings;
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::prelude::*;
use std::time::Duration;

/// `pg_stat_activity.backend_type` of the workers.
pub const WORKER_TYPE: &str = "alkstore maintenance";

/// The chores of one round, in order; `{s}` is the extension's schema.
const CHORES: [&str; 2] = [
    "SELECT {s}.alk_sweep(NULL)",
    "SELECT {s}.alk_schedule_tick()",
];

/// Rows one prune deletes; a round prunes again while a call fills it, at
/// most `PRUNE_CALLS` times (a backlog drains over several rounds).
const PRUNE_BATCH: i32 = 1000;
const PRUNE_CALLS: usize = 10;

/// Which databases get a worker: every configured one while the postmaster
/// preloads the library, else none — and an error saying so when some are
/// configured.
pub fn plan(preloading: bool, databases: Vec<String>) -> Result<Vec<String>, String> {
    if preloading || databases.is_empty() {
        return Ok(if preloading { databases } else { Vec::new() });
    }
    Err(format!(
        "alkstore: no maintenance worker starts for {}: the library was not loaded \
         through shared_preload_libraries (add shared_preload_libraries = 'alkstore' \
         to postgresql.conf and restart the server)",
        databases.join(", ")
    ))
}

/// Whether the postmaster is loading the library from `shared_preload_libraries`.
pub fn preloading() -> bool {
    // SAFETY: a plain flag the postmaster sets while it loads the preload
    // libraries; read from this process's only thread.
    unsafe { pg_sys::process_shared_preload_libraries_in_progress }
}

/// Registers the workers `plan` gives (from `_PG_init`).
pub fn register(preloading: bool) -> Result<(), String> {
    for db in plan(preloading, settings::maintenance_databases(preloading))? {
        BackgroundWorkerBuilder::new(&format!("{WORKER_TYPE} {db}"))
            .set_type(WORKER_TYPE)
            .set_library("alkstore")
            .set_function("alkstore_maintenance_main")
            .set_extra(&db)
            .enable_spi_access()
            .set_start_time(BgWorkerStartTime::RecoveryFinished)
            .set_restart_time(Some(Duration::from_secs(5)))
            .load();
    }
    Ok(())
}

/// The worker's entry point (named in its registration).
#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn alkstore_maintenance_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let db = BackgroundWorker::get_extra().to_string();
    BackgroundWorker::connect_worker_to_spi(Some(&db), None);
    log!(
        "alkstore maintenance {}: serving database \"{db}\"",
        alkstore_core::VERSION
    );
    let mut last_seen = None;
    while BackgroundWorker::wait_latch(Some(interval())) {
        if BackgroundWorker::sighup_received() {
            // SAFETY: the main loop, outside any transaction: where
            // PostgreSQL's own workers re-read the configuration.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        round(&mut last_seen);
    }
    // Only a SIGTERM ends the loop. A worker that exits with 0 is never
    // started again, so exit with 1: after a server shutdown nothing
    // restarts it, after anything else the postmaster does.
    // SAFETY: the worker's own exit, outside any transaction.
    unsafe { pg_sys::proc_exit(1) };
}

fn interval() -> Duration {
    Duration::from_millis(settings::MAINTENANCE_INTERVAL_MS.get().max(10) as u64)
}

/// One round of chores, each in a transaction of its own; nothing when the
/// extension is not installed in this database, or installed at another
/// version than this library's (an `ALTER EXTENSION alkstore UPDATE` is
/// pending: the functions may not be the ones the chores call).
fn round(last_seen: &mut Option<String>) {
    let found = BackgroundWorker::transaction(|| {
        Spi::get_two::<String, String>(
            "SELECT pg_catalog.quote_ident(n.nspname), e.extversion FROM pg_catalog.pg_extension e \
             JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace \
             WHERE e.extname = 'alkstore'",
        )
    });
    let (schema, version) = match found {
        Ok((Some(schema), Some(version))) => (schema, version),
        _ => (String::new(), String::from("none")),
    };
    // Said once per change, in the server log.
    if last_seen.as_deref() != Some(version.as_str()) {
        match version.as_str() {
            "none" => log!("alkstore maintenance: the extension is not installed here; waiting"),
            v if v != alkstore_core::VERSION => log!(
                "alkstore maintenance: alkstore {v} is installed here, the library is {}: \
                 waiting for ALTER EXTENSION alkstore UPDATE",
                alkstore_core::VERSION
            ),
            v => log!("alkstore maintenance: running the chores of alkstore {v}"),
        }
        *last_seen = Some(version.clone());
    }
    if version != alkstore_core::VERSION {
        return;
    }
    for chore in CHORES {
        let sql = chore.replace("{s}", &schema);
        let _ = BackgroundWorker::transaction(|| chore_tx(&sql).map(drop));
    }
    let sql = format!("SELECT {schema}.alk_prune({PRUNE_BATCH})");
    for _ in 0..PRUNE_CALLS {
        let pruned = BackgroundWorker::transaction(|| chore_tx(&sql));
        if pruned.unwrap_or(0) < PRUNE_BATCH {
            break;
        }
    }
}

/// One chore's statement, bounded in time: a chore that waits on a lock for
/// a minute is better retried in the next round.
fn chore_tx(sql: &str) -> Result<i32, pgrx::spi::SpiError> {
    Spi::run("SET LOCAL statement_timeout = '60s'")?;
    Spi::get_one::<i32>(sql).map(|n| n.unwrap_or(0))
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use super::plan;
    use pgrx::prelude::*;

    #[pg_test]
    fn workers_start_only_from_shared_preload_libraries() {
        let dbs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(plan(true, dbs(&["app", "jobs"])), Ok(dbs(&["app", "jobs"])));
        assert_eq!(plan(false, dbs(&[])), Ok(dbs(&[])));
        let refused = plan(false, dbs(&["app"])).unwrap_err();
        assert!(
            refused.contains("no maintenance worker starts for app"),
            "{refused}"
        );
        assert!(
            refused.contains("shared_preload_libraries = 'alkstore'"),
            "{refused}"
        );
        // This test cluster loads the library on demand (CREATE EXTENSION
        // did, without a FATAL for the server-start setting): it reads the
        // configured database, refuses it, and no worker runs.
        assert!(!super::preloading());
        let configured = crate::settings::maintenance_databases(false);
        assert_eq!(configured, dbs(&["pgrx_tests"]));
        assert!(plan(false, configured).is_err());
        let running = Spi::get_one::<i64>(&format!(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = '{}'",
            super::WORKER_TYPE
        ))
        .unwrap()
        .unwrap();
        assert_eq!(running, 0);
    }

    #[pg_test]
    fn the_databases_setting_is_a_list_of_names_each_once() {
        use crate::settings::parse_list;
        assert_eq!(parse_list(" app , jobs,app,, "), vec!["app", "jobs"]);
        assert!(parse_list("").is_empty());
    }
}
