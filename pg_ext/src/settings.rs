//! The extension's settings (GUCs), defined when the library loads.
//!
//! | setting | context | default | what |
//! |---|---|---|---|
//! | `alkstore.maintenance_databases` | server start | empty | databases the maintenance worker serves (comma-separated); empty: none |
//! | `alkstore.maintenance_interval_ms` | reload | 1000 | how often the worker runs its tasks |

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;

/// `alkstore.maintenance_databases`: read once, when the server starts
/// (one worker per database is registered then).
pub static MAINTENANCE_DATABASES: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(None);

/// `alkstore.maintenance_interval_ms`: read again on every reload.
pub static MAINTENANCE_INTERVAL_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);

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
    GucRegistry::define_int_guc(
        c"alkstore.maintenance_interval_ms",
        c"How often alkstore's maintenance worker runs its tasks, in milliseconds.",
        c"",
        &MAINTENANCE_INTERVAL_MS,
        10,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
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
