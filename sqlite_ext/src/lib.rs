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

mod args;
mod conn;
mod error;
mod ffi;
mod function;
mod init;
mod json;
mod lock;
mod notify;
mod outbox;
mod queue;
pub mod sql;
mod stream;

#[cfg(feature = "rusqlite")]
mod rusqlite_glue;
#[cfg(feature = "rusqlite")]
pub use rusqlite_glue::register;

use sqlite_loadable::ext::{sqlite3, sqlite3_api_routines};
use std::ffi::{c_char, c_int, c_uint, c_void};

/// The names of all functions this extension registers.
pub fn function_names() -> impl Iterator<Item = &'static str> {
    function::HANDLERS
        .iter()
        .map(|(name, _, _)| name.to_str().expect("ASCII names"))
}

/// Registers every `alk_*` function on a raw connection.
///
/// Returns an SQLite result code (0 on success).
///
/// # Safety
/// `db` must be an open `sqlite3*` and `api` the routine table of the same
/// SQLite library (`sqlite3_api_routines*`, as handed to extension entry points).
pub unsafe fn register_raw(db: *mut c_void, api: *mut c_void) -> c_int {
    ffi::set_api(api as *mut sqlite3_api_routines);
    function::register_all(db as *mut sqlite3)
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
    sqlite_loadable::entrypoints::register_entrypoint(db, err, api, |db| {
        match register_raw(db as *mut c_void, api as *mut c_void) {
            0 => Ok(()),
            rc => Err(sqlite_loadable::Error::new_message(format!(
                "alkstore: registering functions failed ({rc})"
            ))),
        }
    })
}
