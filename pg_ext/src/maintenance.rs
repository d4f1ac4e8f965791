//! The maintenance worker: one background worker per database named in
//! `alkstore.maintenance_databases`, running the chores that otherwise need
//! a caller, each in short transactions of its own: sequencing streams (at
//! once when a publisher's commit sets its latch — see [`crate::sequencer`]
//! — else every `alkstore.sequence_interval_ms`), dead-lettering expired
//! claims and jobs and making scheduled jobs that came due pending
//! (`alk_sweep`, every `alkstore.sweep_interval_ms`),
//! ticking schedules (`alk_schedule_tick`, `alkstore.schedule_interval_ms`)
//! and pruning what outlived its retention (`alk_prune`,
//! `alkstore.prune_interval_ms`).
//!
//! Background workers are registered by the postmaster while it loads
//! `shared_preload_libraries`; loaded any other way the library starts none
//! and, if databases are configured, says why (as pg_cron does). A worker
//! starts once recovery is over (never on a standby), shows in
//! `pg_stat_activity` as `backend_type = 'alkstore maintenance'`, idles in a
//! database without the extension, and is restarted by the postmaster 5 s
//! after it ends for any reason other than the server's shutdown — an error
//! in a chore, `pg_terminate_backend`, its database dropped and made again.
//!
//! A database with the extension that no worker serves — not listed, or the
//! library not preloaded at all — gets a worker on first use (issue 57):
//! the first claim of a session there ([`start_on_use`]) starts one as a
//! dynamic background worker, unless `alkstore.maintenance_on_use` is off.
//! Such a worker is not restarted when it ends (a claim starts another, at
//! most a minute later), ends when the extension is dropped, and steps
//! aside when another already serves the database.

use crate::{sequencer, settings};
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::guc::GucSetting;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::PgTryBuilder;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::time::{Duration, Instant};

/// `pg_stat_activity.backend_type` of the workers.
pub const WORKER_TYPE: &str = "alkstore maintenance";

/// The chores run on their own intervals, in this order when due together;
/// `{s}` is the extension's schema. Sequencing runs on every wake-up too.
#[derive(Copy, Clone)]
enum Chore {
    Sequence,
    Sweep,
    Tick,
    Prune,
}

const CHORES: [Chore; 4] = [Chore::Sequence, Chore::Sweep, Chore::Tick, Chore::Prune];

impl Chore {
    fn interval(self) -> Duration {
        let setting: &GucSetting<i32> = match self {
            Chore::Sequence => &settings::SEQUENCE_INTERVAL_MS,
            Chore::Sweep => &settings::SWEEP_INTERVAL_MS,
            Chore::Tick => &settings::SCHEDULE_INTERVAL_MS,
            Chore::Prune => &settings::PRUNE_INTERVAL_MS,
        };
        Duration::from_millis(setting.get().max(10) as u64)
    }
}

/// Rows one prune deletes; a round prunes again while a call fills it, at
/// most `PRUNE_CALLS` times (a backlog drains over several rounds).
const PRUNE_BATCH: i32 = 1000;
const PRUNE_CALLS: usize = 10;

/// Scheduled jobs one call makes pending (as alk_sweep's own call, in
/// queue.sql: tens of milliseconds); a sweep round calls again while a call
/// fills it, at most `DUE_CALLS` times.
const DUE_BATCH: i32 = 2000;
const DUE_CALLS: usize = 25;

/// Which databases get a worker: every configured one while the postmaster
/// preloads the library, else none — and an error saying so when some are
/// configured.
pub fn plan(preloading: bool, databases: Vec<String>) -> Result<Vec<String>, String> {
    if preloading || databases.is_empty() {
        return Ok(if preloading { databases } else { Vec::new() });
    }
    Err(format!(
        "alkstore: no configured maintenance worker starts for {}: the library was not \
         loaded through shared_preload_libraries (add shared_preload_libraries = 'alkstore' \
         to postgresql.conf and restart the server); until then a worker starts on a \
         database's first claim, unless alkstore.maintenance_on_use is off",
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

/// How a worker started on use marks its registration's extra text,
/// before the database's name.
const ON_USE: &str = "on use:";

/// How often a session checks, at most, whether its database needs a
/// worker started.
const ON_USE_EVERY: Duration = Duration::from_secs(60);

thread_local! {
    /// When this session may check again ([`start_on_use`]).
    static NEXT_CHECK: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Issue 57: called by every claim. In a database where the extension runs
/// and no maintenance worker serves it (none configured for it, or the
/// library not preloaded), starts one for it as a dynamic background
/// worker, unless `alkstore.maintenance_on_use` is off or the server is a
/// standby. Checked at most once a minute per session, so a worker that
/// ended is replaced within about a minute of the next claim; a failure to
/// start (no free `max_worker_processes` slot) is logged, never raised.
pub fn start_on_use() {
    let now = Instant::now();
    if NEXT_CHECK.with(|c| c.get().is_some_and(|at| now < at)) {
        return;
    }
    NEXT_CHECK.with(|c| c.set(Some(now + ON_USE_EVERY)));
    // SAFETY: a plain read of the server's recovery state, in a backend.
    if !settings::MAINTENANCE_ON_USE.get() || unsafe { pg_sys::RecoveryInProgress() } {
        return;
    }
    // Run by alk_claim and alk_outbox_claim, SECURITY DEFINER functions,
    // under the pg_catalog search path alk_claim's Session pushed or
    // alk_outbox_claim's SET clause pins: every name is qualified anyway, so
    // no schema of the caller's reaches this. Not a template, nor a database
    // that takes no connections (a worker would keep CREATE DATABASE …
    // TEMPLATE from copying it). The transaction-level advisory lock keeps
    // two sessions' claims from registering one each at the same moment.
    let needed = Spi::get_two::<String, bool>(
        "SELECT d.datname::pg_catalog.text, \
                NOT d.datistemplate AND d.datallowconn \
                AND NOT EXISTS (SELECT FROM pg_catalog.pg_stat_activity a \
                                 WHERE a.backend_type OPERATOR(pg_catalog.=) 'alkstore maintenance' \
                                   AND a.datid OPERATOR(pg_catalog.=) d.oid) \
                AND pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext('alkstore.maintenance'), 1) \
           FROM pg_catalog.pg_database d \
          WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()",
    );
    let Ok((Some(db), Some(true))) = needed else {
        return;
    };
    // A worker configured for it that is between lives (restarted 5 s after
    // it ended) is not replaced.
    if sequencer::preloaded() && settings::maintenance_databases(true).contains(&db) {
        return;
    }
    let started = BackgroundWorkerBuilder::new(&format!("{WORKER_TYPE} {db}"))
        .set_type(WORKER_TYPE)
        .set_library("alkstore")
        .set_function("alkstore_maintenance_main")
        .set_extra(&format!("{ON_USE}{db}"))
        .enable_spi_access()
        .set_restart_time(None)
        .load_dynamic();
    match started {
        Ok(_) => log!("alkstore maintenance: starting a worker for database \"{db}\" on use"),
        Err(_) => log!(
            "alkstore maintenance: could not start a worker for database \"{db}\" \
             (max_worker_processes reached?); claims still work, nothing sweeps"
        ),
    }
}

/// `alkstore.maintenance_on_use()` (on_use.sql): [`start_on_use`], for
/// `alk_outbox_claim`, which is PL/pgSQL (SECURITY DEFINER, its search
/// path pinned to pg_catalog).
#[pg_extern(sql = false)]
fn alkstore_maintenance_on_use() {
    start_on_use()
}

/// The worker's entry point (named in its registration).
#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn alkstore_maintenance_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let extra = BackgroundWorker::get_extra().to_string();
    let (on_use, db) = match extra.strip_prefix(ON_USE) {
        Some(db) => (true, db.to_string()),
        None => (false, extra),
    };
    BackgroundWorker::connect_worker_to_spi(Some(&db), None);
    pin_search_path();
    // Two sessions' claims may each start one: the first to take this
    // database's lock serves it, the others end (and are not restarted).
    if on_use && !first_on_use() {
        // SAFETY: the worker's own exit, outside any transaction.
        unsafe { pg_sys::proc_exit(0) };
    }
    log!(
        "alkstore maintenance {}: serving database \"{db}\"{}",
        alkstore_core::VERSION,
        if on_use { " (started on use)" } else { "" }
    );
    let announced = sequencer::announce();
    let mut last_seen = None;
    let now = Instant::now();
    let mut due = [now; CHORES.len()];
    let mut timeout = Duration::ZERO;
    // Woken by a publisher's commit (its latch), a signal, or the next due
    // chore: sequencing runs every time, the other chores when due.
    while BackgroundWorker::wait_latch(Some(timeout)) {
        if BackgroundWorker::sighup_received() {
            // SAFETY: the main loop, outside any transaction: where
            // PostgreSQL's own workers re-read the configuration.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let schema = installed(&mut last_seen);
        if on_use && last_seen.as_deref() == Some("none") {
            // Dropped: nothing for it here any more; a claim after the
            // next CREATE EXTENSION starts another. (An update pending, it
            // waits, as a configured worker does.)
            break;
        }
        if let Some(schema) = schema {
            let now = Instant::now();
            for (k, chore) in CHORES.into_iter().enumerate() {
                if matches!(chore, Chore::Sequence) || due[k] <= now {
                    run(chore, &schema);
                    due[k] = Instant::now() + chore.interval();
                }
            }
        } else {
            due = [Instant::now() + Chore::Sequence.interval(); CHORES.len()];
        }
        let next = due.iter().min().copied().unwrap_or_else(Instant::now);
        timeout = next.saturating_duration_since(Instant::now());
    }
    if let Some(mine) = announced {
        sequencer::withdraw(mine);
    }
    if on_use {
        // SAFETY: the worker's own exit, outside any transaction. Not
        // restarted either way.
        unsafe { pg_sys::proc_exit(0) };
    }
    // Only a SIGTERM ends the loop. A worker that exits with 0 is never
    // started again, so exit with 1: after a server shutdown nothing
    // restarts it, after anything else the postmaster does.
    // SAFETY: the worker's own exit, outside any transaction.
    unsafe { pg_sys::proc_exit(1) };
}

/// Whether this worker, started on use, is the one to serve its database:
/// it holds the database's maintenance lock (session-level, released when
/// it ends). The lock alone decides between workers started on use (two
/// started at once: the first to take it serves, the other ends); a
/// configured worker never meets one, since claims start none where a
/// configured one serves.
fn first_on_use() -> bool {
    let mine = BackgroundWorker::transaction(|| {
        Spi::get_one::<bool>(
            "SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtext('alkstore.maintenance'), 0)",
        )
    });
    matches!(mine, Ok(Some(true)))
}

/// Pins the worker's search path to the catalog: the chores call the
/// extension's functions by schema, and some of its internal functions
/// (called directly here) have no `SET search_path` of their own, so a
/// path a database's owner set (`ALTER DATABASE … SET search_path`) must
/// not reach a process that runs as the bootstrap superuser.
fn pin_search_path() {
    let pinned =
        BackgroundWorker::transaction(|| Spi::run("SET search_path = pg_catalog, pg_temp"));
    if let Err(e) = pinned {
        warning!("alkstore maintenance: could not pin the search path: {e}");
    }
}

/// The extension's schema when the extension is installed in this database
/// at this library's version; else None (an `ALTER EXTENSION alkstore
/// UPDATE` may be pending: the functions may not be the ones the chores
/// call). Said once per change, in the server log.
fn installed(last_seen: &mut Option<String>) -> Option<String> {
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
    (version == alkstore_core::VERSION).then_some(schema)
}

/// One chore, in transactions of its own. An error in one (a statement
/// timeout, a bug) is logged and its transaction rolled back, and the
/// worker goes on with the other chores; the failed one runs again when
/// next due. (It used to end the worker, whose next life, 5 s later, ran the
/// same chores in the same order: one chore failing every time kept the
/// others from ever running.)
fn run(chore: Chore, schema: &str) {
    match chore {
        Chore::Sequence => {
            // A transaction per stream, as alk_sequence does.
            let streams = guarded("listing the streams to sequence", || {
                Spi::get_one::<Vec<String>>("SELECT alkstore.sequence_streams(NULL)")
            });
            for stream in streams.flatten().unwrap_or_default() {
                guarded(&format!("sequencing stream {stream:?}"), || {
                    Spi::run("SET LOCAL statement_timeout = '60s'")?;
                    Spi::get_one_with_args::<i64>(
                        "SELECT alkstore.sequence_stream($1)",
                        &[stream.as_str().into()],
                    )
                });
            }
        }
        Chore::Sweep => {
            let sql = format!("SELECT {schema}.alk_sweep(NULL)");
            guarded("the sweep", || sweep_tx(&sql));
            // alk_sweep made up to DUE_BATCH scheduled jobs pending; more
            // came due at once are made pending in transactions of their own.
            let sql = format!("SELECT alkstore.make_due(NULL, {DUE_BATCH})");
            for _ in 0..DUE_CALLS {
                if guarded("making due scheduled jobs pending", || chore_tx(&sql)).unwrap_or(0)
                    < DUE_BATCH
                {
                    break;
                }
            }
        }
        Chore::Tick => {
            let sql = format!("SELECT {schema}.alk_schedule_tick()");
            guarded("the schedule tick", || chore_tx(&sql));
        }
        Chore::Prune => {
            let sql = format!("SELECT {schema}.alk_prune({PRUNE_BATCH})");
            for _ in 0..PRUNE_CALLS {
                if guarded("pruning", || chore_tx(&sql)).unwrap_or(0) < PRUNE_BATCH {
                    break;
                }
            }
        }
    }
}

/// `body` in a transaction of its own; None if it failed. `chore` names
/// the step (one name per step: whether it is failing is kept by name). A
/// PostgreSQL error
/// raised inside is caught here: the transaction is rolled back and the
/// error logged as a warning naming the chore.
fn guarded<R>(
    chore: &str,
    body: impl FnOnce() -> Result<R, pgrx::spi::SpiError> + UnwindSafe + RefUnwindSafe,
) -> Option<R> {
    let outcome = PgTryBuilder::new(|| Ok(BackgroundWorker::transaction(body)))
        .catch_others(|caught| {
            // SAFETY: the worker's own top-level transaction, left in its
            // failed state by the error (pgrx has copied and flushed the
            // error): rolled back as PostgreSQL's error recovery would, which
            // also releases its locks, snapshots, SPI state and memory.
            unsafe { pg_sys::AbortCurrentTransaction() };
            Err(match caught {
                CaughtError::PostgresError(e)
                | CaughtError::ErrorReport(e)
                | CaughtError::RustPanic { ereport: e, .. } => e.message().to_string(),
            })
        })
        .execute();
    let failure = match outcome {
        Ok(Ok(value)) => {
            if FAILING.with(|f| f.borrow_mut().remove(chore)).is_some() {
                log!("alkstore maintenance: {chore} works again");
            }
            return Some(value);
        }
        Ok(Err(e)) => e.to_string(),
        Err(message) => message,
    };
    // Said when it starts failing, when the error changes, and once a
    // minute while it goes on: not at every round.
    let now = Instant::now();
    let say = FAILING.with(|f| {
        let mut f = f.borrow_mut();
        let said = f
            .get(chore)
            .is_some_and(|(m, at)| *m == failure && now - *at < Duration::from_secs(60));
        if !said {
            f.insert(chore.to_string(), (failure.clone(), now));
        }
        !said
    });
    if say {
        warning!("alkstore maintenance: {chore} failed: {failure}; the other chores go on");
    }
    None
}

thread_local! {
    /// The chores failing now: their last error, and when it was logged.
    static FAILING: std::cell::RefCell<std::collections::HashMap<String, (String, Instant)>> =
        Default::default();
}

/// The sweep's statement, as [`chore_tx`] runs the others, but read-only at
/// the top: pgrx's read-write SPI takes a transaction id before it runs
/// anything (`Spi::mark_mutable`), and alk_sweep rotates the job table's
/// slots only in a transaction that has none yet, which wrote nothing
/// before it (queue.sql, rotate.sql). The function writes as it would.
fn sweep_tx(sql: &str) -> Result<i32, pgrx::spi::SpiError> {
    Spi::connect(|c| {
        c.select(
            "SELECT pg_catalog.set_config('statement_timeout', '60s', true)",
            None,
            &[],
        )?;
        c.select(sql, Some(1), &[])?
            .first()
            .get_one::<i32>()
            .map(|n| n.unwrap_or(0))
    })
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
            refused.contains("no configured maintenance worker starts for app"),
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
