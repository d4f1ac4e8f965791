//! The extension's settings (GUCs), defined when the library loads.
//!
//! | setting | context | default | what |
//! |---|---|---|---|
//! | `alkstore.maintenance_databases` | server start | empty | databases the maintenance worker serves (comma-separated); empty: none |
//! | `alkstore.sequence_interval_ms` | reload | 1000 | how often the worker sequences streams when no publisher's commit woke it |
//! | `alkstore.sweep_interval_ms` | reload | 1000 | how often it dead-letters expired claims (`alk_sweep`) |
//! | `alkstore.schedule_interval_ms` | reload | 1000 | how often it ticks schedules (`alk_schedule_tick`) |
//! | `alkstore.prune_interval_ms` | reload | 10000 | how often it prunes (`alk_prune`) |
//! | `alkstore.maintenance_on_use` | superuser (also per database) | on | a database with the extension that no worker serves gets one on first use (a claim), for as long as it runs |

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use std::ffi::{CStr, CString};

/// `alkstore.maintenance_databases`: read once, when the server starts
/// (one worker per database is registered then).
pub static MAINTENANCE_DATABASES: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(None);

/// `alkstore.maintenance_on_use`: whether a claim in a database no
/// maintenance worker serves starts one there (issue 57; see
/// [`crate::maintenance::start_on_use`]).
pub static MAINTENANCE_ON_USE: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `alkstore.sequence_interval_ms`: read again on every reload, as every
/// interval below.
pub static SEQUENCE_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// `alkstore.sweep_interval_ms`.
pub static SWEEP_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// `alkstore.schedule_interval_ms`.
pub static SCHEDULE_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// `alkstore.prune_interval_ms`.
pub static PRUNE_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(10_000);

/// Defines every setting; `_PG_init` calls it once per process.
/// `alkstore.maintenance_databases` is a server-start setting, which
/// PostgreSQL lets a library define only while the postmaster preloads it
/// (later it is a FATAL error): loaded any other way, it stays a placeholder
/// that [`maintenance_databases`] still reads.
pub fn define(preloading: bool) {
    if preloading {
        GucRegistry::define_string_guc(
            c"alkstore.maintenance_databases",
            c"Databases alkstore's maintenance worker serves (comma-separated).",
            c"One background worker per database, started with the server; needs \
              shared_preload_libraries = 'alkstore'. Empty: no worker.",
            &MAINTENANCE_DATABASES,
            GucContext::Postmaster,
            GucFlags::default(),
        );
    }
    GucRegistry::define_bool_guc(
        c"alkstore.maintenance_on_use",
        c"Whether a claim in a database no alkstore maintenance worker serves starts one there.",
        c"A dynamic background worker for the database, checked at most once a minute per \
          session; works without shared_preload_libraries. Off: only the databases of \
          alkstore.maintenance_databases have a worker.",
        &MAINTENANCE_ON_USE,
        GucContext::Suset,
        GucFlags::default(),
    );
    let intervals = [
        (
            c"alkstore.sequence_interval_ms",
            c"How often alkstore's maintenance worker sequences streams when no commit woke it, in milliseconds.",
            &SEQUENCE_INTERVAL_MS,
        ),
        (
            c"alkstore.sweep_interval_ms",
            c"How often alkstore's maintenance worker dead-letters expired claims, in milliseconds.",
            &SWEEP_INTERVAL_MS,
        ),
        (
            c"alkstore.schedule_interval_ms",
            c"How often alkstore's maintenance worker ticks schedules, in milliseconds.",
            &SCHEDULE_INTERVAL_MS,
        ),
        (
            c"alkstore.prune_interval_ms",
            c"How often alkstore's maintenance worker prunes, in milliseconds.",
            &PRUNE_INTERVAL_MS,
        ),
    ];
    for (name, short, setting) in intervals {
        GucRegistry::define_int_guc(
            name,
            short,
            c"",
            setting,
            10,
            3_600_000,
            GucContext::Sighup,
            GucFlags::UNIT_MS,
        );
    }
}

/// The databases of `alkstore.maintenance_databases`, trimmed, each once,
/// in the order given: the defined setting, or the placeholder the server's
/// configuration made when the library was not preloaded.
pub fn maintenance_databases(preloading: bool) -> Vec<String> {
    let raw = if preloading {
        MAINTENANCE_DATABASES
            .get()
            .map(|c| c.to_string_lossy().into_owned())
    } else {
        // SAFETY: a NUL-terminated name; missing_ok = true answers NULL for
        // an unknown name; the text is copied before any other GUC call.
        unsafe {
            let p = pgrx::pg_sys::GetConfigOption(
                c"alkstore.maintenance_databases".as_ptr(),
                true,
                false,
            );
            (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
        }
    };
    parse_list(&raw.unwrap_or_default())
}

/// A comma-separated list: blanks dropped, duplicates kept once.
pub fn parse_list(raw: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// Sets any setting (PostgreSQL's or a placeholder such as
/// `alkstore.published_to`) as a user's `SET` would: `GUC_ACTION_LOCAL`
/// to the transaction's end (`SET LOCAL`), `GUC_ACTION_SAVE` to the end of
/// the GUC nest level the caller opened (a function's `SET` clause).
///
/// # Safety
/// In a transaction.
pub unsafe fn set(name: &CStr, value: &CStr, action: pg_sys::GucAction::Type) {
    // SAFETY: in a transaction (the caller's promise); both strings outlive the call.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            action,
            true,
            0,
            false,
        );
    }
}
