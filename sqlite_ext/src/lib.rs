//! alkstore's SQLite engine: the `alk_*` functions of contract v1.
//!
//! Load the built library into any SQLite 3.40+ client
//! (`.load target/release/libalkstore_sqlite` in the `sqlite3` shell,
//! `conn.load_extension(...)` in Python), or link this crate and call
//! [`register`] on a rusqlite connection: the same compiled functions either
//! way. Every function writes inside whatever transaction the caller has
//! open, so jobs, outbox messages, events and notifications commit or roll
//! back with the caller's own rows.
//!
//! ```
//! let conn = rusqlite::Connection::open_in_memory()?;
//! alkstore_sqlite::register(&conn)?;
//! let id: i64 = conn.query_row("SELECT alk_enqueue('emails', NULL, '{\"to\":\"a@b.c\"}')", [], |r| r.get(0))?;
//! let jobs: String = conn.query_row("SELECT alk_claim('emails', 'worker-1')", [], |r| r.get(0))?;
//! assert!(jobs.contains("a@b.c"));
//! let acked: bool = conn.query_row("SELECT alk_ack(?1, 'worker-1')", [id], |r| r.get(0))?;
//! assert!(acked);
//! # Ok::<(), rusqlite::Error>(())
//! ```

mod admin;
mod anchor;
mod args;
mod conn;
mod deps;
mod error;
mod ffi;
mod function;
mod group;
mod init;
mod json;
mod limit;
mod lock;
mod notify;
mod out;
mod outbox;
mod pause;
mod prune;
mod queue;
mod release;
mod schedule;
pub mod sql;
mod stream;
pub mod sys;

#[cfg(feature = "libsqlite3-sys")]
pub mod routines;
#[cfg(feature = "rusqlite")]
mod rusqlite_glue;
#[cfg(feature = "rusqlite")]
pub use rusqlite_glue::register;

use std::ffi::{c_char, c_int, c_uint, c_void};
use sys::{sqlite3, sqlite3_api_routines};

/// The names of all functions this extension registers.
pub fn function_names() -> impl Iterator<Item = &'static str> {
    function::HANDLERS
        .iter()
        .map(|(name, _)| name.to_str().expect("ASCII names"))
}

/// Registers every `alk_*` function on a raw connection.
///
/// Returns an SQLite result code (0 on success).
///
/// # Safety
/// `db` must be an open `sqlite3*` and `api` the routine table of the same
/// SQLite library (`sqlite3_api_routines*`, as handed to extension entry points).
pub unsafe fn register_raw(db: *mut c_void, api: *mut c_void) -> c_int {
    // SAFETY: the caller's promise: SQLite's own routine table.
    if unsafe { host_version(api as *mut sqlite3_api_routines) }.is_err() {
        return 1; // SQLITE_ERROR; the loadable entry point reports why
    }
    // SAFETY: the caller's promise: SQLite's own routine table.
    unsafe { ffi::set_api(api as *mut sqlite3_api_routines) };
    // SAFETY: the caller's promise: an open connection of that SQLite.
    match unsafe { ffi::Db::from_raw(db as *mut sqlite3) } {
        Some(db) => function::register_all(db),
        None => 21, // SQLITE_MISUSE
    }
}

/// The oldest SQLite this library runs on: its routine table was generated
/// from 3.40.1's `sqlite3ext.h`, and an older host's table is shorter, so
/// calling through it would read past its end.
pub const MIN_SQLITE_VERSION: i32 = 3_040_000;

/// Whether a host SQLite of `version` (as `sqlite3_libversion_number`) is new enough.
pub fn supported_sqlite(version: i32) -> std::result::Result<(), String> {
    if version >= MIN_SQLITE_VERSION {
        return Ok(());
    }
    let dotted = |v: i32| format!("{}.{}.{}", v / 1_000_000, v / 1000 % 1000, v % 1000);
    Err(format!(
        "alkstore needs SQLite {} or newer; this host runs SQLite {}",
        dotted(MIN_SQLITE_VERSION),
        dotted(version)
    ))
}

/// Checks the host before anything else is read from its routine table
/// (`libversion_number` is one of its first entries, present in every version).
///
/// # Safety
/// `api` must be a routine table SQLite handed out.
unsafe fn host_version(api: *mut sqlite3_api_routines) -> std::result::Result<(), String> {
    if api.is_null() {
        return Err("alkstore: SQLite passed no routine table".into());
    }
    // SAFETY: the caller's promise; the entry is in every version's table.
    let version = unsafe { (*api).libversion_number.map_or(0, |f| f()) };
    supported_sqlite(version)
}

/// The extension's entry point, found by SQLite from the library's file name
/// (`libalkstore_sqlite.so` → `sqlite3_alkstoresqlite_init`).
///
/// # Safety
/// Called by SQLite's extension loader only.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_alkstoresqlite_init(
    db: *mut sqlite3,
    err: *mut *mut c_char,
    api: *mut sqlite3_api_routines,
) -> c_uint {
    // Reports `message` through `*err`, with the loader's own allocator.
    let report = |message: String| {
        // SAFETY: `api` is the loader's table (checked non-null by
        // host_version before any report); mprintf is among the first
        // entries of every version's table, and `err` is the loader's slot.
        unsafe {
            if err.is_null() || api.is_null() {
                return;
            }
            if let (Some(mprintf), Ok(text)) = ((*api).mprintf, std::ffi::CString::new(message)) {
                *err = mprintf(c"%s".as_ptr(), text.as_ptr());
            }
        }
    };
    // SAFETY: the loader passes its routine table.
    if let Err(message) = unsafe { host_version(api) } {
        // Nothing else of the table is read.
        report(message);
        return 1; // SQLITE_ERROR
    }
    // SAFETY: the loader passes an open connection and that SQLite's table.
    match unsafe { register_raw(db as *mut c_void, api as *mut c_void) } {
        0 => 0, // SQLITE_OK
        rc => {
            report(format!("alkstore: registering functions failed ({rc})"));
            rc as c_uint
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hosts_older_than_3_40_are_refused_by_name() {
        assert!(super::supported_sqlite(3_040_000).is_ok());
        assert!(super::supported_sqlite(3_046_001).is_ok());
        let e = super::supported_sqlite(3_031_001).unwrap_err();
        assert_eq!(
            e,
            "alkstore needs SQLite 3.40.0 or newer; this host runs SQLite 3.31.1"
        );
    }
}
